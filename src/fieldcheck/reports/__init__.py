"""Writing results: CSV files safe to open in a spreadsheet, JSON summaries, plots and reports."""

from fieldcheck.reports._csv import neutralise_cell, write_csv

__all__ = ["neutralise_cell", "write_csv"]

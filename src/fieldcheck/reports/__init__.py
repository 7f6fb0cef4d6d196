"""Writing results: CSV files safe to open in a spreadsheet, JSON summaries, plots and reports."""

from fieldcheck.reports._csv import neutralise_cell, write_csv
from fieldcheck.reports._format import format_pvalue, format_seconds, format_seconds_joined

__all__ = [
    "format_pvalue",
    "format_seconds",
    "format_seconds_joined",
    "neutralise_cell",
    "write_csv",
]

"""Writing results: a run's folder (written beside its destination and renamed into place when
complete), CSV files safe to open in a spreadsheet, JSON summaries, plots and reports."""

from fieldcheck.reports._csv import neutralise_cell, write_csv
from fieldcheck.reports._folder import (
    PARTIAL,
    RUN_JSON,
    RUNS_DIR,
    FolderError,
    RunFolder,
    check_destination,
    default_destination,
)
from fieldcheck.reports._format import format_pvalue, format_seconds, format_seconds_joined

OutputFolder = RunFolder  # the writers' name for it

__all__ = [
    "PARTIAL",
    "RUNS_DIR",
    "RUN_JSON",
    "FolderError",
    "OutputFolder",
    "RunFolder",
    "check_destination",
    "default_destination",
    "format_pvalue",
    "format_seconds",
    "format_seconds_joined",
    "neutralise_cell",
    "write_csv",
]

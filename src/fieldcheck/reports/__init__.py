"""Writing results: a run's folder (written beside its destination and renamed into place when
complete), CSV files safe to open in a spreadsheet, JSON summaries, plots and reports."""

from fieldcheck.reports._csv import neutralise_cell, write_csv
from fieldcheck.reports._document import (
    CSS,
    LEGEND_OUTSIDE,
    LINE_BREAKS,
    PLOTTING,
    Report,
    Term,
    esc,
    figure,
    html_table,
    interrupts_deferred,
    label,
    md,
    md_code,
    md_table,
    no_glyph_warnings,
    save_figure,
    write_report,
)
from fieldcheck.reports._folder import (
    PARTIAL,
    RUN_JSON,
    RUNS_DIR,
    FolderError,
    RunFolder,
    Scored,
    check_destination,
    default_destination,
)
from fieldcheck.reports._format import format_pvalue, format_seconds, format_seconds_joined

OutputFolder = RunFolder  # the writers' name for it

__all__ = [
    "CSS",
    "LEGEND_OUTSIDE",
    "LINE_BREAKS",
    "PARTIAL",
    "PLOTTING",
    "RUNS_DIR",
    "RUN_JSON",
    "FolderError",
    "OutputFolder",
    "Report",
    "RunFolder",
    "Scored",
    "Term",
    "check_destination",
    "default_destination",
    "esc",
    "figure",
    "format_pvalue",
    "format_seconds",
    "format_seconds_joined",
    "html_table",
    "interrupts_deferred",
    "label",
    "md",
    "md_code",
    "md_table",
    "neutralise_cell",
    "no_glyph_warnings",
    "save_figure",
    "write_csv",
    "write_report",
]

"""Scored runs in the store (issue 11, docs/runs.md): ``record_folder`` for finished output
folders, comparison, export and re-scoring. The layer above the systems, reached through the
registry (``core.Imports``, ``core.Rescores``); ``fieldcheck runs`` and the runs API are thin
shells over it."""

from fieldcheck.runs._compare import (
    compare_runs,
    format_cell,
    format_count,
    format_items,
    format_latency,
    format_number,
)
from fieldcheck.runs._export import (
    ExportFormat,
    export_columns,
    iter_export,
    iter_items,
    write_parquet,
)
from fieldcheck.runs._folder import record_folder, system_of
from fieldcheck.runs._rescore import rescore

__all__ = [
    "ExportFormat",
    "compare_runs",
    "export_columns",
    "format_cell",
    "format_count",
    "format_items",
    "format_latency",
    "format_number",
    "iter_export",
    "iter_items",
    "record_folder",
    "rescore",
    "system_of",
    "write_parquet",
]

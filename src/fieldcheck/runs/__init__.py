"""Scored runs in the store (issue 11, docs/runs.md): the items a scoring command records,
``record_folder`` for finished output folders, comparison, export and re-scoring. The layer above
the systems (it calls ``jsoneval`` and ``slots`` to re-score); ``fieldcheck runs`` and the runs
API are thin shells over it."""

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
from fieldcheck.runs._items import (
    json_error_item,
    json_item,
    json_metrics,
    slot_items,
)
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
    "json_error_item",
    "json_item",
    "json_metrics",
    "record_folder",
    "rescore",
    "slot_items",
    "system_of",
    "write_parquet",
]

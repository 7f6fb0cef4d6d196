"""Scored runs in the store (issue 11, docs/runs.md): importing finished output folders,
comparison, export, items' stories and re-scoring, through the systems' registry (``core``)."""

from typing import TYPE_CHECKING

from fieldcheck._util.lazy import typed_lazy_names

if TYPE_CHECKING:  # the names as type checkers and editors see them
    from fieldcheck.runs._compare import (
        compare,
        compare_runs,
        format_cell,
        format_count,
        format_items,
        format_latency,
        format_number,
        item_counts,
    )
    from fieldcheck.runs._export import iter_export, write_parquet
    from fieldcheck.runs._folder import record_folder, system_of
    from fieldcheck.runs._item import item_story, item_url, show_value
    from fieldcheck.runs._rescore import rescore

__getattr__, __dir__, __all__ = typed_lazy_names(globals())

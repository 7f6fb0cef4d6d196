"""The run store (layer 2): runs (model runs and scored runs), their items, the model-response
cache and the saved configuration; ``RunRecorder`` is the sink scoring commands write into. A
scored run's items are a zstd Parquet file under the artifacts root (``FIELDCHECK_ARTIFACTS``),
read with DuckDB.

SQLite by default, any SQLAlchemy URL through ``FIELDCHECK_DATABASE_URL``; schema by Alembic.
``Store`` (and SQLAlchemy with it) is imported on first use, so commands that never open the
store start fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fieldcheck.store._items import (
    MODEL_CHARS,
    TAG_CHARS,
    ItemColumns,
    add_tag,
    field_name,
    plain_columns,
)
from fieldcheck.store._records import (
    ARTIFACTS_ENV,
    DATABASE_ENV,
    RunInfo,
    StoredItem,
    artifacts_root,
    database_url,
    default_database_path,
    describe_url,
    sha256_file,
)

if TYPE_CHECKING:
    from fieldcheck.store._recorder import RunRecorder
    from fieldcheck.store._store import (
        MIN_PREFIX,
        AmbiguousRunError,
        ItemsMissing,
        RunHasChildren,
        Store,
    )


def __getattr__(name: str) -> Any:
    if name == "Store":
        from fieldcheck.store._store import Store

        return Store
    if name in ("AmbiguousRunError", "ItemsMissing", "MIN_PREFIX", "RunHasChildren"):
        from fieldcheck.store import _store

        return getattr(_store, name)
    if name == "RunRecorder":
        from fieldcheck.store._recorder import RunRecorder

        return RunRecorder
    raise AttributeError(f"module 'fieldcheck.store' has no attribute {name!r}")


__all__ = [
    "ARTIFACTS_ENV",
    "DATABASE_ENV",
    "MIN_PREFIX",
    "MODEL_CHARS",
    "TAG_CHARS",
    "AmbiguousRunError",
    "ItemColumns",
    "ItemsMissing",
    "RunHasChildren",
    "RunInfo",
    "RunRecorder",
    "Store",
    "StoredItem",
    "add_tag",
    "artifacts_root",
    "database_url",
    "default_database_path",
    "describe_url",
    "field_name",
    "plain_columns",
    "sha256_file",
]

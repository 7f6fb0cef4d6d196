"""The run store (layer 2): runs, their finished items and the model-response cache.

SQLite by default, any SQLAlchemy URL through ``FIELDCHECK_DATABASE_URL``; schema by Alembic.
``Store`` (and SQLAlchemy with it) is imported on first use, so commands that never open the
store start fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fieldcheck.store._records import (
    DATABASE_ENV,
    RunInfo,
    StoredItem,
    database_url,
    default_database_path,
    describe_url,
    sha256_file,
)

if TYPE_CHECKING:
    from fieldcheck.store._store import Store


def __getattr__(name: str) -> Any:
    if name == "Store":
        from fieldcheck.store._store import Store

        return Store
    raise AttributeError(f"module 'fieldcheck.store' has no attribute {name!r}")


__all__ = [
    "DATABASE_ENV",
    "RunInfo",
    "Store",
    "StoredItem",
    "database_url",
    "default_database_path",
    "describe_url",
    "sha256_file",
]

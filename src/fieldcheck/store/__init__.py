"""The run store (layer 2): runs, their finished items and the model-response cache.

SQLite by default, any SQLAlchemy URL through ``FIELDCHECK_DATABASE_URL``; schema by Alembic.
"""

from fieldcheck.store._store import (
    DATABASE_ENV,
    RunInfo,
    Store,
    StoredItem,
    database_url,
    default_database_path,
    describe_url,
    sha256_file,
)

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

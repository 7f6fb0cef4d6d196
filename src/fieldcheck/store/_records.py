"""The store's plain records and locations, importable without SQLAlchemy (fast start-up)."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from fieldcheck.store._schema import RunRow

DATABASE_ENV = "FIELDCHECK_DATABASE_URL"


def default_database_path() -> Path:
    """The SQLite file used when ``FIELDCHECK_DATABASE_URL`` is not set."""
    root = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(root) / "fieldcheck" / "fieldcheck.sqlite3"


def database_url() -> str:
    """``FIELDCHECK_DATABASE_URL``, else the default SQLite file (its folder is created)."""
    url = os.environ.get(DATABASE_ENV)
    if url:
        return url
    path = default_database_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def describe_url(url: str) -> str:
    """The URL without its password, for messages."""
    from sqlalchemy.engine import make_url  # only when a URL is shown

    return make_url(url).render_as_string(hide_password=True)


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class RunInfo:
    """A run's row as plain data."""

    id: str
    run_key: str
    system: str
    task: str
    dataset: str
    dataset_sha256: str
    model: str
    endpoint: str
    settings: dict[str, Any]
    signature: str
    status: str
    started_at: datetime
    finished_at: datetime | None
    n_items: int
    n_done: int
    n_errors: int

    @classmethod
    def of(cls, row: RunRow) -> RunInfo:  # a RunRow of _schema
        return cls(
            id=row.id,
            run_key=row.run_key,
            system=row.system,
            task=row.task,
            dataset=row.dataset,
            dataset_sha256=row.dataset_sha256,
            model=row.model,
            endpoint=row.endpoint,
            settings=orjson.loads(row.settings),
            signature=row.signature,
            status=row.status,
            started_at=row.started_at,
            finished_at=row.finished_at,
            n_items=row.n_items,
            n_done=row.n_done,
            n_errors=row.n_errors,
        )


@dataclass(frozen=True)
class StoredItem:
    """A finished item: its key, order of completion, error type (None: answered) and result."""

    key: str
    seq: int
    error_type: str | None
    calls: int
    cached_calls: int
    latency_s: float
    result: dict[str, Any]
    call_log: list[dict[str, Any]] = field(default_factory=list)

"""The store's plain records and locations, importable without SQLAlchemy (fast start-up)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from fieldcheck._util.errors import FieldcheckError

if TYPE_CHECKING:
    from fieldcheck.store._schema import RunRow

DATABASE_ENV = "FIELDCHECK_DATABASE_URL"
ARTIFACTS_ENV = "FIELDCHECK_ARTIFACTS"


class NotUpgraded(FieldcheckError, RuntimeError):
    """The store cannot be brought to this version's schema (a migration says why, or it was
    left half made); ``Store`` adds the revision it stays at."""


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


def artifacts_root(url: str) -> Path:
    """Where scored runs' item files go: ``FIELDCHECK_ARTIFACTS``, else ``artifacts/`` beside a
    SQLite file, else (PostgreSQL, an in-memory SQLite) beside the default SQLite file."""
    env = os.environ.get(ARTIFACTS_ENV)
    if env:
        return Path(env).expanduser().resolve()
    folder = sqlite_folder(url)
    return (folder or default_database_path().parent) / "artifacts"


def sqlite_folder(url: str) -> Path | None:
    """The folder of a SQLite store's file; None for another database or an in-memory one."""
    if url.startswith("sqlite"):
        from sqlalchemy.engine import make_url

        name = make_url(url).database
        if name and name != ":memory:" and not name.startswith("file:"):
            return Path(name).resolve().parent
    return None


def unshared_artifacts(url: str) -> str | None:
    """The warning of a store shared by URL (not a SQLite file) without ``FIELDCHECK_ARTIFACTS``:
    the items of the runs stored go to this machine's own folder, which no other user reads."""
    if url.startswith("sqlite") or os.environ.get(ARTIFACTS_ENV):
        return None
    return (
        f"{ARTIFACTS_ENV} is not set: the items of the runs stored in {describe_url(url)} go to "
        f"{artifacts_root(url)} on this machine alone, and the store's other users get 410 for "
        "them; set it to a folder they share"
    )


def describe_url(url: str) -> str:
    """The URL without its password, for messages; one that does not parse is not shown (it
    may hold a password), and ``--help`` still works with it."""
    from sqlalchemy.engine import make_url  # only when a URL is shown
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "a value that is not a database URL (a SQLite file is sqlite:////path/to/file)"


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
    kind: str = "run"  # run (model calls and scores) | score | calls (part of its parent)
    parent_id: str | None = None
    out_dir: str | None = None
    inputs: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] | None = None
    intervals: dict[str, Any] | None = None
    # the runs list's figures (``Store.finish_scored_run``); None: not known
    headline: float | None = None
    n_failed: int | None = None
    n_call_errors: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    latency_mean_s: float | None = None

    @classmethod
    def of(cls, row: RunRow) -> RunInfo:  # a RunRow of _schema
        values = {f.name: getattr(row, f.name) for f in fields(cls)}
        for name in ("settings", "inputs", "metrics", "intervals"):  # JSON text
            values[name] = orjson.loads(values[name]) if values[name] else None
        values["inputs"] = values["inputs"] or []
        values["kind"] = values["kind"] or "run"
        return cls(**values)

    @property
    def scored(self) -> bool:
        """Whether its items are scored (not the calls alone of a run before 0006 or of a
        ``calls`` run)."""
        return self.kind not in ("model-run", "calls")

    def public_dict(self) -> dict[str, Any]:
        """The run as JSON for ``runs show --json`` and the API (times in ISO 8601): every
        field but the run's key and endpoint."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        del out["run_key"], out["endpoint"]
        out["started_at"] = utc(self.started_at).isoformat()
        out["finished_at"] = utc(self.finished_at).isoformat() if self.finished_at else None
        return out


def utc(when: datetime) -> datetime:
    """``when`` in UTC, as start times are stored (SQLite compares their text: 13:20+01:00 came
    after 12:28 UTC); a time with no zone (SQLite gives naive ones back) is taken as UTC."""
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


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
    failed: bool | None = None
    model: str | None = None
    turn: int | None = None
    shown: list[Any] = field(default_factory=list)  # the values of a page's item columns

    def call(self) -> dict[str, Any]:
        """A journal item's model call as a scored item keeps it under ``call``."""
        return {
            "key": self.key,
            "error_type": self.error_type,
            "calls": self.call_log,
            "cached_calls": self.cached_calls,
            "latency_s": self.latency_s,
            "result": self.result,
        }

    def public_dict(self) -> dict[str, Any]:
        """A scored item as JSON (export and API): its key, order, indexed columns, result."""
        names = ("key", "seq", "failed", "model", "turn", "error_type", "result")
        return {name: getattr(self, name) for name in names}

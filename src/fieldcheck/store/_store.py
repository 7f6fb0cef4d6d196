"""The run store: runs, their finished items and the response cache, in SQLite or PostgreSQL.

Default: a SQLite file under the user's data directory (``$XDG_DATA_HOME/fieldcheck`` or
``~/.local/share/fieldcheck``); ``FIELDCHECK_DATABASE_URL`` overrides it with any SQLAlchemy URL.
Every write commits at once, so a killed process loses nothing that was saved. The schema is
created and upgraded by Alembic on open.
"""

from __future__ import annotations

import hashlib
import os
import socket
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine, create_engine, event, func, select, update
from sqlalchemy.orm import Session, sessionmaker

from fieldcheck.store._records import (
    DATABASE_ENV,
    RunInfo,
    StoredItem,
    database_url,
    default_database_path,
    describe_url,
    sha256_file,
)
from fieldcheck.store._schema import CacheRow, ConfigRow, ItemRow, RunRow

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

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def _now() -> datetime:
    return datetime.now(UTC)


def _dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS).decode()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Store:
    """Runs, items and cached replies behind one SQLAlchemy engine."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url or database_url()
        self.engine: Engine = _engine(self.url)
        upgrade(self.engine)
        self._session = sessionmaker(self.engine, expire_on_commit=False)

    def __repr__(self) -> str:
        return f"Store({describe_url(self.url)!r})"

    def close(self) -> None:
        self.engine.dispose()

    def session(self) -> Session:
        return self._session()

    # runs ---------------------------------------------------------------------------------
    def open_run(
        self,
        *,
        system: str,
        task: str,
        dataset: str,
        dataset_sha256: str,
        model: str,
        endpoint: str,
        settings: dict[str, Any],
        signature: str,
        n_items: int,
    ) -> tuple[RunInfo, bool]:
        """The unfinished run with the same key (resumed: True), else a new run (False).

        A run's key digests everything that defines it, so the same command finds its run.
        """
        run_key = hashlib.sha256(
            _dumps([system, task, dataset_sha256, model, endpoint, settings]).encode()
        ).hexdigest()
        self.mark_stale_runs()
        with self.session() as s:
            row = s.scalars(
                select(RunRow)
                .where(RunRow.run_key == run_key, RunRow.status.in_(("running", "interrupted")))
                .order_by(RunRow.started_at.desc())
            ).first()
            resumed = row is not None
            if row is None:
                row = RunRow(
                    id=uuid.uuid4().hex[:12],
                    run_key=run_key,
                    system=system,
                    task=task,
                    dataset=dataset,
                    dataset_sha256=dataset_sha256,
                    model=model,
                    endpoint=endpoint,
                    settings=_dumps(settings),
                    signature=signature,
                    status="running",
                    started_at=_now(),
                    n_items=n_items,
                )
                s.add(row)
            row.status = "running"
            row.pid = os.getpid()
            row.host = socket.gethostname()
            row.n_items = n_items
            s.commit()
            return RunInfo.of(row), resumed

    def mark_stale_runs(self) -> int:
        """Mark ``running`` runs of this host whose process is gone as ``interrupted``."""
        host = socket.gethostname()
        with self.session() as s:
            rows = s.scalars(
                select(RunRow).where(RunRow.status == "running", RunRow.host == host)
            ).all()
            stale = [r for r in rows if r.pid is None or not _pid_alive(r.pid)]
            for r in stale:
                r.status = "interrupted"
            s.commit()
            return len(stale)

    def set_status(self, run_id: str, status: str) -> None:
        with self.session() as s:
            values: dict[str, Any] = {"status": status}
            if status == "finished":
                values["finished_at"] = _now()
            s.execute(update(RunRow).where(RunRow.id == run_id).values(**values))
            s.commit()

    def get_run(self, run_id: str) -> RunInfo | None:
        with self.session() as s:
            row = s.get(RunRow, run_id)
            return RunInfo.of(row) if row is not None else None

    def list_runs(self, *, system: str | None = None) -> list[RunInfo]:
        self.mark_stale_runs()
        with self.session() as s:
            query = select(RunRow).order_by(RunRow.started_at)
            if system is not None:
                query = query.where(RunRow.system == system)
            return [RunInfo.of(r) for r in s.scalars(query)]

    # items --------------------------------------------------------------------------------
    def items(self, run_id: str) -> list[StoredItem]:
        """The run's finished items in the order they finished."""
        return list(self.iter_items(run_id))

    def iter_items(self, run_id: str) -> Iterator[StoredItem]:
        with self.session() as s:
            query = select(ItemRow).where(ItemRow.run_id == run_id).order_by(ItemRow.seq)
            for row in s.scalars(query):
                yield StoredItem(
                    key=row.item_key,
                    seq=row.seq,
                    error_type=row.error_type,
                    calls=row.calls,
                    cached_calls=row.cached_calls,
                    latency_s=row.latency_s,
                    result=orjson.loads(row.result),
                    call_log=orjson.loads(row.call_log) if row.call_log else [],
                )

    def save_item(
        self,
        run_id: str,
        key: str,
        result: dict[str, Any],
        *,
        error_type: str | None = None,
        calls: int = 0,
        cached_calls: int = 0,
        latency_s: float = 0.0,
        call_log: list[dict[str, Any]] | None = None,
        seq: int | None = None,
    ) -> None:
        """Commit one finished item (its result and the log of its model calls) and the run's
        counts, in one transaction."""
        with self.session() as s:
            if seq is None:  # a caller that counts its items (RunHandle) saves this query
                last = s.scalar(
                    select(func.coalesce(func.max(ItemRow.seq), -1)).where(ItemRow.run_id == run_id)
                )
                seq = int(last if last is not None else -1) + 1
            s.add(
                ItemRow(
                    run_id=run_id,
                    item_key=key,
                    seq=seq,
                    error_type=error_type,
                    calls=calls,
                    cached_calls=cached_calls,
                    latency_s=latency_s,
                    result=_dumps(result),
                    call_log=_dumps(call_log) if call_log else None,
                    finished_at=_now(),
                )
            )
            s.execute(
                update(RunRow)
                .where(RunRow.id == run_id)
                .values(
                    n_done=RunRow.n_done + 1,
                    n_errors=RunRow.n_errors + (1 if error_type else 0),
                )
            )
            s.commit()

    # cache --------------------------------------------------------------------------------
    def cache_get(self, key: str) -> dict[str, Any] | None:
        with self.engine.connect() as connection:  # Core, not an ORM session: the hot path
            value = connection.execute(
                select(CacheRow.value).where(CacheRow.key == key)
            ).scalar_one_or_none()
        return orjson.loads(value) if value is not None else None

    def cache_put(self, key: str, model: str, value: dict[str, Any]) -> None:
        with self.session() as s:
            s.merge(CacheRow(key=key, model=model, value=_dumps(value), created_at=_now()))
            s.commit()

    def cache_count(self) -> int:
        with self.session() as s:
            return int(s.scalar(select(func.count()).select_from(CacheRow)) or 0)

    # saved configuration ------------------------------------------------------------------
    def get_config(self, section: str) -> Any | None:
        """The saved JSON value of a configuration section, or None when never saved."""
        with self.session() as s:
            row = s.get(ConfigRow, section)
            return orjson.loads(row.value) if row is not None else None

    def put_config(self, section: str, value: Any) -> None:
        """Save (replace) a configuration section; the caller validates it first."""
        with self.session() as s:
            s.merge(ConfigRow(section=section, value=_dumps(value), updated_at=_now()))
            s.commit()


def _engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 30})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


def upgrade(engine: Engine) -> None:
    """Bring the schema to the newest Alembic revision."""
    import logging

    from alembic import command
    from alembic.config import Config

    logging.getLogger("alembic").setLevel(logging.WARNING)  # not its INFO lines under -v

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")

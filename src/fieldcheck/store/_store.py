"""The run store: runs, the runner's journal and the response cache in SQLite or PostgreSQL
(docs/running.md), a scored run's items in Parquet (``_parquet``); every write commits at once."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import socket
import sqlite3
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import orjson
from sqlalchemy import (
    Connection,
    Engine,
    RootTransaction,
    bindparam,
    create_engine,
    delete,
    event,
    false,
    func,
    insert,
    inspect,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import aliased, sessionmaker

from fieldcheck._util.executor import pid_alive
from fieldcheck._util.iters import chunked
from fieldcheck._util.jsonio import dumps, loads
from fieldcheck._util.models import SEPARATOR
from fieldcheck.store import _pairs, _parquet
from fieldcheck.store._figures import journal_figures
from fieldcheck.store._items import Pairing
from fieldcheck.store._records import (
    ARTIFACTS_ENV,
    NotUpgraded,
    RunInfo,
    StoredItem,
    artifacts_root,
    database_url,
    describe_url,
    sqlite_folder,
    utc,
)
from fieldcheck.store._schema import CacheRow, ConfigRow, JournalRow, RunRow

MIGRATIONS = Path(__file__).resolve().parent / "migrations"

BUSY_SECONDS = 30  # how long a SQLite store waits for another process's lock
MIN_PREFIX = 4  # the fewest characters that name a run (``runs delete`` acts at once)

ITEM_PAGE = 1000
MEMO = 256  # counts and filter choices of items files kept (``Store._remember``)
SORTED = 4  # sorted tables' seqs kept (8 MB each at a million items)
DUCKDB_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "enable_external_file_cache": False,
    "allocator_flush_threshold": "8MB",
    "allocator_background_threads": True,
}
"""The store's DuckDB: no copy of the items files it read kept in memory, and its allocator's
freed memory given back after a query that used more than 8 MB (by default a server that read
one item of 40 MB held some 0.5 GB more for good; a new-user trial's finding)."""
SCORED = ("run", "score")  # the kinds of run whose finished items are a file
_IDENTIFIER = '"'

T = TypeVar("T")


class ItemsMissing(FileNotFoundError):
    """A finished run's items file is not under the artifacts root."""

    def __init__(self, run_id: str, path: Path) -> None:
        super().__init__(
            f"the items of run {run_id} are not at {path} (removed, or the run was stored with "
            f"another {ARTIFACTS_ENV}: set it as then)"
        )
        self.run_id, self.path = run_id, path


class RunHasChildren(ValueError):
    """A run still has re-scores (runs whose ``parent_id`` it is): it is not deleted."""

    def __init__(self, run_id: str, children: list[str]) -> None:
        super().__init__(
            f"run {run_id} has re-scores: {', '.join(children)}; delete them first "
            "(each names it as its parent)"
        )
        self.run_id, self.children = run_id, children


class AlreadyStored(ValueError):
    """A run of the same identity (``create_scored_run``'s ``key``) is stored or being stored."""

    def __init__(self, run: RunInfo) -> None:
        super().__init__(f"already stored as run {run.id}")
        self.run = run


class AmbiguousRunError(LookupError):
    """Several runs start with the prefix given."""

    def __init__(self, prefix: str, ids: list[str]) -> None:
        more = ", ..." if len(ids) >= 5 else ""
        super().__init__(f"{prefix!r} names several runs: {', '.join(ids)}{more}")
        self.prefix, self.ids = prefix, ids


def _now() -> datetime:
    return datetime.now(UTC)


class Store:
    """Runs, items and cached replies behind one SQLAlchemy engine."""

    def __init__(self, url: str | None = None, *, artifacts: Path | None = None) -> None:
        self.url = url or database_url()
        self.artifacts = artifacts or artifacts_root(self.url)
        self._duckdb: Any = None
        self._duck_lock = threading.Lock()
        self._memo: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._sorted: OrderedDict[tuple[Any, ...], Any] = OrderedDict()  # seqs of sorted tables
        folder = sqlite_folder(self.url)
        if folder is not None and not folder.is_dir():  # SQLite said "unable to open database file"
            raise FileNotFoundError(f"the SQLite store's folder {folder} does not exist")
        self.engine: Engine = _engine(self.url)
        upgrade(self.engine, artifacts)
        self._session = sessionmaker(self.engine, expire_on_commit=False)

    def __repr__(self) -> str:
        return f"Store({describe_url(self.url)!r})"

    def check_writable(self) -> None:
        """Raise (an SQLAlchemy error) when this store cannot be written (a read-only file or
        role found before a run starts): a delete of no row, rolled back."""
        with self.engine.connect() as connection:
            connection.execute(delete(ConfigRow).where(false()))
            connection.rollback()

    def close(self) -> None:
        with self._duck_lock:
            if self._duckdb is not None:
                self._duckdb.close()
                self._duckdb = None
        self.engine.dispose()

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
        out_dir: str | None = None,
        part_of: str | None = None,
    ) -> tuple[RunInfo, bool]:
        """The interrupted run with the same key (what defines it: resumed, True), else a new
        run (False); a ``running`` one is never taken over (two at once took each other's items).
        ``out_dir`` (the folder it runs for) is recorded; the ``RunInfo`` has the one before.
        ``part_of``: a run whose ``calls`` it is (a several-model slots run's), its items counted
        in it (whose ``n_items`` planned every model's)."""
        run_key = model_run_key(system, task, dataset_sha256, model, endpoint, settings)
        self.mark_stale_runs()
        with self._session() as s:
            row = s.scalars(
                select(RunRow)
                .where(RunRow.run_key == run_key, RunRow.status == "interrupted")
                .order_by(RunRow.started_at.desc())
            ).first()
            resumed = row is not None
            if row is None:
                row = _new_run(
                    run_key=run_key,
                    system=system,
                    task=task,
                    dataset=dataset,
                    dataset_sha256=dataset_sha256,
                    model=model,
                    endpoint=endpoint,
                    settings=dumps(settings),
                    signature=signature,
                )
                s.add(row)
            else:  # its counts its journal's and its parts' (a scoring begun counted every model's)
                row.n_done, row.n_errors = _journal_counts(s, row.id)
            counted = resumed and row.parent_id == part_of  # a part: when its evaluation resumed
            row.kind, row.parent_id = ("calls", part_of) if part_of else ("run", None)
            row.status = "running"
            row.pid, row.host = os.getpid(), socket.gethostname()
            row.n_items = n_items
            earlier, row.out_dir = row.out_dir, out_dir or row.out_dir
            if part_of and not counted:  # the evaluation's counts are every model's
                plus = {k: getattr(RunRow, k) + getattr(row, k) for k in ("n_done", "n_errors")}
                s.execute(update(RunRow).where(RunRow.id == part_of).values(**plus))
            s.commit()
            return replace(RunInfo.of(row), out_dir=earlier), resumed

    def unresumed_run(self, run: RunInfo) -> RunInfo | None:
        """The latest interrupted model run of ``run``'s system, task, data and model that
        ``open_run`` did not resume for ``run`` (another key: other settings), or None."""
        with self._session() as s:
            row = s.scalars(
                select(RunRow)
                .where(
                    RunRow.system == run.system,
                    RunRow.task == run.task,
                    RunRow.dataset_sha256 == run.dataset_sha256,
                    RunRow.model == run.model,
                    RunRow.status == "interrupted",
                    RunRow.kind != "score",
                    RunRow.run_key != run.run_key,
                )
                .order_by(RunRow.started_at.desc())
            ).first()
            return None if row is None else RunInfo.of(row)

    def mark_stale_runs(self) -> int:
        """Mark ``running`` runs of this host whose process is gone as ``interrupted``."""
        host = socket.gethostname()
        with self._session() as s:
            rows = s.scalars(
                select(RunRow).where(RunRow.status == "running", RunRow.host == host)
            ).all()
            stale = [r for r in rows if r.pid is None or not pid_alive(r.pid)]
            for r in stale:
                r.status = "interrupted"
                # killed once its items were published, before all were counted: the file's
                if (path := _parquet.located(self.run_folder(r.id))) is not None:
                    r.n_items, r.n_errors = self._query(_parquet.count_errors, path)
                    r.n_done = r.n_items
            s.commit()
            return len(stale)

    def set_status(
        self, run_id: str, status: str, *, call_errors: Sequence[str] | None = None
    ) -> None:
        """The run's status; with ``call_errors`` (the runner's failed calls' types) also the
        runs list's figures of its journal, for a model run that stops before it is scored
        (``finish_scored_run`` sets them for a scored one)."""
        with self.engine.begin() as connection:
            values: dict[str, Any] = {"status": status}
            if status == "finished":
                values["finished_at"] = _now()
            if call_errors is not None:
                values |= journal_figures(connection, run_id, call_errors)
            connection.execute(update(RunRow).where(RunRow.id == run_id).values(**values))

    def forget_folder(self, run_id: str) -> None:
        """Run ``run_id`` stored without an output folder (its folder was removed: the API's
        upload scored in a temporary folder), so no page names a folder that is gone."""
        with self.engine.begin() as connection:
            connection.execute(update(RunRow).where(RunRow.id == run_id).values(out_dir=None))

    def get_run(self, run_id: str) -> RunInfo | None:
        """The run ``run_id``, or the one a scored run of that id was merged into (0006)."""
        with self._session() as s:
            row = s.get(RunRow, run_id)
            if row is None:
                row = s.scalars(select(RunRow).where(RunRow.former_id == run_id)).first()
            return RunInfo.of(row) if row is not None else None

    def list_runs(
        self,
        *,
        limit: int | None = None,
        offset: int = 0,
        newest_first: bool = False,
        sort: str = "started",
        **filters: Any,
    ) -> list[RunInfo]:
        """Runs by start time (oldest first unless ``newest_first``), or by ``sort`` (one of
        ``RUN_SORTS``; unknown figures last either way), filtered by ``_run_filters``."""
        self.mark_stale_runs()
        with self._session() as s:
            found = RUN_SORTS[sort]
            columns = found if isinstance(found, tuple) else (found,)
            orders = [(c.desc() if newest_first else c.asc()).nulls_last() for c in columns]
            query = _run_filters(select(RunRow), **filters).order_by(
                *orders, RunRow.started_at.desc(), RunRow.id
            )
            if limit is not None:
                query = query.limit(limit).offset(offset)
            return [RunInfo.of(r) for r in s.scalars(query)]

    def count_runs(self, **filters: Any) -> int:
        """How many runs ``list_runs`` gives with the same filters and no limit."""
        query = _run_filters(select(func.count()).select_from(RunRow), **filters)
        with self._session() as s:
            return int(s.scalar(query) or 0)

    def find_run(self, prefix: str) -> RunInfo | None:
        """The run whose id is ``prefix``, or the only one starting with it (of ``MIN_PREFIX``
        characters or more, as git names commits); AmbiguousRunError when several do."""
        run = self.get_run(prefix)
        if run is not None or len(prefix) < MIN_PREFIX:
            return run
        with self._session() as s:
            rows = s.scalars(
                select(RunRow)
                .where(func.substr(RunRow.id, 1, len(prefix)) == prefix)
                .order_by(RunRow.id)
                .limit(5)
            ).all()
        if len(rows) > 1:
            raise AmbiguousRunError(prefix, [r.id for r in rows])
        return RunInfo.of(rows[0]) if rows else None

    def delete_run(self, run_id: str) -> bool:
        """Delete a run, its journal, item files and ``calls`` runs (False: no such run);
        ``RunHasChildren`` while re-scores remain, ``PermissionError`` for unremovable files;
        ``ItemsMissing`` for a finished run's items file and folder not under the artifacts root
        (another root's: deleting would orphan them; a file gone from its folder is deleted)."""
        with self._session() as s:
            row = s.get(RunRow, run_id)
            if row is not None and row.kind in SCORED and row.n_items:  # items written
                folder = self.run_folder(run_id)
                if not folder.is_dir():
                    raise ItemsMissing(
                        run_id, folder / _parquet.ITEMS if row.status == "finished" else folder
                    )
            names = [run_id, *([row.former_id] if row is not None and row.former_id else [])]
            children = s.scalars(
                select(RunRow.id)
                .where(RunRow.parent_id.in_(names), RunRow.kind != "calls")
                .order_by(RunRow.started_at, RunRow.id)
            ).all()
            if children:
                raise RunHasChildren(run_id, list(children))
            parts = select(RunRow.id).where(RunRow.parent_id == run_id, RunRow.kind == "calls")
            ids = [run_id, *s.scalars(parts)]
            for run in ids if row is not None else ():
                folder = self.run_folder(run)
                if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
                    raise PermissionError(
                        f"cannot remove the items of run {run} in {folder} (not writable: a "
                        "read-only artifacts root?); nothing was deleted"
                    )
            s.execute(delete(JournalRow).where(JournalRow.run_id.in_(ids)))
            s.execute(delete(RunRow).where(RunRow.id.in_(ids[1:])))
            gone = s.execute(delete(RunRow).where(RunRow.id == run_id)).rowcount  # type: ignore[attr-defined]
            s.commit()
        if gone:
            for run in ids:
                _parquet.remove(self.run_folder(run))
        return bool(gone)

    # scored runs ----------------------------------------------------------------------------
    def create_scored_run(
        self,
        *,
        system: str,
        model: str,
        task: str,
        inputs: list[dict[str, Any]],
        settings: dict[str, Any],
        signature: str,
        out_dir: str | None,
        parent_id: str | None = None,
        key: str | None = None,
        origin: str | None = None,
    ) -> RunInfo:
        """A new ``score`` run (no model calls), ``running`` until ``finish_scored_run``: its
        first input names the dataset; ``origin``: the id its folder names (``former_id``: it
        finds the run). With ``key`` (what the run is: an import's identity, its ``run_key``),
        ``AlreadyStored`` naming the run running or finished of that key, looked up in the
        transaction that adds this one under the store's write lock (SQLite) or the key's
        (PostgreSQL), so that one of many processes stores it; a failed or interrupted one is
        deleted and replaced. Its id is its own (uuid) as every run's: another store's run of
        the same folder, under a shared artifacts root, has its own items folder."""
        first = inputs[0] if inputs else {"path": "", "sha256": ""}
        with self._session() as s:
            row = _new_run(
                run_key=key,
                system=system,
                task=task,
                dataset=str(first.get("path") or ""),
                dataset_sha256=str(first.get("sha256") or ""),
                model=model,
                endpoint="",
                settings=dumps(settings),
                signature=signature,
                kind="score",
                parent_id=parent_id,
                out_dir=out_dir,
                inputs=dumps(inputs),
                former_id=origin,
            )
            s.add(row)
            s.flush()  # SQLite: the INSERT holds the write lock until the commit
            held: Sequence[RunRow] = ()
            if key is not None:
                if self.engine.dialect.name == "postgresql":
                    s.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": int(key[:15], 16)})
                same = select(RunRow).where(RunRow.run_key == key, RunRow.id != row.id)
                held = s.scalars(same.order_by(RunRow.started_at, RunRow.id)).all()
            if live := [r for r in held if r.status in ("running", "finished")]:
                s.rollback()
                raise AlreadyStored(RunInfo.of(live[0]))
            s.commit()
            info = RunInfo.of(row)
        for stale in held:
            self.delete_run(stale.id)
        return info

    def begin_scoring(
        self,
        run_id: str,
        *,
        inputs: list[dict[str, Any]],
        settings: dict[str, Any],
        out_dir: str | None,
        model: str | None = None,
        parts: list[str] | None = None,
        kind: str = "run",
    ) -> RunInfo:
        """Score run ``run_id`` into itself afresh (one run per evaluation; ``parts``: a slot
        run's other models' runs, made its ``calls``); ``kind="score"`` replaces its settings."""
        with self._session() as s:
            row = s.get(RunRow, run_id)
            if row is None:
                raise KeyError(run_id)
            earlier = orjson.loads(row.settings) if kind == "run" else {}
            row.settings = dumps({**earlier, **settings})
            row.inputs = dumps(inputs)
            row.out_dir = out_dir
            row.kind = kind
            row.model = model or row.model
            row.status = "running"
            row.pid, row.host = os.getpid(), socket.gethostname()
            row.metrics = row.intervals = None
            if kind == "score":  # a model run's counts stay its journal's until it is scored
                row.n_items = row.n_done = row.n_errors = 0
            if parts:
                s.execute(
                    update(RunRow)
                    .where(RunRow.id.in_(parts))
                    .values(kind="calls", parent_id=run_id, status="finished", finished_at=_now())
                )
            s.commit()
            info = RunInfo.of(row)
        _parquet.remove(self.run_folder(run_id))  # an interrupted scoring's items
        return info

    def runs_of_folder(self, out_dir: Path, *, system: str) -> list[RunInfo]:
        """The finished runs of ``system`` stored from the output folder ``out_dir`` (by its
        command or an import; a re-score has no folder), newest first."""
        with self._session() as s:
            rows = s.scalars(
                select(RunRow)
                .where(
                    RunRow.out_dir == str(out_dir.resolve()),
                    RunRow.system == system,
                    RunRow.status == "finished",
                    RunRow.kind != "calls",
                )
                .order_by(RunRow.started_at.desc(), RunRow.id)
            )
            return [RunInfo.of(r) for r in rows]

    def unfinished_scoring(self, run_ids: Sequence[str], *, system: str) -> str | None:
        """The first of ``run_ids`` (an unfinished folder's) that is an interrupted or failed
        scoring of ``system``: continuing the folder finishes it rather than storing another."""
        if not run_ids:
            return None
        self.mark_stale_runs()
        query = select(RunRow.id).where(
            RunRow.id.in_(list(run_ids)),
            RunRow.kind == "score",
            RunRow.system == system,
            RunRow.status.in_(("interrupted", "failed")),
        )
        with self._session() as s:
            found = set(s.scalars(query))
        return next((r for r in run_ids if r in found), None)

    def run_folder(self, run_id: str) -> Path:
        """The folder of a run's item files under the artifacts root (ValueError for an id that
        is not a plain name: no path leads out of the root)."""
        if not _parquet.RUN_ID.fullmatch(run_id):
            raise ValueError(f"not a run id: {run_id!r}")
        return self.artifacts / "runs" / run_id

    def items_file(self, run_id: str) -> Path | None:
        """A scored run's items for DuckDB (``_parquet.located``); None for items in flight;
        ``ItemsMissing`` for a finished run's missing file (never read as a run of no items)."""
        if not _parquet.RUN_ID.fullmatch(run_id):
            return None
        found = _parquet.located(self.run_folder(run_id))
        if found is not None:
            return found
        with self._session() as s:
            run = s.get(RunRow, run_id)
        if run is not None and run.status == "finished" and run.n_items and run.kind in SCORED:
            raise ItemsMissing(run_id, self.run_folder(run_id) / _parquet.ITEMS)
        return None

    def items_writer(self, run_id: str) -> _parquet.ItemsWriter:
        """A writer of a scored run's items, each chunk counted on the run
        (benchmarks/baseline_store.py); ``publish_items`` makes them the run's files."""
        return _parquet.ItemsWriter(self.run_folder(run_id), partial(self.count_written, run_id))

    def count_written(self, run_id: str, items: int, errors: int) -> None:
        """Count ``items`` written (``errors`` of them with an error) on the run."""
        with self.engine.begin() as conn:
            conn.execute(
                update(RunRow)
                .where(RunRow.id == run_id)
                .values(
                    n_done=RunRow.n_done + items,
                    n_items=RunRow.n_items + items,
                    n_errors=RunRow.n_errors + errors,
                )
            )

    def publish_items(self, run_id: str) -> Path:
        """The run's written parts as its items (``_parquet.publish``)."""
        return _parquet.publish(self.run_folder(run_id))

    def export_parquet(
        self,
        run_id: str,
        out: Path,
        columns: Sequence[tuple[str, str, str]] = (),
        *,
        model: str | None = None,
    ) -> None:
        """Run ``run_id``'s items (or journal) as zstd Parquet in ``seq`` order: the indexed
        columns (``model`` where an item names none), each of ``columns`` (name, JSON path,
        DuckDB type), the JSON as ``result``; KeyError when there is no such run (nothing is
        written), as ``runs.write_parquet``; FileExistsError for an ``out`` that exists and is not
        an empty file (fieldcheck never replaces a file it did not make, as ``runs export``)."""
        if self.get_run(run_id) is None:
            raise KeyError(run_id)
        if out.is_dir() or (out.exists() and (not out.is_file() or out.stat().st_size)):
            raise FileExistsError(f"{out} exists and is not an empty file: give a new name")
        with tempfile.TemporaryDirectory(prefix="fieldcheck-export-") as tmp:
            path = self.items_file(run_id)
            if path is None:
                writer = _parquet.ItemsWriter(Path(tmp))
                for page in chunked(self.iter_items(run_id), ITEM_PAGE):
                    rows = [
                        (i.key, i.seq, i.error_type, None, None, None, dumps(i.result))
                        for i in page
                    ]
                    writer.write(rows, ())
                writer.close()
                path = _parquet.publish(Path(tmp))
            # each item's JSON parsed once for all the columns (once a column: 4x the time)
            extracted = "".join(
                f", TRY_CAST(v[{i}] AS {kind}) AS {_parquet.quote(name, _IDENTIFIER)}"
                for i, (name, _, kind) in enumerate(columns, 1)
            )
            paths = ", ".join(_parquet.quote(at) for _, at, _ in columns)
            source = f"read_parquet({_parquet.quote(path)})"
            if columns:
                source = f"(SELECT *, json_extract_string(result, [{paths}]) AS v FROM {source})"
            named = f"COALESCE(model, {_parquet.quote(model)}) AS model" if model else "model"
            self._query(
                lambda con: con.execute(
                    f"COPY (SELECT key, seq, failed, {named}, turn, error_type{extracted}, result "
                    f"FROM {source} ORDER BY seq) TO "
                    f"{_parquet.quote(out)} (FORMAT parquet, COMPRESSION zstd)"
                )
            )

    def _query(self, read: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``read(cursor, *args, **kwargs)`` on a DuckDB cursor of its own (the API's threads
        query at once) of the store's one connection, made under a lock (not one per thread)."""
        with self._cursor() as con:
            return read(con, *args, **kwargs)

    def _cursor(self) -> Any:
        with self._duck_lock:
            if self._duckdb is None:
                import duckdb

                self._duckdb = duckdb.connect(config=DUCKDB_CONFIG)
            return self._duckdb.cursor()

    def finish_scored_run(
        self,
        run_id: str,
        *,
        metrics: dict[str, Any] | None,
        intervals: dict[str, Any] | None,
        status: str = "finished",
        signature: str | None = None,
        figures: Mapping[str, Any] | None = None,
        counts: tuple[int, int] | None = None,
    ) -> RunInfo:
        """Finish a scored run: metrics, intervals, status and the runs list's figures
        (``_figures``, then ``figures``: its system's ``headline``, usage and ``dataset`` roles);
        ``counts``: the items written and of them with an error (a model run's, not counted as
        they were written: its counts were its journal's till now)."""
        figures = figures or {}
        failed = None
        with contextlib.suppress(ItemsMissing, OSError):  # an aborted run's parts, or none
            failed = self.count_items(run_id, failed=True) if self.items_file(run_id) else None
        with self._session() as s:
            row = s.get(RunRow, run_id)
            if row is None:
                raise KeyError(run_id)
            if signature is not None:
                row.signature = signature
            if metrics is not None:
                row.metrics = dumps(metrics)
            if intervals is not None:
                row.intervals = dumps(intervals)
            called = journal_figures(s.connection(), run_id, figures.get("call_errors") or ())
            for name, value in called.items():
                setattr(row, name, value)
            row.latency_mean_s = called["latency_mean_s"] or figures.get("latency_mean_s")
            for name in ("input_tokens", "output_tokens", "cost_usd"):  # given predictions'
                if called[name] is None and figures.get(name) is not None:
                    value = figures[name]
                    setattr(row, name, value if name == "cost_usd" else int(value))
            row.headline, row.n_failed = figures.get("headline"), failed
            inputs = orjson.loads(row.inputs or "[]")
            roles = figures.get("dataset") or ()
            dataset = next((i for r in roles for i in inputs if i.get("name") == r), None)
            if dataset is not None:
                row.dataset = str(dataset.get("path") or "")
                row.dataset_sha256 = str(dataset.get("sha256") or "")
            if counts is not None:
                (row.n_items, row.n_errors), row.n_done = counts, counts[0]
            row.status = status
            row.finished_at = _now()
            s.commit()
            return RunInfo.of(row)

    def page_items(
        self,
        run_id: str,
        *,
        after: int = -1,
        limit: int = 100,
        offset: int = 0,
        order: str | None = None,
        descending: bool = False,
        values: Sequence[str] = (),
        **filters: Any,
    ) -> list[StoredItem]:
        """Up to ``limit`` items with ``seq > after`` (keyset paging) filtered as
        ``_parquet.page`` (``filters``); ``order`` (an ``ItemColumn`` expression),
        ``descending``, ``offset``: sorted."""
        path = self.items_file(run_id)
        if path is not None:
            if order is None and not descending:
                rows = self._query(
                    _parquet.page,
                    path,
                    after=after,
                    limit=limit,
                    offset=offset,
                    values=values,
                    **filters,
                )
            else:
                seqs = self._remember(
                    ("sorted", order, descending, after, repr(filters)),
                    _parquet.sorted_seqs,
                    path,
                    order=order or "seq",
                    descending=descending,
                    after=after,
                    **filters,
                )
                page = [int(s) for s in seqs[offset : offset + limit]]
                rows = self._query(_parquet.rows_of, path, page, values)
            return _scored(rows)
        query = _journal(run_id, filters)
        if query is None:
            return []
        with self._session() as s:
            if descending:
                query = query.order_by(JournalRow.seq.desc())
            else:
                query = query.where(JournalRow.seq > after).order_by(JournalRow.seq)
            return [_in_flight(row) for row in s.scalars(query.limit(limit).offset(offset))]

    def count_items(
        self,
        run_id: str,
        *,
        not_scored: bool = False,
        **filters: Any,
    ) -> int:
        """How many items ``page_items`` gives with these filters (``not_scored``: of those, the
        ones neither failed nor passed), remembered per items file (``_remember``)."""
        path = self.items_file(run_id)
        if path is not None:
            key = ("count", not_scored, repr(filters))
            return int(self._remember(key, _parquet.count, path, not_scored=not_scored, **filters))
        query = _journal(run_id, filters, func.count())
        if query is None:
            return 0
        with self._session() as s:
            return int(s.scalar(query) or 0)

    def find_items(self, run_id: str, keys: Sequence[str]) -> list[StoredItem]:
        """The items of ``keys`` (of every model) in order of seq: an item's page and the items
        its story reads beside it. A run still calling gives its journal's."""
        if not keys:
            return []
        path = self.items_file(run_id)
        if path is not None:
            return _scored(self._query(_parquet.find, path, list(keys)))
        query = _journal(run_id, {}).where(JournalRow.item_key.in_(list(keys)))
        with self._session() as s:
            return [_in_flight(row) for row in s.scalars(query.order_by(JournalRow.seq))]

    def count_not_scored(self, run_id: str) -> int:
        return self.count_items(run_id, not_scored=True)

    def item_tags(self, run_id: str, *, limit: int = 1000) -> list[str]:
        """The distinct tag names of a run (fields or topics), sorted: the filter's choices."""
        path = self.items_file(run_id)
        if path is None:
            return []  # an item in flight is not tagged yet
        return list(self._remember(("tags", limit), _parquet.tag_names, path, limit))

    def item_values(self, run_id: str, sql: str, *, limit: int = 1000) -> list[Any]:
        """The distinct values of a run's items' column ``sql`` (an indexed column's name or
        a system's ``ItemColumn`` expression), sorted: a filter's choices."""
        path = self.items_file(run_id)
        if path is None and sql == "error_type":  # the call errors of items in flight
            query = _journal(run_id, {}, JournalRow.error_type).distinct()
            with self._session() as s:
                found = query.where(JournalRow.error_type.is_not(None)).limit(limit)
                return sorted(s.scalars(found))
        if path is None:
            return []
        return list(self._remember(("values", sql, limit), _parquet.distinct, path, sql, limit))

    def _remember(
        self,
        key: tuple[Any, ...],
        read: Callable[..., Any],
        path: Path,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        """``_query(read, path, ...)``, kept (``MEMO`` answers; a ``"sorted"`` key's: ``SORTED``)
        while the items file is unchanged (its first file's size and time, its folder's time)."""
        memo, size = (self._sorted, SORTED) if key[0] == "sorted" else (self._memo, MEMO)
        stamp = self._stamp(path)
        if stamp is None:
            return self._query(read, path, *args, **kwargs)
        full = (*stamp, *key)
        with self._duck_lock:
            if full in memo:
                memo.move_to_end(full)
                return memo[full]
        value = self._query(read, path, *args, **kwargs)
        with self._duck_lock:
            memo[full] = value
            while len(memo) > size:
                memo.popitem(last=False)
        return value

    @staticmethod
    def _stamp(path: Path) -> tuple[str, int, int, int] | None:
        """What tells an items file changed: its first file's size and time, its folder's time."""
        first = path if path.is_file() else path.with_name("items-00000.parquet")
        try:
            stat, folder = first.stat(), path.parent.stat()
        except OSError:
            return None
        return str(path), stat.st_size, stat.st_mtime_ns, folder.st_mtime_ns

    def item_matrix(
        self,
        columns: Sequence[tuple[str, str | None]],
        pairing: Pairing,
        *,
        differ: bool = True,
        offset: int = 0,
        limit: int = 100,
    ) -> tuple[int, int, list[tuple[Any, ...]]] | None:
        """The items of ``columns`` ((run id, model or None) each) paired on ``pairing.key``:
        ``_pairs.matrix``. None when a run has no items file (its calls in flight)."""
        sides = self._sides(columns)
        if sides is None:
            return None
        return self._query(_pairs.matrix, sides, pairing, differ=differ, offset=offset, limit=limit)

    def paired_rows(
        self, a: tuple[str, str | None], b: tuple[str, str | None], pairing: Pairing
    ) -> tuple[Any, Any, Any] | None:
        """The per-item statistics of the items both columns hold, grouped with their counts
        (``_pairs.paired_rows``); None when a run has no items file."""
        sides = self._sides([a, b])
        if sides is None:
            return None
        first, other = sides  # each page of a comparison asks again: kept while both are as now
        key = ("paired", self._stamp(other.path), first.model, other.model, pairing.key)
        return self._remember(  # type: ignore[no-any-return]
            (*key, pairing.rows),
            lambda con, _: _pairs.paired_rows(con, first, other, pairing),
            first.path,
        )

    def truth_digests(
        self, columns: Sequence[tuple[str, str | None]], pairing: Pairing
    ) -> list[tuple[int, int]] | None:
        """Each column's ``_pairs.truth_digest``, of the stored text, or canonical where those
        differ (the same truth in another key order); None when a run has no items file."""
        sides = self._sides(columns)
        if sides is None or pairing.truth is None:
            return None

        def digest(side: _pairs.Side, canonical: bool) -> tuple[int, int]:
            key = ("truth", side.model, pairing.key, pairing.truth, canonical)
            return self._remember(  # type: ignore[no-any-return]
                key,
                lambda con, _: _pairs.truth_digest(con, side, pairing, canonical=canonical),
                side.path,
            )

        found = [digest(s, False) for s in sides]
        return [digest(s, True) for s in sides] if len(set(found)) > 1 else found

    def _sides(self, columns: Sequence[tuple[str, str | None]]) -> list[_pairs.Side] | None:
        paths = [self.items_file(run) for run, _ in columns]
        if any(p is None for p in paths):
            return None
        return [_pairs.Side(p, m) for p, (_, m) in zip(paths, columns, strict=True) if p]

    # items --------------------------------------------------------------------------------
    def items(self, run_id: str) -> list[StoredItem]:
        """The run's finished items in the order they finished."""
        return list(self.iter_items(run_id))

    def iter_items(self, run_id: str) -> Iterator[StoredItem]:
        """The run's items, read a page at a time: an items file in one scan (a page a query
        decompressed a row group per page: 44 s for a CSV export of 100,000 items)."""
        path = self.items_file(run_id)
        if path is not None:
            with self._cursor() as con:
                for rows in _parquet.stream(con, path, ITEM_PAGE):
                    yield from _scored(rows)
            return
        after = -1
        while page := self.page_items(run_id, after=after, limit=ITEM_PAGE):
            yield from page
            after = page[-1].seq

    # the runner's journal ------------------------------------------------------------------
    def journal(self, run_id: str) -> list[StoredItem]:
        """The journal of model run ``run_id``: its items as their calls finished (a resume
        reads them back), in order."""
        with self._session() as s:
            query = select(JournalRow).where(JournalRow.run_id == run_id).order_by(JournalRow.seq)
            return [_stored(row) for row in s.scalars(query)]

    def items_in_flight(self, run_id: str) -> bool:
        """Whether the run's items are its journal's: a model run's items called and not yet
        scored (a run interrupted or still calling), or a ``calls`` run's calls."""
        if self.items_file(run_id) is not None:
            return False
        with self._session() as s:
            first = select(JournalRow.seq).where(JournalRow.run_id == run_id).limit(1)
            return s.scalar(first) is not None

    def forget_item(self, run_id: str, key: str) -> None:
        """Delete a journal item of ``run_id`` and take it off the run's counts (a resumed run
        calls it again before saving it anew)."""
        with self._session() as s:
            row = s.get(JournalRow, (run_id, key))
            if row is None:
                return
            failed = 1 if row.error_type else 0
            s.delete(row)
            s.execute(
                update(RunRow)
                .where(_and_parent(run_id))
                .values(n_done=RunRow.n_done - 1, n_errors=RunRow.n_errors - failed)
            )
            s.commit()

    def save_items(
        self,
        items: Sequence[dict[str, Any]],
        cached: Sequence[tuple[str, str, dict[str, Any]]] = (),
    ) -> None:
        """Commit finished journal items, their runs' counts and cached replies ``(key, model,
        value)`` in one Core transaction; a key cached already keeps its first reply."""
        now = _now()
        rows = [
            {
                "run_id": i["run_id"],
                "item_key": i["key"],
                "seq": i["seq"],
                "error_type": i.get("error_type"),
                "calls": i.get("calls", 0),
                "cached_calls": i.get("cached_calls", 0),
                "latency_s": i.get("latency_s", 0.0),
                "result": dumps(i["result"], sort=False),  # a resume reads it in its order
                "call_log": dumps(i["call_log"]) if i.get("call_log") else None,
                "finished_at": now,
            }
            for i in items
        ]
        counts: dict[str, list[int]] = {}
        for row in rows:
            count = counts.setdefault(row["run_id"], [0, 0])
            count[0] += 1
            count[1] += row["error_type"] is not None
        cache = [
            {"key": key, "model": model, "value": dumps(value), "created_at": now}
            for key, model, value in cached
        ]
        with self.engine.begin() as connection:
            if rows:
                connection.execute(_JOURNAL_ADD, rows)
            for run_id, (done, failed) in counts.items():
                connection.execute(_COUNT_DONE, {"run_id": run_id, "done": done, "failed": failed})
            if cache:
                insert = _INSERTS[self.engine.dialect.name](CacheRow).on_conflict_do_nothing()
                connection.execute(insert, cache)

    # cache --------------------------------------------------------------------------------
    def cache_get(self, key: str) -> dict[str, Any] | None:
        with self.engine.connect() as connection:  # Core, not an ORM session: the hot path
            value = connection.execute(_CACHE_GET, {"key": key}).scalar_one_or_none()
        return orjson.loads(value) if value is not None else None

    def cache_drop(self, key: str) -> None:
        """Forget the cached reply of ``key`` (one its caller cannot use: a judge's prose)."""
        with self.engine.begin() as connection:
            connection.execute(delete(CacheRow).where(CacheRow.key == key))

    def cache_count(self) -> int:
        with self._session() as s:
            return int(s.scalar(select(func.count()).select_from(CacheRow)) or 0)

    # saved configuration ------------------------------------------------------------------
    def get_config(self, section: str) -> Any | None:
        """The saved JSON value of a configuration section, or None when never saved."""
        with self._session() as s:
            row = s.get(ConfigRow, section)
            return orjson.loads(row.value) if row is not None else None

    def put_config(self, section: str, value: Any) -> None:
        """Save (replace) a configuration section; the caller validates it first."""
        with self._session() as s:
            text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()  # order kept
            s.merge(ConfigRow(section=section, value=text, updated_at=_now()))
            s.commit()


# built once: a fully cached re-run looks up every call (issue 10's 20x)
_CACHE_GET = select(CacheRow.value).where(CacheRow.key == bindparam("key"))
_INSERTS: dict[str, Any] = {"sqlite": sqlite_insert, "postgresql": postgresql_insert}
_JOURNAL_ADD = insert(JournalRow)


def _and_parent(run_id: Any) -> Any:
    """Run ``run_id`` and, for a ``calls`` run, the run whose part it is (its counts are every
    model's)."""
    part = aliased(RunRow)
    up = select(part.parent_id).where(part.id == run_id, part.kind == "calls").scalar_subquery()
    return or_(RunRow.id == run_id, RunRow.id == up)


_COUNT_DONE = (
    update(RunRow)
    .where(_and_parent(bindparam("run_id")))
    .values(
        n_done=RunRow.n_done + bindparam("done"), n_errors=RunRow.n_errors + bindparam("failed")
    )
)


def _journal_counts(s: Any, run_id: str) -> tuple[int, int]:
    """The journal items of ``run_id`` and of its ``calls`` parts, and of them with an error
    type."""
    counted = select(func.count(), func.count(JournalRow.error_type))
    parts = select(RunRow.id).where(RunRow.parent_id == run_id, RunRow.kind == "calls")
    ours = or_(JournalRow.run_id == run_id, JournalRow.run_id.in_(parts))
    done, errors = s.execute(counted.where(ours)).one()
    return int(done), int(errors)


def _stored(row: JournalRow) -> StoredItem:
    return StoredItem(
        key=row.item_key,
        seq=row.seq,
        error_type=row.error_type,
        calls=row.calls,
        cached_calls=row.cached_calls,
        latency_s=row.latency_s,
        result=loads(row.result),  # a value's integers beyond 64 bits kept exact
        call_log=orjson.loads(row.call_log) if row.call_log else [],
    )


def _scored(rows: Sequence[tuple[Any, ...]]) -> list[StoredItem]:
    """Rows of an items file (``_parquet.SELECTED``, then shown values) as items (no call)."""
    return [
        StoredItem(key, seq, error, 0, 0, 0.0, loads(result), [], failed, model, turn, list(rest))
        for key, seq, error, failed, model, turn, result, *rest in rows
    ]


def model_run_key(
    system: str, task: str, dataset_sha256: str, model: str, endpoint: str, settings: Any
) -> str:
    """What defines a model run (``open_run`` resumes the interrupted run of the same key)."""
    return _digest([system, task, dataset_sha256, model, endpoint, settings])


def _digest(value: Any) -> str:
    return hashlib.sha256(dumps(value).encode()).hexdigest()


def _new_run(run_key: str | None = None, run_id: str | None = None, **columns: Any) -> RunRow:
    """A new run of this process, ``running``, of no items yet; a scored run's key is its id's."""
    run_id = run_id or uuid.uuid4().hex[:12]
    return RunRow(
        id=run_id,
        run_key=run_key or _digest(["scored", run_id]),
        status="running",
        pid=os.getpid(),
        host=socket.gethostname(),
        started_at=_now(),
        **{"n_items": 0, "n_done": 0, "n_errors": 0, **columns},
    )


def _journal(run_id: str, filters: Mapping[str, Any], *columns: Any) -> Any:
    """The query of a run's journal items ``page_items``'s filters keep, None for none: an item
    in flight is neither failed nor passed, nor tagged yet (only its call's ``error_type``)."""
    error_type = filters.get("error_type")
    if any(v not in (None, "", ()) for k, v in filters.items() if k != "error_type"):
        return None
    query = select(*(columns or [JournalRow])).select_from(JournalRow)
    parts = select(RunRow.id).where(RunRow.parent_id == run_id, RunRow.kind == "calls")
    query = query.where(or_(JournalRow.run_id == run_id, JournalRow.run_id.in_(parts)))
    return query if error_type is None else query.where(JournalRow.error_type == error_type)


def _in_flight(row: JournalRow) -> StoredItem:
    """A journal item as an item not yet scored: its call under ``call`` (``StoredItem.call``),
    and no verdict."""
    item = _stored(row)
    return replace(item, result={"call": item.call()})


def _run_filters(
    query: Any,
    *,
    system: str | None = None,
    model: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    kind: str | None = None,
    model_contains: str | None = None,
    dataset_contains: str | None = None,
) -> Any:
    """``query`` of the runs of a system, a model (one of a slot run's ``", "``-joined names),
    a kind (none: all but ``calls`` runs), text in the model or dataset file name (any case),
    a time."""
    if system is not None:
        query = query.where(RunRow.system == system)
    if kind is not None:
        query = query.where(RunRow.kind == kind)
    else:
        query = query.where(RunRow.kind != "calls")
    if model is not None:  # one of the ", "-joined names of a slot run, or the whole name
        joined = SEPARATOR + RunRow.model + SEPARATOR  # replace() matches case as == does
        query = query.where(func.replace(joined, f"{SEPARATOR}{model}{SEPARATOR}", "") != joined)
    # the dataset by its file name, what the list shows (its folders are the server's)
    for column, given in ((RunRow.model, model_contains), (DATASET_NAME, dataset_contains)):
        if given:  # matched literally (LIKE's escape ``\\``)
            literal = given.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            query = query.where(column.ilike(f"%{literal}%", escape="\\"))
    if since is not None:
        query = query.where(RunRow.started_at >= utc(since))
    if until is not None:
        query = query.where(RunRow.started_at < utc(until))
    return query


DATASET_NAME = func.substr(
    RunRow.dataset,
    func.length(func.rtrim(RunRow.dataset, func.replace(RunRow.dataset, "/", ""))) + 1,
)
"""A run's dataset file name (after the last ``/``): the runs list sorts by what it shows."""
RUN_SORTS: dict[str, Any] = {
    "started": RunRow.started_at,
    "system": RunRow.system,
    "model": RunRow.model,
    "dataset": (DATASET_NAME, RunRow.dataset_sha256),
    "metric": RunRow.headline,
    "items": RunRow.n_items,
    "failed": RunRow.n_failed,
    "call_errors": RunRow.n_call_errors,
    "tokens": RunRow.input_tokens + RunRow.output_tokens,
    "cost": RunRow.cost_usd,
    "latency": RunRow.latency_mean_s,
}
"""What ``Store.list_runs`` sorts runs by: the runs list's columns, each a column (or columns)."""


def _engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": BUSY_SECONDS})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA page_size=8192")  # ~20% fewer page splits (set at creation)
            _set_wal(cursor)
            # WAL's advice: no fsync per commit (a power cut may lose the last commits, never the
            # database); those commits took an eighth of the writer's time
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA busy_timeout={BUSY_SECONDS * 1000}")
            cursor.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


def _set_wal(cursor: Any) -> None:
    """WAL mode, tried again for up to ``BUSY_SECONDS``: leaving a rollback journal (an old
    store) takes a lock SQLite never waits for, so a second process opening the store while
    the first upgrades it got "database is locked" at once."""
    deadline = time.monotonic() + BUSY_SECONDS
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _newest_revision() -> str:
    """The newest migration's revision id: each file of ``versions/`` is named after its id."""
    return max(p.name.split("_", 1)[0] for p in (MIGRATIONS / "versions").glob("[0-9]*_*.py"))


def _at_revision(engine: Engine) -> str | None:
    """The database's Alembic revision (None: none yet), read without importing Alembic."""
    with engine.connect() as connection:
        if not inspect(connection).has_table("alembic_version"):
            return None
        return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


def upgrade(engine: Engine, artifacts: Path | None = None) -> None:
    """Bring the schema to the newest Alembic revision (importing Alembic only when behind);
    ``artifacts``: the store's root, where 0007 writes old runs' items."""
    if _at_revision(engine) == _newest_revision():
        return
    from alembic import command
    from alembic.config import Config

    logging.getLogger("alembic").setLevel(logging.WARNING)  # not its INFO lines under -v

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    try:
        with engine.connect() as connection, _all_or_nothing(connection):
            config.attributes["connection"] = connection
            config.attributes["artifacts"] = artifacts
            command.upgrade(config, "head")
    except Exception as exc:
        if (at := _at_revision(engine)) != _newest_revision():
            if (half := _half_made(engine)) is not None:
                raise half from exc
            if isinstance(exc, NotUpgraded):  # the upgrade is one transaction: none of it made
                raise NotUpgraded(f"{exc}; the store is left as it was, at revision {at}") from None
            raise
        # else another process opening the store upgraded it meanwhile


def _half_made(engine: Engine) -> Exception | None:
    """The error of a store with fieldcheck's tables but no revision: what a fieldcheck that did
    not create a store in one transaction left when stopped meanwhile (docs/decisions.md)."""
    with engine.connect() as connection:
        if _at_revision(engine) is not None or not inspect(connection).has_table("runs"):
            return None
        runs = connection.execute(text("SELECT count(*) FROM runs")).scalar()
    return NotUpgraded(
        f"{describe_url(engine.url.render_as_string(hide_password=False))} has tables but no "
        f"schema version (an older fieldcheck was stopped making it), {runs} run(s) in it: move "
        "it aside for a new store"
    )


def _all_or_nothing(connection: Connection) -> RootTransaction:
    """The transaction of an upgrade, every statement in it: on SQLite, SQLAlchemy's pysqlite
    recipe for this connection only (no pysqlite BEGIN, our own), as pysqlite committed each
    CREATE or ALTER by itself, so a Ctrl-C or a kill left half a schema that no later command
    could open (docs/decisions.md); PostgreSQL's DDL is transactional already. IMMEDIATE: a
    process opening the store meanwhile waits for the upgrade, then finds it done (a read
    transaction asking to write fails at once, without waiting)."""
    if connection.dialect.name == "sqlite":
        connection.execution_options(isolation_level="AUTOCOMMIT")  # reset back in the pool
        event.listen(connection, "begin", lambda c: c.exec_driver_sql("BEGIN IMMEDIATE"))
    return connection.begin()

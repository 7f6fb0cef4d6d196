"""``RunRecorder``: the sink a scoring command writes its run into (issue 11, docs/runs.md):
``open``, ``add_items``/``add_prepared``/``add_built`` chunk by chunk, ``finish`` (or ``abort``)."""

from __future__ import annotations

import contextlib
import importlib
import marshal
import pickle
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from fieldcheck._util.digest import sha256_file
from fieldcheck._util.errors import shown_path
from fieldcheck._util.executor import Executor, InProcess, LocalPool, finish
from fieldcheck._util.jsonio import dumps_bytes
from fieldcheck._util.paths import file_bytes
from fieldcheck.store._items import ItemColumns, error_kind
from fieldcheck.store._parquet import COLUMNS, ItemsWriter, _Row, _Tag, located, publish, remove
from fieldcheck.store._records import RunInfo

if TYPE_CHECKING:  # SQLAlchemy: not in a pool process that only writes part files
    from fieldcheck.store._store import Store


# what a task writes: ("rows", items, tags), or ("build", "module:function", payload,
# first seq, count), items the task builds itself with that function (``add_built``)
_Chunk = tuple[Any, ...]


def flat_rows(
    rows: Iterable[tuple[ItemColumns, str | bytes]], seq: int
) -> tuple[list[_Row], list[_Tag], int]:
    """(columns, result) pairs as the items and tags rows ``ItemsWriter.write`` takes,
    numbered from ``seq``; and the next seq."""
    items: list[_Row] = []
    tags: list[_Tag] = []
    for c, result in rows:  # bytes are decoded by the task
        error = c.error_type and error_kind(c.error_type)  # never cut mid-word
        items.append((c.key, seq, error, c.failed, c.model, c.turn, result))
        if c.tags:
            tags.extend((name, seq, failed) for name, failed in c.tags.items())
        seq += 1
    return items, tags, seq


def encode_chunk(chunk: _Chunk, plain: bool = False) -> bytes:
    """A chunk as a pool's task reads it (``decode_chunk``); ``plain``: builtin types only (no
    NumPy scalar), marshalled, twice as fast as pickle (a million slot lines: 1 s less)."""
    if plain:
        return b"M" + marshal.dumps(chunk)
    return b"P" + pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL)


def decode_chunk(data: bytes) -> _Chunk:
    """The chunk ``encode_chunk`` made ``data`` of."""
    body = memoryview(data)[1:]
    chunk: _Chunk = marshal.loads(body) if data[:1] == b"M" else pickle.loads(body)
    return chunk


def resolve(chunk: _Chunk) -> tuple[Any, list[_Tag]]:
    """A chunk's items and tags rows; a ``build`` chunk's built here (in the task): rows, or
    a table (``spliced``'s) then numbered."""
    if chunk[0] == "rows":
        return chunk[1], chunk[2]
    _, builder, payload, seq, count = chunk
    module, _, name = builder.partition(":")
    built = getattr(importlib.import_module(module), name)(payload)
    tags: list[_Tag] = []
    if isinstance(built, Iterable):
        items, tags, end = flat_rows(built, seq)
    else:  # a table (``spliced``'s)
        import pyarrow as pa

        end = seq + len(built)
        items = built.add_column(1, "seq", pa.array(range(seq, end), pa.int64()))
    if end - seq != count:
        raise ValueError(f"{builder} built {end - seq} items where {count} were announced")
    return items, tags


def write_part(task: tuple[str, int, list[Any]]) -> tuple[int, int]:
    """A task: the chunks of ``(folder, first seq, chunks)`` (``encode_chunk``'s in a pool) as
    one part file of the run's items; returns how many items, and of them with an error."""
    folder, first, chunks = task
    counts: list[tuple[int, int]] = []
    part = ItemsWriter(Path(folder), lambda n, e: counts.append((n, e)), first)
    try:
        for chunk in chunks:
            part.write(*resolve(decode_chunk(chunk) if isinstance(chunk, bytes) else chunk))
        part.close()
    except BaseException:  # a Ctrl-C or a failed write: the file it began is not left
        part.discard()
        raise
    return sum(n for n, _ in counts), sum(e for _, e in counts)


TASK_ITEMS = 65_536
TASK_BYTES = 4 << 20
"""A task writes at most about this many items or bytes (a part file each; the pool holds at
most three tasks in flight, 12 MiB: the recorder's memory stays flat)."""
_BUILT_ITEM_BYTES = 256  # a built chunk's guessed size per item


# Items written in this process before a run moves its writes to a pool process (small runs
# never pay the process's start, about 0.4 s).
PROCESS_AFTER = 20_000
# Inputs this large (in all) start the pool when the run opens (its start overlaps the
# reading): about 20,000 JSON records of 8 fields, 150,000 slot lines or 60,000 numeric turns.
PROCESS_INPUT_BYTES = 8 << 20


class RunRecorder:
    """One scored run being written: open, add items chunk by chunk, finish (or abort)."""

    def __init__(
        self,
        store: Store,
        run: RunInfo,
        on_error: Callable[[BaseException], None] | None = None,
        calls: Mapping[str, Any] | None = None,
    ) -> None:
        self.store = store
        self.run = run
        self.calls = calls or {}
        self._called: set[str] = set()  # the keys of the calls spliced into an item
        self._failed_calls_added = False
        self.seq = 0
        self.on_error = on_error
        self.broken = False
        self._executor: Executor = InProcess()
        self._pooled = False
        self._task: list[Any] = []  # chunks of the next task
        self._task_first: int | None = None
        self._task_size = 0  # items or bytes, whichever is nearer its bound (TASK_ITEMS/BYTES)
        self._closed = False
        self._sealed = False  # every item added; the part files sent to be published (``seal``)
        self.written = (0, 0)  # items in part files, and of them with an error
        self.process_after = PROCESS_AFTER

    def _failed(self, error: BaseException) -> None:
        """Raise ``error``; or, with ``on_error`` (a command whose files matter more than its
        copy in the store), report it once and store nothing more."""
        if self.on_error is None or not isinstance(error, Exception):
            raise error
        if not self.broken:
            self.broken = True
            self.on_error(error)

    @classmethod
    def open(
        cls,
        store: Store | None,
        *,
        system: str,
        inputs: Sequence[tuple[str, str | Path]],
        settings: Mapping[str, Any],
        signature: Any,
        out: str | Path | None,
        model: str = "",
        task: str = "score",
        parent_id: str | None = None,
        input_digests: Sequence[Mapping[str, Any]] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        run_id: str | None = None,
        calls: Mapping[str, Any] | None = None,
        parts: Sequence[str] = (),
        resume: Sequence[str] = (),
        placed: Callable[[Path], Path] | None = None,
        digests: Mapping[str, str] | None = None,
        key: str | None = None,
        origin: str | None = None,
    ) -> RunRecorder:
        """Start a run of ``system``: into model run ``run_id`` (``Store.begin_scoring``, its
        items' ``calls`` by key), the unfinished one of ``resume`` (its folder's runs), or new
        (of identity ``key``, from run ``origin``: ``Store.create_scored_run``)."""
        if store is None:
            from fieldcheck.store._store import Store

            store = Store()
        described = []  # ``placed``: where a file of the partial folder will be
        for name, path in inputs:
            p = Path(path)
            at = (placed or Path)(p.resolve()).resolve()
            digest = (digests or {}).get(str(path)) or (sha256_file(p) if p.is_file() else None)
            described.append({"name": name, "path": shown_path(at), "sha256": digest})
        given: dict[str, Any] = {
            "inputs": [*described, *(dict(d) for d in input_digests or ())],
            "settings": orjson.loads(_json(dict(settings))),
            "out_dir": str(Path(out).resolve()) if out is not None else None,
            "model": model,
        }
        into = run_id or store.unfinished_scoring(resume, system=system)
        if into is not None:
            kind = "run" if run_id is not None else "score"
            run = store.begin_scoring(into, parts=list(parts), kind=kind, **given)
        else:
            signature = _signature_text(signature)
            run = store.create_scored_run(
                system=system,
                task=task,
                signature=signature,
                parent_id=parent_id,
                key=key,
                origin=origin,
                **given,
            )

        recorder = cls(store, run, on_error, calls)
        if file_bytes(p for _, p in inputs) >= PROCESS_INPUT_BYTES:
            recorder.start_process()
        return recorder

    def start_process(self) -> None:
        """Write through a pool process from now on (``LocalPool``, one worker: the other
        core); a pool that cannot be started leaves the writes in this process."""
        if self._pooled or self.broken:
            return
        with contextlib.suppress(OSError):
            self._executor = LocalPool(1, in_flight=3, warm=("pyarrow.parquet", __name__))
            self._pooled = True

    @property
    def id(self) -> str:
        return self.run.id

    def add_items(
        self,
        chunk: Iterable[Mapping[str, Any]],
        columns: Callable[[Mapping[str, Any]], ItemColumns],
    ) -> int:
        """Store a chunk of items (plain dicts), their indexed columns derived by ``columns``
        (the system's ``item_columns``); returns how many."""
        return self.add_prepared((columns(item), _json(dict(item))) for item in chunk)

    def add_prepared(self, rows: Iterable[tuple[ItemColumns, str | bytes]]) -> int:
        """Store a chunk of (columns, result JSON text), the hot paths' way (no dict per item),
        by a task in this process or, past ``process_after`` items, a pool's; returns how many."""
        items, tags, self.seq = flat_rows(rows, self.seq)
        if items:
            self._put(("rows", self._with_calls(items), tags))
        return len(items)

    def _with_calls(self, items: list[_Row]) -> list[_Row]:
        """Items with their model call, when this run made calls (``calls``): the call's
        record spliced into the result's JSON object as ``call``."""
        if not self.calls:
            return items
        joined = []
        for row in items:
            call = self.calls.get(row[0])
            if call is not None:
                self._called.add(row[0])
                text = row[6] if isinstance(row[6], bytes) else row[6].encode()
                body = text.rstrip()[:-1].rstrip()
                glue = b"" if body.endswith(b"{") else b","
                spliced = body + glue + b'"call":' + _json(call).encode() + b"}"
                row = (*row[:6], spliced)
            joined.append(row)
        return joined

    def add_built(
        self,
        builder: str,
        payload: Any,
        count: int,
        *,
        plain: bool = False,
        at: int | None = None,
        calls: bool = True,
    ) -> int:
        """Store ``count`` items that ``builder`` (``"module:function"``) makes of ``payload`` in
        the task writing them (a pool's CPU, not the scoring's); ``at``: their first seq, if set;
        ``calls``: whether they get their model calls (False: lines never sent to a model)."""
        if count:
            if at is None:
                at, self.seq = self.seq, self.seq + count
            chunk: _Chunk = ("build", builder, payload, at, count)
            if self.calls and calls:  # built here, where the calls are
                items, tags = resolve(chunk)
                if not isinstance(items, list):  # a table: as rows
                    c = items.to_pydict()
                    both = zip(c["seq"], c["tags"], c["failed_tags"], strict=True)
                    tags = [(n, seq, n in failed) for seq, names, failed in both for n in names]
                    items = list(zip(*(c[n] for n in (*COLUMNS[:6], "result")), strict=True))
                chunk = ("rows", self._with_calls(items), tags)
            self._put(chunk, plain)
        return count

    def _put(self, chunk: _Chunk, plain: bool = False) -> None:
        """Add ``chunk`` to the next task; run the task when it is full."""
        if self.broken:
            return
        try:
            if self._sealed:
                raise RuntimeError("items added to a sealed run")
            if self.seq > self.process_after:
                self.start_process()
            first = chunk[1][0][1] if chunk[0] == "rows" else chunk[3]
            self._task_first = first if self._task_first is None else min(first, self._task_first)

            if self._pooled:
                data = encode_chunk(chunk, plain)
                self._task.append(data)
                size = len(data) * TASK_ITEMS // TASK_BYTES
            else:
                self._task.append(chunk)
                rows = chunk[1] if chunk[0] == "rows" else ()
                built = 0 if rows else chunk[4] * _BUILT_ITEM_BYTES
                size = (sum(len(r[6]) for r in rows) + built) * TASK_ITEMS // TASK_BYTES
            count = len(chunk[1]) if chunk[0] == "rows" else chunk[4]
            self._task_size += max(size, count)
            if self._task_size >= TASK_ITEMS:
                self._submit()
        except BaseException as error:
            self._failed(error)

    def _submit(self) -> None:
        if self._task:
            task = (str(self.store.run_folder(self.run.id)), self._task_first or 0, self._task)
            self._task, self._task_first, self._task_size = [], None, 0
            self._counted(self._executor.submit(write_part, task))

    def _counted(self, written: list[Any]) -> None:
        """Count the parts written (a model run's at ``finish``: till then its journal's)."""
        for done in written:
            if isinstance(done, tuple):  # a part's (items, errors); ``publish``'s path is not
                self.written = (self.written[0] + done[0], self.written[1] + done[1])
                if self.run.kind != "run":
                    self.store.count_written(self.run.id, *done)

    def seal(self) -> None:
        """Every item is added: the last task and the publishing are sent now, so that a pool
        writes them while the caller writes its report (0.5-1 s of 1M records); ``finish`` waits."""
        if self._sealed or self.broken:
            return
        self.add_failed_calls()
        self._sealed = True
        try:
            self._submit()
            self._counted(self._executor.submit(publish, self.store.run_folder(self.run.id)))
        except Exception as error:
            self._close(kill=True)
            self._failed(error)

    def flush(self) -> None:
        """Wait until every item added so far is in a closed part file (on Ctrl-C, ``abort``
        waits for the tasks in flight; a second Ctrl-C kills them)."""
        try:
            self._submit()
            self._counted(finish(self._executor))
        except Exception as error:
            self._close(kill=True)
            self._failed(error)

    def _publish(self) -> None:
        """The part files made the run's items by a task (unless ``seal``'s did: in a pool,
        pyarrow stays out of this process; a Ctrl-C in ``seal`` may have cut it), then the pool
        stopped."""
        try:
            if located(folder := self.store.run_folder(self.run.id)) is None:
                self._executor.submit(publish, folder)
                finish(self._executor)
        finally:
            self._close()

    def _close(self, *, kill: bool = False) -> None:
        executor, self._executor, self._pooled = self._executor, InProcess(), False
        self._task, self._task_first, self._task_size = [], None, 0
        executor.close(kill=kill)

    def finish(
        self,
        *,
        metrics: Mapping[str, Any] | None,
        intervals: Mapping[str, Any] | None = None,
        signature: Any = None,
        figures: Mapping[str, Any] | None = None,
    ) -> RunInfo:
        """Mark the run finished with its metrics, intervals, final ``signature`` and
        ``figures`` (``Store.finish_scored_run``) once every item is in its files."""
        self.add_failed_calls()  # once: done already when sealed
        self.flush()
        if self.broken:
            self._close()
            self._closed = True
            return self.run
        try:
            self._publish()
            self.run = self.store.finish_scored_run(
                self.run.id,
                metrics=orjson.loads(_json(metrics)) if metrics is not None else None,
                intervals=orjson.loads(_json(intervals)) if intervals is not None else None,
                signature=None if signature is None else _signature_text(signature),
                figures=figures,
                counts=self.written if self.run.kind == "run" else None,
            )
        except Exception as error:
            self._failed(error)
        self._closed = True
        return self.run

    def add_failed_calls(self) -> None:
        """A failed call its system made no item of (json: no output) as an item not scored,
        once: now (before items never sent to the model, a json run's bad DATA lines) or when
        the run is sealed."""
        if not self._failed_calls_added:
            self._failed_calls_added = True
            self.add_prepared(
                (ItemColumns(key, None, error_type=call.get("error_type")), b"{}")
                for key, call in self.calls.items()
                if key not in self._called and call.get("error_type")
            )

    def abort(self, status: str = "interrupted") -> None:
        """Mark the run ``interrupted`` (Ctrl-C) or ``failed`` (an error: a full disk); the
        items added so far stay."""
        if not self._closed:
            self._closed = True
            with contextlib.suppress(Exception):  # the run's own error is the one to report
                self.flush()
            with contextlib.suppress(Exception):  # the parts written, whatever stopped the rest
                if self.run.kind == "run" and self.store.items_file(self.run.id) is None:
                    self._close()  # a model run's, cut short: its items stay its journal's
                    remove(self.store.run_folder(self.run.id))  # (called, never scored)
                else:
                    self._publish()
            with contextlib.suppress(Exception):
                published = self.run.kind == "run" and self.store.items_file(self.run.id)
                self.store.finish_scored_run(
                    self.run.id,
                    metrics=None,
                    intervals=None,
                    status=status,
                    counts=self.written if published else None,
                )

    def __enter__(self) -> RunRecorder:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is not None:
            self.abort("interrupted" if issubclass(exc_type, KeyboardInterrupt) else "failed")


def _signature_text(signature: Any) -> str:
    """A Signature (``_plain_default``), its dict or its text, as stored."""
    return signature if isinstance(signature, str) else _json(signature)


def _json(value: Any) -> str:
    """Sorted-key JSON text (the same bytes on every backend); NaN and infinities are null."""
    option = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
    return dumps_bytes(value, option, _plain_default).decode()


def _plain_default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"cannot store a {type(value).__name__} in a run")

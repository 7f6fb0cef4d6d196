"""``RunRecorder``: the sink a scoring command writes its run into (issue 11, docs/runs.md).

    recorder = RunRecorder.open(store, system="json", inputs=[("batch", path)],
                                settings=..., signature=..., out=folder, model=name)
    recorder.add_items(chunk)        # plain dicts, one transaction per chunk
    recorder.add_prepared(rows)      # or (ItemColumns, result JSON text): the hot paths
    recorder.finish(metrics=..., intervals=...)
    # on an error or Ctrl-C: recorder.abort() marks the run interrupted (``with`` does it)

After a model run, ``open(..., run_id=RUN, calls={key: call})`` scores into the runner's run
(one run per evaluation) and each item keyed in ``calls`` keeps its call under ``call``.

The files on disk are untouched: the store holds a copy for listing, comparing and re-scoring.
"""

from __future__ import annotations

import contextlib
import importlib
import marshal
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

from fieldcheck._util import child
from fieldcheck._util.errors import shown_path
from fieldcheck._util.frames import write_frame
from fieldcheck._util.jsonio import dumps_bytes
from fieldcheck.store._items import ItemColumns, plain_columns
from fieldcheck.store._records import RunInfo, sha256_file
from fieldcheck.store._store import Store


def describe_inputs(inputs: Sequence[tuple[str, str | Path]]) -> list[dict[str, Any]]:
    """``[{name, path, sha256}]`` of the input files (sha256 None for a path that is no file)."""
    described = []
    for name, path in inputs:
        p = Path(path)
        digest = sha256_file(p) if p.is_file() else None
        described.append({"name": name, "path": shown_path(p.resolve()), "sha256": digest})
    return described


def _plain(value: Any) -> Any:
    """A pydantic model or dataclass-free JSON value: dumped with orjson's rules (NaN -> null)."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return value


_Row = tuple[str, int, str | None, bool | None, str | None, int | None, str | bytes]
_Tag = tuple[str, int, bool]
_QUEUED_CHUNKS = 2
# what a writer receives: ("rows", items, tags), or ("build", "module:function", payload,
# first seq, count), items the writer builds itself with that function (``add_built``)
_Chunk = tuple[Any, ...]


def flat_rows(
    rows: Iterable[tuple[ItemColumns, str | bytes]], seq: int
) -> tuple[list[_Row], list[_Tag], int]:
    """(columns, result) pairs as the items and tags rows ``ItemsWriter.write`` takes,
    numbered from ``seq``; and the next seq."""
    items: list[_Row] = []
    tags: list[_Tag] = []
    for c, result in rows:  # bytes are decoded by the writer
        items.append((c.key, seq, c.error_type, c.failed, c.model, c.turn, result))
        if c.tags:
            tags.extend((name, seq, failed) for name, failed in c.tags.items())
        seq += 1
    return items, tags, seq


def encode_chunk(chunk: _Chunk, plain: bool = False) -> bytes:
    """A chunk as the writer process reads it (``decode_chunk``). ``plain``: it holds only
    None, bool, int, float, str, bytes, and lists, tuples and dicts of them, of exactly those
    types, and is marshalled, about twice as fast as pickling both ways (a million slot lines:
    1 s less in the scoring). marshal would write a NumPy scalar as its bytes: never pass
    ``plain`` for data that may hold one."""
    if plain:
        return b"M" + marshal.dumps(chunk)
    return b"P" + pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL)


def decode_chunk(data: bytes) -> _Chunk:
    """The chunk ``encode_chunk`` made ``data`` of."""
    body = memoryview(data)[1:]
    chunk: _Chunk = marshal.loads(body) if data[:1] == b"M" else pickle.loads(body)
    return chunk


def resolve(chunk: _Chunk) -> tuple[list[_Row], list[_Tag]]:
    """A chunk's items and tags rows; a ``build`` chunk's built here (in the writer)."""
    if chunk[0] == "rows":
        return chunk[1], chunk[2]
    _, builder, payload, seq, count = chunk
    module, _, name = builder.partition(":")
    build = getattr(importlib.import_module(module), name)
    items, tags, end = flat_rows(build(payload), seq)
    if end - seq != count:
        raise ValueError(f"{builder} built {end - seq} items where {count} were announced")
    return items, tags


class _Writer:
    """Writes queued chunks to a part of the run's Parquet file in a thread of its own, so the
    compression (pyarrow releases the GIL) overlaps the scoring; at most ``_QUEUED_CHUNKS``
    wait, so memory stays flat. A write's error is raised again in the scoring thread at its
    next call."""

    def __init__(self, store: Store, run_id: str) -> None:
        self._queue: queue.Queue[_Chunk | None] = queue.Queue(_QUEUED_CHUNKS)
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._loop, args=(store, run_id), name="fieldcheck-store", daemon=True
        )
        self._thread.start()

    def _loop(self, store: Store, run_id: str) -> None:
        items = store.items_writer(run_id)
        while (chunk := self._queue.get()) is not None:
            if self._error is None:
                try:
                    items.write(*resolve(chunk))
                except BaseException as error:  # handed to the scoring thread
                    self._error = error
        try:
            items.close()
        except BaseException as error:
            self._error = self._error or error

    def put(self, chunk: _Chunk, plain: bool = False) -> None:
        self.check()
        self._queue.put(chunk)

    def check(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def close(self) -> None:
        """Wait until every queued chunk is in the part file, closed."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        self.check()


class StoreWriteError(Exception):
    """A write failed in the writer process (its type and message: the exception itself
    stays in the child)."""


# Chunks pickled and waiting for the writer process: a few chunks' memory, and room for the
# scoring to go on while the process starts (about 0.4 s) or a slow insert finishes.
_PROCESS_QUEUED_CHUNKS = 6
_PROCESS_QUEUED_BYTES = 12 << 20
"""And at most this many bytes of them (but always one chunk): chunks of built items (a second
slot scorer's) are several times larger than the payloads they are built of."""


class _ProcessWriter:
    """Writes chunks to a part of the run's Parquet file in a process of its own
    (``fieldcheck.store._writer``): a large run's items then cost the scoring process only the
    pickling (building Arrow columns took about 4 times as long, under the GIL). A sender thread hands
    the pickled chunks to the process and reads each answer, so the scoring never waits on the
    process's start or on an insert unless ``_PROCESS_QUEUED_CHUNKS`` chunks are waiting; an
    error is raised at the next call."""

    def __init__(self, store: Store, run_id: str) -> None:
        # -P: the working folder is not put on sys.path (a "fieldcheck" package there must not
        # stand in for this one); its own session: out of the terminal's Ctrl-C, this process
        # decides
        self._process = child.start(
            [sys.executable, "-P", "-m", "fieldcheck.store._writer"],
            subprocess.DEVNULL,
            orjson.dumps({"url": store.url, "run_id": run_id, "artifacts": str(store.artifacts)}),
        )
        self._queue: queue.Queue[bytes | None] = queue.Queue(_PROCESS_QUEUED_CHUNKS)
        self._room = threading.Condition()
        self._queued = 0  # bytes of the chunks queued and not yet answered
        self._error: StoreWriteError | None = None
        self._thread = threading.Thread(target=self._send, name="fieldcheck-store", daemon=True)
        self._thread.start()

    def _send(self) -> None:
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        while (data := self._queue.get()) is not None:
            if self._error is not None:
                self._done(data)
                continue
            try:
                write_frame(stdin, data)
                answer = stdout.readline()
            except (OSError, ValueError):  # a broken pipe (the process is gone) or closed
                answer = b""
            self._done(data)
            if not answer.endswith(b"\n"):
                try:
                    code: int | None = self._process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    code = None
                self._error = StoreWriteError(
                    f"the store's writer process ended ({child.status_text(code)})"
                )
            elif answer != b"\n":
                self._error = StoreWriteError(answer.decode(errors="replace").strip())
        with contextlib.suppress(OSError, ValueError):  # the end of input stops the process
            write_frame(stdin, b"")
            stdin.close()
            answer = stdout.readline()  # once its file is closed
            if answer.strip() and self._error is None:
                self._error = StoreWriteError(answer.decode(errors="replace").strip())

    def check(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _done(self, data: bytes) -> None:
        with self._room:
            self._queued -= len(data)
            self._room.notify_all()

    def put(self, chunk: _Chunk, plain: bool = False) -> None:
        self.check()
        data = encode_chunk(chunk, plain)
        with self._room:
            while self._queued and self._queued + len(data) > _PROCESS_QUEUED_BYTES:
                self._room.wait()
            self._queued += len(data)
        self._queue.put(data)

    def close(self) -> None:
        """Wait until every chunk sent is in the part file; stop the process (the sender
        thread ends its input: the process closes its file). Interrupted while waiting (a second Ctrl-C), it kills it."""
        process = self._process
        try:
            if self._thread.is_alive():
                self._queue.put(None)
                self._thread.join()
            self.check()
        finally:
            if self._thread.is_alive():
                process.kill()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()


# Items written through a thread before a run moves its inserts to a writer process (small
# runs never pay the process's start, about 0.4 s).
PROCESS_AFTER = 20_000
# Inputs this large (in all) start the writer process when the run opens: about 20,000 JSON
# records of 8 fields, 150,000 slot lines or 60,000 numeric turns.
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
        self.seq = 0
        self.on_error = on_error
        self.broken = False
        self._writer: _Writer | _ProcessWriter | None = None
        self._closed = False
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
    ) -> RunRecorder:
        """Start a run of ``system`` (json | slots | numeric): ``inputs`` as (name,
        path) pairs (their sha256 is taken now), ``settings`` what ``rescore`` needs to score it
        again, ``signature`` a Signature, its dict or its text, ``out`` the output folder,
        ``model`` the model (several: ``", "``-joined). ``input_digests`` (``[{name, path,
        sha256}]``, a re-scored run's parent's) are kept as given, after ``inputs``. With
        ``on_error``, a failing store later is reported to it once (see ``_failed``).
        ``run_id``: the model run to score into (``Store.begin_scoring``; ``parts``: its other
        models' runs), ``calls`` its items' calls by scored item key."""
        store = store if store is not None else Store()
        described = [*describe_inputs(inputs), *(dict(d) for d in input_digests or ())]
        plain = orjson.loads(_json(dict(settings)))
        folder = str(Path(out).resolve()) if out is not None else None
        if run_id is not None:
            run = store.begin_scoring(
                run_id,
                inputs=described,
                settings=plain,
                out_dir=folder,
                model=model,
                parts=list(parts),
            )
        else:
            run = store.create_scored_run(
                system=system,
                model=model,
                task=task,
                inputs=described,
                settings=plain,
                signature=_signature_text(signature),
                out_dir=folder,
                parent_id=parent_id,
            )
        recorder = cls(store, run, on_error, calls)
        if _input_bytes(inputs) >= PROCESS_INPUT_BYTES:
            recorder.start_process()
        return recorder

    def start_process(self) -> None:
        """Insert through the writer process from now on (once the items queued so far are
        in); a process that cannot be started leaves the inserts in the thread."""
        if isinstance(self._writer, _ProcessWriter) or self.broken:
            return
        self.flush()
        try:
            self._writer = _ProcessWriter(self.store, self.run.id)
        except OSError:
            self._writer = None

    @property
    def id(self) -> str:
        return self.run.id

    def add_items(
        self,
        chunk: Iterable[Mapping[str, Any]],
        columns: Callable[[Mapping[str, Any]], ItemColumns] = plain_columns,
    ) -> int:
        """Store a chunk of items (plain dicts), their indexed columns derived by ``columns``
        (the run's system's ``item_columns``; an item's ``key`` and ``failed`` by default).
        Returns how many."""
        return self.add_prepared((columns(item), _json(dict(item))) for item in chunk)

    def add_prepared(self, rows: Iterable[tuple[ItemColumns, str | bytes]]) -> int:
        """Store a chunk of items given as (columns, result JSON text): the hot paths' way,
        without a dict per item. Queued for the writer thread, or (past ``process_after``
        items, or from the start for large inputs) the writer process; one transaction per
        chunk; a key stored before in this run gets ``~<seq>`` appended. Returns how many."""
        items, tags, seq = flat_rows(rows, self.seq)
        self.seq = seq
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
                text = row[6] if isinstance(row[6], bytes) else row[6].encode()
                body = text.rstrip()[:-1].rstrip()
                glue = b"" if body.endswith(b"{") else b","
                spliced = body + glue + b'"call":' + _json(call).encode() + b"}"
                row = (*row[:6], spliced)
            joined.append(row)
        return joined

    def add_built(
        self, builder: str, payload: Any, count: int, *, plain: bool = False, at: int | None = None
    ) -> int:
        """Store ``count`` items that ``builder`` (``"module:function"``, importable) makes of
        ``payload`` (picklable) as (columns, result) pairs, in the writer: in a large run, the
        writer process then spends the CPU of building them, not the scoring. ``plain``: the
        payload is plain data (``encode_chunk``), sent marshalled. ``at``: their first seq,
        for items stored ahead of ones still to come (the next seq is then not moved; the
        caller keeps the numbers apart). Returns ``count``."""
        if count:
            if at is None:
                at, self.seq = self.seq, self.seq + count
            chunk: _Chunk = ("build", builder, payload, at, count)
            if self.calls:  # built here, where the calls are
                items, tags = resolve(chunk)
                chunk = ("rows", self._with_calls(items), tags)
            self._put(chunk, plain)
        return count

    def _put(self, chunk: _Chunk, plain: bool = False) -> None:
        if self.broken:
            return
        try:
            if self.seq > self.process_after:
                self.start_process()
            if self._writer is None:
                self._writer = _Writer(self.store, self.run.id)
            self._writer.put(chunk, plain)
        except BaseException as error:
            self._failed(error)

    def flush(self) -> None:
        """Wait until every item added so far is in a closed part file."""
        if self._writer is not None:
            writer, self._writer = self._writer, None
            try:
                writer.close()
            except BaseException as error:
                self._failed(error)

    def finish(
        self,
        *,
        metrics: Mapping[str, Any] | None,
        intervals: Mapping[str, Any] | None = None,
        signature: Any = None,
    ) -> RunInfo:
        """Mark the run finished with its metrics and confidence intervals (JSON values), once
        every item is in its ``items.parquet``; ``signature`` replaces the one given to
        ``open`` (a command knows its full signature only once scored)."""
        self.flush()
        if self.broken:
            self._closed = True
            return self.run
        try:
            self.store.publish_items(self.run.id)
            self.run = self.store.finish_scored_run(
                self.run.id,
                metrics=orjson.loads(_json(_plain(metrics))) if metrics is not None else None,
                intervals=orjson.loads(_json(_plain(intervals))) if intervals is not None else None,
                signature=None if signature is None else _signature_text(signature),
            )
        except Exception as error:
            self._failed(error)
        self._closed = True
        return self.run

    def abort(self, status: str = "interrupted") -> None:
        """Mark the run ``interrupted`` (Ctrl-C) or ``failed`` (an error: a full disk); the
        items added so far stay."""
        if not self._closed:
            self._closed = True
            with contextlib.suppress(Exception):  # the run's own error is the one to report
                self.flush()
                self.store.publish_items(self.run.id)
            with contextlib.suppress(Exception):
                self.store.finish_scored_run(
                    self.run.id, metrics=None, intervals=None, status=status
                )

    def __enter__(self) -> RunRecorder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self.abort("interrupted" if issubclass(exc_type, KeyboardInterrupt) else "failed")


def _input_bytes(inputs: Sequence[tuple[str, str | Path]]) -> int:
    """The inputs' total size in bytes (0 for a path that is no file)."""
    total = 0
    for _, path in inputs:
        with contextlib.suppress(OSError):
            total += os.stat(path).st_size
    return total


def _signature_text(signature: Any) -> str:
    """A Signature, its dict or its text, as stored."""
    if hasattr(signature, "model_dump"):
        signature = signature.model_dump(mode="json")
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

"""``slots score`` on files of any size: every input file split by session into buckets of a fixed
budget (``crc32(user) + session mod K``), scored one at a time (docs/slots.md "Large files")."""

from __future__ import annotations

import errno
import gc
import hashlib
import logging
import marshal
import os
import shutil
import stat
import struct
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from fieldcheck._util.errors import ErrorList, InputError
from fieldcheck._util.executor import Executor, finish
from fieldcheck._util.paths import file_bytes
from fieldcheck.slots._loaders import KINDS, JudgeFile, LatencyFile, SlotFile

BUCKET_BYTES = 8 << 20
"""Input bytes per bucket: about 40 MB of Python objects while a bucket is scored."""
_PENDING_ROWS = 16_384
"""Rows held in memory over all buckets before being appended to their files (each bucket
holds ``_PENDING_ROWS // K``), so the reading pass uses the same memory whatever K."""

PARALLEL_BYTES = 64 << 20
"""Inputs (two files or more, all regular files) at least this large in all are read by two
processes, given a pool: this one and a ``read_files`` task on the other core."""
_HELPER_START_BYTES = 10 << 20
"""About what this process reads while the pool's worker starts: the split gives the task
that much less to read."""
HELPER_NAME = "bucket{}.2.bin"
"""The bucket files of the ``read_files`` task."""
_HEADER = struct.Struct("<Q")

Batch = tuple[int, list[tuple[int, Any]]]  # (file index, [(line, row), ...])

log = logging.getLogger(__name__)


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for a block that makes many small acyclic objects (rows,
    tuples, dicts of a bucket): its passes over the live bucket took a third of the time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


SideKind = Literal["latency", "judge"]


@dataclass
class SlotInput:
    """What the partition read of one slot file: its valid lines and its bad lines (in order).
    ``records`` and ``errors`` serve the same usage checks as a loaded ``SlotFile``."""

    path: Path
    records: int = 0
    errors: ErrorList = field(default_factory=ErrorList)
    failure: InputError | None = None  # the file could not be read at all
    kind: Literal["slots", "latency", "judge"] = "slots"
    first: tuple[str, int] | None = None  # a slot file's first session (user, session)
    # a slot file's sessions (``session_key``) while the partition reads: the gold's, and those
    # of a file the ``read_files`` task read; the others are checked against the gold's at once
    sessions: set[int] | None = None
    shared: bool = False  # a slot file after the gold: a session of it is a gold session


class Partition:
    """Slot files and side files (latencies, judge scores) split into ``k`` buckets by session;
    ``pool``: a ``read_files`` task on it reads the last files of large inputs (``_split``)."""

    def __init__(
        self,
        paths: Sequence[Path],
        folder: Path,
        k: int,
        sides: Sequence[tuple[SideKind, Path]] = (),
        *,
        parallel_bytes: int | None = None,
        pool: Executor | None = None,
    ) -> None:
        self.inputs = [SlotInput(Path(p)) for p in paths]
        self.sides = [SlotInput(Path(p), kind=kind) for kind, p in sides]
        self.k = k
        self.folder = folder
        self._memory: list[Batch] = []  # k == 1: the one bucket, in memory
        self._names = ["bucket{}.bin"]  # each reader's bucket files, in input order
        items = [*self.inputs, *self.sides]
        if parallel_bytes is None:
            parallel_bytes = PARALLEL_BYTES
        split = _split(items, parallel_bytes) if k > 1 and pool is not None else len(items)
        handles: list[IO[bytes]] = []
        helped = False
        try:
            if k > 1:
                handles = [(folder / f"bucket{b}.bin").open("wb") for b in range(k)]
            if pool is not None and split < len(items):
                helped = self._submit(pool, items, split)
            for index, item in enumerate(items[:split]):
                self._read_item(index, item, handles)
            if helped and pool is not None and self._joined(pool, items[split:]):
                self._names.append(HELPER_NAME)
            else:  # no task, or it failed: its files are read here, after this reader's
                for index, item in enumerate(items[split:], start=split):
                    self._read_item(index, item, handles)
        finally:
            for h in handles:
                _close(h)
        gold = self.inputs[0].sessions or set()
        for item in self.inputs[1:]:  # those the task read; the sets go (a gold's: 100,000 keys)
            if item.sessions is not None:
                item.shared, item.sessions = not gold.isdisjoint(item.sessions), None
        self.inputs[0].sessions = None

    def _submit(self, pool: Executor, items: Sequence[SlotInput], split: int) -> bool:
        """Hand ``items[split:]`` to a ``read_files`` task; False (a warning) when it cannot."""
        spec = (self.folder, self.k, [(i, it.path, it.kind) for i, it in enumerate(items)][split:])
        try:
            pool.submit(read_files, spec)
        except Exception as exc:  # whatever stops the task, this process reads its files
            self._failed(f"could not start: {exc}")
            return False
        return True

    def _joined(self, pool: Executor, items: Sequence[SlotInput]) -> bool:
        """The ``read_files`` task's result taken into ``items``; False (a warning, its bucket
        files removed) when it failed, so the caller reads them."""
        try:
            (results,) = finish(pool)
        except Exception as exc:
            self._failed(f"{type(exc).__name__}: {exc}")
            return False
        for item, (records, errors, failure, first, sessions) in zip(items, results, strict=True):
            item.records, item.errors, item.failure = records, errors, failure
            item.first, item.sessions = first, sessions
        return True

    def _failed(self, why: str) -> None:
        if not self.folder.is_dir():  # removed while the run went on: its bucket files went too
            raise ScratchError(errno.ENOENT, os.strerror(errno.ENOENT), str(self.folder))
        log.warning("the second reader of the slot files failed (%s); reading them here", why)
        for b in range(self.k):
            (self.folder / HELPER_NAME.format(b)).unlink(missing_ok=True)

    def _read_item(self, index: int, item: SlotInput, handles: list[IO[bytes]]) -> None:
        gold = self.inputs[0].sessions if index else None  # the gold is read first, here
        rows = read_into(index, item, handles, self.k, gold)
        if rows is not None:
            self._memory.append((index, rows))

    def chunks(self) -> Iterator[Bucket]:
        """Each bucket, in order, as a chunk: read by whoever scores it (``Bucket.part``)."""
        kinds = [item.kind for item in self.sides]
        paths = [item.path for item in (*self.inputs, *self.sides)]
        for b in range(self.k):
            memory, self._memory = self._memory, []
            files = [self.folder / name.format(b) for name in self._names] if self.k > 1 else []
            spill = self.folder / f"items{b}.bin" if self.k > 1 else None
            yield Bucket(paths, kinds, files, memory, spill)


@dataclass
class Bucket:
    """One bucket as a chunk: the input paths (slot files, then side files of ``kinds``) and its
    rows, in its bucket files (removed once read) or ``memory``; ``spill``: for ``ChunkItems``."""

    paths: list[Path]
    kinds: Sequence[str]
    files: list[Path]
    memory: list[Batch]
    spill: Path | None = None

    def part(self) -> tuple[list[SlotFile], list[LatencyFile | JudgeFile]]:
        """The bucket's files, in input order, each with the bucket's sessions only: a
        ``SlotFile`` per slot file, a ``LatencyFile`` or ``JudgeFile`` per side file."""
        n = len(self.paths) - len(self.kinds)
        kinds = [KINDS[kind] for kind in ["slots"] * n + list(self.kinds)]
        files = [make(path) for (make, _, _), path in zip(kinds, self.paths, strict=True)]
        for index, rows in self._batches():
            add, out = kinds[index][2], files[index]
            for line, row in rows:
                add(out, line, row)
        return files[:n], files[n:]

    def _batches(self) -> Iterator[Batch]:
        yield from self.memory
        self.memory = []
        for path in self.files:
            with path.open("rb") as handle:
                while (data := _read_frame(handle)) is not None:
                    yield marshal.loads(data)
            path.unlink()


def read_files(spec: tuple[Path, int, list[tuple[int, Path, str]]]) -> list[Any]:
    """A task: read the files ``(index, path, kind)`` of ``spec`` ``(folder, k, files)`` into
    bucket files of its own (``HELPER_NAME``); each file's ``(records, errors, failure)``."""
    folder, k, files = spec
    handles = [(folder / HELPER_NAME.format(b)).open("wb") for b in range(k)]
    results = []
    try:
        for index, path, kind in files:
            # its errors past the first ones in the scratch folder: handed back by name
            item = SlotInput(path, kind=kind, errors=ErrorList(spill_dir=folder))  # type: ignore[arg-type]
            read_into(index, item, handles, k)
            results.append((item.records, item.errors, item.failure, item.first, item.sessions))
    finally:
        for h in handles:
            _close(h)
    return results


_MIX = 0x9E3779B97F4A7C15  # 2**64 / golden ratio: spreads session numbers over 64 bits
_MASK = (1 << 64) - 1


def session_key(user: str, session: int, users: dict[str, int]) -> int:
    """A session's 64-bit key, the same in every process (``hash`` of a str is not): a blake2b of
    its user (``users`` caches them) mixed with its number; two sessions share one with odds of
    about 2**-64."""
    h = users.get(user)
    if h is None:
        if len(users) > 100_000:
            users.clear()
        digest = hashlib.blake2b(user.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        h = users[user] = int.from_bytes(digest, "little")
    return h ^ ((session * _MIX) & _MASK)


def read_into(
    index: int,
    item: SlotInput,
    handles: Sequence[IO[bytes]],
    k: int,
    gold: set[int] | None = None,
) -> list[tuple[int, Any]] | None:
    """Read ``item``'s file (input ``index``) into the ``k`` bucket files ``handles``, setting its
    ``records``, ``errors`` and ``failure``; with ``k == 1``, return its rows instead. A slot file
    also gets its ``first`` session and, without ``gold`` (the gold's session keys), its
    ``sessions``; with it, ``shared`` once a session is a gold session."""
    pending: list[list[tuple[int, Any]]] = [[] for _ in range(k)]
    records = 0
    flush = max(16, _PENDING_ROWS // k)
    crc: dict[str, int] = {}
    source: Iterator[tuple[int, Any]] = KINDS[item.kind][1](item.path, item.errors)
    track = item.kind == "slots"
    keys: set[int] = set()
    users: dict[str, int] = {}
    last: tuple[Any, Any] = (None, None)  # the session of the line before: lines come grouped
    try:
        with gc_paused():
            for line, row in source:
                records += 1
                if track and (row[1] != last[1] or row[0] != last[0]):
                    last = row[0], row[1]
                    if item.first is None:
                        item.first = last
                    key = session_key(row[0], row[1], users)
                    if gold is None:
                        keys.add(key)
                    elif key in gold:
                        item.shared, track = True, False  # one is enough
                if k == 1:
                    pending[0].append((line, row))
                    continue
                user = row[0]
                h = crc.get(user)
                if h is None:
                    if len(crc) > 100_000:
                        crc.clear()
                    h = crc[user] = zlib.crc32(user.encode("utf-8", "surrogatepass"))
                b = (h + row[1]) % k
                rows = pending[b]
                rows.append((line, row))
                if len(rows) >= flush:
                    _write(handles[b], (index, rows))
                    pending[b] = []
    except InputError as exc:  # the file could not be read
        item.failure = exc
        return None
    item.records = records
    if item.kind == "slots" and gold is None:
        item.sessions = keys
    if k == 1:
        return pending[0]
    for b, rows in enumerate(pending):
        if rows:
            _write(handles[b], (index, rows))
    return None


class ScratchError(OSError):
    """A bucket file of the run's scratch folder could not be written (a full disk, the folder
    removed): not an input's fault. ``filename`` is the bucket file (the folder: it is gone)."""


def _write(handle: IO[bytes], batch: Batch) -> None:
    # framed (its length, 8 bytes, then the data): marshal.load on a file reads in tiny pieces,
    # marshal.loads does not
    data = marshal.dumps(batch)
    try:
        handle.write(_HEADER.pack(len(data)))
        handle.write(data)
    except OSError as exc:
        raise ScratchError(exc.errno, exc.strerror or str(exc), handle.name) from exc


def _read_frame(handle: IO[bytes]) -> bytes | None:
    """The next frame ``_write`` wrote; None at the end."""
    head = handle.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(head)
    data = handle.read(size)
    if len(data) < size:
        raise EOFError(f"{handle.name}: a bucket file ends inside a frame")
    return data


def _close(handle: IO[bytes]) -> None:
    try:
        handle.close()  # writes what is buffered
    except OSError as exc:
        raise ScratchError(exc.errno, exc.strerror or str(exc), handle.name) from exc


def _split(items: Sequence[SlotInput], parallel_bytes: int) -> int:
    """How many of ``items`` this process reads (a ``read_files`` task the rest, evening out the
    bytes); all for small inputs, one file, or a file not regular (it could not be read again)."""
    sizes = []
    for item in items:
        try:
            st = os.stat(item.path)
        except OSError:
            return len(items)
        if not stat.S_ISREG(st.st_mode):
            return len(items)
        sizes.append(st.st_size)
    total = sum(sizes)
    if len(items) < 2 or total < parallel_bytes:
        return len(items)
    best, best_cost, head = len(items), total, 0
    for m in range(1, len(items)):
        head += sizes[m - 1]
        cost = max(head, total - head + _HELPER_START_BYTES)
        if cost < best_cost:
            best, best_cost = m, cost
    return best


def bucket_count(paths: Sequence[Path], bucket_bytes: int = BUCKET_BYTES) -> int:
    """K: the files' total size over ``bucket_bytes``, at least 1."""
    return max(1, -(-file_bytes(paths) // bucket_bytes))


@contextmanager
def partitioned(
    paths: Sequence[Path],
    *,
    beside: Path,
    bucket_bytes: int = BUCKET_BYTES,
    k: int | None = None,
    sides: Sequence[tuple[SideKind, Path]] = (),
    parallel_bytes: int | None = None,
    pool: Executor | None = None,
) -> Iterator[Partition]:
    """``Partition`` of ``paths`` (slot files) and ``sides`` in a scratch folder in the nearest
    existing folder above ``beside``, removed when the block ends; ``k``: the bucket count."""
    k = k if k is not None else bucket_count([*paths, *(p for _, p in sides)], bucket_bytes)
    where = Path(beside).absolute().parent
    while not where.is_dir() and where != where.parent:
        where = where.parent
    try:
        folder = Path(tempfile.mkdtemp(prefix=".fieldcheck-scratch-", dir=where if k > 1 else None))
    except OSError:  # not writable there: the system's temporary folder (--out is checked later)
        folder = Path(tempfile.mkdtemp(prefix=".fieldcheck-slots-"))
    try:
        yield Partition(paths, folder, k, sides, parallel_bytes=parallel_bytes, pool=pool)
    except BaseException:
        if pool is not None:  # its reading tasks write into the folder: stopped before it goes
            pool.close(kill=True)
        raise
    finally:
        shutil.rmtree(folder, ignore_errors=True)

"""``slots score`` on files of any size: the slot files (and the latency and judge files, when
given) are split by session into buckets that fit a fixed budget, and ``SlotScorer`` scores one
bucket at a time (docs/slots.md "Large files").

The files need not be sorted: each line goes to bucket ``crc32(user) + session mod K``, so a
session's every line, from every file, lands in the same bucket, with its file and line number.
K is the files' total size over ``BUCKET_BYTES``; with K = 1 nothing is written. Bucket files live
in a temporary folder removed at the end, on an error or on Ctrl-C alike. Inputs of
``PARALLEL_BYTES`` or more are read by two processes (``_Helper``): each writes its own bucket
files, read back in input order, so the buckets hold the same rows in the same order.
"""

from __future__ import annotations

import errno
import gc
import logging
import marshal
import os
import pickle
import shutil
import stat
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from fieldcheck._util import child
from fieldcheck._util.errors import ErrorList, InputError
from fieldcheck._util.frames import read_frame, write_frame
from fieldcheck.slots._loaders import (
    JudgeFile,
    LatencyFile,
    SlotFile,
    add_judge,
    add_latency,
    add_slot,
    read_judge_rows,
    read_latency_rows,
    read_slot_rows,
)

BUCKET_BYTES = 8 << 20
"""Input bytes per bucket: about 40 MB of Python objects while a bucket is scored."""
_PENDING_ROWS = 16_384
"""Rows held in memory over all buckets before being appended to their files (each bucket
holds ``_PENDING_ROWS // K``), so the reading pass uses the same memory whatever K."""

PARALLEL_BYTES = 64 << 20
"""Inputs (two files or more, all regular files) at least this large in all are read by two
processes: this one and a helper (``fieldcheck.slots._reader``) on the other core."""
_HELPER_START_BYTES = 10 << 20
"""About what this process reads while the helper starts (0.3 s: ``fieldcheck.slots`` imports
its modules on first use, and the helper needs only the readers): the split gives the helper
that much less to read."""

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


@dataclass
class Part:
    """One bucket: a ``SlotFile`` per slot file and a ``LatencyFile`` or ``JudgeFile`` per side
    file, in input order, each with the bucket's sessions only."""

    slots: list[SlotFile]
    sides: list[LatencyFile | JudgeFile]


class Partition:
    """Slot files (and side files: latencies, judge scores) split into ``k`` buckets by session;
    ``parts()`` yields each bucket's files, ``buckets()`` only its slot files."""

    def __init__(
        self,
        paths: Sequence[Path],
        folder: Path,
        k: int,
        sides: Sequence[tuple[SideKind, Path]] = (),
        *,
        parallel_bytes: int | None = None,
    ) -> None:
        self.inputs = [SlotInput(Path(p)) for p in paths]
        self.sides = [SlotInput(Path(p), kind=kind) for kind, p in sides]
        self.k = k
        self.folder = folder
        self._memory: list[Batch] = []  # k == 1: the one bucket, in memory
        self._names = ["bucket{}.bin"]  # each reader's bucket files, in input order
        self.keep = False  # keep each bucket's files once read (a second scorer's may fail)
        items = [*self.inputs, *self.sides]
        if parallel_bytes is None:
            parallel_bytes = PARALLEL_BYTES
        split = _split(items, parallel_bytes) if k > 1 else len(items)
        handles: list[IO[bytes]] = []
        helper = None
        try:
            if k > 1:
                handles = [(folder / f"bucket{b}.bin").open("wb") for b in range(k)]
            if split < len(items):
                helper = _Helper(folder, k, items, split)
            for index, item in enumerate(items[:split]):
                self._read_item(index, item, handles)
            if helper is not None:
                if helper.join():
                    self._names.append(_Helper.NAME)
                else:  # the helper failed: its files are read here, after this reader's
                    for index, item in enumerate(items[split:], start=split):
                        self._read_item(index, item, handles)
        finally:
            if helper is not None:
                helper.stop()
            for h in handles:
                _close(h)

    def _read_item(self, index: int, item: SlotInput, handles: list[IO[bytes]]) -> None:
        try:
            with gc_paused():
                rows = read_into(index, item, handles, self.k)
        except InputError as exc:
            item.failure = exc
            return
        if rows is not None:
            self._memory.append((index, rows))

    def buckets(self) -> Iterator[list[SlotFile]]:
        for part in self.parts():
            yield part.slots

    def parts(self, start: int = 0, stop: int | None = None) -> Iterator[Part]:
        """Buckets ``start`` to ``stop`` (default: the last), each read once."""
        # the collector stays off across the buckets (the consumer scores each under its own
        # pause): turned on between them, it walked every object of each new bucket, 6 of 46 s
        # of a million slot lines x 3 models; what the scoring frees goes by reference counting
        with gc_paused():
            for b in range(start, self.k if stop is None else stop):
                yield self._part(b)

    def _part(self, b: int) -> Part:
        """Bucket ``b``'s files, read back from its bucket file (or memory)."""
        n = len(self.inputs)
        slots = [SlotFile(item.path) for item in self.inputs]
        sides: list[LatencyFile | JudgeFile] = [
            LatencyFile(item.path) if item.kind == "latency" else JudgeFile(item.path)
            for item in self.sides
        ]
        for index, rows in self._batches(b):
            if index < n:
                out = slots[index]
                for line, row in rows:
                    add_slot(out, line, row)
                continue
            side = sides[index - n]
            if isinstance(side, LatencyFile):
                for line, row in rows:
                    add_latency(side, line, row)
            else:
                for line, row in rows:
                    add_judge(side, line, row)
        return Part(slots, sides)

    def sessions(self, stop: int) -> int:
        """How many sessions the first input (the gold) has in buckets 0 to ``stop`` (each
        bucket's distinct users and sessions of its valid lines, as ``add_slot`` keys them):
        read from its rows alone, which come first in each reader's bucket files."""
        total = 0
        with gc_paused():
            for b in range(stop):
                keys: set[tuple[str, int]] = set()
                for name in self._names if self.k > 1 else ():
                    with (self.folder / name.format(b)).open("rb") as handle:
                        while (data := read_frame(handle)) is not None:
                            index, rows = marshal.loads(data)
                            if index:
                                break
                            keys.update((row[0], row[1]) for _, row in rows)
                for index, rows in self._memory:
                    if index == 0:
                        keys.update((row[0], row[1]) for _, row in rows)
                total += len(keys)
        return total

    def _batches(self, b: int) -> Iterator[Batch]:
        if self.k == 1:
            yield from self._memory
            self._memory = []
            return
        for name in self._names:
            path = self.folder / name.format(b)
            with path.open("rb") as handle:
                while (data := read_frame(handle)) is not None:
                    yield marshal.loads(data)
            if not self.keep:
                path.unlink()


def read_into(
    index: int, item: SlotInput, handles: Sequence[IO[bytes]], k: int
) -> list[tuple[int, Any]] | None:
    """Read ``item``'s file (input number ``index``) into the ``k`` bucket files ``handles``,
    setting its ``records`` and ``errors``; with ``k == 1``, return its rows instead."""
    pending: list[list[tuple[int, Any]]] = [[] for _ in range(k)]
    records = 0
    flush = max(16, _PENDING_ROWS // k)
    crc: dict[str, int] = {}
    source: Iterator[tuple[int, Any]] = (
        read_slot_rows(item.path, item.errors)
        if item.kind == "slots"
        else read_latency_rows(item.path, item.errors)
        if item.kind == "latency"
        else read_judge_rows(item.path, item.errors)
    )
    for line, row in source:
        records += 1
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
    item.records = records
    if k == 1:
        return pending[0]
    for b, rows in enumerate(pending):
        if rows:
            _write(handles[b], (index, rows))
    return None


class ScratchError(OSError):
    """A bucket file of the run's scratch folder could not be written (a full disk, the folder
    removed): not an input's fault. ``filename`` is the bucket file (the folder: it is gone)."""


def check_scratch(folder: Path) -> None:
    """Raise ``ScratchError`` when the scratch folder ``folder`` is gone (removed while the run
    went on): a failed helper process is then not replaced here, its bucket files went too."""
    if not folder.is_dir():
        raise ScratchError(errno.ENOENT, os.strerror(errno.ENOENT), str(folder))


def _write(handle: IO[bytes], batch: Batch) -> None:
    # framed: marshal.load on a file reads in tiny pieces, marshal.loads does not
    try:
        write_frame(handle, marshal.dumps(batch))
    except OSError as exc:
        raise ScratchError(exc.errno, exc.strerror or str(exc), handle.name) from exc


def _close(handle: IO[bytes]) -> None:
    try:
        handle.close()  # writes what is buffered
    except OSError as exc:
        raise ScratchError(exc.errno, exc.strerror or str(exc), handle.name) from exc


def _split(items: Sequence[SlotInput], parallel_bytes: int) -> int:
    """How many of ``items`` this process reads; a helper reads the rest. The split evens out
    the two readers' bytes; ``len(items)`` (no helper) for small inputs, a single file, or any
    input that is not a regular file (a pipe could not be read again if the helper failed)."""
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


class _Helper:
    """The helper reader (``python -P -m fieldcheck.slots._reader``) of ``items[split:]``: it
    writes bucket files of its own (``NAME``) and hands back each file's line count, errors and
    failure. It ends when this process closes its input or is gone; ``stop`` kills it."""

    NAME = "bucket{}.2.bin"
    # -P: the working folder is not put on sys.path (a "fieldcheck" package there must not
    # stand in for this one)
    COMMAND = (sys.executable, "-P", "-m", "fieldcheck.slots._reader")

    def __init__(self, folder: Path, k: int, items: Sequence[SlotInput], split: int) -> None:
        self._folder, self._k, self._items = folder, k, list(items[split:])
        self._log = folder / "reader.log"
        self._process: subprocess.Popen[bytes] | None = None
        try:
            spec = {
                "folder": folder,
                "k": k,
                "name": self.NAME,
                "items": [(i, item.path, item.kind) for i, item in enumerate(self._items, split)],
            }
            with self._log.open("wb") as err:  # the spec pickled: a path need not be UTF-8
                self._process = child.start(self.COMMAND, err, pickle.dumps(spec))
        except Exception as exc:  # whatever stops the helper, this process reads its files
            self._failed(f"could not start: {exc}")

    def join(self) -> bool:
        """Wait for the helper; ``True`` when it read every file it was given. Else (a warning
        says why) its bucket files are removed and the caller reads its files itself;
        ``ScratchError`` when the scratch folder is gone."""
        process = self._process
        if process is None:
            return False
        assert process.stdout is not None
        try:
            data = process.stdout.read()
            status = process.wait()
            results = pickle.loads(data) if status == 0 else None
        except (OSError, EOFError, pickle.UnpicklingError) as exc:
            self._failed(str(exc))
            return False
        if not isinstance(results, list) or len(results) != len(self._items):
            self._failed(child.ended(status, self._log.read_text(errors="replace")))
            return False
        for item, (records, errors, failure) in zip(self._items, results, strict=True):
            item.records, item.errors, item.failure = records, errors, failure
        return True

    def _failed(self, why: str) -> None:
        self.stop()
        check_scratch(self._folder)  # removed: one error, no warning before it
        log.warning("the second reader of the slot files failed (%s); reading them here", why)
        for b in range(self._k):
            (self._folder / self.NAME.format(b)).unlink(missing_ok=True)

    def stop(self) -> None:
        """Stop the helper (killed if still reading) and close its pipes."""
        process, self._process = self._process, None
        if process is not None:
            child.stop(process)


def bucket_count(paths: Sequence[Path], bucket_bytes: int = BUCKET_BYTES) -> int:
    """K: the files' total size over ``bucket_bytes``, at least 1."""
    total = 0
    for p in paths:
        with suppress(OSError):  # an unreadable file is reported when it is read
            total += Path(p).stat().st_size
    return max(1, -(-total // bucket_bytes))


@contextmanager
def partitioned(
    paths: Sequence[Path],
    *,
    beside: Path,
    bucket_bytes: int = BUCKET_BYTES,
    k: int | None = None,
    sides: Sequence[tuple[SideKind, Path]] = (),
    parallel_bytes: int | None = None,
) -> Iterator[Partition]:
    """``Partition`` of ``paths`` (slot files) and ``sides`` (``("latency" | "judge", path)``)
    in a temporary folder beside ``beside`` (in the nearest existing folder above it: the same
    disk as the outputs, never inside an --out that must stay empty), removed when the block
    ends however it ends (a killed run's is left, named ``.fieldcheck-scratch-*``). ``k``
    overrides the bucket count, ``parallel_bytes`` ``PARALLEL_BYTES`` (tests)."""
    k = k if k is not None else bucket_count([*paths, *(p for _, p in sides)], bucket_bytes)
    where = Path(beside).absolute().parent
    while not where.is_dir() and where != where.parent:
        where = where.parent
    try:
        folder = Path(tempfile.mkdtemp(prefix=".fieldcheck-scratch-", dir=where if k > 1 else None))
    except OSError:  # not writable there: the system's temporary folder (--out is checked later)
        folder = Path(tempfile.mkdtemp(prefix=".fieldcheck-slots-"))
    try:
        yield Partition(paths, folder, k, sides, parallel_bytes=parallel_bytes)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

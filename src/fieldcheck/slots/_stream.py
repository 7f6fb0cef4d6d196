"""``slots score`` on files of any size: the slot files (and the latency and judge files, when
given) are split by session into buckets that fit a fixed budget, and ``SlotScorer`` scores one
bucket at a time (docs/slots.md "Large files").

The files need not be sorted: each line goes to bucket ``crc32(user) + session mod K``, so a
session's every line, from every file, lands in the same bucket, with its file and line number.
K is the files' total size over ``BUCKET_BYTES``; with K = 1 nothing is written. Bucket files live
in a temporary folder removed at the end, on an error or on Ctrl-C alike.
"""

from __future__ import annotations

import gc
import marshal
import shutil
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from fieldcheck._util.errors import InputError
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

Batch = tuple[int, list[tuple[int, Any]]]  # (file index, [(line, row), ...])


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
    errors: list[InputError] = field(default_factory=list)
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
    ) -> None:
        self.inputs = [SlotInput(Path(p)) for p in paths]
        self.sides = [SlotInput(Path(p), kind=kind) for kind, p in sides]
        self.k = k
        self.folder = folder
        self._memory: list[Batch] = []  # k == 1: the one bucket, in memory
        handles: list[IO[bytes]] = []
        try:
            if k > 1:
                handles = [(folder / f"bucket{b}.bin").open("wb") for b in range(k)]
            for index, item in enumerate([*self.inputs, *self.sides]):
                try:
                    with gc_paused():
                        self._read(index, item, handles)
                except InputError as exc:
                    item.failure = exc
        finally:
            for h in handles:
                h.close()

    def _read(self, index: int, item: SlotInput, handles: list[IO[bytes]]) -> None:
        k = self.k
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
            self._memory.append((index, pending[0]))
            return
        for b, rows in enumerate(pending):
            if rows:
                _write(handles[b], (index, rows))

    def buckets(self) -> Iterator[list[SlotFile]]:
        for part in self.parts():
            yield part.slots

    def parts(self) -> Iterator[Part]:
        # the collector stays off across the buckets (the consumer scores each under its own
        # pause): turned on between them, it walked every object of each new bucket, 6 of 46 s
        # of a million slot lines x 3 models; what the scoring frees goes by reference counting
        with gc_paused():
            for b in range(self.k):
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

    def _batches(self, b: int) -> Iterator[Batch]:
        if self.k == 1:
            yield from self._memory
            self._memory = []
            return
        path = self.folder / f"bucket{b}.bin"
        with path.open("rb") as handle:
            while size := handle.read(8):
                yield marshal.loads(handle.read(int.from_bytes(size, "little")))
        path.unlink()


def _write(handle: IO[bytes], batch: Batch) -> None:
    # length-prefixed: marshal.load on a file reads in tiny pieces, marshal.loads does not
    data = marshal.dumps(batch)
    handle.write(len(data).to_bytes(8, "little") + data)


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
) -> Iterator[Partition]:
    """``Partition`` of ``paths`` (slot files) and ``sides`` (``("latency" | "judge", path)``)
    in a temporary folder in ``beside``'s nearest existing folder, removed when the block ends
    however it ends. ``k`` overrides the bucket count (tests)."""
    k = k if k is not None else bucket_count([*paths, *(p for _, p in sides)], bucket_bytes)
    where = Path(beside).absolute()
    while not where.is_dir() and where != where.parent:
        where = where.parent
    folder = Path(tempfile.mkdtemp(prefix=".fieldcheck-slots-", dir=where if k > 1 else None))
    try:
        yield Partition(paths, folder, k, sides)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

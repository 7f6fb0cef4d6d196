"""The second scorer of a large ``slots score`` (``python -P -m fieldcheck.slots._second``):
while the scoring process scores the first buckets of a ``Partition``, this one scores the last
ones, on the other core, and hands back what it folded (``SlotScorer.state``). The scoring
process absorbs that state; it stores these buckets' items while it scores its own, numbered
after its own, so the run and its stored items are the ones a single scorer over every bucket
in order gives (tests/slots/test_streamed.py, tests/slots/test_store_hook.py).

Its standard input carries, in one frame (``fieldcheck._util.frames``), the pickled
``{"partition", "first", "gold", "models", "items"}``; its standard output, at the end, the
pickled ``ScorerState`` or the exception that stopped it. ``items`` (or ``None`` when the run is
not stored): a file that gets, per bucket, a frame of the item count (8 bytes, little-endian)
and its items, built (``plain_rows``) and marshalled. It stops at once when its input ends
before it is done (the scoring process stopped it, or is gone).
"""

from __future__ import annotations

import gc
import logging
import marshal
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

from fieldcheck._util import child
from fieldcheck._util.frames import HEADER, read_frame, write_frame
from fieldcheck.slots._score import (
    PREBUILT_ROWS,
    STORE_ROWS,
    ItemSink,
    ScorerState,
    SlotScorer,
    plain_rows,
)
from fieldcheck.slots._stream import Partition, check_scratch

log = logging.getLogger(__name__)

SPLIT_BUCKETS = 4
"""Partitions of at least this many buckets (32 MiB of input) are scored by two processes."""


class _ItemFile:
    """The second scorer's ``ItemSink``: each bucket's items built here (``plain_rows``: the
    store's writer would otherwise build every item of the run alone), marshalled, in a
    file."""

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle = handle
        self.seq = 0

    def add_built(
        self, builder: str, payload: Any, count: int, *, plain: bool = False, at: int | None = None
    ) -> int:
        if builder != STORE_ROWS or not plain or at is not None:
            raise ValueError(f"a second scorer stores only plain {STORE_ROWS} payloads, in order")
        write_frame(self.handle, count.to_bytes(8, "little") + marshal.dumps(plain_rows(payload)))
        self.seq += count
        return count


class SecondScorer:
    """The scoring process's side: started on buckets ``first`` to the last, ``join`` gives
    their state (``None``, with a warning, when the process failed: the caller scores them),
    ``forward`` stores the items of the buckets it has finished, from seq ``seq``, and ``stop``
    kills it if it still runs."""

    # -P: the working folder is not put on sys.path (a "fieldcheck" package there must not
    # stand in for this one)
    COMMAND = (sys.executable, "-P", "-m", "fieldcheck.slots._second")

    def __init__(self, scorer: SlotScorer, partition: Partition, first: int) -> None:
        self.first = first
        folder = partition.folder
        self._items = folder / "second-items.bin" if scorer.recorder is not None else None
        self._log = folder / "second.log"
        self._process: subprocess.Popen[bytes] | None = None
        self._reading: IO[bytes] | None = None  # the items file, read as it grows
        self.seq = 0  # the seq of its next item to store
        self.forwarded = 0  # how many of its buckets' items are stored
        try:
            spec = {
                "partition": partition,
                "first": first,
                "gold": scorer.gold,
                "models": scorer.models,
                "items": self._items,
            }
            data = pickle.dumps(spec, protocol=pickle.HIGHEST_PROTOCOL)
            with self._log.open("wb") as err:
                self._process = child.start(self.COMMAND, err, data)
        except Exception as exc:  # whatever stops it, the caller scores these buckets
            self._failed(f"could not start: {exc}")

    @property
    def started(self) -> bool:
        return self._process is not None

    def join(self) -> ScorerState | None:
        """Wait for the second scorer; its state, or ``None`` when it failed (a warning);
        ``ScratchError`` when it failed because the scratch folder is gone."""
        process = self._process
        if process is None:
            return None
        assert process.stdout is not None
        try:
            data = process.stdout.read()
            status = process.wait()
            answer = pickle.loads(data) if data else None
        except (OSError, EOFError, pickle.UnpicklingError) as exc:
            self._failed(str(exc))
            return None
        if status == 0 and isinstance(answer, ScorerState):
            return answer
        if isinstance(answer, BaseException):
            self._failed(repr(answer))
        else:
            self._failed(child.ended(status, self._log.read_text(errors="replace")))
        return None

    def forward(self, sink: ItemSink) -> None:
        """Store the items of every bucket the second scorer has finished so far (its frames
        written whole), numbered from ``seq``, as it built them (never decoded here:
        ``prebuilt_rows`` reads them in the store's writer). Called while both score, so the
        store's writer inserts them then, not after."""
        handle = self._reading
        if handle is None:
            if self._items is None:
                return
            try:
                handle = self._reading = self._items.open("rb")
            except FileNotFoundError:  # not created yet
                return
        size = os.fstat(handle.fileno()).st_size
        while True:
            start = handle.tell()
            head = handle.read(HEADER.size)
            if len(head) == HEADER.size:
                (length,) = HEADER.unpack(head)
                if length >= 8 and start + HEADER.size + length <= size:
                    frame = handle.read(length)
                    count = int.from_bytes(frame[:8], "little")
                    sink.add_built(PREBUILT_ROWS, frame[8:], count, plain=True, at=self.seq)
                    self.seq += count
                    self.forwarded += 1
                    continue
            handle.seek(start)  # a frame still being written: read on a later call
            return

    def _failed(self, why: str) -> None:
        process, self._process = self._process, None
        if process is not None:
            child.stop(process)
        check_scratch(self._log.parent)  # removed: one error, no warning before it
        log.warning("the second slot scorer failed (%s); scoring its buckets here", why)

    def stop(self) -> None:
        """Stop the process (killed if still scoring), close its pipes and remove its items
        file."""
        process, self._process = self._process, None
        if process is not None:
            child.stop(process)
        if self._reading is not None:
            self._reading.close()
            self._reading = None
        if self._items is not None:
            self._items.unlink(missing_ok=True)


def score_partition(
    scorer: SlotScorer,
    partition: Partition,
    progress: Callable[[str], None] | None = None,
) -> None:
    """Score every bucket of ``partition`` with ``scorer``, in bucket order: the last half by a
    second scorer process when the scorer allows it (``SlotScorer.splittable``) and there are
    at least ``SPLIT_BUCKETS`` buckets (else, or if it fails, here). Its items are stored while
    this process scores its own, numbered after them: it counts its buckets' gold sessions
    first (``Partition.sessions``)."""
    k = partition.k
    second = None
    if scorer.splittable and k >= SPLIT_BUCKETS:
        partition.keep = True  # the second scorer's buckets stay readable here if it fails
        second = SecondScorer(scorer, partition, k - k // 2)
        if not second.started:
            second = None
    first = k if second is None else second.first
    scorer.build_items = second is not None
    recorder = scorer.recorder
    ahead = 0  # the seq of the second scorer's first item
    try:
        if second is not None and recorder is not None:
            ahead = second.seq = recorder.seq + len(scorer.models) * partition.sessions(first)
        for b, part in enumerate(partition.parts(stop=first), start=1):
            if progress is not None:
                progress(f"scoring sessions: part {b} of {k}")
            scorer.add_part(part)
            if second is not None and recorder is not None:
                second.forward(recorder)
        if second is None:
            return
        if progress is not None:
            progress(f"scoring sessions: parts {first + 1}-{k} of {k} (second process)")
        state = second.join()
        if recorder is not None:
            if recorder.seq != ahead:
                raise RuntimeError(
                    f"the second slot scorer's items were numbered from {ahead}, but this "
                    f"process stored {recorder.seq}: the stored items are misnumbered"
                )
            second.forward(recorder)
            recorder.seq = second.seq
        if state is None:
            for b, part in enumerate(partition.parts(start=first), start=first + 1):
                if progress is not None:
                    progress(f"scoring sessions: part {b} of {k}")
                # the buckets whose items the second scorer stored are not stored again
                scorer.recorder = None if b - first <= second.forwarded else recorder
                scorer.add_part(part)
            return
        scorer.absorb(state)
    finally:
        scorer.recorder = recorder
        if second is not None:
            second.stop()


def main() -> int:
    gc.disable()  # many small acyclic rows, as in Partition.parts (gc_paused)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    data = read_frame(stdin)
    if data is None:  # no work given: the scoring process is gone
        return 3
    done = threading.Event()
    child.exit_when_input_ends(done)
    try:
        spec = pickle.loads(data)
        partition: Partition = spec["partition"]
        partition.keep = True
        items: Path | None = spec["items"]
        with ExitStack() as stack:
            sink = _ItemFile(stack.enter_context(items.open("wb"))) if items else None
            scorer = SlotScorer(spec["gold"], spec["models"], recorder=sink)
            for part in partition.parts(start=spec["first"]):
                scorer.add_part(part)
        answer = pickle.dumps(scorer.state(), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # handed to the scoring process, which scores the buckets itself
        stdout.write(child.error_bytes(exc))
        stdout.flush()
        done.set()
        return 1
    stdout.write(answer)
    stdout.flush()
    done.set()
    return 0


if __name__ == "__main__":
    sys.exit(main())

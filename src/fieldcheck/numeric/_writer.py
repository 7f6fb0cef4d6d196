"""The writer process of a large ``numeric score`` (``python -P -m fieldcheck.numeric._writer``):
it writes the row files and traces/ (``_stream.RowSink``) from the values of the conversations
the scoring process sends, on the other core. Their cells, CSV text and 25,000 trace files took
more than half of a 100k-turn run.

Its standard input carries frames (``fieldcheck._util.frames``): ``{"files", "traces"}``
pickled, then pickled blocks of ``(conversation_id, trace_id, features, turns, document)``, then
``END`` when all was sent. Its standard output, at the end: ``ok``, or the exception that
stopped it, pickled. Input that ends before ``END`` stops it at once (the scoring
process stopped it, or is gone); so does a kill, as it is in a session of its own.
"""

from __future__ import annotations

import errno
import gc
import logging
import pickle
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

from fieldcheck._util import child
from fieldcheck._util.frames import read_frame, write_frame

log = logging.getLogger(__name__)

END = b"end"  # the last frame (a pickled block starts with b"\x80")

_QUEUED_BLOCKS = 32
"""Pickled blocks (of ``chunk`` conversations, 256 by default: about 320 KB) waiting for the
process: room for the scoring to go on while it starts (about 0.6 s), and a flat memory."""


class WriterProcess:
    """The scoring process's side: ``send`` pickles a block and queues it for a sender thread
    (so the scoring never waits on the process's start), ``close`` waits until every file is
    written, or, with ``discard``, kills the process. The process's error (a full disk, say)
    is raised again here: at the next ``send`` after it stopped, or by ``close``."""

    # -P: the working folder is not put on sys.path (a "fieldcheck" package there must not
    # stand in for this one)
    COMMAND = (sys.executable, "-P", "-m", "fieldcheck.numeric._writer")

    @classmethod
    def start(cls, files: Mapping[str, str | Path], traces: str | Path) -> WriterProcess | None:
        """A started writer process, or ``None`` (with a warning) when it cannot start."""
        try:
            return cls(files, traces)
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("the output writer process could not start (%s); writing here", exc)
            return None

    def __init__(self, files: Mapping[str, str | Path], traces: str | Path) -> None:
        self._folder = str(Path(traces).parent)
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by _stop or the collector
        self._broken = self._stopped = self._ok = False
        self._answer, self._status = b"", 0
        try:
            self._process = child.start(self.COMMAND, self._log)
        except BaseException:
            self._log.close()
            raise
        self._queue: queue.Queue[bytes | None] = queue.Queue(_QUEUED_BLOCKS)
        self._queue.put(pickle.dumps({"files": dict(files), "traces": traces}))
        self._thread = threading.Thread(
            target=self._send, name="fieldcheck-numeric-writer", daemon=True
        )
        self._thread.start()

    def _send(self) -> None:
        stdin = self._process.stdin
        assert stdin is not None
        while (frame := self._queue.get()) is not None:
            if self._broken:
                continue  # drained, so ``send`` and ``close`` never wait on a stopped process
            try:
                write_frame(stdin, frame)
            except (OSError, ValueError):  # the process is gone
                self._broken = True
        with suppress(OSError, ValueError):
            stdin.close()

    def send(self, block: list[tuple[Any, ...]]) -> None:
        """Queue a block of conversations (waits only while ``_QUEUED_BLOCKS`` wait)."""
        if self._broken:
            self._stop()
            raise self._failure()
        self._queue.put(pickle.dumps(block, protocol=pickle.HIGHEST_PROTOCOL))

    def close(self, *, discard: bool = False) -> None:
        """Wait until the process wrote every file and ended; ``discard``: kill it first."""
        if discard:
            self._stop(kill=True)
            return
        if self._thread.is_alive():
            self._queue.put(END)
        self._stop()
        if not self._ok:
            raise self._failure()

    def _stop(self, *, kill: bool = False) -> None:
        if self._stopped:
            return
        self._stopped = True
        process = self._process
        try:
            if kill:
                process.kill()
            if self._thread.is_alive():
                self._queue.put(None)
                self._thread.join()
            assert process.stdout is not None
            self._answer = b"" if kill else process.stdout.read()
            self._status = process.wait()
            self._ok = self._status == 0 and self._answer == b"ok"
        finally:  # also when interrupted while waiting
            child.stop(process)
            if self._ok:
                self._log.close()

    def _failure(self) -> BaseException:
        """The process's own exception, else an ``OSError`` saying how it ended."""
        with suppress(Exception):
            error = pickle.loads(self._answer)
            if isinstance(error, BaseException):
                return error
        self._log.seek(0)
        lines = self._log.read().decode(errors="replace").strip().splitlines()
        tail = f": {lines[-1]}" if lines else ""
        why = f"the output writer process ended ({child.status_text(self._status)}){tail}"
        return OSError(errno.EIO, why, self._folder)


def main() -> int:
    gc.disable()  # many small acyclic rows and dicts, freed by reference counting
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    data = read_frame(stdin)
    if data is None:
        return 3
    spec = pickle.loads(data)
    try:
        from fieldcheck.numeric._stream import RowSink

        sink = RowSink(spec["files"], spec["traces"])
        try:
            while (frame := read_frame(stdin)) != END:
                if frame is None:  # stopped before the end
                    return 3
                for conversation in pickle.loads(frame):
                    sink.write(*conversation)
                sink.flush()
        finally:
            sink.close(flush=False)
    except Exception as exc:  # handed to the scoring process, raised there
        stdout.write(child.error_bytes(exc))
        stdout.flush()
        return 1
    stdout.write(b"ok")
    stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

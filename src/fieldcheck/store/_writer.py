"""The store's writer process (``python -m fieldcheck.store._writer``): it writes a large run's
chunks of items to a part of its Parquet file, so the scoring process spends on them only the
pickling (or marshalling).

Started by ``RunRecorder`` (``_recorder._ProcessWriter``) in a session of its own (a Ctrl-C
reaches the scoring process only, which then tells this one when to stop). Its standard input
carries frames, each an 8-byte little-endian length and that many bytes: first
``{"url": ..., "run_id": ..., "artifacts": ...}`` as JSON (the URL may hold a password: it is never on the command
line), then one chunk each (``_recorder.encode_chunk``: pickled, or marshalled if plain data;
``resolve`` makes it the items and tags rows of ``ItemsWriter.write``, or builds them); an
empty frame or the end of input closes the part file and stops it. Each chunk, and the end, is
answered with one line on standard output: empty when written (closed), else the first error's
type and message (nothing more is written).
"""

from __future__ import annotations

import gc
import signal
import sys
from typing import Any

import orjson

from fieldcheck._util.frames import read_frame


def describe(error: BaseException) -> str:
    """An error as one line: its type and the first line of its message."""
    lines = str(error).splitlines()
    return f"{type(error).__name__}: {lines[0][:300] if lines else ''}".rstrip(": ")


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # what it decodes and builds is acyclic and freed by reference counting: the collector's
    # passes over each chunk's objects doubled the cost of a slots bucket (2.0 s against 1.0 s)
    gc.disable()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    head = read_frame(stdin)
    if head is None:
        return 0
    config = orjson.loads(head)
    failed: str | None = None
    store: Any = None
    items: Any = None
    try:
        from pathlib import Path

        from fieldcheck.store._recorder import decode_chunk, resolve
        from fieldcheck.store._store import Store

        store = Store(config["url"], artifacts=Path(config["artifacts"]))
        items = store.items_writer(config["run_id"])
    except Exception as error:  # answered to every chunk
        failed = describe(error)
    try:
        while (data := read_frame(stdin)) is not None:
            if failed is None:
                try:
                    items.write(*resolve(decode_chunk(data)))
                except Exception as error:  # sent back to the scoring process
                    failed = describe(error)
            stdout.write((failed or "").encode() + b"\n")
            stdout.flush()
        if items is not None and failed is None:
            try:
                items.close()
            except Exception as error:
                failed = describe(error)
        stdout.write((failed or "").encode() + b"\n")  # the last answer: the file closed
        stdout.flush()
    except BrokenPipeError:  # the scoring process is gone
        pass
    finally:
        if store is not None:
            store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

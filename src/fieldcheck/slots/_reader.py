"""The helper reader of a large slot ``Partition`` (``python -P -m fieldcheck.slots._reader``):
while the scoring process reads the first input files into buckets, this one reads the others
into bucket files of its own, on the other core (``_stream._Helper`` starts it).

Its standard input carries ``{"folder", "k", "name", "items": [(index, path, kind), ...]}``
pickled, in one frame (``fieldcheck._util.frames``); its standard output, at the end, the
pickled ``[(records, errors, failure)]`` of each item. It stops at once when its input ends
before it is done (the scoring process closed it, or is gone)."""

from __future__ import annotations

import gc
import pickle
import sys
import threading

from fieldcheck._util import child
from fieldcheck._util.errors import ErrorList, InputError
from fieldcheck._util.frames import read_frame
from fieldcheck.slots._stream import SlotInput, read_into


def main() -> int:
    gc.disable()  # many small acyclic rows, as in Partition (gc_paused)
    stdin = sys.stdin.buffer
    data = read_frame(stdin)
    if data is None:  # no work given: the scoring process is gone
        return 3
    spec = pickle.loads(data)
    done = threading.Event()
    child.exit_when_input_ends(done)
    folder, k = spec["folder"], spec["k"]
    handles = [(folder / spec["name"].format(b)).open("wb") for b in range(k)]
    results = []
    try:
        for index, path, kind in spec["items"]:
            # its errors past the first ones in the scratch folder: handed back by name
            item = SlotInput(path, kind=kind, errors=ErrorList(spill_dir=folder))
            try:
                read_into(index, item, handles, k)
            except InputError as exc:
                item.failure = exc
            results.append((item.records, item.errors, item.failure))
    finally:
        for h in handles:
            h.close()
    sys.stdout.buffer.write(pickle.dumps(results, protocol=pickle.HIGHEST_PROTOCOL))
    sys.stdout.buffer.flush()
    done.set()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Baseline: writing numeric's ``traces/`` files alone, what ``numeric score`` cannot be faster
than (the spec asks for one trace file per conversation). ``main([FOLDER, COUNT, BYTES])``
creates FOLDER (which must not exist) and writes COUNT files of BYTES bytes each, named as the
trace ids of the generated data, with the plain ``open``/``write`` of ``numeric score``'s own
trace writer (``numeric._stream``)."""

from __future__ import annotations

import os


def main(argv: list[str]) -> int:
    folder, count, size = argv[0], int(argv[1]), int(argv[2])
    os.mkdir(folder)
    data = b"x" * size
    for i in range(count):
        with open(f"{folder}{os.sep}conv-{i:07d}.json", "wb") as handle:
            handle.write(data)
    return 0 if len(os.listdir(folder)) == count else 1

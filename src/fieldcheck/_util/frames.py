"""Length-prefixed frames: an 8-byte little-endian length, then that many bytes. The pipes to
fieldcheck's own helper processes (the store's writer, the slot reader) and the slot bucket
files use them."""

from __future__ import annotations

import struct
from typing import IO

HEADER = struct.Struct("<Q")


def write_frame(stream: IO[bytes], data: bytes) -> None:
    """One frame: the length of ``data``, then ``data`` (``b""``: stop)."""
    stream.write(HEADER.pack(len(data)))
    if data:
        stream.write(data)
    stream.flush()


def read_frame(stream: IO[bytes]) -> bytes | None:
    """The next frame's bytes; None at an empty frame or the end of input."""
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    (size,) = HEADER.unpack(head)
    data = stream.read(size) if size else b""
    return data if size and len(data) == size else None

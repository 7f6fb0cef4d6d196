"""The records of a ConvFinQA file's top-level array (or of its object's arrays) with their byte
offsets, read in a window of a few kilobytes (issue 10): orjson ends each record ("unexpected
content after document"); anything else raises ``Broken``, and the file is read whole instead."""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, NamedTuple

import orjson

from fieldcheck._util.jsonio import MAX_DEPTH, open_input

_NON_WS = re.compile(rb"[^ \t\r\n]")
_BOM = b"\xef\xbb\xbf"
_AFTER = "unexpected content after document"
_BLOCK = 1 << 20
_FIRST_WINDOW = 4096
# a record this deep (with the array and the object around it) is checked by read_json instead
_DEPTH_MARGIN = MAX_DEPTH - 4


class Broken(Exception):
    """The file is not the simple shape this reader follows; read it whole instead."""


class _Window:
    """Bytes of a file from offset ``base``: ``buf[pos:]`` is not read yet."""

    def __init__(self, handle: IO[bytes], start: int) -> None:
        handle.seek(start)
        self.handle = handle
        self.base = start
        self.buf = b""
        self.pos = 0
        self.eof = False
        self.window = _FIRST_WINDOW

    def more(self, at_least: int = _BLOCK) -> None:
        data = self.handle.read(max(_BLOCK, at_least))
        if not data:
            self.eof = True
        self.base += self.pos
        self.buf = self.buf[self.pos :] + data
        self.pos = 0

    def peek(self) -> int | None:
        """The next byte that is not white space (``None`` at the end of the file)."""
        while True:
            found = _NON_WS.search(self.buf, self.pos)
            if found is not None:
                self.pos = found.start()
                return self.buf[self.pos]
            self.pos = len(self.buf)
            if self.eof:
                return None
            self.more()

    def take(self, byte: int) -> None:
        if self.peek() != byte:
            raise Broken
        self.pos += 1

    def value(self, parse: bool = True) -> tuple[Any, int, int]:
        """The JSON value starting here (white space skipped): (value, file offset, length);
        without ``parse``, ``None`` for the value (only where it is)."""
        self.peek()
        while True:
            end = self.pos + self.window
            if end > len(self.buf) and not self.eof:
                self.more(end - len(self.buf))
                continue
            end = min(end, len(self.buf))
            buf = self.buf
            while end < len(buf) and buf[end] & 0xC0 == 0x80:
                end -= 1  # never cut a UTF-8 character
            try:
                orjson.loads(memoryview(buf)[self.pos : end])
            except orjson.JSONDecodeError as exc:
                if exc.msg != _AFTER:
                    if end >= len(buf) and self.eof:
                        raise Broken from None
                    self.window *= 2
                    continue
                doc = exc.doc
                size = exc.pos if len(doc) == end - self.pos else len(doc[: exc.pos].encode())
                raw = buf[self.pos : self.pos + size].rstrip(b" \t\r\n")
            else:
                if not (end >= len(buf) and self.eof):
                    self.window *= 2
                    continue  # a number may go on past the window
                raw = buf[self.pos : end].rstrip(b" \t\r\n")
            if raw.count(b"[") + raw.count(b"{") > _DEPTH_MARGIN:
                raise Broken
            start = self.base + self.pos
            self.pos += len(raw)
            self.window = max(_FIRST_WINDOW, 2 * len(raw))
            return (orjson.loads(raw) if parse else None), start, len(raw)

    def members(self, opening: str, closing: str) -> Iterator[None]:
        """Steps through the array or object starting here: once per member, the caller reads
        the member (an element; a key, ``:`` and value) before the next step."""
        self.take(ord(opening))
        if self.peek() == ord(closing):
            self.pos += 1
            return
        while True:
            yield
            nxt = self.peek()
            self.pos += 1
            if nxt == ord(closing):
                return
            if nxt != ord(","):
                raise Broken


class Shape(NamedTuple):
    """Where a file's records are: ``kind`` "array" or "object" (``members``: each key -> its
    array's offset, or ``None``); ``spans``: each array's (offset, length) pairs (top: ``""``)."""

    kind: str
    members: dict[str, int | None]
    spans: dict[str, array[int]]


def _spans(window: _Window) -> array[int]:
    spans = array("q")
    for _ in window.members("[", "]"):
        spans.extend(window.value(parse=False)[1:])
    return spans


def shape(file: Path) -> Shape:
    """The file's top level: an array, or an object with its members' offsets (every member
    value read once, one element at a time). Raises ``Broken`` for anything else."""
    with open_input(file, _BLOCK) as handle:
        start = len(_BOM) if handle.read(3) == _BOM else 0
        window = _Window(handle, start)
        first = window.peek()
        if first == ord("["):
            spans = {"": _spans(window)}
            if window.peek() is not None:
                raise Broken
            return Shape("array", {}, spans)
        if first != ord("{"):
            raise Broken
        members: dict[str, int | None] = {}
        found: dict[str, array[int]] = {}
        for _ in window.members("{", "}"):
            key, _, _ = window.value()
            if not isinstance(key, str):
                raise Broken
            window.take(ord(":"))
            members.pop(key, None)  # a repeated key: the last one counts, as in orjson
            if window.peek() == ord("["):
                members[key] = window.base + window.pos
                found[key] = _spans(window)
            else:
                window.value(parse=False)
                members[key] = None
        if window.peek() is not None:
            raise Broken
        return Shape("object", members, found)


def read_spans(file: Path, spans: array[int]) -> Iterator[tuple[Any, int, int]]:
    """The values at ``spans`` (``Shape.spans``) of ``file``: (value, file offset, length);
    ``Broken`` if one no longer parses (the file changed under us)."""
    with open_input(file, _BLOCK) as handle:
        for k in range(0, len(spans), 2):
            start, size = spans[k], spans[k + 1]
            handle.seek(start)
            try:
                yield orjson.loads(handle.read(size)), start, size
            except orjson.JSONDecodeError:
                raise Broken from None

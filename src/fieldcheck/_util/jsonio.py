"""Reading JSON and JSONL with errors that name file and line; writing with orjson."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import orjson

from fieldcheck._util.errors import InputError, shown_text

_BOM = b"\xef\xbb\xbf"
MAX_DEPTH = 200
"""The one depth limit of every input line and file (docs/decisions.md): deeper values would
reach Python's recursion limit in comparisons and orjson's (254) when outputs are written."""
EMPTY_FILE = "no records (the file is empty)"
TOO_DEEP = f"nested deeper than {MAX_DEPTH} arrays/objects; too deep to score"
_NON_FINITE = re.compile(rb"(?<![\w\"])-?(NaN|Infinity)(?![\w\"])")
MAX_LINE_BYTES = 64 << 20
"""The longest line of any JSONL input (64 MiB, its end of line not counted): a longer one is
refused (``line too long``) without being read whole (docs/cli.md)."""
_SKIP_BYTES = 1 << 20  # the rest of a too long line is read past this much at a time


class LongLine(bytes):
    """What ``read_lines`` gives for a line over the limit: no content (``parse_jsonl_line``
    makes it its error), but ``len`` is the line's size in the file, so offsets stay right."""

    size: int  # its bytes in the file, its end of line included
    limit: int
    end: int  # the bytes of its end of line

    def __new__(cls, size: int, limit: int, end: int = 0) -> LongLine:
        line = super().__new__(cls, b"")
        line.size, line.limit, line.end = size, limit, end
        return line

    def __len__(self) -> int:
        return self.size


def read_lines(handle: IO[bytes], *, limit: int | None = None) -> Iterator[bytes]:
    """The lines of ``handle``, but one longer than ``limit`` bytes (default ``MAX_LINE_BYTES``)
    comes as a ``LongLine``: never more than ``limit`` bytes of a line are held."""
    limit = MAX_LINE_BYTES if limit is None else limit
    while raw := handle.readline(limit + 1):
        if len(raw) <= limit or raw.endswith(b"\n"):
            yield raw
            continue
        size, step = len(raw), min(_SKIP_BYTES, limit + 1)
        del raw
        while (more := handle.readline(step)) and not more.endswith(b"\n"):
            size += len(more)
        size += len(more)
        yield LongLine(size, limit, len(more) - len(more.rstrip(b"\r\n")))


def _bytes(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n:,} bytes"


# An integer beyond 64 bits has at least 19 digits: digits map to "0" and a run is found with
# ``bytes.find`` (an eighth of orjson's time on a batch chunk; a regex took more than orjson).
NOT_A_NUMBER = "invalid JSON: NaN and Infinity are not JSON numbers (write null or a number)"
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_DIGITS = b"0" * 19


def may_hold_big_int(raw: bytes | str) -> bool:
    """Whether ``raw`` has a run of 19 ASCII digits: the only text where an integer beyond 64
    bits can be."""
    if isinstance(raw, str):  # UTF-8 keeps ASCII digits as they are; a tenth of a regex's time
        raw = raw.encode("utf-8", "surrogatepass")
    return raw.translate(_DIGITS_AS_ZERO).find(_LONG_DIGITS) >= 0


def loads(data: bytes | str) -> Any:
    """The one reader of JSON in user input (docs/decisions.md): ``orjson.loads``, then a text
    that ``may_hold_big_int`` read again by ``json`` to keep every integer exact."""
    value = orjson.loads(data)
    if may_hold_big_int(data):
        with contextlib.suppress(RecursionError, ValueError):
            value = json.loads(data.decode("utf-8") if isinstance(data, bytes) else data)
    return value


def json_or_text(data: bytes) -> Any:
    """A model output's bytes as JSON, or as text when they are not valid JSON (scored by the
    non-object rule, not rejected); a leading UTF-8 byte order mark is skipped."""
    data = data.removeprefix(_BOM)
    try:
        return loads(data)
    except orjson.JSONDecodeError:
        return data.decode("utf-8", errors="replace")


def _bad_utf8(exc: orjson.JSONDecodeError, raw: bytes) -> tuple[int, int, int] | None:
    """The first byte of ``raw`` that is not UTF-8 when that is ``exc``'s cause: (byte, line,
    column in characters), or None."""
    if "not valid UTF-8" not in exc.msg:
        return None
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as bad:
        before = raw[: bad.start]
        start = before.rfind(b"\n") + 1
        return raw[bad.start], before.count(b"\n") + 1, len(before[start:].decode("utf-8")) + 1
    return None


def _reason(exc: orjson.JSONDecodeError, raw: bytes, *, column: int | None = None) -> str:
    # the pattern's look-behind tried at every byte: a bad line's costliest step without this
    if (b"NaN" in raw or b"Infinity" in raw) and _NON_FINITE.search(raw):
        return NOT_A_NUMBER
    # orjson's words speak of surrogates the user never wrote
    if (bad := _bad_utf8(exc, raw)) is not None:
        return f"invalid JSON: not UTF-8 text (byte 0x{bad[0]:02x} at column {bad[2]})"
    return f"invalid JSON: {exc.msg} at column {column if column is not None else exc.colno}"


def nesting_depth(value: Any, *, limit: int | None = None) -> int:
    """How many arrays/objects deep ``value`` goes (a scalar 0, ``{"a": [1]}`` 2), level by
    level without recursion; past ``limit`` it stops and returns ``limit + 1``."""
    depth = 0
    level = [value]
    while True:
        nodes = [
            node
            for node in level
            if type(node) in _FAST_CONTAINERS
            or (type(node) not in _SCALARS and isinstance(node, Mapping | list | tuple))
        ]
        if not nodes:
            return depth
        depth += 1
        if limit is not None and depth > limit:
            return limit + 1
        level = [
            child
            for node in nodes
            for child in (node.values() if isinstance(node, Mapping) else node)
        ]


_FAST_CONTAINERS = frozenset({dict, list})
_SCALARS = frozenset({str, int, float, bool, type(None)})


def too_deep(raw: bytes | None, value: Any) -> bool:
    """Whether ``value`` nests more than MAX_DEPTH levels inside its top level; ``raw`` (its
    bytes) with fewer openers than the limit answers without a walk."""
    if raw is not None and raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH + 1:
        return False
    return nesting_depth(value, limit=MAX_DEPTH + 1) > MAX_DEPTH + 1


def id_text(raw: Any) -> str | None:
    """A record's id as text: a JSON string or integer (a boolean is neither), else None."""
    return str(raw) if isinstance(raw, str | int) and not isinstance(raw, bool) else None


def too_deep_error(
    value: Any,
    *,
    file: str | Path | None = None,
    line: int | None = None,
    record_key: str | None = None,
) -> InputError:
    """The error of a too deep value: names the first too deep key and, with ``record_key``, the
    record (never the value: its repr would recurse too)."""
    record = field = None
    if isinstance(value, Mapping):
        record = id_text(value.get(record_key)) if record_key is not None else None
        field = next(
            (str(k) for k in value if nesting_depth(value[k], limit=MAX_DEPTH) > MAX_DEPTH), None
        )
    return InputError(TOO_DEEP, file=file, line=line, record=record, field=field)


def document_error(
    exc: orjson.JSONDecodeError, data: bytes, *, file: str | Path | None = None
) -> InputError:
    """orjson's error on the JSON document ``data`` in the CLI's words (``not UTF-8 text (byte
    0xff at column 2)`` for orjson's surrogates), at its line."""
    bad = _bad_utf8(exc, data)
    line = exc.lineno if bad is None else bad[1]
    return InputError(_reason(exc, data), file=file, line=line)


def read_json(path: str | Path) -> Any:
    """Parse one JSON document; a syntax error names the file, line and column, a document
    too deep (MAX_DEPTH) the file and key."""
    return read_json_bytes(path)[0]


def read_json_bytes(path: str | Path) -> tuple[Any, bytes]:
    """``read_json``'s document and the bytes it was read from (a byte order mark left out)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", file=p) from exc
    data = data.removeprefix(_BOM)
    if not data.strip():  # orjson's words: "Input is a zero-length, empty document"
        raise InputError(EMPTY_FILE, file=p)
    try:
        value = loads(data)
    except orjson.JSONDecodeError as exc:
        raise document_error(exc, data, file=p) from exc
    if too_deep(data, value):
        raise too_deep_error(value, file=p)
    return value, data


def first_repeated_key(pairs: Sequence[tuple[str, Any]]) -> str | None:
    """The first key a JSON object's ``pairs`` (as read) give twice, or None."""
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return key
        seen.add(key)
    return None


_KEY_OR_BRACKET = re.compile(rb'"(?:[^"\\]|\\.)*"\s*:?|[][{}]', re.DOTALL)


def repeated_key(data: bytes) -> tuple[str, int] | None:
    """The first key an object of the JSON document ``data`` gives twice, with the line where it
    is given again (orjson keeps the last one without a word: a configuration file's
    ``{"name": "FUZZY", "name": "EXACT"}``); None when no key repeats."""
    objects: list[set[str] | None] = []  # the keys of each open object (None: an array)
    for token in _KEY_OR_BRACKET.finditer(data):
        text = token.group()
        if text in (b"{", b"["):
            objects.append(set() if text == b"{" else None)
        elif text in (b"}", b"]"):
            del objects[-1:]
        elif text.endswith(b":") and objects and (keys := objects[-1]) is not None:
            key = json.loads(text[:-1])
            if key in keys:
                return key, data.count(b"\n", 0, token.start()) + 1
            keys.add(key)
    return None


def open_input(path: Path, buffering: int = -1) -> IO[bytes]:
    """An input file opened for reading; InputError ``file: cannot read file: why`` when it
    cannot be (the one wording of every reader)."""
    try:
        return path.open("rb", buffering=buffering)
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", file=path) from exc


def iter_jsonl(
    path: str | Path, *, record_key: str | None = None
) -> Iterator[tuple[int, Any | InputError]]:
    """Yield ``(line_number, value)`` for every non-blank line, a bad one (``parse_jsonl_line``)
    as an InputError; reading always goes on."""
    p = Path(path)
    with open_input(p) as handle:
        for number, raw in enumerate(read_lines(handle), start=1):
            value = parse_jsonl_line(raw, number, p, record_key=record_key)
            if value is not BLANK:
                yield number, value


_REMEMBERED_BYTES = 4096
_last_bad: tuple[bytes, str] = (b"", "")  # the last invalid line (this long at most), its reason

BLANK: Any = object()
"""What ``parse_jsonl_line`` returns for a blank line (``None`` is the JSON value null)."""


def parse_jsonl_line(
    raw: bytes, number: int, file: Path, *, record_key: str | None = None
) -> Any | InputError:
    """One JSONL line (the one parser of every JSONL reader): its value, an InputError naming
    ``file:number`` (invalid JSON, too deep, a ``LongLine``), or BLANK."""
    if isinstance(raw, LongLine):
        return InputError(
            f"line too long: {raw.size - raw.end:,} bytes, over the limit of {_bytes(raw.limit)} "
            "a line (not read; the next lines are)",
            file=file,
            line=number,
        )
    if number == 1:
        raw = raw.removeprefix(_BOM)
    raw = raw.rstrip(b"\r\n")  # so an unfinished line's error points into the line
    if not raw.strip():
        return BLANK
    global _last_bad
    if _last_bad[0] == raw:  # the same bad line again (a writer's repeated garbage): its reason
        return InputError(_last_bad[1], file=file, line=number)
    try:
        value = loads(raw)
    except orjson.JSONDecodeError as exc:
        column = len(raw[: exc.pos].decode("utf-8", "replace")) + 1
        reason = _reason(exc, raw, column=column)
        if len(raw) <= _REMEMBERED_BYTES:
            _last_bad = (raw, reason)  # one tuple, replaced whole: safe across threads
        return InputError(reason, file=file, line=number)
    if too_deep(raw, value):
        return too_deep_error(value, file=file, line=number, record_key=record_key)
    return value


def dumps(value: Any, *, indent: bool = False, sort: bool = True) -> str:
    """Serialise with orjson (non-str keys allowed, keys sorted unless not ``sort``, optional
    2-space indent)."""
    option = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
    option |= orjson.OPT_SORT_KEYS if sort else 0
    option |= orjson.OPT_INDENT_2 if indent else 0
    return dumps_bytes(value, option).decode()


def dumps_bytes(value: Any, option: int, default: Any = None) -> bytes:
    """``orjson.dumps``, but what orjson refuses (an integer beyond 64 bits, a lone surrogate)
    written as ``shown_value`` makes it."""
    try:
        return orjson.dumps(value, option=option, default=default)
    except TypeError as exc:
        if "surrogates" not in str(exc) and "64-bit" not in str(exc):
            raise
        return orjson.dumps(shown_value(value), option=option, default=default)


def shown_value(value: Any) -> Any:
    """``value`` as orjson can write it: every str through ``shown_text``, every integer beyond
    64 bits as its exact digits (an ``orjson.Fragment``)."""
    if isinstance(value, str):
        return shown_text(value)
    if isinstance(value, dict):
        return {_shown_key(k): shown_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [shown_value(v) for v in value]
    if type(value) is int and not -_INT64 <= value < 1 << 64:
        return orjson.Fragment(str(value).encode())
    return value


_INT64 = 1 << 63


def _shown_key(key: Any) -> Any:
    if isinstance(key, str):
        return shown_text(key)
    return str(key) if type(key) is int and not -_INT64 <= key < 1 << 64 else key


def write_json(path: str | Path, value: Any) -> None:
    Path(path).write_text(dumps(value, indent=True) + "\n", encoding="utf-8")


def write_jsonl(path: str | Path, rows: Any) -> None:
    with Path(path).open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(dumps(row) + "\n")

"""Reading JSON and JSONL with errors that name file and line; writing with orjson."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from fieldcheck._util.errors import InputError

_BOM = b"\xef\xbb\xbf"
_NON_FINITE = re.compile(rb"(?<![\w\"])-?(NaN|Infinity)(?![\w\"])")


def _reason(exc: orjson.JSONDecodeError, raw: bytes, *, column: int | None = None) -> str:
    if _NON_FINITE.search(raw):
        return "invalid JSON: NaN and Infinity are not JSON numbers (write null or a number)"
    return f"invalid JSON: {exc.msg} at column {column if column is not None else exc.colno}"


def read_json(path: str | Path) -> Any:
    """Parse one JSON document; a syntax error names the file, line and column."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", file=p) from exc
    data = data.removeprefix(_BOM)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InputError(_reason(exc, data), file=p, line=exc.lineno) from exc


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, Any | InputError]]:
    """Yield ``(line_number, value)`` for every non-blank line; a bad line yields an InputError.

    The caller decides whether an error stops the run; reading always goes on to the next line.
    """
    p = Path(path)
    try:
        handle = p.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", file=p) from exc
    with handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1:
                raw = raw.removeprefix(_BOM)
            raw = raw.rstrip(b"\r\n")  # so an unfinished line's error points into the line
            if not raw.strip():
                continue
            try:
                yield number, orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                column = len(raw[: exc.pos].decode("utf-8", "replace")) + 1
                yield number, InputError(_reason(exc, raw, column=column), file=p, line=number)


def dumps(value: Any, *, indent: bool = False) -> str:
    """Serialise with orjson (non-str keys allowed, sorted keys, optional 2-space indent)."""
    option = orjson.OPT_NON_STR_KEYS | orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY
    if indent:
        option |= orjson.OPT_INDENT_2
    return orjson.dumps(value, option=option).decode()


def write_json(path: str | Path, value: Any) -> None:
    Path(path).write_text(dumps(value, indent=True) + "\n", encoding="utf-8")


def write_jsonl(path: str | Path, rows: Any) -> None:
    with Path(path).open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(dumps(row) + "\n")

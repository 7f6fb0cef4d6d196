"""CSV writing that neutralises spreadsheet formulas (model outputs are hostile)."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from fieldcheck._util.jsonio import dumps_bytes
from fieldcheck._util.term import safe_cell, safe_json_text

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n", "\x00", "|", "%")
_FORMULA_CHARS = frozenset(_FORMULA_START)


def neutralise_cell(value: Any) -> Any:
    """A cell a spreadsheet cannot run as a formula (OWASP CSV injection): text starting with
    ``= + - @ | %`` or a control character prefixed ``'`` unless a plain number (issue 9); and
    one ``cat`` cannot run on a terminal: control characters escaped as the terminal output
    escapes them (``\\x1b``; a JSON cell's as ``\\u001b``, the same JSON)."""
    if type(value) is str:  # the common cell: text that cannot start a formula
        if (not value or value[0] not in _FORMULA_CHARS) and value.isprintable():
            return value
    elif value is None:
        return ""
    elif isinstance(value, bool | int | float):
        return value
    if isinstance(value, Mapping | list | tuple):
        json = dumps_bytes(value, orjson.OPT_NON_STR_KEYS | orjson.OPT_SORT_KEYS).decode()
        text = safe_json_text(json)
    else:
        text = safe_cell(str(value))
    if text.startswith(_FORMULA_START) and not is_plain_number(text):
        return "'" + text
    return text


_CURRENCY = "$€£¥₹"
_PLAIN_NUMBER = re.compile(
    rf"(?:[+-][{_CURRENCY}]?|[{_CURRENCY}][+-]?)?"  # sign and currency, either order
    r"(?:[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]*)?|[0-9]+\.?[0-9]*|\.[0-9]+)"  # 1,234.5 or 12.5 or .5
    r"(?:[eE][+-]?[0-9]+)?"
    r"(?: ?%| ?(?:thousands?|millions?|billions?|trillions?|k|m|mm|mn|bn|tn))?",
    re.IGNORECASE,
)


def restored_cell(text: str) -> str:
    """A text cell of a CSV read back as it was before ``neutralise_cell``: its ``'`` taken off."""
    if text[:1] == "'" and text[1:2] in _FORMULA_CHARS and not is_plain_number(text[1:]):
        return text[1:]
    return text


def is_plain_number(text: str) -> bool:
    """A number as data (sign, currency, digits, ``%`` or a scale word: docs/decisions.md); its only
    ``+``/``-`` are a leading sign and an exponent's, so no formula is a plain number."""
    return _PLAIN_NUMBER.fullmatch(text) is not None


def write_csv(path: str | Path, rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> int:
    """Write ``rows`` with exactly ``columns`` (missing keys are empty); return the row count."""
    count = 0
    with Path(path).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([neutralise_cell(row.get(c)) for c in columns])
            count += 1
    return count

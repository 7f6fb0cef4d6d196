"""The indexed columns of a stored item (key, failed, model, turn, tags), each system's to derive
(``System.item_columns``); ``failed`` None: not scored (glossaries of docs/json.md, slots.md...)."""

from __future__ import annotations

import marshal
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

TAG_CHARS = 512
MODEL_CHARS = 255


class ItemColumns(NamedTuple):
    """An item's indexed columns (a tuple: the hot paths build one per item); ``tags``: field or
    topic -> whether the item failed there (the shared default is never mutated)."""

    key: str
    failed: bool | None
    model: str | None = None
    turn: int | None = None
    error_type: str | None = None
    tags: Mapping[str, bool] = MappingProxyType({})


class ItemColumn(NamedTuple):
    """One column of a run's item table (the run page, ``GET /api/runs/{id}/items``)."""

    name: str  # what sorts and filters by it
    label: str  # its heading
    sql: str  # a DuckDB expression over the items file (a system's, never a user's)
    kind: str = "text"  # how it shows: text, prose (given room), number, count, flag
    order: str | None = None  # what sorts it (default ``sql``)
    filter: bool = False  # whether its values are offered as a filter


def item_value(path: str, kind: str = "VARCHAR") -> str:
    """The DuckDB expression of the value at JSON ``path`` of a stored item as ``kind`` (null
    where absent or of another type)."""
    quoted = "'" + path.replace("'", "''") + "'"
    return f"TRY_CAST(json_extract_string(result, {quoted}) AS {kind})"


FAILED = ItemColumn("failed", "failed", "failed", "flag")
ERROR = ItemColumn("error_type", "error", "error_type")


def error_kind(text: str, size: int = 32) -> str:
    """``text`` as an item's ``error_type`` (``size`` characters at most, the column's): whole,
    else its head before the first ": " (``invalid JSON``), else cut after a whole word."""
    if len(text) <= size:
        return text
    head = text.split(": ", 1)[0]
    cut = text.rfind(" ", 0, size + 1)
    return head if len(head) <= size else text[:cut] if cut > 0 else text[:size]


def add_tag(tags: dict[str, bool], name: str, failed: bool) -> None:
    """Tag ``name`` (cut to ``TAG_CHARS``), failed when any of its items' parts failed."""
    name = name[:TAG_CHARS]
    tags[name] = tags.get(name, False) or failed


MARSHALLED = f"{__name__}:marshalled_columns"
"""``RunRecorder.add_built``'s builder of items marshalled as (key, failed, turn, error_type,
result) tuples: a scoring process hands them on undecoded, the writer's imports stay light."""


def marshalled_columns(data: bytes) -> Iterator[tuple[ItemColumns, bytes]]:
    """The (columns, result) pairs of ``MARSHALLED`` items."""
    for key, failed, turn, error_type, result in marshal.loads(data):
        yield ItemColumns(key, failed, turn=turn, error_type=error_type), result


class Pairing(NamedTuple):
    """How a system's items pair across runs and what is compared (``runs compare``, the compare
    page): DuckDB expressions over an item's row of its items file (columns and ``result``)."""

    key: str = "key"  # what the same item of two runs pairs on
    right: str = "NOT failed"  # true, false or null (not scored)
    value: str = "NULL"  # the text compared (two right items may differ in it)
    shown: str | None = None  # ``value`` as the matrix shows it (None: as it is)
    metric: str = "right"  # the headline metric of ``rows``
    rows: tuple[str, ...] = ("CAST(NOT failed AS DOUBLE)", "1.0")  # its statistics (null: left out)
    statistic: Callable[[Any], Any] | None = None  # the metric per row of their (m, k) sums
    stream: int = 0  # the paired test's random stream: the system scorer's own
    truth: str | None = None  # digested to tell runs of other truth apart (None: inputs' sha256)

"""The indexed columns of a stored item: its key, whether it failed, its model and turn, and its
tags (the fields of a JSON record, the topics of a slot session) with whether it failed there.

``failed`` is each system's one definition (its glossary in docs/json.md, slots.md,
numeric.md): True for a scored item that failed, False for a scored item that did not, and
None (NULL) for an item that was not scored (an input or judge error, a call error, no gold),
which is neither; its ``error_type`` says why. Each system derives them from its items
(``System.item_columns``); the store sits below the systems and knows none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

TAG_CHARS = 512
MODEL_CHARS = 255


class ItemColumns(NamedTuple):
    """An item's indexed columns (a tuple: the hot paths build one per item). ``tags`` maps a
    field or topic to whether the item failed there; the shared default is never mutated."""

    key: str
    failed: bool | None
    model: str | None = None
    turn: int | None = None
    error_type: str | None = None
    tags: Mapping[str, bool] = MappingProxyType({})


class ItemColumn(NamedTuple):
    """One column of a run's item table (the run page, ``GET /api/runs/{id}/items``): ``name``
    sorts and filters by it, ``label`` heads it, ``sql`` reads it (a DuckDB expression over the
    items file's columns, written by a system, never by a user: ``item_value`` reads the item's
    JSON), ``order`` sorts it (default ``sql``), ``kind`` says how it shows (text, prose: a
    sentence given room, number, count, flag) and ``filter`` whether its values are offered as a filter."""

    name: str
    label: str
    sql: str
    kind: str = "text"
    order: str | None = None
    filter: bool = False


def item_value(path: str, kind: str = "VARCHAR") -> str:
    """The DuckDB expression of the value at JSON ``path`` of a stored item as ``kind`` (null
    where absent or of another type)."""
    quoted = "'" + path.replace("'", "''") + "'"
    return f"TRY_CAST(json_extract_string(result, {quoted}) AS {kind})"


FAILED = ItemColumn("failed", "failed", "failed", "flag")
ERROR = ItemColumn("error_type", "error", "error_type")


def add_tag(tags: dict[str, bool], name: str, failed: bool) -> None:
    """Tag ``name`` (cut to ``TAG_CHARS``), failed when any of its items' parts failed."""
    name = name[:TAG_CHARS]
    tags[name] = tags.get(name, False) or failed


def plain_columns(item: Mapping[str, Any]) -> ItemColumns:
    """The columns of an item of no known system: its ``key`` and ``failed``."""
    failed = item.get("failed")
    return ItemColumns(str(item.get("key", "")), None if failed is None else bool(failed))


class Pairing(NamedTuple):
    """How a system's items pair across runs and what is compared (``runs compare``, the compare
    page): DuckDB expressions over an item's row of its items file (the indexed columns and
    ``result``, the item's JSON text). ``key``: what its items pair on (the same item in two
    runs); ``right``: true, false or null (not scored); ``value``: the text compared (two items
    that are both right may differ in it), ``shown`` as the matrix shows it (None: as it is);
    ``rows``: the per-item sufficient statistics of
    headline metric ``metric`` (an item with a null among them is not counted), which
    ``statistic`` computes from their sums (one value per row of an (m, k) array); ``stream``: the
    paired test's random stream, the one the system's scorer draws its own paired test from;
    ``truth``: the item's ground truth, whose digest over a run's items tells runs of other
    ground truth apart where its input files cannot (None: the ``dataset_inputs`` sha256)."""

    key: str = "key"
    right: str = "NOT failed"
    value: str = "NULL"
    shown: str | None = None
    metric: str = "right"
    rows: tuple[str, ...] = ("CAST(NOT failed AS DOUBLE)", "1.0")
    statistic: Callable[[Any], Any] | None = None
    stream: int = 0
    truth: str | None = None

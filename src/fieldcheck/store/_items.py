"""The indexed columns of a scored item, derived from the plain dict a scoring command hands the
recorder: its key, whether it failed, its model and turn, and its tags (the fields of a JSON
record, the topics of a slot session) with whether it failed there.

``failed`` is each system's one definition (its glossary in docs/json.md, slots.md,
numeric.md): True for a scored item that failed, False for a scored item that did not, and
None (NULL) for an item that was not scored (an input or judge error, a call error, no gold),
which is neither; its ``error_type`` says why.

Plain dicts only (no import of the systems): the store sits below them.

- json: a ``records.jsonl`` line (``id``, scores, ``buckets``, ``fields``) plus the raw
  ``ground_truth`` and ``output`` (what ``rescore`` needs); or an ``errors.jsonl`` line under
  ``error`` with its ``id`` (not scored). Failed: not an object, or a field scored below 1,
  missing, hallucinated or extra. Tags: the fields it failed on, with ``[n]`` written ``[*]``
  as fields.csv names them (only those: a tag row for every field of every record would cost
  more than the record).
- slots: ``model``, ``user``, ``session``, ``counts`` (tp, fp, fn, ...), ``per_topic`` (topic ->
  {slots, differ}), ``gold`` and ``pred`` (``[[topic, field, values], ...]``), optional ``not_scored``
  (why: not scored), ``latency_s``, ``judge``. Failed: an FP or FN. Tags: topics, failed
  where a slot of that topic differs from gold (``per_topic[t]["differ"]``); none when not
  scored.
- numeric: a ``turns.csv`` row (``conversation_id``, ``turn_idx``, ``numerical_match``,
  ``error_type``, ``not_scored``, ...). Failed: not a numerical match (the turns with a failure
  mode, errors.csv's rows). Not scored: ``not_scored`` set (a call error, no gold). Turn:
  ``turn_idx``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

TAG_CHARS = 512
MODEL_CHARS = 255
_INDEX = re.compile(r"\[\d+\]")


class ItemColumns(NamedTuple):
    """An item's indexed columns (a tuple: the hot paths build one per item). ``tags`` maps a
    field or topic to whether the item failed there; the shared default is never mutated."""

    key: str
    failed: bool | None
    model: str | None = None
    turn: int | None = None
    error_type: str | None = None
    tags: Mapping[str, bool] = MappingProxyType({})


def field_name(path: str) -> str:
    """``items[3].sku`` -> ``items[*].sku``: one name for every index, as fields.csv has it."""
    return _INDEX.sub("[*]", path)


def _truthy(value: Any) -> bool:
    """A boolean from JSON or a CSV cell (``True``/``true``/``1``)."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def _add(tags: dict[str, bool], name: str, failed: bool) -> None:
    name = name[:TAG_CHARS]
    tags[name] = tags.get(name, False) or failed


def json_columns(item: Mapping[str, Any]) -> ItemColumns:
    key = str(item.get("id", item.get("key", "")))
    error = item.get("error")
    if error is not None:
        reason = error.get("reason") if isinstance(error, Mapping) else None
        return ItemColumns(key, None, error_type=str(reason or "error")[:32])
    tags: dict[str, bool] = {}
    for name, result in (item.get("fields") or {}).items():
        score = result.get("score") if isinstance(result, Mapping) else None
        if score is not None and score < 1:  # None: IGNORE
            _add(tags, field_name(name), True)
    buckets = item.get("buckets") or {}
    for bucket in ("aio_missing_or_null", "gt_null_aio_has_value", "extra_keys"):
        for name in buckets.get(bucket) or ():
            _add(tags, field_name(str(name)), True)
    failed = bool(tags) or item.get("output_kind", "object") != "object"
    return ItemColumns(key, failed, tags=tags)


def slot_columns(item: Mapping[str, Any]) -> ItemColumns:
    model = str(item.get("model", ""))
    key = f"{model}/{item.get('user')}/{item.get('session')}"
    not_scored = item.get("not_scored")
    counts = item.get("counts") or {}
    failed = None if not_scored else bool(counts.get("fp") or counts.get("fn"))
    tags: dict[str, bool] = {}
    for topic, c in () if not_scored else (item.get("per_topic") or {}).items():
        _add(tags, str(topic), bool(c.get("differ") or c.get("fp") or c.get("fn")))
    error_type = str(not_scored)[:32] if not_scored else None
    return ItemColumns(key, failed, model=model[:MODEL_CHARS], error_type=error_type, tags=tags)


def numeric_columns(item: Mapping[str, Any]) -> ItemColumns:
    turn_text = item.get("turn_idx")
    try:
        turn = int(turn_text) if turn_text not in (None, "") else None  # type: ignore[arg-type]
    except (TypeError, ValueError):
        turn = None
    key = f"{item.get('conversation_id')}#{turn_text}"
    error = item.get("error_type") or None
    not_scored = item.get("not_scored")
    failed = None if not_scored else not _truthy(item.get("numerical_match"))
    return ItemColumns(key, failed, turn=turn, error_type=str(error)[:32] if error else None)


def item_columns(system: str, item: Mapping[str, Any]) -> ItemColumns:
    """The indexed columns of ``item`` for ``system`` (``key`` given by the caller wins)."""
    if system == "json":
        columns = json_columns(item)
    elif system == "slots":
        columns = slot_columns(item)
    elif system == "numeric":
        columns = numeric_columns(item)
    else:
        failed = item.get("failed")
        columns = ItemColumns(str(item.get("key", "")), None if failed is None else bool(failed))
    if system != "json" and "key" in item:
        columns = ItemColumns(
            str(item["key"]),
            columns.failed,
            columns.model,
            columns.turn,
            columns.error_type,
            columns.tags,
        )
    return columns

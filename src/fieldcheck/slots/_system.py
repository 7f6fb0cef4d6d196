"""The slot extraction benchmark as a system of the registry (``fieldcheck.core.System``): a
stored slots run holds several models, each a column of its own in ``runs compare``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fieldcheck.slots._report import METRIC_COLUMNS
from fieldcheck.store import MODEL_CHARS, ItemColumns, add_tag

_COUNTS = ("tp", "fp", "fn")


def _topic_f1(metrics: Mapping[str, Any]) -> dict[str, Any]:
    topics = metrics.get("per_topic") or {}
    return {topic: (s or {}).get("f1") for topic, s in topics.items()}


class SlotsSystem:
    name = "slots"
    title = "Slot extraction benchmark"
    item = "session"
    headline = METRIC_COLUMNS
    breakdowns = (("Per-topic F1", "topic", _topic_f1),)
    export_columns = (
        ("user", '$."user"', "VARCHAR"),
        ("session", '$."session"', "BIGINT"),
        *((name, f'$.counts."{name}"', "BIGINT") for name in _COUNTS),
        ("not_scored", '$."not_scored"', "VARCHAR"),
    )

    def columns(
        self, model: str, metrics: Mapping[str, Any], intervals: Mapping[str, Any]
    ) -> list[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
        models = metrics.get("models") or {}
        return [(name, m, intervals.get(name) or {}) for name, m in models.items()]

    def estimate(self, metrics: Mapping[str, Any], name: str) -> Any:
        return metrics.get(name)

    def interval(self, intervals: Mapping[str, Any], name: str) -> Any:
        return intervals.get(name)

    def latency(self, metrics: Mapping[str, Any]) -> Mapping[str, Any] | None:
        found = metrics.get("latency")
        return found if isinstance(found, Mapping) else None

    def paired(self, metrics: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        return list(metrics.get("paired_f1") or [])

    def item_summary(self, result: Mapping[str, Any]) -> list[tuple[str, Any]]:
        if result.get("not_scored"):
            return [("not scored", result["not_scored"])]
        counts = result.get("counts") or {}
        return [(k, counts.get(k)) for k in _COUNTS]

    def export_row(self, result: Mapping[str, Any]) -> list[Any]:
        counts = result.get("counts") or {}
        return [
            counts.get(name) if name in _COUNTS else result.get(name)
            for name, _, _ in self.export_columns
        ]

    def item_columns(self, item: Mapping[str, Any]) -> ItemColumns:
        """A session of a model: ``model``, ``user``, ``session``, ``counts``, ``per_topic``
        (topic -> {slots, differ}), ``gold``/``pred``, or ``not_scored`` (why). Failed: an FP
        or FN; tagged with its topics, failed where a slot of the topic differs from gold;
        none when not scored. A ``key`` given wins over ``model/user/session``."""
        model = str(item.get("model", ""))
        key = str(item.get("key", f"{model}/{item.get('user')}/{item.get('session')}"))
        not_scored = item.get("not_scored")
        counts = item.get("counts") or {}
        failed = None if not_scored else bool(counts.get("fp") or counts.get("fn"))
        tags: dict[str, bool] = {}
        for topic, c in () if not_scored else (item.get("per_topic") or {}).items():
            add_tag(tags, str(topic), bool(c.get("differ") or c.get("fp") or c.get("fn")))
        error_type = str(not_scored)[:32] if not_scored else None
        return ItemColumns(key, failed, model[:MODEL_CHARS], error_type=error_type, tags=tags)


SYSTEM = SlotsSystem()

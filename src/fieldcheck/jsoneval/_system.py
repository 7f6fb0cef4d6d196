"""JSON evaluation as a system of the registry (``fieldcheck.core.System``): what the runs
list, ``runs compare``, ``runs export`` and the pages read from its stored runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fieldcheck.jsoneval._stream import SCORES
from fieldcheck.store import ItemColumns, add_tag, field_name

_SUMMARY = ("completeness", "accuracy", "rqs")


def _field_match_rates(metrics: Mapping[str, Any]) -> dict[str, Any]:
    fields = metrics.get("fields") or {}
    return {name: (s or {}).get("match_rate") for name, s in fields.items()}


class JsonSystem:
    name = "json"
    title = "JSON evaluation"
    item = "record"
    headline = SCORES
    breakdowns = (("Per-field match rate", "field", _field_match_rates),)
    export_columns = (
        *((name, f'$."{name}"', "DOUBLE") for name in SCORES),
        ("output_kind", '$."output_kind"', "VARCHAR"),
    )

    def columns(
        self, model: str, metrics: Mapping[str, Any], intervals: Mapping[str, Any]
    ) -> list[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
        return [(model, metrics, intervals)]

    def estimate(self, metrics: Mapping[str, Any], name: str) -> Any:
        return (metrics.get("means") or {}).get(name)

    def interval(self, intervals: Mapping[str, Any], name: str) -> Any:
        return intervals.get(name)

    def latency(self, metrics: Mapping[str, Any]) -> Mapping[str, Any] | None:
        found = metrics.get("latency_s")
        return found if isinstance(found, Mapping) else None

    def paired(self, metrics: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        return []

    def item_summary(self, result: Mapping[str, Any]) -> list[tuple[str, Any]]:
        if "error" in result:
            return [("error", (result["error"] or {}).get("message"))]
        return [(k, result.get(k)) for k in _SUMMARY]

    def export_row(self, result: Mapping[str, Any]) -> list[Any]:
        return [result.get(name) for name, _, _ in self.export_columns]

    def item_columns(self, item: Mapping[str, Any]) -> ItemColumns:
        """A ``records.jsonl`` line (plus the raw ``ground_truth`` and ``output``), or an
        ``errors.jsonl`` line under ``error`` (not scored). Failed: not an object, or a field
        scored below 1, missing, hallucinated or extra; tagged with those fields only, ``[n]``
        written ``[*]`` as fields.csv names them."""
        key = str(item.get("id", item.get("key", "")))
        error = item.get("error")
        if error is not None:
            reason = error.get("reason") if isinstance(error, Mapping) else None
            return ItemColumns(key, None, error_type=str(reason or "error")[:32])
        tags: dict[str, bool] = {}
        for name, result in (item.get("fields") or {}).items():
            score = result.get("score") if isinstance(result, Mapping) else None
            if score is not None and score < 1:  # None: IGNORE
                add_tag(tags, field_name(name), True)
        buckets = item.get("buckets") or {}
        for bucket in ("aio_missing_or_null", "gt_null_aio_has_value", "extra_keys"):
            for name in buckets.get(bucket) or ():
                add_tag(tags, field_name(str(name)), True)
        failed = bool(tags) or item.get("output_kind", "object") != "object"
        return ItemColumns(key, failed, tags=tags)


SYSTEM = JsonSystem()

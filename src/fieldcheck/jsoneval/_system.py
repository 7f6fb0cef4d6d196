"""JSON evaluation as a system of the registry (``fieldcheck.core.System``): what the runs
list, ``runs compare``, ``runs export`` and the pages read from its stored runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fieldcheck.jsoneval._stream import SCORES

_SUMMARY = ("completeness", "accuracy", "rqs")


def _field_match_rates(metrics: Mapping[str, Any]) -> dict[str, Any]:
    fields = metrics.get("fields") or {}
    return {name: (s or {}).get("match_rate") for name, s in fields.items()}


class JsonSystem:
    name = "json"
    title = "JSON evaluation"
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


SYSTEM = JsonSystem()

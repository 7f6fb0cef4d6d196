"""Numeric QA as a system of the registry (``fieldcheck.core.System``): its intervals are
stored overall and by turn; ``runs compare`` shows accuracy and operations by turn."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fieldcheck.numeric._report import HEADLINE
from fieldcheck.numeric._stream import numeric_columns
from fieldcheck.store import ItemColumns

_SUMMARY = ("question", "expected_answer", "predicted_answer")


def _accuracy_by_turn(metrics: Mapping[str, Any]) -> dict[str, Any]:
    return dict(metrics.get("accuracy_by_turn_number") or {})


def _operations_by_turn(metrics: Mapping[str, Any]) -> dict[str, Any]:
    return dict(metrics.get("avg_operations_by_turn") or {})


class NumericSystem:
    name = "numeric"
    title = "Numeric QA"
    item = "turn"
    headline = tuple(key for key, _ in HEADLINE)
    breakdowns = (
        ("Accuracy by turn", "turn", _accuracy_by_turn),
        ("Operations by turn", "turn", _operations_by_turn),
    )
    export_columns = (
        ("conversation_id", '$."conversation_id"', "VARCHAR"),
        ("turn_idx", '$."turn_idx"', "BIGINT"),
        ("general_match", '$."general_match"', "BOOLEAN"),
        ("numerical_match", '$."numerical_match"', "BOOLEAN"),
        ("failure_mode", '$."failure_mode"', "VARCHAR"),
    )

    def columns(
        self, model: str, metrics: Mapping[str, Any], intervals: Mapping[str, Any]
    ) -> list[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
        return [(model, metrics, intervals)]

    def estimate(self, metrics: Mapping[str, Any], name: str) -> Any:
        return metrics.get(name)

    def interval(self, intervals: Mapping[str, Any], name: str) -> Any:
        return (intervals.get("overall") or {}).get(name)

    def latency(self, metrics: Mapping[str, Any]) -> Mapping[str, Any] | None:
        found = metrics.get("latency_s")
        return found if isinstance(found, Mapping) else None

    def paired(self, metrics: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        return []

    def item_summary(self, result: Mapping[str, Any]) -> list[tuple[str, Any]]:
        return [(k, result.get(k)) for k in _SUMMARY]

    def export_row(self, result: Mapping[str, Any]) -> list[Any]:
        return [result.get(name) for name, _, _ in self.export_columns]

    def item_columns(self, item: Mapping[str, Any]) -> ItemColumns:
        return numeric_columns(item)


SYSTEM = NumericSystem()

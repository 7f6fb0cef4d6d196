"""EXACT: case-insensitive string equality (json spec, Phase 3 "Strategy Behaviors")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fieldcheck.matchers._base import Similarity, check_pairs


def exact_similarity(prediction: str, reference: str) -> float:
    """1.0 when ``prediction.lower() == reference.lower()``, else 0.0."""
    return 1.0 if prediction.lower() == reference.lower() else 0.0


class ExactMatcher:
    """Case-insensitive equality as a 0/1 similarity."""

    name = "exact"

    def similarities(
        self, predictions: Sequence[str], references: Sequence[str]
    ) -> list[Similarity]:
        check_pairs(predictions, references)
        return [
            Similarity(exact_similarity(p, r)) for p, r in zip(predictions, references, strict=True)
        ]

    def signature(self) -> dict[str, Any]:
        return {"matcher": self.name}

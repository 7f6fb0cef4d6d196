"""EXACT: case-insensitive string equality (json spec, Phase 3 "Strategy Behaviors")."""

from __future__ import annotations

from fieldcheck.matchers._base import PairwiseMatcher


def exact_similarity(prediction: str, reference: str) -> float:
    """1.0 when ``prediction.lower() == reference.lower()``, else 0.0."""
    return 1.0 if prediction.lower() == reference.lower() else 0.0


class ExactMatcher(PairwiseMatcher):
    """Case-insensitive equality as a 0/1 similarity."""

    name = "exact"
    similarity = staticmethod(exact_similarity)

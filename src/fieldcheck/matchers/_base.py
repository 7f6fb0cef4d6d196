"""The one small interface every matcher implements: similarity in [0, 1] of paired strings."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class Similarity:
    """A similarity in [0, 1], or an error (a judge that failed is never a score of 0)."""

    score: float | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.score is not None

    def passes(self, threshold: float) -> bool | None:
        """``score >= threshold``; ``None`` when there is no score."""
        return None if self.score is None else self.score >= threshold


@runtime_checkable
class Matcher(Protocol):
    """Scores ``predictions[i]`` against ``references[i]`` in one batch, so that semantic
    encoders and judges see every distinct string once."""

    name: str

    def similarities(
        self, predictions: Sequence[str], references: Sequence[str]
    ) -> list[Similarity]: ...

    def signature(self) -> dict[str, Any]: ...


class PairwiseMatcher:
    """A matcher that scores each pair on its own with ``similarity`` (exact, fuzzy)."""

    name: str
    similarity: Callable[[str, str], float]  # a staticmethod

    def similarities(
        self, predictions: Sequence[str], references: Sequence[str]
    ) -> list[Similarity]:
        check_pairs(predictions, references)
        made: dict[float, Similarity] = {}  # one (frozen) Similarity per score: 0.4 us each
        found = made.get
        return [
            found(s) or made.setdefault(s, Similarity(s))
            for s in map(self.similarity, predictions, references)
        ]

    def signature(self) -> dict[str, Any]:
        return {"matcher": self.name}


def check_pairs(predictions: Sequence[str], references: Sequence[str]) -> None:
    if len(predictions) != len(references):
        raise ValueError(
            f"predictions and references differ in length ({len(predictions)} != {len(references)})"
        )

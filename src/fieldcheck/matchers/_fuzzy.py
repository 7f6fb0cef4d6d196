"""FUZZY with rapidfuzz: character-level similarity that forgives typos, case and word order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rapidfuzz import fuzz, utils

from fieldcheck.matchers._base import Similarity, check_pairs


def fuzzy_similarity(prediction: str, reference: str) -> float:
    """``fuzz.token_sort_ratio / 100`` after rapidfuzz's ``default_process``; range [0, 1].

    token_sort_ratio is the normalised Indel similarity of the strings with their words sorted:
    one changed letter in "John Smith"/"John Smyth" gives 0.90, "Smith, John"/"John Smith" gives
    1.0, and unlike partial_ratio it does not call a short string a match for a long one that
    merely contains it. Strings that are empty after processing (punctuation only) score 1.0
    when equal ignoring case and surrounding space, else 0.0.
    """
    a, b = utils.default_process(prediction), utils.default_process(reference)
    if not a and not b:
        return 1.0 if prediction.strip().lower() == reference.strip().lower() else 0.0
    return float(fuzz.token_sort_ratio(a, b)) / 100.0


class FuzzyMatcher:
    """rapidfuzz token_sort_ratio, scaled to [0, 1]."""

    name = "fuzzy:rapidfuzz.token_sort_ratio"

    def similarities(
        self, predictions: Sequence[str], references: Sequence[str]
    ) -> list[Similarity]:
        check_pairs(predictions, references)
        return [
            Similarity(fuzzy_similarity(p, r)) for p, r in zip(predictions, references, strict=True)
        ]

    def signature(self) -> dict[str, Any]:
        return {"matcher": self.name}

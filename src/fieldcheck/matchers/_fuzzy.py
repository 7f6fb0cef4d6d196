"""FUZZY with rapidfuzz: character-level similarity that forgives typos, case and word order."""

from __future__ import annotations

from typing import Any

import numpy as np
from rapidfuzz import utils
from rapidfuzz.distance import Indel

from fieldcheck.matchers._base import PairwiseMatcher

# Beyond this many characters (the longer value, after processing) FUZZY compares by 3-grams:
# rapidfuzz's Indel distance is quadratic (10k characters 2.5 ms, 300k 1.4 s, 3M 104 s).
LONG_VALUE_CHARS = 10_000


def compared_linearly(prediction: str, reference: str) -> bool:
    """Whether ``fuzzy_similarity`` compares this pair by ``long_value_similarity``."""
    a, b = utils.default_process(prediction), utils.default_process(reference)
    return max(len(a), len(b)) > LONG_VALUE_CHARS


def _trigrams(text: str) -> np.ndarray:
    """Every 3-gram of ``text`` as one integer (three 21-bit code points), a 1- or 2-character
    text as its single short gram."""
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    if len(codes) < 3:
        gram = 0
        for c in codes.tolist():
            gram = (gram << 21) | c
        return np.array([gram | (1 << 63)], dtype=np.uint64)  # never equal to a full 3-gram
    # built in place, one array of 8 bytes a gram (a 20 MB text took 700 MB in temporaries)
    grams = codes[:-2].astype(np.uint64)
    for shifted in (codes[1:-1], codes[2:]):
        grams <<= np.uint64(21)
        grams |= shifted
    return grams


def _counted(grams: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(grams, return_counts=True)``, sorting ``grams`` in place (no copy)."""
    grams.sort()
    starts = np.flatnonzero(np.concatenate(([True], grams[1:] != grams[:-1])))
    return grams[starts], np.diff(starts, append=len(grams))


def long_value_similarity(a: str, b: str) -> float:
    """FUZZY of long processed texts in O(n log n): the Dice coefficient of their character
    3-gram multisets, words sorted (docs/json.md "Long values")."""
    x = _trigrams(" ".join(sorted(a.split())))
    y = _trigrams(" ".join(sorted(b.split())))
    ux, cx = _counted(x)
    uy, cy = _counted(y)
    _, ix, iy = np.intersect1d(ux, uy, assume_unique=True, return_indices=True)
    common = int(np.minimum(cx[ix], cy[iy]).sum())
    return 2.0 * common / (len(x) + len(y))


def fuzzy_similarity(prediction: str, reference: str) -> float:
    """``fuzz.token_sort_ratio / 100`` after ``default_process``, in [0, 1] (docs/json.md): the
    Indel ratio of the texts' sorted words, ``(n - distance) / n`` of their ``n`` characters, as
    one division of integers (rapidfuzz's ``1 - distance / n`` is 0.44999999999999996 for 18/40,
    under a threshold of 0.45); two texts empty after processing score 1.0 when equal ignoring
    case and outer space, else 0."""
    a, b = _process(prediction), _process(reference)
    if not a and not b:
        return 1.0 if prediction.strip().lower() == reference.strip().lower() else 0.0
    if max(len(a), len(b)) > LONG_VALUE_CHARS:
        return long_value_similarity(a, b)
    a, b = " ".join(sorted(a.split())), " ".join(sorted(b.split()))
    n = len(a) + len(b)
    return (n - _indel(a, b)) / n


_process, _indel = utils.default_process, Indel.distance


class FuzzyMatcher(PairwiseMatcher):
    """rapidfuzz token_sort_ratio, scaled to [0, 1]."""

    name = "fuzzy:rapidfuzz.token_sort_ratio"
    similarity = staticmethod(fuzzy_similarity)

    def signature(self) -> dict[str, Any]:
        return {"matcher": self.name, "long_values": f"3gram_dice_over_{LONG_VALUE_CHARS}_chars"}

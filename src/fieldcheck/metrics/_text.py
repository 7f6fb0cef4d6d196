"""Text normalisation and token metrics of the slot benchmark, pure: canonicalize, token overlap,
BLEU-1 (slot spec §4 "Normalization", §6-9 "Token-Level Metrics")."""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

CANONICALIZE_VERSION = "canon-v1"

# the spec names these two patterns without showing them (slot spec §4; docs/slots.md)
NON_ASCII_RE = re.compile(r"[^\x00-\x7f]")
PUNCT_RE = re.compile(r"[^A-Za-z0-9\s]")
_SPACE_RE = re.compile(r"\s+")


def _fold_accents(value: str) -> str:
    """NFKD-decompose and drop combining marks, so "José" keeps its "e" instead of losing it."""
    if value.isascii():  # NFKD leaves ASCII as it is and ASCII has no combining marks
        return value
    decomposed = unicodedata.normalize("NFKD", value)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def canonicalize(value: str) -> str:
    """A slot value normalised for comparison by the spec's steps in its order (slot spec §4
    ``canonicalize``), accents folded first and whitespace collapsed again last (docs/slots.md).
    Empty in, empty out."""
    text = NON_ASCII_RE.sub("", _fold_accents(value))
    text = text.replace("_", " ")
    text = _SPACE_RE.sub(" ", text)
    text = PUNCT_RE.sub(" ", text)
    text = _SPACE_RE.sub(" ", text)
    return text.lower().strip()


def tokenize(value: str) -> list[str]:
    """Whitespace tokens of ``canonicalize(value)`` (slot spec §6); ``[]`` for empty input."""
    return canonicalize(value).split()


def tokenize_values(values: Sequence[str]) -> list[str]:
    """Tokens of every value of a slot, in order: the slot's token multiset (slot spec §6)."""
    return [token for value in values for token in tokenize(value)]


@dataclass(frozen=True, slots=True)
class TokenOverlap:
    """Token counts of one prediction against one reference (slot spec §6-7): ``matched`` is the
    multiset overlap, precision ``matched / predicted`` and recall ``matched / reference``."""

    matched: int
    predicted: int
    reference: int


def token_overlap(
    prediction_tokens: Sequence[str], reference_tokens: Sequence[str]
) -> TokenOverlap:
    """Multiset overlap of two token lists (slot spec §6 ``Counter(gt) & Counter(pred)``)."""
    matched = sum((Counter(prediction_tokens) & Counter(reference_tokens)).values())
    return TokenOverlap(matched, len(prediction_tokens), len(reference_tokens))


def bleu1_score(prediction_tokens: Sequence[str], reference_tokens: Sequence[str]) -> float:
    """BLEU-1: clipped unigram precision times the brevity penalty ``exp(1 - ref_len / pred_len)``
    when not longer than the reference (slot spec §9). Range [0, 1]; an empty prediction is 0.0."""
    if not prediction_tokens:
        return 0.0
    overlap = sum((Counter(prediction_tokens) & Counter(reference_tokens)).values())
    pred_len = len(prediction_tokens)
    ref_len = len(reference_tokens)
    precision = overlap / pred_len
    bp = math.exp(1 - ref_len / pred_len) if pred_len <= ref_len else 1.0
    return precision * bp

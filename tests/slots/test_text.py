"""canonicalize, token overlap and BLEU-1: the spec's worked examples, decisions, properties."""

from __future__ import annotations

import math
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fieldcheck.metrics import (
    NON_ASCII_RE,
    PUNCT_RE,
    bleu1_score,
    canonicalize,
    f1_from_pr,
    token_overlap,
    tokenize,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Software Engineer", "software engineer"),
        ("  Hello_World  ", "hello world"),
        ("reading, hiking", "reading hiking"),  # not "reading  hiking" (decision: final collapse)
        ("a , b", "a b"),
        ("José Núñez", "jose nunez"),  # accents folded, not dropped (decision)
        ("tea 🍵 time", "tea time"),  # emoji is non-ASCII and goes
        ("don't", "don t"),  # punctuation becomes a space, as the spec's PUNCT_RE.sub(" ", ...)
        ("25 years old!", "25 years old"),
        ("", ""),
        ("李明", ""),  # nothing ASCII is left: empty (the loader warns about such values)
    ],
)
def test_canonicalize_decisions(value: str, expected: str) -> None:
    assert canonicalize(value) == expected


def test_spec_order_would_leave_double_space() -> None:
    # The spec's literal order (collapse, then punctuation to space) leaves two spaces:
    text = "reading, hiking"
    literal = PUNCT_RE.sub(" ", " ".join(text.split())).lower().strip()
    assert literal == "reading  hiking"
    assert canonicalize(text) == "reading hiking"


def test_patterns_are_what_docs_say() -> None:
    assert NON_ASCII_RE.sub("", "aé✓b") == "ab"
    assert PUNCT_RE.sub("", "a-b_c!d 1") == "abcd 1"  # underscore is punctuation here too


def test_spec_token_example() -> None:
    # gold "software engineer at Google", prediction "senior software engineer at Microsoft"
    # matched: software, engineer, at = 3; precision 3/5, recall 3/4
    o = token_overlap(
        tokenize("senior software engineer at Microsoft"), tokenize("software engineer at Google")
    )
    assert (o.matched, o.predicted, o.reference) == (3, 5, 4)
    assert o.matched / o.predicted == 0.60
    assert o.matched / o.reference == 0.75


def test_token_overlap_is_a_multiset() -> None:
    # Counter & Counter, not sets: "a a a" vs "a" matches once, "a a" vs "a a b" twice
    assert token_overlap(["a", "a", "a"], ["a"]).matched == 1
    assert token_overlap(["a", "a"], ["a", "a", "b"]).matched == 2


def test_spec_bleu1_example() -> None:
    # reference "software engineer", prediction "engineer": precision 1, BP exp(1 - 2/1) = e^-1
    got = bleu1_score(["engineer"], ["software", "engineer"])
    assert math.isclose(got, math.exp(-1))
    assert round(got, 3) == 0.368


def test_bleu1_edges() -> None:
    assert bleu1_score([], ["a"]) == 0.0
    assert bleu1_score(["a", "b", "c"], ["a"]) == pytest.approx(1 / 3)  # longer: BP 1
    assert bleu1_score(["x"], ["a"]) == 0.0


tokens = st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(tokens, tokens)
def test_bleu1_equals_nltk(pred: list[str], ref: list[str]) -> None:
    from nltk.translate.bleu_score import sentence_bleu

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = sentence_bleu([ref], pred, weights=(1, 0, 0, 0))
    assert math.isclose(bleu1_score(pred, ref), float(expected), abs_tol=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.lists(tokens, min_size=1, max_size=5), st.lists(tokens, min_size=1, max_size=5))
def test_swapping_swaps_token_precision_and_recall(a: list[list[str]], b: list[list[str]]) -> None:
    n = min(len(a), len(b))
    fwd = [token_overlap(p, g) for p, g in zip(a[:n], b[:n], strict=True)]
    bwd = [token_overlap(g, p) for p, g in zip(a[:n], b[:n], strict=True)]
    matched = sum(o.matched for o in fwd)
    assert matched == sum(o.matched for o in bwd)
    assert sum(o.predicted for o in fwd) == sum(o.reference for o in bwd)
    p = matched / sum(o.predicted for o in fwd)
    r = matched / sum(o.reference for o in fwd)
    assert 0.0 <= p <= 1.0 and 0.0 <= r <= 1.0
    assert min(p, r) - 1e-12 <= f1_from_pr(p, r) <= max(p, r) + 1e-12


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_canonicalize_is_idempotent_and_clean(value: str) -> None:
    once = canonicalize(value)
    assert canonicalize(once) == once
    assert "  " not in once and once == once.strip() and once.isascii()
    assert not PUNCT_RE.search(once)

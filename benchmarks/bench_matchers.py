"""Matchers: rapidfuzz FUZZY vs difflib; batched, de-duplicated SEMANTIC vs one encode per pair."""

from __future__ import annotations

import difflib
import random

from benchmarks._harness import Comparison, measure, row_of
from benchmarks._table import Row
from fieldcheck.matchers import FuzzyMatcher, SemanticMatcher
from fieldcheck.matchers._semantic import load_model

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "invoice",
    "total",
    "amount",
    "customer",
    "street",
    "city",
    "order",
    "paid",
    "due",
]


def _phrases(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6))) for _ in range(n)]


def _in_process() -> list[Comparison]:
    rng = random.Random(0)
    n = 20_000
    preds, refs = _phrases(rng, n), _phrases(rng, n)
    fuzzy = FuzzyMatcher()
    ours = measure(lambda: fuzzy.similarities(preds, refs), n)
    base = measure(
        lambda: [
            difflib.SequenceMatcher(None, p, r).ratio() for p, r in zip(preds, refs, strict=True)
        ],
        n,
    )
    out = [Comparison("fuzzy similarity", "pairs", ours, base, "difflib.SequenceMatcher")]

    # Semantic: 400 pairs drawn from 60 distinct strings (typical of a batch of records).
    pool = _phrases(rng, 60)
    m = 400
    sp = [rng.choice(pool) for _ in range(m)]
    sr = [rng.choice(pool) for _ in range(m)]
    model = load_model()

    def batched() -> None:
        SemanticMatcher(cache=None).similarities(sp, sr)

    def per_pair() -> None:
        for p, r in zip(sp, sr, strict=True):
            a, b = model.encode([p, r], normalize_embeddings=True, show_progress_bar=False)
            float(a @ b)

    out.append(
        Comparison(
            "semantic similarity",
            "pairs",
            measure(batched, m, repeat=2),
            measure(per_pair, m, repeat=1),
            "encode each pair separately",
        )
    )
    return out


def run(quick: bool = False) -> list[Row]:
    return [row_of(c) for c in _in_process()]

"""The slots bootstrap draws its resample weights in chunks (flat memory) and gives exactly the
intervals and paired p-values of the whole-matrix functions for the same seed."""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from slots_helpers import slot

from fieldcheck.metrics._stats import (
    bootstrap_totals_ci,
    paired_bootstrap_groups_pvalue,
    paired_bootstrap_totals_pvalue,
)
from fieldcheck.slots import ModelInput, load_slots, score_models
from fieldcheck.slots._score import STATISTICS, _stat_f1, session_intervals

Jsonl = Callable[[str, list[Any]], Path]


def _units(rng: np.random.Generator, n: int) -> np.ndarray:
    """Session counts as the scorer makes them: tp, fp, fn, gold, exact, token m/p/g."""
    tp, fp, fn = rng.integers(0, 5, n), rng.integers(0, 3, n), rng.integers(0, 3, n)
    exact = np.minimum(tp, rng.integers(0, 4, n))
    tok_m = rng.integers(0, 10, n)
    return np.column_stack(
        [
            tp,
            fp,
            fn,
            tp + fn,
            exact,
            tok_m,
            tok_m + rng.integers(0, 5, n),
            tok_m + rng.integers(0, 5, n),
        ]
    ).astype(float)


@pytest.mark.parametrize("n", [1, 2, 37, 300])
@pytest.mark.parametrize("chunk", ["one resample", "seven resamples", "all at once"])
def test_chunked_intervals_and_pvalues_equal_the_whole_matrix(n: int, chunk: str) -> None:
    max_cells = {"one resample": 1, "seven resamples": 7 * n, "all at once": 10**9}[chunk]
    rng = np.random.default_rng(n)
    a, b = _units(rng, n), _units(rng, n)
    for seed, resamples in ((0, 200), (11, 57)):
        expected = bootstrap_totals_ci(a.tolist(), STATISTICS, resamples=resamples, seed=seed)
        got = session_intervals(a, resamples=resamples, seed=seed, max_cells=max_cells)
        assert expected is not None and got == expected
        p_expected = paired_bootstrap_totals_pvalue(
            a.tolist(), b.tolist(), _stat_f1, resamples=resamples, seed=seed
        )
        p_got = paired_bootstrap_groups_pvalue(
            a, b, _stat_f1, resamples=resamples, seed=seed, max_cells=max_cells
        )
        assert p_got == p_expected
    # a pair with a real difference: the p-value is small, and still the same
    better = a.copy()
    better[:, 1] = 0  # no false positives: precision 1
    p_whole = paired_bootstrap_totals_pvalue(better.tolist(), a.tolist(), _stat_f1, resamples=99)
    p_chunked = paired_bootstrap_groups_pvalue(
        better, a, _stat_f1, resamples=99, max_cells=max_cells
    )
    assert p_chunked == p_whole
    if n == 300:
        assert p_whole == 1 / 100


def test_pvalue_edge_cases() -> None:
    assert paired_bootstrap_groups_pvalue([], [], _stat_f1) is None
    assert (
        paired_bootstrap_groups_pvalue([[1, 0, 0, 1, 1, 1, 1, 1]], [[0] * 8], _stat_f1, resamples=0)
        is None
    )
    with pytest.raises(ValueError, match="same examples"):
        paired_bootstrap_groups_pvalue([[1.0] * 8], [], _stat_f1)


def test_score_models_intervals_and_pvalue_equal_the_whole_matrix(jsonl: Jsonl) -> None:
    """End to end with a left-out session: intervals over each model's sessions, the p-value over
    the sessions both were scored on, each equal to the whole-matrix function's."""
    rnd = random.Random(3)
    gold = [
        slot(f"u{i % 9}", i, rnd.choice("tq"), f"f{j}", f"v{j}")
        for i in range(60)
        for j in range(3)
    ]
    preds = {
        name: [g for g in gold if rnd.random() < keep] + [slot("u0", 0, "t", "extra", "x")]
        for name, keep in (("a", 0.8), ("b", 0.6))
    }
    left_out = {("u1", 1): "timeout", ("u2", 2): "server_error"}
    models = [
        ModelInput("a", load_slots(jsonl("a.jsonl", preds["a"]))),
        ModelInput("b", load_slots(jsonl("b.jsonl", preds["b"])), not_scored=left_out),
    ]
    run = score_models(load_slots(jsonl("gold.jsonl", gold)), models, bootstrap=150, seed=4)
    units = {m.name: m.units for m in run.models}
    assert units["a"].shape == (60, 8) and units["b"].shape == (58, 8)
    assert units["a"][:, 0].sum() == run.models[0].result.counts.tp
    for m in run.models:
        expected = bootstrap_totals_ci(units[m.name].tolist(), STATISTICS, resamples=150, seed=4)
        assert expected is not None and m.result.ci == expected
    common = [i for i, k in enumerate(run.models[0].keys) if k not in left_out]
    p = paired_bootstrap_totals_pvalue(
        units["a"][common].tolist(), units["b"].tolist(), _stat_f1, resamples=150, seed=4
    )
    (pair,) = run.paired_f1
    assert pair.sessions == 58 and pair.p_value == p


def _peak(n: int) -> int:
    units = _units(np.random.default_rng(0), n)
    tracemalloc.start()
    try:
        session_intervals(units, resamples=100, seed=0, max_cells=500_000)
        paired_bootstrap_groups_pvalue(
            units, units[::-1], _stat_f1, resamples=100, max_cells=500_000
        )
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_bootstrap_memory_is_flat_in_sessions() -> None:
    # 100 resamples of 100,000 sessions as one matrix: 80 MB of integer draws and 80 MB of float
    # weights; in chunks of 500,000 weights about 12 MB whatever the number of sessions
    small, large = _peak(10_000), _peak(100_000)
    assert large < 20 * 2**20, large
    assert large < 1.5 * small, (small, large)

"""Shared statistics: the slot spec's P/R/F1, latency examples, bootstrap determinism."""

from __future__ import annotations

import math
import statistics

from hypothesis import given, settings
from hypothesis import strategies as st

from fieldcheck.metrics import (
    bootstrap_ci,
    f1,
    f1_from_pr,
    latency_stats,
    p95_nearest_rank,
    paired_bootstrap_pvalue,
    precision,
    recall,
)


def test_spec_precision_recall_f1_examples() -> None:
    assert precision(7, 3) == 0.70  # 7 / (7 + 3)
    assert recall(12, 3) == 0.80  # 12 / (12 + 3)
    # 2 * 0.7 * 0.8 / 1.5 = 0.74666...
    assert round(f1_from_pr(0.70, 0.80), 3) == 0.747


def test_empty_denominators_are_zero() -> None:
    assert precision(0, 0) == 0.0 and recall(0, 0) == 0.0 and f1(0, 0, 0) == 0.0


def test_spec_latency_example() -> None:
    stats = latency_stats([200, 250, 400, 600, 800])
    assert stats is not None
    assert stats.median == 400 and stats.mean == 450 and stats.total == 2250
    # int(5 * 0.95) - 1 = 3 -> sorted[3] = 600
    assert stats.p95 == 600


def test_p95_index_rule() -> None:
    values = list(range(1, 21))  # int(20 * 0.95) - 1 = 18 -> 19
    assert p95_nearest_rank(values) == 19
    assert p95_nearest_rank([5.0]) == 5.0  # max(int(0.95) - 1, 0) = 0
    assert latency_stats([]) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1e4, allow_nan=False), min_size=1, max_size=50))
def test_latency_agrees_with_statistics_module(values: list[float]) -> None:
    stats = latency_stats(values)
    assert stats is not None
    assert math.isclose(stats.median, statistics.median(values), rel_tol=1e-12, abs_tol=1e-9)
    assert math.isclose(stats.mean, statistics.fmean(values), rel_tol=1e-9, abs_tol=1e-9)
    assert min(values) <= stats.p95 <= max(values)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 50), st.integers(0, 50), st.integers(0, 50))
def test_f1_between_p_and_r(tp: int, fp: int, fn: int) -> None:
    p, r, score = precision(tp, fp), recall(tp, fn), f1(tp, fp, fn)
    assert 0.0 <= score <= 1.0
    assert min(p, r) - 1e-12 <= score <= max(p, r) + 1e-12


def test_bootstrap_is_seeded_and_brackets_estimate() -> None:
    units = [0.0, 1.0] * 20 + [1.0] * 10
    mean = statistics.fmean
    a = bootstrap_ci(units, mean, resamples=500, seed=7)
    b = bootstrap_ci(units, mean, resamples=500, seed=7)
    assert a == b and a is not None
    assert a.low <= a.estimate == 0.6 <= a.high
    assert bootstrap_ci([], mean) is None


def test_paired_bootstrap_detects_a_real_difference() -> None:
    better = [1.0] * 45 + [0.0] * 5
    worse = [1.0] * 10 + [0.0] * 40
    p = paired_bootstrap_pvalue(better, worse, statistics.fmean, resamples=300, seed=1)
    same = paired_bootstrap_pvalue(better, better, statistics.fmean, resamples=300, seed=1)
    assert p is not None and p < 0.01
    assert same == 1.0

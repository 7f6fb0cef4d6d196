"""Shared statistics: the slot spec's P/R/F1, latency examples, bootstrap determinism."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fieldcheck.metrics import (
    ExactSum,
    f1,
    f1_from_pr,
    latency_stats,
    p95_nearest_rank,
    precision,
    recall,
    safe_div,
    safe_div_array,
)
from fieldcheck.metrics._arrays import percentile_interval
from fieldcheck.metrics._stats import Interval
from stats_reference import bootstrap_totals_ci, paired_bootstrap_totals_pvalue

T = TypeVar("T")


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


def _naive_bootstrap_ci(
    units: Sequence[T], statistic: Callable[[Sequence[T]], float], *, resamples: int, seed: int
) -> Interval | None:
    """The oracle: ``statistic`` of ``resamples`` draws of ``units`` with replacement, one unit
    at a time, through the one percentile rule."""
    rng = random.Random(seed)
    n = len(units)
    values = np.array(
        [statistic([units[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples)]
    )
    return percentile_interval(values, statistic(units), 0.95)


def test_paired_bootstrap_detects_a_real_difference() -> None:
    better = [[1.0]] * 45 + [[0.0]] * 5
    worse = [[1.0]] * 10 + [[0.0]] * 40

    def mean(totals: np.ndarray) -> np.ndarray:
        return totals[:, 0] / 50

    p = paired_bootstrap_totals_pvalue(better, worse, mean, resamples=300, seed=1)
    same = paired_bootstrap_totals_pvalue(better, better, mean, resamples=300, seed=1)
    assert p is not None and p < 0.01
    assert same == 1.0


def _precision_totals(t: np.ndarray) -> np.ndarray:
    return safe_div_array(t[:, 0], t[:, 0] + t[:, 1])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.just(0.0), st.floats(1e-6, 100)), min_size=1, max_size=20),
    st.lists(st.one_of(st.just(0.0), st.floats(1e-6, 100)), min_size=1, max_size=20),
)
def test_metric_functions_give_the_same_values_on_arrays_and_numbers(
    ps: list[float], rs: list[float]
) -> None:
    """The bootstrap calls the metric functions on arrays of resamples, the point estimates on
    numbers: both give the same values, to the last bit."""
    n = min(len(ps), len(rs))
    p, r = np.array(ps[:n]), np.array(rs[:n])
    pairs = list(zip(ps[:n], rs[:n], strict=True))
    assert safe_div(p, r).tolist() == [safe_div(a, b) for a, b in pairs]
    assert f1_from_pr(p, r).tolist() == [f1_from_pr(a, b) for a, b in pairs]
    assert precision(p, r).tolist() == [precision(a, b) for a, b in pairs]


def test_bootstrap_totals_matches_the_per_unit_bootstrap() -> None:
    # 60 sessions of (tp, fp): the vectorised bootstrap and the generic one estimate the same
    # sampling distribution (different random streams, so compare within Monte Carlo error)
    units = [(3, 1)] * 20 + [(1, 2)] * 20 + [(2, 0)] * 20

    def precision_of(sample: list[tuple[int, int]]) -> float:
        return precision(sum(u[0] for u in sample), sum(u[1] for u in sample))

    fast = bootstrap_totals_ci(units, {"p": _precision_totals}, resamples=4000, seed=1)
    slow = _naive_bootstrap_ci(units, precision_of, resamples=4000, seed=1)
    assert fast is not None and slow is not None
    # point estimate: 120 / (120 + 60) = 2/3, from the full totals, not a resample
    assert fast["p"].estimate == slow.estimate == 2 / 3
    assert abs(fast["p"].low - slow.low) < 0.02 and abs(fast["p"].high - slow.high) < 0.02
    assert fast["p"].low < 2 / 3 < fast["p"].high


def test_bootstrap_totals_is_seeded_and_shares_resamples() -> None:
    units = [(1, 0), (0, 1), (1, 1), (2, 0)] * 5
    stats = {"p": _precision_totals, "p_again": _precision_totals}
    a = bootstrap_totals_ci(units, stats, resamples=300, seed=4)
    b = bootstrap_totals_ci(units, stats, resamples=300, seed=4)
    assert a == b and a is not None
    assert a["p"] == a["p_again"]  # one set of resamples for every statistic
    assert bootstrap_totals_ci([], stats) is None
    assert bootstrap_totals_ci(units, stats, resamples=0) is None


def test_paired_totals_pvalue() -> None:
    better = [(1, 0)] * 45 + [(0, 1)] * 5
    worse = [(1, 0)] * 10 + [(0, 1)] * 40
    p = paired_bootstrap_totals_pvalue(better, worse, _precision_totals, resamples=300, seed=1)
    same = paired_bootstrap_totals_pvalue(better, better, _precision_totals, resamples=300, seed=1)
    assert p is not None and p < 0.01
    assert same == 1.0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(-2, 2)), max_size=40),
    st.lists(st.tuples(st.integers(0, 3), st.integers(-2, 2)), max_size=40),
    st.integers(1, 20),
)
def test_row_classes_absorb_is_adding_the_other_rows(
    first: list[tuple[int, int]], second: list[tuple[int, int]], chunk: int
) -> None:
    """``RowClasses.absorb`` (a second slot scorer's classes) gives the classes of one
    ``RowClasses`` fed every row, in any chunks: the same rows, counts and units."""
    from fieldcheck.metrics._arrays import RowClasses

    def fed(rows: list[tuple[int, int]]) -> RowClasses:
        classes = RowClasses(2)
        for start in range(0, len(rows), chunk):
            classes.add(np.asarray(rows[start : start + chunk], dtype=np.int64).reshape(-1, 2))
        return classes

    merged = fed(first)
    merged.absorb(fed(second))
    whole = fed(first + second)
    (rows, counts), (rows_ref, counts_ref) = merged.classes(), whole.classes()
    assert merged.units == whole.units == len(first) + len(second)
    assert rows.tolist() == rows_ref.tolist() and counts.tolist() == counts_ref.tolist()
    assert int(counts.sum()) == merged.units


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 60),
    sizes=st.lists(st.integers(1, 30), min_size=1, max_size=4),
    seed=st.integers(0, 2**31),
)
def test_resample_counts_are_draws_with_replacement_in_any_chunks(
    n: int, sizes: list[int], seed: int
) -> None:
    """``_draw_counts``: each row counts n uniform draws of the n units (a multinomial(n, 1/n)
    row), checked against a plain loop over the same generator's draws; drawn in consecutive
    chunks it gives the rows of one call (what bootstrap_groups_ci's chunks rely on)."""
    from fieldcheck.metrics._arrays import _draw_counts

    whole = _draw_counts(np.random.default_rng(seed), n, sum(sizes))
    rng = np.random.default_rng(seed)
    assert (np.vstack([_draw_counts(rng, n, k) for k in sizes]) == whole).all()
    picks = np.random.default_rng(seed).integers(0, n, size=(sum(sizes), n))
    slow = [[sum(1 for p in row if p == u) for u in range(n)] for row in picks.tolist()]
    assert whole.tolist() == slow and (whole.sum(axis=1) == n).all()


def test_resample_counts_have_the_multinomial_moments() -> None:
    """Counts of one unit over many resamples: mean 1 and variance (n - 1) / n, as a
    multinomial(n, 1/n) (20,000 resamples of 50 units: within 3% of each)."""
    from fieldcheck.metrics._arrays import _draw_counts

    counts = _draw_counts(np.random.default_rng(7), 50, 20_000)
    assert abs(counts.mean() - 1.0) < 0.03
    assert abs(counts.var(axis=0).mean() - 49 / 50) < 0.03


def test_exact_sum_pending_values_fold_to_one_fsum_in_any_chunks() -> None:
    # 1e16 + 1.0 - 1e16 cancels: a running float sum gives 0.0, fsum gives 10000.0
    values = [1e16, *([1.0] * 10_000), -1e16, 0.1, 0.2]
    a, b = ExactSum(), ExactSum()
    a.pending += values[:3]  # appended by hand, as score_session does
    a.extend(values[3:5000])  # past 4096: folded while extending
    assert len(a.pending) < 4096 and a.partials
    b.extend(values[5000:])
    b.pending.append(0.3)
    a.absorb(b)
    assert a.value == math.fsum([*values, 0.3]) == 10000.6
    assert not a.pending  # the value settles what waited

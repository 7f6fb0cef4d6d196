"""``metrics.paired_bootstrap_test``, the one paired test of ``runs compare`` (every system's
headline metric): against a naive one-resample-at-a-time reference, independent of the order of
the units, and telling a real difference from none."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fieldcheck.metrics import (
    RowClasses,
    f1,
    paired_bootstrap_classes_pvalue,
    paired_bootstrap_test,
    safe_div_array,
)
from stats_reference import paired_bootstrap_test_naive


def _mean(totals: np.ndarray) -> np.ndarray:
    return safe_div_array(totals[:, 0], totals[:, 1])


def _f1(totals: np.ndarray) -> np.ndarray:
    return f1(totals[:, 0], totals[:, 1], totals[:, 2])


scores = st.sampled_from([0.0, 0.25, 0.5, 0.85, 1.0])
counts = st.integers(0, 4)


paired_scores = given(
    pairs=st.lists(st.tuples(scores, scores), min_size=1, max_size=30),
    seed=st.integers(0, 2**16),
)


@settings(max_examples=40, deadline=None)
@paired_scores
def test_mean_difference_and_p_value_are_the_naive_references(
    pairs: list[tuple[float, float]], seed: int
) -> None:
    a = np.array([[x, 1.0] for x, _ in pairs])
    b = np.array([[y, 1.0] for _, y in pairs])
    test = paired_bootstrap_test(a, b, _mean, resamples=60, seed=seed)
    difference, p_value = paired_bootstrap_test_naive(a, b, _mean, resamples=60, seed=seed)
    assert test is not None and test.units == len(pairs)
    assert math.isclose(test.difference, difference, abs_tol=1e-12)
    assert math.isclose(test.estimate_a, sum(x for x, _ in pairs) / len(pairs), abs_tol=1e-12)
    assert test.p_value == p_value


@settings(max_examples=40, deadline=None)
@paired_scores
def test_the_p_value_is_the_same_whichever_side_is_named_first(
    pairs: list[tuple[float, float]], seed: int
) -> None:
    """``runs compare A B`` and ``runs compare B A`` gave other p-values for the same two runs
    (the classes' order, so their draws, followed the sides' order): one p-value, the
    difference negated."""
    a = np.array([[x, 1.0] for x, _ in pairs])
    b = np.array([[y, 1.0] for _, y in pairs])
    ab = paired_bootstrap_test(a, b, _mean, resamples=80, seed=seed)
    ba = paired_bootstrap_test(b, a, _mean, resamples=80, seed=seed)
    assert ab is not None and ba is not None
    assert ab.p_value == ba.p_value
    assert math.isclose(ab.difference, -ba.difference, abs_tol=1e-12)


@settings(max_examples=25, deadline=None)
@given(
    sessions=st.lists(st.tuples(*[counts] * 6), min_size=1, max_size=25),
    seed=st.integers(0, 2**16),
)
def test_pooled_f1_p_value_is_the_naive_reference_whatever_the_order(
    sessions: list[tuple[int, ...]], seed: int
) -> None:
    a = np.array([s[:3] for s in sessions], dtype=float)
    b = np.array([s[3:] for s in sessions], dtype=float)
    test = paired_bootstrap_test(a, b, _f1, resamples=40, seed=seed)
    _, p_value = paired_bootstrap_test_naive(a, b, _f1, resamples=40, seed=seed)
    assert test is not None and test.p_value == p_value
    order = np.random.default_rng(seed).permutation(len(a))
    shuffled = paired_bootstrap_test(a[order], b[order], _f1, resamples=40, seed=seed)
    assert shuffled == test
    # the same sessions given grouped, each distinct pair once with its count
    rows, counts = np.unique(np.hstack([a, b]), axis=0, return_counts=True)
    grouped = paired_bootstrap_test(
        rows[:, :3], rows[:, 3:], _f1, counts=counts, resamples=40, seed=seed
    )
    assert grouped == test
    # a scorer's own test over its RowClasses of the same units, seed and stream (slots' p-value)
    streamed = paired_bootstrap_test(a, b, _f1, resamples=40, seed=seed, stream=3)
    _, naive = paired_bootstrap_test_naive(a, b, _f1, resamples=40, seed=seed, stream=3)
    classes = RowClasses(6)
    classes.add(np.hstack([a, b])[order])
    own = paired_bootstrap_classes_pvalue(classes, 3, _f1, resamples=40, seed=seed, stream=3)
    assert streamed is not None and streamed.p_value == naive == own


def test_a_real_difference_is_told_from_none() -> None:
    # 200 items: A right on 180, B right on 120 of them (B never right where A is wrong)
    a = np.array([[1.0 if i < 180 else 0.0, 1.0] for i in range(200)])
    b = np.array([[1.0 if i < 120 else 0.0, 1.0] for i in range(200)])
    test = paired_bootstrap_test(a, b, _mean, resamples=1000, seed=0)
    assert test is not None and math.isclose(test.difference, 0.3)  # 0.9 - 0.6
    assert test.p_value == 1 / 1001  # no resample comes near a difference of 0
    same = paired_bootstrap_test(a, a, _mean, resamples=1000, seed=0)
    assert same is not None and same.difference == 0 and same.p_value == 1.0
    assert paired_bootstrap_test(np.empty((0, 2)), np.empty((0, 2)), _mean) is None

"""The slots bootstrap is a Poisson bootstrap over classes of equal session rows: its cost and
memory follow the distinct rows, not the sessions; its results depend only on the rows (not their
order or chunks) and estimate the spread of the multinomial bootstrap it replaced."""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from slots_helpers import slot

from fieldcheck.metrics import SLOT_STATISTICS as STATISTICS
from fieldcheck.metrics import score_session
from fieldcheck.metrics._arrays import (
    RowClasses,
    bootstrap_classes_ci,
    paired_bootstrap_classes_pvalue,
    safe_div_array,
)
from fieldcheck.metrics._stats import Interval
from fieldcheck.slots import ModelInput, load_slots, score_models
from fieldcheck.slots._score import CI_GROUPS, _on_columns
from stats_reference import bootstrap_totals_ci, paired_bootstrap_totals_pvalue

_stat_f1 = STATISTICS["f1"]

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


def _classes(rows: np.ndarray, chunks: list[int] | None = None) -> RowClasses:
    classes = RowClasses(rows.shape[1])
    start = 0
    for size in chunks or [len(rows)]:
        classes.add(rows[start : start + size])
        start += size
    classes.add(rows[start:])
    return classes


def test_row_classes_count_equal_rows_whatever_the_chunks() -> None:
    rows = np.array([[1, 0, 2], [0, 0, 0], [1, 0, 2], [3, 1, 0], [1, 0, 2], [0, 0, 0]])
    for chunks in ([6], [1, 1, 1, 1, 1, 1], [4, 2]):
        classes = _classes(rows, chunks)
        got, counts = classes.classes()
        # (1, 0, 2) three times, (0, 0, 0) twice, (3, 1, 0) once
        assert sorted(zip(map(tuple, got.tolist()), counts.tolist(), strict=True)) == [
            ((0, 0, 0), 2),
            ((1, 0, 2), 3),
            ((3, 1, 0), 1),
        ]
        assert classes.units == 6 and classes.totals().tolist() == [[6, 1, 6]]


def test_class_bootstrap_depends_only_on_the_rows_not_their_order_or_chunks() -> None:
    rng = np.random.default_rng(7)
    a, b = _units(rng, 5_000).astype(np.int64), _units(rng, 5_000).astype(np.int64)
    statistics = {"precision": STATISTICS["precision"], "token_f1": STATISTICS["token_f1"]}
    first = bootstrap_classes_ci(_classes(a), statistics, resamples=200, seed=3)
    order = rng.permutation(len(a))
    shuffled = _classes(a[order], [1, 7, 3000, 13])  # compacted several times
    assert bootstrap_classes_ci(shuffled, statistics, resamples=200, seed=3) == first
    assert bootstrap_classes_ci(shuffled, statistics, resamples=200, seed=4) != first
    joined = np.hstack([a, b])
    p = paired_bootstrap_classes_pvalue(_classes(joined), 8, _stat_f1, resamples=200, seed=3)
    p_shuffled = paired_bootstrap_classes_pvalue(
        _classes(joined[order], [999, 1]), 8, _stat_f1, resamples=200, seed=3
    )
    assert p is not None and p == p_shuffled


def test_empty_resamples_are_left_out_and_edge_cases() -> None:
    # one session (tp=1, fp=1): every drawn resample has precision 1/2; the Poisson(1) weight
    # is 0 in about e^-1 = 37% of 1,000 resamples, and those are left out
    one = _classes(np.array([[1, 1, 0]]))
    found = bootstrap_classes_ci(one, {"p": _precision3}, resamples=1000, seed=0)
    assert found is not None
    p = found["p"]
    assert (p.estimate, p.low, p.high) == (0.5, 0.5, 0.5)
    assert 560 < p.resamples < 700  # 1000 * (1 - e^-1) = 632
    assert bootstrap_classes_ci(RowClasses(3), {"p": _precision3}) is None
    assert bootstrap_classes_ci(one, {"p": _precision3}, resamples=0) is None
    assert paired_bootstrap_classes_pvalue(RowClasses(6), 3, _precision3) is None


def _precision3(t: np.ndarray) -> np.ndarray:
    return safe_div_array(t[:, 0], t[:, 0] + t[:, 1])


def test_spread_matches_the_multinomial_bootstrap() -> None:
    """The Poisson bootstrap over classes estimates the same sampling spread as the seeded
    multinomial bootstrap it replaced: each interval's width within 10% on a fixed input, and
    the paired p-values alike (2,000 resamples each)."""
    rng = np.random.default_rng(11)
    a = _units(rng, 3_000)
    b = a.copy()
    flip = rng.random(len(b)) < 0.08  # model b: a few more misses than a
    b[flip, 0] -= np.minimum(b[flip, 0], 1)
    b[flip, 2] += 1
    multinomial = bootstrap_totals_ci(a.tolist(), STATISTICS, resamples=2000, seed=1)
    assert multinomial is not None
    found: dict[str, Interval] = {}
    for stream, (columns, statistics) in enumerate(CI_GROUPS):
        classes = _classes(a[:, list(columns)].astype(np.int64))
        found |= (
            bootstrap_classes_ci(classes, statistics, resamples=2000, seed=1, stream=stream) or {}
        )
    assert set(found) == set(multinomial)
    for name, expected in multinomial.items():
        got = found[name]
        assert got.estimate == expected.estimate
        width, expected_width = got.high - got.low, expected.high - expected.low
        assert abs(width - expected_width) <= 0.1 * expected_width, (name, width, expected_width)
    # paired p-values: a real difference (both at their floor, 1 / 2,001), and two models of
    # the same quality whose p-values the two bootstraps put within 10% of each other
    pair_f1 = _on_columns((0, 1, 2), "f1", items=False)
    cases = [(a, b, 1 / 2001)]
    for seed, expected in ((12, 0.2444), (13, 0.3928)):  # multinomial p-values, 2,000 resamples
        other = np.random.default_rng(seed)
        cases.append((_units(other, 3_000), _units(other, 3_000), expected))
    for x, y, expected_p in cases:
        joined = _classes(np.hstack([x[:, :3], y[:, :3]]).astype(np.int64))
        p = paired_bootstrap_classes_pvalue(joined, 3, pair_f1, resamples=2000, seed=1)
        p_multinomial = paired_bootstrap_totals_pvalue(
            x.tolist(), y.tolist(), _stat_f1, resamples=2000, seed=1
        )
        assert p_multinomial == pytest.approx(expected_p, abs=5e-5)
        assert p is not None and abs(p - p_multinomial) <= 0.1 * p_multinomial, (p, p_multinomial)


def test_score_models_intervals_and_pvalue_are_the_class_bootstrap(jsonl: Jsonl) -> None:
    """End to end with a left-out session: each model's intervals are the class bootstrap of its
    sessions' counts, the p-value that of the sessions both models were scored on."""
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
    gold_file = load_slots(jsonl("gold.jsonl", gold))
    run = score_models(gold_file, models, bootstrap=150, seed=4)
    keys = sorted(gold_file.sessions)  # each session's counts, by the metric's own function
    units = {
        m.name: np.array(
            [
                score_session(m.predictions.sessions.get(k, {}), gold_file.sessions[k], {})
                for k in keys
                if k not in m.not_scored
            ],
            dtype=np.int64,
        )
        for m in models
    }
    assert units["a"].shape == (60, 8) and units["b"].shape == (58, 8)
    assert units["a"][:, 0].sum() == run.models[0].result.counts.tp
    for m in run.models:
        expected: dict[str, Interval] = {}
        for stream, (columns, statistics) in enumerate(CI_GROUPS):
            classes = _classes(units[m.name][:, list(columns)])
            expected |= (
                bootstrap_classes_ci(classes, statistics, resamples=150, seed=4, stream=stream)
                or {}
            )
        assert m.result.ci == expected
        assert all(i is not None and i.low <= i.estimate <= i.high for i in m.result.ci.values())
    common = [i for i, k in enumerate(keys) if k not in left_out]
    joined = np.hstack([units["a"][common][:, :3], units["b"][:, :3]])
    p = paired_bootstrap_classes_pvalue(
        _classes(joined),
        3,
        _on_columns((0, 1, 2), "f1", items=False),
        resamples=150,
        seed=4,
        stream=3,
    )
    (pair,) = run.paired_f1
    assert pair.sessions == 58 and pair.p_value == p


def _peak(n: int) -> tuple[int, int]:
    units = _units(np.random.default_rng(0), n).astype(np.int64)
    tracemalloc.start()
    try:
        classes = _classes(units[:, :3], [1000] * (n // 1000))
        bootstrap_classes_ci(classes, {"p": _precision3}, resamples=1000, seed=0)
        paired = _classes(np.hstack([units[:, :3], units[::-1, :3]]), [1000] * (n // 1000))
        paired_bootstrap_classes_pvalue(paired, 3, _precision3, resamples=1000)
        return tracemalloc.get_traced_memory()[1], len(paired.classes()[1])
    finally:
        tracemalloc.stop()


def test_bootstrap_memory_is_flat_in_sessions() -> None:
    # the classes of (tp, fp, fn) rows: 5 x 3 x 3 = 45 at most, (a, b) pairs 45^2 = 2,025; the
    # sessions are folded in 1,000 at a time, so memory is the classes and 1,000 x 1,000 weights
    (small, small_classes), (large, large_classes) = _peak(10_000), _peak(200_000)
    assert small_classes <= 2025 and large_classes <= 2025
    assert large < 1.3 * small, (small, large)


def _width_ratios(sessions: int, datasets: int, resamples: int) -> tuple[float, float]:
    """Mean over ``datasets`` random sets of ``sessions`` sessions and the five statistics of
    (Poisson class bootstrap width / scipy.stats.bootstrap width, multinomial bootstrap width /
    scipy's): scipy's percentile bootstrap, paired over the sessions' count columns, is the
    independent reference of the multinomial bootstrap."""
    scipy_stats = pytest.importorskip("scipy.stats")
    poisson, multinomial = [], []
    for d in range(datasets):
        a = _units(np.random.default_rng(100 + d), sessions)
        found: dict[str, Interval] = {}
        for stream, (columns, statistics) in enumerate(CI_GROUPS):
            classes = _classes(a[:, list(columns)].astype(np.int64))
            found |= (
                bootstrap_classes_ci(
                    classes, statistics, resamples=resamples, seed=d, stream=stream
                )
                or {}
            )
        ours = bootstrap_totals_ci(a.tolist(), STATISTICS, resamples=resamples, seed=d)
        assert ours is not None
        for name, stat in STATISTICS.items():

            def of_sums(*columns: np.ndarray, axis: int = -1, stat: Any = stat) -> np.ndarray:
                totals = np.stack([c.sum(axis=axis) for c in columns], axis=-1)
                flat = totals.reshape(-1, totals.shape[-1])
                return np.asarray(stat(flat)).reshape(totals.shape[:-1])

            theirs = scipy_stats.bootstrap(
                tuple(a.T),
                of_sums,
                paired=True,
                vectorized=True,
                method="percentile",
                n_resamples=resamples,
                rng=np.random.default_rng(d),
            ).confidence_interval
            width = theirs.high - theirs.low
            poisson.append((found[name].high - found[name].low) / width)
            multinomial.append((ours[name].high - ours[name].low) / width)
    return float(np.mean(poisson)), float(np.mean(multinomial))


def test_widths_against_scipys_bootstrap_at_15_and_300_sessions() -> None:
    """What docs/slots.md says of the Poisson intervals, measured against scipy's bootstrap
    (20 random sets of sessions, 2,000 resamples each, the five statistics): at 15 sessions
    they are about 5% wider (a Poisson resample's size varies around n, which widens a ratio's
    spread by O(1/n)); at 300 within 2%. The multinomial bootstrap is scipy's within 2% at both.
    (Measured at 4,000 resamples, 40 sets: 5.4% wider at 15, per statistic 5.1-5.8%, per set
    2-8%; 1.1% at 60, 0.8% at 300, 0.4% at 3,000.)"""
    poisson, multinomial = _width_ratios(15, 20, 2000)
    assert 1.03 <= poisson <= 1.08, poisson
    assert 0.98 <= multinomial <= 1.02, multinomial
    poisson, multinomial = _width_ratios(300, 20, 2000)
    assert 0.98 <= poisson <= 1.02, poisson
    assert 0.98 <= multinomial <= 1.02, multinomial


def test_a_resample_with_no_predicted_slot_is_left_out_of_precision(jsonl: Jsonl) -> None:
    """15 sessions with a gold slot each; the model predicts in session 0 only, rightly:
    precision 1/1. A resample that draws no session 0 (Poisson: e^-1 = 37% of them) has no
    predicted slot, so no precision: it is left out, not scored the spec's 0 (which made the
    interval [0.0, 1.0]). Recall's items (gold slots) are in every resample: none left out."""
    gold = [slot("u", i, "t", "f", f"v{i}") for i in range(15)]
    run = score_models(
        load_slots(jsonl("gold.jsonl", gold)),
        [ModelInput("few", load_slots(jsonl("few.jsonl", gold[:1])))],
        bootstrap=1000,
        seed=0,
    )
    (model,) = run.models
    assert model.result.precision == 1.0 and model.result.recall == pytest.approx(1 / 15)
    precision = model.result.ci["precision"]
    assert precision is not None
    assert (precision.low, precision.high, precision.drawn) == (1.0, 1.0, 1000)
    assert 580 <= precision.resamples <= 680  # 1000 (1 - e^-1) = 632 expected
    recall = model.result.ci["recall"]
    assert recall is not None and recall.resamples == recall.drawn == 1000
    assert recall.low == 0.0 < recall.high

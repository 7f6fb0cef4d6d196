"""Bootstrap intervals on the JSON batch means (issue 9; Poisson(1) and streamed since issue 10):
the pure interval function against a slow loop over the same per-record weights, the same
intervals whatever the chunks, exact running sums, hand-checkable small batches, seeds and
signatures."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fieldcheck.jsoneval import (
    BatchRecord,
    EvalConfig,
    evaluate,
    evaluate_batch,
)
from fieldcheck.metrics._arrays import _POISSON, BOOTSTRAP_BLOCK, MeansBootstrap, value_classes
from fieldcheck.metrics._stats import ExactSum, Interval

from .conftest import write_outputs

Walk = tuple[dict[str, Any], dict[str, Any], dict[str, str]]


def bootstrap_means_ci(
    values: dict[str, np.ndarray], *, resamples: int = 1000, seed: int = 0
) -> dict[str, Interval]:
    """``MeansBootstrap`` over per-unit arrays given at once (unit i is the same example in
    every array; NaN: left out of that mean); ValueError when the arrays differ in length."""
    arrays = {name: np.asarray(v, dtype=float).reshape(-1) for name, v in values.items()}
    lengths = {len(a) for a in arrays.values()}
    if len(lengths) > 1:
        raise ValueError(f"per-unit arrays differ in length: {sorted(lengths)}")
    if not lengths or lengths.pop() == 0 or resamples < 1:
        return {}
    names = [name for name, a in arrays.items() if not np.isnan(a).all()]
    if not names:
        return {}
    accumulator = MeansBootstrap(names, resamples=resamples, seed=seed)
    accumulator.add(np.column_stack([arrays[name] for name in names]))
    return accumulator.intervals()


def poisson_weights(seed: int, block: int, resamples: int) -> np.ndarray:
    """The oracle: the (resamples, BOOTSTRAP_BLOCK) Poisson(1) weights of block ``block``, one
    per record, from a generator seeded by (seed, block)."""
    rng = np.random.default_rng([seed, block])
    draws = rng.integers(0, 1 << 16, size=(resamples, BOOTSTRAP_BLOCK), dtype=np.uint16)
    return _POISSON.astype(float)[draws]


GT = {"a": 1, "b": 2}
# r1 all right; r2 b wrong; r3 b missing.
# completeness 1, 1, 0.5; hallucination 0, 0, 0; accuracy 1, 0.5, 1 (r3 scores a only);
# RQS 0.45 + 0.25 + 0.15 = 0.85; 0.225 + 0.25 + 0.15 = 0.625; 0.45 + 0.125 + 0.15 = 0.725
THREE = [
    BatchRecord(id="r1", ground_truth=GT, output={"a": 1, "b": 2}),
    BatchRecord(id="r2", ground_truth=GT, output={"a": 1, "b": 3}),
    BatchRecord(id="r3", ground_truth=GT, output={"a": 1}),
]


Rows = list[tuple[float, ...]]


# the scores of THREE in SCORES order (completeness, hallucination, accuracy, safety, rqs)
THREE_ROWS = [
    (1.0, 0.0, 1.0, 1.0, 0.85),
    (1.0, 0.0, 0.5, 1.0, 0.625),
    (0.5, 0.0, 1.0, 1.0, 0.725),
]


def block_classes(rows: Rows, resamples: int, seed: int) -> list[tuple[Rows, np.ndarray]]:
    """Each block of BOOTSTRAP_BLOCK rows as its distinct rows (ordered by their bytes) and their
    (resamples, classes) weights, written out slowly: a generator seeded by (seed, block) draws
    16-bit values for the one-row classes (mapped through the Poisson(1) table), then
    Poisson(count) for the classes of several rows."""
    out = []
    for b, start in enumerate(range(0, len(rows), BOOTSTRAP_BLOCK)):
        counts: dict[bytes, int] = {}
        first: dict[bytes, tuple[float, ...]] = {}
        for row in rows[start : start + BOOTSTRAP_BLOCK]:
            key = b"".join(struct.pack("=d", v) for v in row)
            counts[key] = counts.get(key, 0) + 1
            first.setdefault(key, row)
        keys = sorted(counts)
        rng = np.random.default_rng([seed, b])
        singles = [i for i, k in enumerate(keys) if counts[k] == 1]
        many = [i for i, k in enumerate(keys) if counts[k] > 1]
        weights = np.zeros((resamples, len(keys)))
        draws = rng.integers(0, 65536, size=(resamples, len(singles)), dtype=np.uint16)
        for r in range(resamples):
            for j, i in enumerate(singles):
                weights[r, i] = _POISSON[draws[r, j]]
        if many:
            lam = [float(counts[keys[i]]) for i in many]
            drawn = rng.poisson(lam, size=(resamples, len(many)))
            for j, i in enumerate(many):
                weights[:, i] = drawn[:, j]
        out.append(([first[k] for k in keys], weights))
    return out


def resampled_means(rows: Rows, column: int, resamples: int, seed: int) -> list[float]:
    """Each resample's weighted mean of the counted values of ``column`` (a resample counting
    none has no mean), summed class by class in a plain loop."""
    totals = [0.0] * resamples
    counted = [0.0] * resamples
    for classes, weights in block_classes(rows, resamples, seed):
        for r in range(resamples):
            for row, w in zip(classes, weights[r], strict=True):
                if not math.isnan(row[column]):
                    totals[r] += float(w) * row[column]
                    counted[r] += float(w)
    return [t / c for t, c in zip(totals, counted, strict=True) if c]


def loop_reference(
    rows: Rows | list[float], resamples: int, seed: int, column: int = 0
) -> tuple[float, float, int] | None:
    """The interval written out slowly: sort the resampled means, take the floor/ceil percentile
    ranks."""
    table = [r if isinstance(r, tuple) else (r,) for r in rows]
    means = sorted(resampled_means(table, column, resamples, seed))
    if not means:
        return None
    k = len(means)
    return means[math.floor(0.025 * (k - 1))], means[math.ceil(0.975 * (k - 1))], k


def counted_resamples(rows: Rows, resamples: int, seed: int, column: int = 0) -> int:
    return len(resampled_means(rows, column, resamples, seed))


def test_poisson_table_is_poisson_one_to_two_to_the_minus_16() -> None:
    # P(k) = e^-1 / k!: 0.367879, 0.367879, 0.183940, 0.061313, ...; each mass is a count of the
    # 65,536 16-bit draws, so within 2^-16 of the exact probability
    masses = np.bincount(_POISSON, minlength=12) / 65536
    for k in range(12):
        assert abs(masses[k] - math.exp(-1) / math.factorial(k)) <= 2**-16
    assert masses.sum() == 1.0


def test_two_values_zero_and_one_give_the_whole_range() -> None:
    # each of the 2 units has weight 0 with chance e^-1: a resample weighing neither (e^-2, about
    # 135 of 1000) has no mean and is dropped; of the rest, one unit alone is about 27% each, far
    # more than the 2.5% rank skips, so the interval is [0, 1]
    ci = bootstrap_means_ci({"x": np.array([0.0, 1.0])}, resamples=1000, seed=0)["x"]
    counted = counted_resamples([(0.0,), (1.0,)], 1000, 0)
    assert 800 < counted < 920
    assert (ci.estimate, ci.low, ci.high, ci.level, ci.resamples) == (0.5, 0.0, 1.0, 0.95, counted)


def test_constant_values_give_a_point_interval() -> None:
    # every resampled mean is (w * 0.7 summed) / (w summed): 0.7 up to one rounding of the sum
    ci = bootstrap_means_ci({"x": np.full(5, 0.7)}, resamples=200, seed=3)["x"]
    assert ci.estimate == 0.7
    assert ci.low == pytest.approx(0.7, abs=2e-16) and ci.high == pytest.approx(0.7, abs=2e-16)


@pytest.mark.parametrize(
    ("values", "seed"),
    [
        ([0.2, 0.5, 0.9], 0),
        ([0.2, 0.5, 0.9], 7),
        ([1.0, math.nan, 0.0], 1),  # the NaN unit is left out of the mean and of every resample
        ([0.85, 0.625, 0.725, 0.1, 0.0, 1.0, 0.33], 11),
    ],
)
def test_intervals_agree_with_a_slow_loop_over_the_same_weights(
    values: list[float], seed: int
) -> None:
    ci = bootstrap_means_ci({"x": np.array(values)}, resamples=300, seed=seed)["x"]
    ref = loop_reference(values, 300, seed)
    assert ref is not None
    low, high, counted = ref
    assert math.isclose(ci.low, low, abs_tol=1e-12) and math.isclose(ci.high, high, abs_tol=1e-12)
    assert ci.resamples == counted
    kept = [v for v in values if not math.isnan(v)]
    assert ci.estimate == math.fsum(kept) / len(kept)


def test_a_nan_unit_drops_the_resamples_that_weigh_only_it() -> None:
    values = [1.0, math.nan, 0.0]
    no_counted = 1000 - counted_resamples([(v,) for v in values], 1000, 1)  # about 1000 e^-2
    ci = bootstrap_means_ci({"x": np.array(values)}, resamples=1000, seed=1)["x"]
    assert no_counted > 0 and ci.resamples == 1000 - no_counted
    assert ci.estimate == 0.5


@pytest.mark.parametrize("chunk", [1, 7, 10_000])
def test_streamed_intervals_are_identical_whatever_the_chunks(chunk: int) -> None:
    # 2,500 records span three weight blocks; chunks of 1, 7 and 10,000 give the very same floats
    rng = np.random.default_rng(5)
    rows = rng.random((2500, 3))
    rows[rng.random(2500) < 0.1, 1] = math.nan
    whole = bootstrap_means_ci(
        {"a": rows[:, 0], "b": rows[:, 1], "c": rows[:, 2]}, resamples=200, seed=3
    )
    streamed = MeansBootstrap(["a", "b", "c"], resamples=200, seed=3)
    for start in range(0, len(rows), chunk):
        streamed.add(rows[start : start + chunk])
    assert streamed.intervals() == whole
    ref = loop_reference([tuple(r) for r in rows.tolist()], 200, 3, column=1)
    assert ref is not None
    assert (whole["b"].low, whole["b"].high, whole["b"].resamples) == pytest.approx(ref, abs=1e-12)


@pytest.mark.parametrize("levels", [3, 10**9])
def test_class_weights_give_the_spread_of_the_per_record_poisson_bootstrap(levels: int) -> None:
    # a random batch of 3,000 records (few distinct rows: classes of many records drawn
    # Poisson(count); or all distinct: one Poisson(1) per record): the standard errors of the
    # resampled means are those of the per-record Poisson(1) bootstrap within 10% (4,000
    # resamples estimate each to about 1.1%)
    rng = np.random.default_rng(levels)
    rows = rng.integers(0, levels, size=(3000, 2)) / (levels - 1)
    rows[rng.random(3000) < 0.2, 1] = math.nan
    ours = MeansBootstrap(["a", "b"], resamples=4000, seed=1)
    ours.add(rows)
    ours.intervals()
    weights = np.concatenate([poisson_weights(9, b, 4000) for b in range(3)], axis=1)[:, :3000]
    for j in range(2):
        present = ~np.isnan(rows[:, j])
        ours_means = ours.totals[:, j] / ours.counts[:, j]
        per_record = (weights @ np.where(present, rows[:, j], 0.0)) / (weights @ present)
        ratio = ours_means.std() / per_record.std()
        assert 0.9 < ratio < 1.1, (j, ratio)
        assert abs(ours_means.mean() - per_record.mean()) < 0.1 * per_record.std()
    classes, counts = value_classes(rows[:BOOTSTRAP_BLOCK])
    assert counts.sum() == BOOTSTRAP_BLOCK
    assert (len(classes) < 20) if levels == 3 else (len(classes) == BOOTSTRAP_BLOCK)


def test_exact_sum_is_fsum_whatever_the_chunks() -> None:
    values = [1e100, 1.0, -1e100, 0.1, 0.2, 0.3, 1e-300, -0.6] * 50
    for size in (1, 3, 7, len(values)):
        total = ExactSum()
        for start in range(0, len(values), size):
            total.add(values[start : start + size])
        assert total.value == math.fsum(values)  # 50.0 + 50e-300, not what a plain sum gives
    assert sum(values) != math.fsum(values)


def test_no_interval_without_units_resamples_or_counted_values() -> None:
    assert bootstrap_means_ci({"x": np.array([])}) == {}
    assert bootstrap_means_ci({"x": np.array([0.5, 1.0])}, resamples=0) == {}
    assert bootstrap_means_ci({"x": np.array([math.nan]), "y": np.array([1.0])}).keys() == {"y"}
    with pytest.raises(ValueError, match="differ in length"):
        bootstrap_means_ci({"x": np.array([1.0]), "y": np.array([1.0, 0.0])})


def test_batch_means_have_intervals_equal_to_the_loop(table_matchers: dict[str, Any]) -> None:
    batch = evaluate_batch(THREE, EvalConfig(), matchers=table_matchers, bootstrap=500, seed=4)
    s = batch.summary
    assert s.means["completeness"] == 2.5 / 3 and s.means["accuracy"] == 2.5 / 3
    assert math.isclose(s.means["rqs"] or 0.0, 2.2 / 3)
    assert set(s.ci) == {"completeness", "hallucination", "accuracy", "safety_score", "rqs"}
    per_record = {
        "completeness": [1.0, 1.0, 0.5],
        "hallucination": [0.0, 0.0, 0.0],
        "accuracy": [1.0, 0.5, 1.0],
        "safety_score": [1.0, 1.0, 1.0],
        "rqs": [0.85, 0.625, 0.725],
    }
    names = list(per_record)
    arrays = {n: np.array([getattr(r.result, n) for r in batch.results]) for n in names}
    table = list(zip(*(arrays[name].tolist() for name in names), strict=True))
    for j, (name, values) in enumerate(per_record.items()):
        assert np.allclose(arrays[name], values, rtol=0, atol=1e-12)
        assert arrays[name].dtype == np.float64
        ci = s.ci[name]
        ref = loop_reference(table, 500, 4, column=j)
        assert ref is not None
        assert (ci.low, ci.high, ci.resamples) == pytest.approx(ref, abs=1e-12)
        assert ci.estimate == pytest.approx(s.means[name], abs=1e-15)
        assert ci.low <= ci.estimate <= ci.high
    assert (s.ci["hallucination"].low, s.ci["hallucination"].high) == (0.0, 0.0)
    # completeness is 0.5 only when r3 alone has weight (e^-2 (1 - e^-1) = 8.6% > 2.5%) and 1.0
    # when r3 has none (e^-1 = 37% > 2.5%): the interval is [0.5, 1.0]
    assert (s.ci["completeness"].low, s.ci["completeness"].high) == (0.5, 1.0)


def test_same_seed_same_intervals_other_seed_other_intervals(
    table_matchers: dict[str, Any],
) -> None:
    records = [
        BatchRecord(id=i, ground_truth={"a": 1, "b": 2, "c": 3}, output=out)
        for i, out in enumerate(
            [{"a": 1}, {"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3}, {"a": 2}, {"c": 3}] * 4
        )
    ]

    def ci(seed: int) -> dict[str, tuple[float, float]]:
        s = evaluate_batch(records, matchers=table_matchers, seed=seed).summary
        return {k: (v.low, v.high) for k, v in s.ci.items()}

    assert ci(0) == ci(0)
    assert ci(0)["rqs"] != ci(1)["rqs"]


def test_bootstrap_zero_gives_no_intervals_and_the_same_means(
    table_matchers: dict[str, Any],
) -> None:
    with_ci = evaluate_batch(THREE, matchers=table_matchers).summary
    without = evaluate_batch(THREE, matchers=table_matchers, bootstrap=0).summary
    assert without.ci == {} and without.means == with_ci.means
    assert without.signature.settings["bootstrap"] == 0
    with pytest.raises(ValueError, match="must be >= 0"):
        evaluate_batch(THREE, matchers=table_matchers, bootstrap=-1)


def test_signature_adds_bootstrap_and_seed_to_the_summary_only(
    walkthrough: Walk, table_matchers: dict[str, Any]
) -> None:
    aio, gt, strategies = walkthrough
    config = EvalConfig(strategies=strategies)
    single = evaluate(aio, gt, config, matchers=table_matchers)
    batch = evaluate_batch(
        [BatchRecord(id=1, ground_truth=gt, output=aio)],
        config,
        matchers=table_matchers,
        bootstrap=200,
        seed=9,
    )
    record = batch.results[0].result
    assert record.rqs == single.rqs == 0.7375  # the walkthrough does not move
    assert record.signature == single.signature  # a record's signature is as before
    assert "bootstrap" not in single.signature.settings
    summary_sig = batch.summary.signature
    assert (summary_sig.settings["bootstrap"], summary_sig.settings["seed"]) == (200, 9)
    # only fields added: the rest of the string is the record's, unchanged
    parts = summary_sig.format().split("|")
    assert [p for p in parts if not p.startswith(("bootstrap:", "seed:"))] == (
        single.signature.format().split("|")
    )
    assert "bootstrap:200" in parts and "seed:9" in parts


def test_summary_json_carries_the_intervals(tmp_path: Path, table_matchers: dict[str, Any]) -> None:
    batch = evaluate_batch(THREE, matchers=table_matchers, bootstrap=100, seed=2)
    write_outputs(tmp_path / "out", THREE, matchers=table_matchers, bootstrap=100, seed=2)
    data = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert set(data["ci"]) == {"completeness", "hallucination", "accuracy", "safety_score", "rqs"}
    assert data["ci"]["rqs"] == {
        "estimate": batch.summary.ci["rqs"].estimate,
        "low": batch.summary.ci["rqs"].low,
        "high": batch.summary.ci["rqs"].high,
        "level": 0.95,
        "resamples": counted_resamples(THREE_ROWS, 100, 2),  # 98 here
        "drawn": 100,
    }
    assert data["signature"]["settings"]["bootstrap"] == 100
    assert data["complete"] is True

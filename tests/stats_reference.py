"""Multinomial bootstrap references (sacrebleu's way, one matrix of resample counts): the oracles
that ``bootstrap_groups_ci`` and the Poisson class bootstraps of ``fieldcheck.metrics`` are
checked against. Not used by fieldcheck itself (ARCHITECTURE.md: references live in tests)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fieldcheck.metrics import Interval, TotalsStatistic
from fieldcheck.metrics._arrays import _draw_counts, percentile_interval


def resample_weights(n: int, resamples: int, seed: int) -> np.ndarray:
    """(resamples, n) multinomial counts: how often each of ``n`` units is drawn per resample."""
    return _draw_counts(np.random.default_rng(seed), n, resamples)


def bootstrap_totals_ci(
    units: Sequence[Sequence[float]],
    statistics: Mapping[str, TotalsStatistic],
    *,
    resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, Interval] | None:
    """Percentile intervals of statistics of summed per-unit count vectors, every resample drawn
    at once; a statistic with no kept resample has none. ``None`` for no units or resamples."""
    if len(units) == 0 or resamples < 1:
        return None
    matrix = np.asarray(units, dtype=float)
    totals = resample_weights(len(matrix), resamples, seed) @ matrix
    full = matrix.sum(axis=0, keepdims=True)
    found = {
        name: percentile_interval(stat(totals), float(stat(full)[0]), level)
        for name, stat in statistics.items()
    }
    return {name: ci for name, ci in found.items() if ci is not None}


def paired_bootstrap_totals_pvalue(
    units_a: Sequence[Sequence[float]],
    units_b: Sequence[Sequence[float]],
    statistic: TotalsStatistic,
    *,
    resamples: int = 1000,
    seed: int = 0,
) -> float | None:
    """Two-sided paired bootstrap p-value (Koehn 2004): the share of resampled deltas, centred
    on the observed one, at least as extreme as it, with +1 smoothing."""
    if len(units_a) != len(units_b):
        raise ValueError("paired bootstrap needs the same examples for both systems")
    if len(units_a) == 0 or resamples < 1:
        return None
    a = np.asarray(units_a, dtype=float)
    b = np.asarray(units_b, dtype=float)
    weights = resample_weights(len(a), resamples, seed)
    observed = float(
        statistic(a.sum(axis=0, keepdims=True))[0] - statistic(b.sum(axis=0, keepdims=True))[0]
    )
    deltas = statistic(weights @ a) - statistic(weights @ b)
    extreme = int(np.count_nonzero(np.abs(deltas - observed) >= abs(observed) - 1e-12))
    return (extreme + 1) / (resamples + 1)


def paired_bootstrap_test_naive(
    units_a: Sequence[Sequence[float]],
    units_b: Sequence[Sequence[float]],
    statistic: TotalsStatistic,
    *,
    resamples: int,
    seed: int,
    stream: int = 0,
) -> tuple[float, float | None]:
    """``metrics.paired_bootstrap_test``'s (difference, p-value) the long way, one resample and
    one class at a time in Python: the joined rows grouped into classes sorted by their bytes
    (as int64 when every value is a whole number, float64 otherwise), each class of one unit weighed Poisson(1) by a 16-bit draw through the inverse CDF, a class
    of c units Poisson(c), blocks of 1024 classes drawn from generators seeded (seed, stream, block);
    deltas centred on the observed one, empty resamples left out, +1 smoothing; drawn on the
    classes of (A, B) or of (B, A), whichever sorts first (their keys, then their counts)."""
    joined = [
        tuple(float(v) for v in a) + tuple(float(v) for v in b)
        for a, b in zip(units_a, units_b, strict=True)
    ]
    width = len(joined[0]) // 2
    whole = all(v == int(v) for row in joined for v in row)

    def grouped(rows: list[tuple[float, ...]]) -> tuple[list[list[Any]], bytes]:
        counted: dict[bytes, list[Any]] = {}
        for row in rows:
            key = np.asarray(row, dtype=np.int64 if whole else float).tobytes()
            counted.setdefault(key, [row, 0])[1] += 1
        order = sorted(counted)
        sizes = np.asarray([counted[k][1] for k in order], dtype=np.int64).tobytes()
        return [counted[k] for k in order], b"".join(order) + sizes

    # drawn on (A, B) or (B, A), whichever sorts first: one p-value whichever is named first
    classes, ab = grouped(joined)
    swapped, ba = grouped([row[width:] + row[:width] for row in joined])
    flip = ba < ab
    if flip:
        classes = swapped
    bounds, total = [], 0.0
    for k in range(20):
        total += math.exp(-1) / math.factorial(k)
        bounds.append(round(total * 65536))

    def poisson_of(u: int) -> int:
        return sum(1 for b in bounds if b <= u)

    weights = [[0.0] * len(classes) for _ in range(resamples)]
    for block, start in enumerate(range(0, len(classes), 1024)):
        part = classes[start : start + 1024]
        rng = np.random.default_rng([seed, stream, block])
        single = [i for i, (_, c) in enumerate(part) if c == 1]
        many = [i for i, (_, c) in enumerate(part) if c != 1]
        draws = rng.integers(0, 65536, size=(resamples, len(single)), dtype=np.uint16)
        for r in range(resamples):
            for j, i in enumerate(single):
                weights[r][start + i] = poisson_of(int(draws[r][j]))
        if many:
            lam = [float(part[i][1]) for i in many]
            drawn = rng.poisson(lam, size=(resamples, len(many)))
            for r in range(resamples):
                for j, i in enumerate(many):
                    weights[r][start + i] = float(drawn[r][j])

    def stat(row: Sequence[float]) -> float:
        return float(statistic(np.asarray([row], dtype=float))[0])

    full = [sum(c * row[j] for row, c in classes) for j in range(2 * width)]
    observed = stat(full[:width]) - stat(full[width:])
    if flip:
        full = full[width:] + full[:width]
    kept = extreme = 0
    for r in range(resamples):
        if not any(weights[r]):
            continue
        kept += 1
        totals = [
            sum(w * row[j] for w, (row, _) in zip(weights[r], classes, strict=True))
            for j in range(2 * width)
        ]
        delta = stat(totals[:width]) - stat(totals[width:])
        extreme += abs(delta - observed) >= abs(observed) - 1e-12
    return stat(full[:width]) - stat(full[width:]), (extreme + 1) / (kept + 1)

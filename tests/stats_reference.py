"""Multinomial bootstrap references (sacrebleu's way, one matrix of resample counts): the oracles
that ``bootstrap_groups_ci`` and the Poisson class bootstraps of ``fieldcheck.metrics`` are
checked against. Not used by fieldcheck itself (ARCHITECTURE.md: references live in tests)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from fieldcheck.metrics import Interval, TotalsStatistic
from fieldcheck.metrics._stats import _draw_counts, percentile_interval


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

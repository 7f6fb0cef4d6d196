"""Shared statistics on numpy arrays, pure and at full precision: P/R/F1 from counts (or arrays
of them), seeded bootstrap intervals and paired tests (``_stats`` holds what needs no numpy)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple, TypeVar

import numpy as np

from fieldcheck.metrics._stats import ExactSum, Interval, TotalsGroup, TotalsStatistic

N = TypeVar("N", float, np.ndarray)
"""A count or a ratio, or a numpy array of them (one per bootstrap resample)."""


def safe_div(numerator: N, denominator: N) -> N:
    """``numerator / denominator``, or 0.0 when the denominator is 0 (the specs' convention);
    element-wise on arrays, so a bootstrap's resamples go through the same metric functions."""
    if isinstance(numerator, np.ndarray) or isinstance(denominator, np.ndarray):
        return safe_div_array(numerator, denominator)
    return numerator / denominator if denominator else 0.0


def precision(tp: N, fp: N) -> N:
    """TP / (TP + FP), 0.0 when nothing was predicted (slot spec §1). Range [0, 1]."""
    return safe_div(tp, tp + fp)


def recall(tp: N, fn: N) -> N:
    """TP / (TP + FN), 0.0 when nothing was expected (slot spec §2). Range [0, 1]."""
    return safe_div(tp, tp + fn)


def f1_from_pr(p: N, r: N) -> N:
    """Harmonic mean 2PR/(P+R); 0.0 when both are 0 (slot spec §3). Range [0, 1]."""
    return safe_div(2 * p * r, p + r)


def f1(tp: N, fp: N, fn: N) -> N:
    """F1 from counts, through precision and recall exactly as slot spec §3 computes it."""
    return f1_from_pr(precision(tp, fp), recall(tp, fn))


def safe_div_array(numerator: np.ndarray, denominator: np.ndarray, zero: float = 0.0) -> np.ndarray:
    """Element-wise ``safe_div``: ``zero`` wherever the denominator is 0."""
    num = np.asarray(numerator, dtype=float)
    den = np.asarray(denominator, dtype=float)
    out: np.ndarray = np.full(np.broadcast(num, den).shape, zero)
    np.divide(num, den, out=out, where=den != 0)
    return out


def ratio_array(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """Element-wise ``numerator / denominator``, NaN where the denominator is 0: a resample that
    drew no item has no value, and ``percentile_interval`` leaves it out."""
    return safe_div_array(numerator, denominator, np.nan)


def _draw_counts(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    """``size`` multinomial(n, 1/n) resamples of ``n`` units as counts per unit (float), drawn as
    unit indices: 5x faster than ``Generator.multinomial`` (decisions.md)."""
    picks = rng.integers(0, n, size=(size, n))
    picks += np.arange(0, size * n, n)[:, None]
    return np.bincount(picks.ravel(), minlength=size * n).reshape(size, n).astype(float)


def percentile_interval(values: np.ndarray, estimate: float, level: float) -> Interval | None:
    """The interval of every bootstrap: the k non-NaN ``values`` sorted, at ``floor(a * (k - 1))``
    and ``ceil((1 - a) * (k - 1))``, a = (1 - level) / 2 (a NaN resample held no item of the group:
    decisions.md). ``None`` when no resample is kept."""
    values = np.asarray(values, dtype=float).reshape(-1)
    ordered = np.sort(values[~np.isnan(values)])
    kept = len(ordered)
    if not kept:
        return None
    alpha = (1 - level) / 2
    return Interval(
        estimate=estimate,
        low=float(ordered[math.floor(alpha * (kept - 1))]),
        high=float(ordered[math.ceil((1 - alpha) * (kept - 1))]),
        level=level,
        resamples=kept,
        drawn=len(values),
    )


BOOTSTRAP_BLOCK = 1024
"""Records per block of bootstrap weights: block b's weights come from a generator seeded by
(seed, b) alone, so every record's weights depend only on (seed, its index)."""
_U16 = 1 << 16


def _poisson_table() -> np.ndarray:
    """Poisson(1) inverse CDF over the 65,536 values of a 16-bit draw: value u maps to the k
    with CDF(k - 1) <= u / 2**16 < CDF(k); each probability is exact to 2**-16."""
    cdf = np.cumsum([math.exp(-1) / math.factorial(k) for k in range(20)])
    bounds = np.round(cdf * _U16).astype(np.int64)
    return np.searchsorted(bounds, np.arange(_U16), side="right").astype(np.uint8)


_POISSON = _poisson_table()
_POISSON_FLOAT = _POISSON.astype(float)


def value_classes(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``rows`` (by their bytes, so NaN rows group too), in byte order, and
    how many rows each stands for."""
    rows = np.ascontiguousarray(rows, dtype=float)
    keys = rows.view(np.dtype((np.void, rows.itemsize * rows.shape[1]))).ravel()
    _, first, counts = np.unique(keys, return_index=True, return_counts=True)
    return rows[first], counts


def class_weights(rng: np.random.Generator, resamples: int, counts: np.ndarray) -> np.ndarray:
    """(resamples, classes) Poisson bootstrap weights, a class of ``c`` records drawn Poisson(c):
    16-bit draws through the Poisson(1) table for classes of one record, then ``rng.poisson``."""
    counts = np.asarray(counts, dtype=np.int64)
    single = counts == 1
    weights = np.empty((resamples, len(counts)))
    draws = rng.integers(0, _U16, size=(resamples, int(single.sum())), dtype=np.uint16)
    weights[:, single] = _POISSON_FLOAT[draws]
    many = ~single
    if many.any():
        weights[:, many] = rng.poisson(
            counts[many].astype(float), size=(resamples, int(many.sum()))
        )
    return weights


class MeansBootstrap:
    """Streaming Poisson(1) percentile bootstrap of the means of per-unit values (NaN: left out
    of that mean), folded a BOOTSTRAP_BLOCK at a time: memory one block, however it was added."""

    def __init__(
        self, names: Sequence[str], *, resamples: int = 1000, level: float = 0.95, seed: int = 0
    ) -> None:
        self.names = list(names)
        self.resamples, self.level, self.seed = resamples, level, seed
        k = len(self.names)
        self.totals = np.zeros((max(resamples, 0), k))
        self.counts = np.zeros((max(resamples, 0), k))
        self.sums = [ExactSum() for _ in self.names]
        self.counted = [0] * k
        self.units = 0
        self._buffer = np.empty((BOOTSTRAP_BLOCK, k))
        self._filled = 0

    def add(self, rows: np.ndarray) -> None:
        rows = np.asarray(rows, dtype=float).reshape(-1, len(self.names))
        for j in range(len(self.names)):
            column = rows[:, j]
            kept = column[~np.isnan(column)]
            self.sums[j].add(kept.tolist())
            self.counted[j] += len(kept)
        start = 0
        while start < len(rows):
            take = min(BOOTSTRAP_BLOCK - self._filled, len(rows) - start)
            self._buffer[self._filled : self._filled + take] = rows[start : start + take]
            self._filled += take
            start += take
            if self._filled == BOOTSTRAP_BLOCK:
                self._fold()

    def _fold(self) -> None:
        if self._filled == 0:
            return
        if self.resamples > 0:
            block = self.units // BOOTSTRAP_BLOCK
            values, counts = value_classes(self._buffer[: self._filled])
            weights = class_weights(
                np.random.default_rng([self.seed, block]), self.resamples, counts
            )
            present = ~np.isnan(values)
            columns = np.ascontiguousarray(np.where(present, values, 0.0).T)
            # one matrix-vector product per column: a matrix product was 3-10x slower on a
            # busy 2-core machine (BLAS threads), and each row's dot product stays in one thread
            everyone = weights.sum(axis=1) if present.all() else None
            for j in range(len(self.names)):
                self.totals[:, j] += weights.dot(columns[j])
                if everyone is not None:
                    self.counts[:, j] += everyone
                else:
                    self.counts[:, j] += weights.dot(present[:, j].astype(float))
        self.units += self._filled
        self._filled = 0

    def intervals(self) -> dict[str, Interval]:
        """The ``level`` percentile interval of each mean with a counted unit; a resample that
        counts no unit of a name is left out of its percentiles."""
        self._fold()
        out: dict[str, Interval] = {}
        if self.resamples < 1:
            return out
        for j, name in enumerate(self.names):
            if not self.counted[j]:
                continue
            estimate = self.sums[j].value / self.counted[j]
            means = ratio_array(self.totals[:, j], self.counts[:, j])
            found = percentile_interval(means, estimate, self.level)
            if found is not None:
                out[name] = found
        return out


def bootstrap_groups_ci(
    n: int,
    groups: Sequence[TotalsGroup],
    *,
    resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    max_cells: int = 2_000_000,
) -> dict[str, Interval] | None:
    """Percentile intervals of statistics of summed per-unit counts (sacrebleu's way) for groups of
    the same ``n`` units, all resampled by the same seeded multinomial draws, ``max_cells`` weights
    at a time. ``None`` for ``n < 1`` or ``resamples < 1``."""
    if n < 1 or resamples < 1:
        return None
    # a group of every unit in order is multiplied without copying the weights' columns
    prepared: list[tuple[np.ndarray | None, np.ndarray, Mapping[str, TotalsStatistic]]] = []
    names: set[str] = set()
    for group in groups:
        idx = np.asarray(group.units, dtype=np.intp).reshape(-1)
        rows = np.asarray(group.rows, dtype=float).reshape(len(idx), -1)
        if len(idx) and (idx.min() < 0 or idx.max() >= n):
            raise ValueError(f"a unit index is outside 0..{n - 1}")
        if names & set(group.statistics):
            raise ValueError(f"statistic names repeat: {sorted(names & set(group.statistics))}")
        names |= set(group.statistics)
        whole = len(idx) == n and bool((idx == np.arange(n)).all())
        prepared.append((None if whole else idx, rows, group.statistics))
    values = {name: np.empty(resamples) for name in names}
    rng = np.random.default_rng(seed)
    step = max(1, max_cells // n)
    for start in range(0, resamples, step):
        size = min(step, resamples - start)
        weights = _draw_counts(rng, n, size)
        for columns, rows, statistics in prepared:
            totals = (weights if columns is None else weights[:, columns]) @ rows
            for name, stat in statistics.items():
                values[name][start : start + size] = stat(totals)
    out: dict[str, Interval | None] = {}
    for _, rows, statistics in prepared:
        full = rows.sum(axis=0, keepdims=True)
        for name, stat in statistics.items():
            out[name] = percentile_interval(values[name], float(stat(full)[0]), level)
    return {name: ci for name, ci in out.items() if ci is not None}


class RowClasses:
    """Distinct integer rows of per-unit statistics with how many units each stands for, in one
    order whatever the units' order and chunks: memory grows with the distinct rows."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.units = 0
        self._rows = np.empty((0, width), dtype=np.int64)
        self._counts = np.empty(0, dtype=np.int64)
        self._pending: list[np.ndarray] = []
        self._waiting = 0

    def add(self, rows: np.ndarray) -> None:
        """Count each row of ``rows`` (an (m, width) array of integers) as one unit."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1, self.width)
        if not len(rows):
            return
        self.units += len(rows)
        self._pending.append(rows)
        self._waiting += len(rows)
        if self._waiting > max(8192, 2 * len(self._counts)):
            self._compact()

    def _compact(self) -> None:
        if self._pending:
            rows, waiting = np.concatenate(self._pending), self._waiting
            self._pending, self._waiting = [], 0
            self._merge(rows, np.ones(waiting, dtype=np.int64))

    def _merge(self, rows: np.ndarray, counts: np.ndarray) -> None:
        both = np.concatenate([self._rows, rows])
        keys = np.ascontiguousarray(both).view(np.dtype((np.void, 8 * self.width))).ravel()
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        weights = np.concatenate([self._counts, counts])
        self._rows = both[first]
        self._counts = np.bincount(inverse.reshape(-1), weights=weights).astype(np.int64)

    def absorb(self, other: RowClasses) -> None:
        """Count ``other``'s units here too: as if its rows had been added to this one."""
        rows, counts = other.classes()
        if len(counts):
            self._compact()
            self._merge(rows, counts)
            self.units += other.units

    def classes(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows, counts): the distinct rows in byte order and how many units each stands for."""
        self._compact()
        return self._rows, self._counts

    def totals(self) -> np.ndarray:
        """The (1, width) column totals over every unit (exact integers)."""
        rows, counts = self.classes()
        totals: np.ndarray = (counts @ rows).reshape(1, self.width)
        return totals


def _class_totals(
    rows: np.ndarray, counts: np.ndarray, *, resamples: int, seed: int, stream: int
) -> tuple[np.ndarray, np.ndarray]:
    """(totals, units drawn) of ``resamples`` Poisson bootstrap resamples over the classes
    (``class_weights``), block b of BOOTSTRAP_BLOCK classes seeded by (seed, stream, b)."""
    width = rows.shape[1]
    totals = np.zeros((resamples, width))
    mass = np.zeros(resamples)
    columns = np.ascontiguousarray(rows.T, dtype=float)
    for block, start in enumerate(range(0, len(counts), BOOTSTRAP_BLOCK)):
        end = start + BOOTSTRAP_BLOCK
        rng = np.random.default_rng([seed, stream, block])
        weights = class_weights(rng, resamples, counts[start:end])
        mass += weights.sum(axis=1)
        for j in range(width):  # matrix-vector products: see MeansBootstrap._fold
            totals[:, j] += weights.dot(columns[j, start:end])
    return totals, mass


def bootstrap_classes_ci(
    classes: RowClasses,
    statistics: Mapping[str, TotalsStatistic],
    *,
    resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    stream: int = 0,
) -> dict[str, Interval] | None:
    """Percentile intervals of statistics of summed per-unit counts by the Poisson bootstrap over
    ``classes``, empty resamples left out; it depends only on the multiset of rows and (seed,
    stream). ``None`` for no units or ``resamples < 1``."""
    if classes.units == 0 or resamples < 1:
        return None
    rows, counts = classes.classes()
    totals, mass = _class_totals(rows, counts, resamples=resamples, seed=seed, stream=stream)
    empty = mass == 0
    full = classes.totals()
    found: dict[str, Interval | None] = {}
    for name, stat in statistics.items():
        values = np.asarray(stat(totals), dtype=float)
        values[empty] = np.nan
        found[name] = percentile_interval(values, float(stat(full)[0]), level)
    return {name: ci for name, ci in found.items() if ci is not None}


def _one_orientation(
    rows: np.ndarray, counts: np.ndarray, width: int
) -> tuple[np.ndarray, np.ndarray]:
    """The classes as (A, B) or as (B, A), whichever sorts first, each in its rows' byte order
    (int64 when whole): one p-value whichever side is named first (``runs compare B A`` drew
    other weights per class than ``A B``)."""
    whole = bool(np.all(rows == np.trunc(rows)) and np.all(np.abs(rows) < 2.0**53))
    keyed = rows.astype(np.int64) if whole else rows.astype(float)
    sides = []
    for side in (keyed, np.hstack([keyed[:, width:], keyed[:, :width]])):
        side = np.ascontiguousarray(side)
        keys = side.view(np.dtype((np.void, side.itemsize * side.shape[1]))).ravel()
        order = np.argsort(keys, kind="stable")
        sides.append((side[order], counts[order]))
    (ab, ab_counts), (ba, ba_counts) = sides
    first = ab.tobytes() + ab_counts.tobytes() <= ba.tobytes() + ba_counts.tobytes()
    return (ab, ab_counts) if first else (ba, ba_counts)


def paired_bootstrap_classes_pvalue(
    classes: RowClasses | tuple[np.ndarray, np.ndarray],
    width: int,
    statistic: TotalsStatistic,
    *,
    resamples: int = 1000,
    seed: int = 0,
    stream: int = 0,
) -> float | None:
    """Two-sided paired bootstrap p-value (Koehn 2004, +1 smoothing) that ``statistic`` differs
    between A's ``width`` columns and B's, over classes of joined rows (``bootstrap_classes_ci``'s
    draws). ``None`` for no units or ``resamples < 1``."""
    rows, counts = classes.classes() if isinstance(classes, RowClasses) else classes
    if not int(np.sum(counts)) or resamples < 1:
        return None
    rows, counts = _one_orientation(np.asarray(rows), np.asarray(counts, dtype=np.int64), width)
    totals, mass = _class_totals(rows, counts, resamples=resamples, seed=seed, stream=stream)
    totals = totals[mass > 0]
    full = (np.asarray(counts, dtype=float) @ rows).reshape(1, -1)
    observed = float(statistic(full[:, :width])[0] - statistic(full[:, width:])[0])
    deltas = statistic(totals[:, :width]) - statistic(totals[:, width:])
    extreme = int(np.count_nonzero(np.abs(deltas - observed) >= abs(observed) - 1e-12))
    return (extreme + 1) / (len(totals) + 1)


class PairedTest(NamedTuple):
    """A statistic of two systems over the same units, their difference (A - B) and its
    two-sided paired bootstrap p-value (None without resamples)."""

    units: int
    estimate_a: float
    estimate_b: float
    difference: float
    p_value: float | None


def paired_bootstrap_test(
    units_a: np.ndarray,
    units_b: np.ndarray,
    statistic: TotalsStatistic,
    *,
    counts: np.ndarray | None = None,
    resamples: int = 1000,
    seed: int = 0,
    stream: int = 0,
) -> PairedTest | None:
    """The paired test of ``statistic`` between A and B, row i of ``units_a`` and ``units_b`` the
    same unit (``counts[i]`` units), over classes in ``RowClasses``' order (whole numbers as int64,
    so a scorer's own test agrees); it depends only on the multiset of pairs. ``None`` for none."""
    joined = np.ascontiguousarray(np.hstack([units_a, units_b]), dtype=float)
    weights = np.ones(len(joined)) if counts is None else np.asarray(counts, dtype=float)
    if not len(joined) or not weights.sum():
        return None
    whole = bool(np.all(joined == np.trunc(joined)) and np.all(np.abs(joined) < 2.0**53))
    keyed = joined.astype(np.int64) if whole else joined
    keys = keyed.view(np.dtype((np.void, keyed.itemsize * keyed.shape[1]))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    rows = joined[first]
    per_class = np.bincount(inverse.reshape(-1), weights=weights).astype(np.int64)
    width = joined.shape[1] // 2
    full = (per_class.astype(float) @ rows).reshape(1, -1)
    estimate_a = float(statistic(full[:, :width])[0])
    estimate_b = float(statistic(full[:, width:])[0])
    p_value = paired_bootstrap_classes_pvalue(
        (rows, per_class), width, statistic, resamples=resamples, seed=seed, stream=stream
    )
    units = int(per_class.sum())
    return PairedTest(units, estimate_a, estimate_b, estimate_a - estimate_b, p_value)

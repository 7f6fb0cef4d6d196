"""Shared statistics without numpy, pure and at full precision: latency summaries, exact sums,
what a bootstrap interval is (``_arrays`` draws them and holds P/R/F1, with numpy: a process that
only scores numeric turns, a pool worker or ``--help``, does not import it)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from statistics import median as median  # the mean of the middle two of an even count (§11)
from typing import TYPE_CHECKING, NamedTuple, TypeAlias

from pydantic import BaseModel

if TYPE_CHECKING:
    import numpy as np


class LatencyStats(BaseModel):
    """Mean, median, p95 and total of a set of durations in seconds (slot spec §10-13)."""

    mean: float
    median: float
    p95: float
    total: float
    count: int


def p95_nearest_rank(values: Sequence[float]) -> float:
    """The spec's p95: ``sorted[max(int(n * 0.95) - 1, 0)]`` (slot spec §12). Needs n >= 1."""
    if not values:
        raise ValueError("p95 of no values")
    ordered = sorted(values)
    return ordered[max(int(len(ordered) * 0.95) - 1, 0)]


def latency_stats(seconds: Sequence[float]) -> LatencyStats | None:
    """Summary of durations; ``None`` for no durations (absent, never 0)."""
    if not seconds:
        return None
    total = math.fsum(seconds)
    return LatencyStats(
        mean=total / len(seconds),
        median=median(seconds),
        p95=p95_nearest_rank(seconds),
        total=total,
        count=len(seconds),
    )


class Interval(BaseModel):
    """A bootstrap percentile interval around a point estimate; ``resamples``: those ``drawn``
    less the ones that held no item of the statistic's group (``percentile_interval``)."""

    estimate: float
    low: float
    high: float
    level: float = 0.95
    resamples: int
    drawn: int | None = None


TotalsStatistic: TypeAlias = Callable[["np.ndarray"], "np.ndarray"]


class ExactSum:
    """A running sum of floats, in any chunks, that ends exactly where one ``math.fsum`` of all
    of them would: its state is non-overlapping partials whose exact total is the sum so far, and
    the ``pending`` values a caller appends (folded in blocks: an ``add`` per value is slow)."""

    __slots__ = ("partials", "pending")

    def __init__(self) -> None:
        self.partials: list[float] = []
        self.pending: list[float] = []

    def add(self, values: Sequence[float]) -> None:
        terms = self.partials + self.pending + list(values)
        self.pending = []
        partials: list[float] = []
        while True:
            # the exact sum of floats is a multiple of 2**-1074, so a residual that rounds to 0 is 0
            s = math.fsum(terms + [-p for p in partials])
            if s == 0.0:
                break
            partials.append(s)
        self.partials = partials

    def extend(self, values: list[float]) -> None:
        """``values`` appended to ``pending``, folded once a few thousand wait."""
        self.pending += values
        if len(self.pending) >= 4096:
            self.add(())

    def settle(self) -> None:
        """Fold ``pending`` in (its memory freed)."""
        if self.pending:
            self.add(())

    def absorb(self, other: ExactSum) -> None:
        """Add ``other``'s sum, exactly."""
        self.add([*other.partials, *other.pending])

    @property
    def value(self) -> float:
        self.settle()
        return math.fsum(self.partials)


class TotalsGroup(NamedTuple):
    """Count vectors ``rows[j]`` of units ``units[j]`` (others add nothing) and statistics, each of
    an (m, k) array of totals to m values, for :func:`bootstrap_groups_ci`."""

    units: Sequence[int]
    rows: Sequence[Sequence[float]]
    statistics: Mapping[str, TotalsStatistic]

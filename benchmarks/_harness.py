"""Measure a callable's throughput and peak Python memory (tracemalloc) against a baseline."""

from __future__ import annotations

import gc
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks._table import Row, Target, rate


@dataclass
class Measurement:
    seconds: float
    items: int
    peak_mib: float

    @property
    def per_second(self) -> float:
        return self.items / self.seconds if self.seconds else float("inf")


@dataclass
class Comparison:
    name: str
    unit: str
    ours: Measurement
    baseline: Measurement
    baseline_name: str

    @property
    def speedup(self) -> float:
        return self.ours.per_second / self.baseline.per_second


def best_seconds(fn: Callable[[], Any], *, repeat: int = 3) -> float:
    """Best wall time of ``repeat`` runs of ``fn`` (a collection before each)."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def measure(fn: Callable[[], Any], items: int, *, repeat: int = 3) -> Measurement:
    """Best wall time of ``repeat`` runs; peak traced memory of one further run."""
    best = best_seconds(fn, repeat=repeat)
    gc.collect()
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return Measurement(seconds=best, items=items, peak_mib=peak / 2**20)


def row_of(c: Comparison, target: Target | None = None) -> Row:
    """An in-process comparison as a table row (memory: peak Python heap, tracemalloc)."""
    return Row(
        f"{c.name} ({c.unit})",
        f"{rate(c.ours.per_second)} {c.unit}/s",
        f"{c.baseline_name}: {rate(c.baseline.per_second)} {c.unit}/s",
        c.speedup,
        target,
        f"{c.ours.peak_mib:.1f} heap" if c.ours.peak_mib else "",
        f"{c.baseline.peak_mib:.1f} heap" if c.baseline.peak_mib else "",
    )

"""Measure a callable's throughput and peak Python memory (tracemalloc) against a baseline."""

from __future__ import annotations

import gc
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


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


def measure(fn: Callable[[], Any], items: int, *, repeat: int = 3) -> Measurement:
    """Best wall time of ``repeat`` runs; peak traced memory of one further run."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    gc.collect()
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return Measurement(seconds=best, items=items, peak_mib=peak / 2**20)

"""Pure metric functions: no I/O, no model calls. One private module per spec area."""

from fieldcheck.metrics._stats import (
    Interval,
    LatencyStats,
    bootstrap_ci,
    f1,
    f1_from_pr,
    latency_stats,
    median,
    p95_nearest_rank,
    paired_bootstrap_pvalue,
    precision,
    recall,
    safe_div,
)

__all__ = [
    "Interval",
    "LatencyStats",
    "bootstrap_ci",
    "f1",
    "f1_from_pr",
    "latency_stats",
    "median",
    "p95_nearest_rank",
    "paired_bootstrap_pvalue",
    "precision",
    "recall",
    "safe_div",
]

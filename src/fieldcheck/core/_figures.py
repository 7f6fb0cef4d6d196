"""What the runs list shows of a stored run, read through its system (issue 28 page 1): each
model's headline metric and interval, and the figures the store keeps to sort by."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fieldcheck.core._registry import find
from fieldcheck.core._system import System
from fieldcheck.runner import CALL_ERRORS


def headline_metric(system: System) -> str:
    """The one metric a run is listed by: the system's ``headline_metric`` (json RQS, slots F1,
    numeric numerical-match accuracy), else the first of its ``headline``."""
    return str(getattr(system, "headline_metric", "") or system.headline[0])


def _number(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def headline_values(
    system: System, model: str, metrics: Mapping[str, Any] | None, intervals: Any
) -> list[dict[str, Any]]:
    """Each model's ``{model, estimate, low, high}`` of the headline metric (a slot run gives
    one per model), unrounded; None where not stored."""
    name = headline_metric(system)
    values = []
    for column, found, bounds in system.columns(model, metrics or {}, intervals or {}):
        interval = system.interval(bounds, name)
        interval = interval if isinstance(interval, Mapping) else {}
        estimate = _number(system.estimate(found, name))
        low, high = _number(interval.get("low")), _number(interval.get("high"))
        values.append({"model": column, "estimate": estimate, "low": low, "high": high})
    return values


def list_figures(
    system_name: str, model: str, metrics: Mapping[str, Any] | None, intervals: Any
) -> dict[str, Any]:
    """What a finished run's row keeps to be sorted by: the best model's headline estimate, the
    mean of its models' mean latencies, its dataset roles and the ``USAGE`` its metrics hold."""
    system = find(system_name)
    if system is None:
        return {}
    estimates = [v["estimate"] for v in headline_values(system, model, metrics, intervals)]
    found = [e for e in estimates if e is not None]
    columns = system.columns(model, metrics or {}, intervals or {})
    means = [_number((system.latency(column) or {}).get("mean")) for _, column, _ in columns]
    latencies = [m for m in means if m is not None]
    usage = getattr(system, "usage_metrics", None) or ()  # tokens and cost it scored
    given = {f: _number((metrics or {}).get(m)) for f, m in zip(USAGE, usage, strict=False)}
    return {
        "headline": max(found) if found else None,
        "latency_mean_s": math.fsum(latencies) / len(latencies) if latencies else None,
        "dataset": system.dataset_inputs,  # the first the run has; else its first input
        "call_errors": CALL_ERRORS,  # what the journal's call errors count
        **given,
    }


USAGE = ("input_tokens", "output_tokens", "cost_usd")
"""The usage figures a run of given predictions has from its metrics (``usage_metrics``)."""

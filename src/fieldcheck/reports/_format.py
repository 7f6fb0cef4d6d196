"""Formatting numbers for people (files keep full precision; only printing rounds)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def format_fixed(value: float | None, digits: int = 3) -> str:
    """``0.500`` (``digits`` decimals), ``n/a`` when absent."""
    return "n/a" if value is None else f"{value:.{digits}f}"


def format_pvalue(p: float | None) -> str:
    """``p = 0.023``, ``p < 0.001`` below a thousandth (a 1/1001 bootstrap floor is not 0.001),
    ``p = n/a`` when absent."""
    if p is None:
        return "p = n/a"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def format_seconds(seconds: float | None) -> str:
    """A duration in units that keep its digits (``23.4 ms``, ``2.35 ms``, ``1.23 s``, ``264.9 s``:
    docs/decisions.md); ``n/a`` when absent or not finite. Files keep the seconds unrounded."""
    if seconds is None or not math.isfinite(seconds):
        return "n/a"
    ms = seconds * 1000
    if abs(ms) < 1000 and round(abs(ms), 1) < 1000:
        if abs(ms) >= 10:
            return f"{ms:.1f} ms"
        if abs(ms) >= 1:
            return f"{ms:.2f} ms"
        return f"{ms:.3f} ms" if ms == 0 or abs(ms) >= 0.001 else f"{ms:.3g} ms"
    if round(abs(seconds), 2) < 10:
        return f"{seconds:.2f} s"
    return f"{seconds:.1f} s"


def format_seconds_joined(values: Sequence[float | None]) -> str:
    """Durations joined by `` / ``, a shared unit written once: ``25.5 / 26.5 / 382.1 ms``, but
    ``850.0 ms / 1.20 s``."""
    texts = [format_seconds(v) for v in values]
    units = {t.rsplit(" ", 1)[1] for t in texts if " " in t}
    if len(units) == 1 and all(" " in t for t in texts):
        (unit,) = units
        return " / ".join(t.rsplit(" ", 1)[0] for t in texts) + f" {unit}"
    return " / ".join(texts)

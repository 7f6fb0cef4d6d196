"""Formatting numbers for people (files keep full precision; only printing rounds)."""

from __future__ import annotations


def format_pvalue(p: float | None) -> str:
    """``p = 0.023``, ``p < 0.001`` below a thousandth (a 1/1001 bootstrap floor is not 0.001),
    ``p = n/a`` when absent."""
    if p is None:
        return "p = n/a"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def format_seconds(seconds: float | None) -> str:
    """A duration for people, in units that keep its digits: ``23.4 ms`` below a second,
    ``1.23 s`` or ``264.9 s`` above; ``n/a`` when absent.

    Milliseconds: one decimal from 10 ms (``57.0 ms``, ``999.9 ms``), two from 1 ms
    (``2.35 ms``), three below (``0.412 ms``); seconds: two decimals below 10 s, one from there.
    A value that would round to 1000.0 ms is shown as ``1.00 s``. Files keep the seconds
    unrounded; only this rounds."""
    if seconds is None:
        return "n/a"
    ms = seconds * 1000
    if abs(ms) < 1000 and round(abs(ms), 1) < 1000:
        if abs(ms) >= 10:
            return f"{ms:.1f} ms"
        return f"{ms:.2f} ms" if abs(ms) >= 1 else f"{ms:.3f} ms"
    if abs(seconds) < 10:
        return f"{seconds:.2f} s"
    return f"{seconds:.1f} s"

"""Formatting numbers for people (files keep full precision; only printing rounds)."""

from __future__ import annotations


def format_pvalue(p: float | None) -> str:
    """``p = 0.023``, ``p < 0.001`` below a thousandth (a 1/1001 bootstrap floor is not 0.001),
    ``p = n/a`` when absent."""
    if p is None:
        return "p = n/a"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"

"""The ``make bench`` table: one row per figure (ours, baseline, ratio, target, holds) and the exit
status (non-zero when any target does not hold). Pure formatting, no timing (tested on fake rows)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Direction = Literal[">=", "<="]


@dataclass(frozen=True)
class Target:
    """``ratio >= value`` (a speed ratio) or ``ratio <= value`` (a memory growth ratio)."""

    direction: Direction
    value: float

    def holds(self, ratio: float) -> bool:
        if math.isnan(ratio):
            return False
        return ratio >= self.value if self.direction == ">=" else ratio <= self.value

    def __str__(self) -> str:
        return f"{self.direction} {self.value:g}"


@dataclass(frozen=True)
class Row:
    """One figure. ``ours``/``baseline`` are display texts (a rate, a size); ``ratio`` is what the
    target checks; ``bound`` marks a ratio that is only a bound (a run stopped at its time or
    memory limit: '<' for speed, '>' for memory); ``note`` says why when a run did not finish."""

    name: str
    ours: str
    baseline: str
    ratio: float
    target: Target | None = None
    ours_mem: str = ""
    baseline_mem: str = ""
    bound: str = ""
    note: str = ""

    @property
    def holds(self) -> bool | None:
        """None for an informational row (no target)."""
        return None if self.target is None else self.target.holds(self.ratio)


HEAD = (
    "benchmark",
    "ours",
    "baseline",
    "ratio",
    "target",
    "holds",
    "ours peak MiB",
    "baseline peak MiB",
)


def rate(value: float) -> str:
    """Thousands separators for large figures, three significant digits for small ones."""
    if math.isinf(value) or math.isnan(value):
        return str(value)
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def ratio_text(row: Row) -> str:
    if math.isnan(row.ratio):
        return "n/a"
    return f"{row.bound}{row.ratio:.3g}x"


def holds_text(row: Row) -> str:
    holds = row.holds
    return "-" if holds is None else ("yes" if holds else "NO")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def format_table(rows: Sequence[Row]) -> str:
    """A Markdown table of ``rows`` (the same text on the terminal and in docs/benchmarks.md);
    notes of rows that did not finish follow it."""
    lines = ["| " + " | ".join(HEAD) + " |", "|---|---:|---:|---:|---|---|---:|---:|"]
    for r in rows:
        cells = (
            r.name,
            r.ours,
            r.baseline,
            ratio_text(r),
            str(r.target) if r.target else "-",
            holds_text(r),
            r.ours_mem or "-",
            r.baseline_mem or "-",
        )
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    notes = [f"- {r.name}: {r.note}" for r in rows if r.note]
    return "\n".join(lines + (["", *notes] if notes else []))


def failing(rows: Sequence[Row]) -> list[Row]:
    """Rows whose target does not hold."""
    return [r for r in rows if r.holds is False]


def exit_status(rows: Sequence[Row]) -> int:
    """0 when every target holds (informational rows never fail), 1 otherwise."""
    return 1 if failing(rows) else 0

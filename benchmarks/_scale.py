"""Rows of the subprocess benchmarks: a speed ratio (same input, ours vs a baseline, both timed in
their own process with imports excluded) and a memory-growth ratio (peak RSS at 10x the input)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from benchmarks._proc import ProcRun
from benchmarks._table import Row, Target, rate


def mib(run: ProcRun) -> str:
    return f"{'>=' if run.stopped else ''}{run.peak_rss_mib:,.0f} RSS"


def _note(ours: ProcRun, base: ProcRun) -> str:
    parts = [f"ours {ours.problem()}" if ours.problem() else ""]
    parts.append(f"baseline {base.problem()}" if base.problem() else "")
    return "; ".join(p for p in parts if p)


def speed_row(
    name: str,
    items: int,
    unit: str,
    ours: ProcRun,
    base: ProcRun,
    base_name: str,
    target: Target | None,
    *,
    base_items: int | None = None,
) -> Row:
    """``ours`` and ``base`` processed ``items`` (``base_items`` for a baseline timed on a sample
    and scaled by its rate); ratio = ours items/s over baseline items/s."""
    ours_rate = items / ours.seconds if ours.seconds else math.inf
    base_rate = (base_items or items) / base.seconds if base.seconds else math.inf
    bound = ""
    if base.problem() or (ours.status and not ours.stopped):
        ratio = math.nan
    else:
        ratio = ours_rate / base_rate
        bound = "<" if ours.stopped else ""  # stopped early: it would have taken longer
    ours_text = f"{'<' if ours.stopped else ''}{rate(ours_rate)} {unit}/s"
    return Row(
        name,
        ours_text,
        f"{base_name}: {rate(base_rate)} {unit}/s",
        ratio,
        target,
        mib(ours),
        mib(base),
        bound,
        _note(ours, base),
    )


def memory_row(
    name: str, small_label: str, large_label: str, small: ProcRun, large: ProcRun, target: Target
) -> Row:
    """Peak RSS of the large run over the small one (a stopped large run: a lower bound)."""
    ratio = large.peak_rss_mib / small.peak_rss_mib if small.peak_rss_mib else math.nan
    if small.problem() or (large.status and not large.stopped):
        ratio = math.nan
    note = "; ".join(
        p
        for p in (
            f"{small_label} {small.problem()}" if small.problem() else "",
            f"{large_label} {large.problem()}" if large.problem() else "",
        )
        if p
    )
    return Row(
        name,
        f"{large_label}: {mib(large)} MiB",
        f"{small_label}: {mib(small)} MiB",
        ratio,
        target,
        mib(large),
        mib(small),
        ">" if large.stopped else "",
        note,
    )


def cpu_bound_row(
    name: str,
    items: int,
    unit: str,
    base: ProcRun,
    base_name: str,
    parts: Mapping[str, ProcRun],
    cores: int,
) -> Row:
    """The most any program doing the work of each of ``parts`` (each measured alone, in its own
    process) could reach on ``cores`` cores: their CPU seconds shared perfectly by the cores.
    Ratio = that rate over ``base``'s (``base`` is only the yardstick: list it among ``parts`` to
    count its work); a target above it cannot hold on this machine."""
    problems = [f"{k} {r.problem()}" for k, r in {base_name: base, **parts}.items() if r.problem()]
    cpu = sum(r.cpu_seconds for r in parts.values())
    best = cpu / cores
    ratio = base.seconds / best if best > 0 and not problems else math.nan
    spent = ", ".join(f"{k} {r.cpu_seconds:.2f} s" for k, r in parts.items())
    return Row(
        name,
        f"at most {rate(items / best) if best > 0 else '-'} {unit}/s",
        f"{base_name}: {rate(items / base.seconds)} {unit}/s",
        ratio,
        None,
        "-",
        mib(base),
        "",
        "; ".join([f"CPU (user + system): {spent}; shared by {cores} cores", *problems]),
    )

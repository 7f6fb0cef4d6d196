"""Runs of one system side by side: each metric with its 95% interval per run (per run and model
for slots), the system's table (JSON per-field match rates, slot per-topic F1, numeric accuracy
and operations by turn), and for slots the paired F1 p-values each run stored. Numbers only read
from the store: nothing is re-scored here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fieldcheck import core
from fieldcheck._util.errors import InputError
from fieldcheck.reports import format_seconds_joined
from fieldcheck.store import RunInfo

if TYPE_CHECKING:
    from fieldcheck.store import Store


def _cell(estimate: Any, interval: Any) -> dict[str, Any] | None:
    if estimate is None and not interval:
        return None
    cell: dict[str, Any] = {"estimate": estimate, "low": None, "high": None}
    if isinstance(interval, dict):
        cell["low"], cell["high"] = interval.get("low"), interval.get("high")
    return cell


def _table(
    title: str, row_label: str, columns: Sequence[dict[str, Any]], values: list[dict[str, Any]]
) -> dict[str, Any]:
    names = sorted(dict.fromkeys(n for by_row in values for n in by_row), key=_natural)
    rows = [{"name": n, "values": [v.get(n) for v in values]} for n in names]
    return {"title": title, "row_label": row_label, "columns": len(columns), "rows": rows}


LATENCY_KEYS = ("mean", "median", "p95", "total")


def _latency(found: Any) -> dict[str, float] | None:
    """A column's latency summary in seconds (slots: per session; numeric: per turn), unrounded;
    ``None`` when the run has none (a JSON batch; no latency file)."""
    if not isinstance(found, Mapping):
        return None
    return {k: found[k] for k in LATENCY_KEYS if isinstance(found.get(k), int | float)}


def _natural(name: str) -> tuple[int, Any]:
    return (0, int(name)) if name.isdigit() else (1, name)


def _joined(
    store: Store, runs: Sequence[RunInfo], columns: Sequence[dict[str, Any]], several: list[bool]
) -> dict[str, Any] | None:
    """Each column's items against the same model's in the first run, joined on their key
    (DuckDB over the runs' Parquet files): how many went from each verdict to each other;
    None when any run has no items file."""
    first = runs[0].id
    counts: list[dict[str, int]] = []
    for column, by_model in zip(columns, several, strict=True):
        model = column["model"] if by_model else None
        if column["run"] == first:
            counts.append({})
            continue
        joined = store.join_items(first, column["run"], model=model)
        if joined is None:
            return None
        counts.append(joined)
    return _table(f"Items against {first[:8]} (verdict there -> here)", "items", columns, counts)


def compare_runs(runs: Sequence[RunInfo], store: Store | None = None) -> dict[str, Any]:
    """The comparison of ``runs`` (all of one system; InputError naming them otherwise); with
    the ``store``, their items joined on key against the first run's (``_joined``)."""
    if not runs:
        raise InputError("give at least one run to compare")
    systems = sorted({r.system for r in runs})
    if len(systems) > 1:
        listed = ", ".join(f"{r.id} ({r.system})" for r in runs)
        raise InputError(f"runs of different systems cannot be compared: {listed}")
    system = systems[0]
    kind = core.find(system)
    if kind is None:
        raise InputError(f"runs of system {system!r} cannot be compared: it is not registered")
    columns: list[dict[str, Any]] = []
    cells: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []
    several: list[bool] = []  # whether a column is one of its run's models (joined by model)
    for run in runs:
        own = kind.columns(run.model, run.metrics or {}, run.intervals or {})
        for model, metrics, intervals in own:
            columns.append({"run": run.id, "model": model, "label": f"{run.id[:8]} {model}"})
            cells.append((metrics, intervals))
            several.append(len(own) > 1)
    rows = [
        {
            "name": name,
            "values": [_cell(kind.estimate(m, name), kind.interval(i, name)) for m, i in cells],
        }
        for name in kind.headline
    ]
    tables = [
        _table(title, row_label, columns, [dict(read(m)) for m, _ in cells])
        for title, row_label, read in kind.breakdowns
    ]
    if store is not None and len(runs) > 1 and (joined := _joined(store, runs, columns, several)):
        tables.append(joined)
    paired = [{"run": run.id, **pair} for run in runs for pair in kind.paired(run.metrics or {})]
    return {
        "system": system,
        "item": kind.item,
        "runs": [
            {
                "id": r.id,
                "model": r.model,
                "status": r.status,
                "parent_id": r.parent_id,
                "signature": r.signature,
            }
            for r in runs
        ],
        "columns": columns,
        "metrics": rows,
        "latency": [_latency(kind.latency(m)) for m, _ in cells],
        "tables": tables,
        "paired_f1": paired,
    }


def format_cell(cell: dict[str, Any] | None) -> str:
    """``0.9853 [0.9630, 1.0000]``; ``-`` when absent (rounded only here, for display)."""
    if cell is None or cell.get("estimate") is None:
        return "-"
    text = f"{cell['estimate']:.4f}"
    if cell.get("low") is not None and cell.get("high") is not None:
        text += f" [{cell['low']:.4f}, {cell['high']:.4f}]"
    return text


def format_latency(latency: dict[str, float] | None) -> str:
    """``23.4 / 22.0 / 41.2 ms / 1.23 s`` (mean / median / p95 / total, in units that keep the
    digits: ``format_seconds_joined``); ``-`` when absent."""
    if not latency:
        return "-"
    return format_seconds_joined([latency[k] for k in LATENCY_KEYS if k in latency])


def format_number(value: Any) -> str:
    """A rate to 4 decimals; a count (an int) as it is; ``-`` when absent."""
    if value is None:
        return "-"
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else f"{value:.4f}"


def format_count(n_done: int, n_items: int) -> str:
    """A run's items: ``40``, or ``9 of 40`` while (or when, interrupted) fewer are done."""
    return str(n_items) if n_done == n_items else f"{n_done} of {n_items}"


def format_items(
    run: Any,
    *,
    failed: int | None,
    not_scored: int | None,
    noun: bool = True,
    in_flight: bool = False,
) -> str:
    """The item counts of a run as ``runs show`` and the run page give them: a scored run's
    failed and not scored items (each system's one meaning, docs/runs.md); the calls alone of
    a model (a ``calls`` run, a ``model-run`` from before 0006) are never scored, so its call
    errors (``n_errors``) instead; items in flight (``Store.items_in_flight``) are said to be
    so. ``noun``: ``7 items (...)`` for a sentence, ``7 (...)`` after a label."""
    count = format_count(run.n_done, run.n_items) + (" items" if noun else "")
    if run.kind not in ("model-run", "calls"):
        if in_flight:
            return f"{count} (in flight: called, not yet scored)"
        return f"{count} ({failed} failed, {not_scored or 0} not scored)"
    return f"{count} ({run.n_errors} with a call error)"

"""Runs of one system side by side (docs/runs.md "Comparing runs"): each metric with its 95%
interval per run (and model), the system's tables, paired tests and the item matrix."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from fieldcheck import core
from fieldcheck._util.errors import InputError
from fieldcheck._util.jsonio import dumps, loads
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


_RUN_FIELDS = ("id", "model", "status", "parent_id", "signature")


def compare_runs(runs: Sequence[RunInfo]) -> dict[str, Any]:
    """The comparison of ``runs`` (all of one system; InputError naming them otherwise) from
    their stored metrics (``compare`` adds what their items say)."""
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
    for run in runs:
        own = kind.columns(run.model, run.metrics or {}, run.intervals or {})
        for model, metrics, intervals in own:
            columns.append({"run": run.id, "model": model, "label": f"{run.id[:8]} {model}"})
            cells.append((metrics, intervals))
    rows = []
    for name in kind.headline:
        values = [_cell(kind.estimate(m, name), kind.interval(i, name)) for m, i in cells]
        rows.append({"name": name, "values": values})
    tables = [
        _table(title, row_label, columns, [dict(read(m)) for m, _ in cells])
        for title, row_label, read in kind.breakdowns
    ]
    paired = [{"run": run.id, **pair} for run in runs for pair in kind.paired(run.metrics or {})]
    return {
        "system": system,
        "item": kind.item,
        "runs": [{k: getattr(r, k) for k in _RUN_FIELDS} for r in runs],
        "columns": columns,
        "metrics": rows,
        "latency": [_latency(kind.latency(m)) for m, _ in cells],
        "tables": tables,
        "paired_f1": paired,
    }


PAIRED_RESAMPLES = 1000
PAIRED_SEED = 0


def _paired_test_settings(runs: Sequence[RunInfo]) -> tuple[int, int]:
    """The paired test's resamples and seed: one run's models (slots) the run's own (the
    p-values it stored), runs side by side ``PAIRED_RESAMPLES`` and ``PAIRED_SEED``."""
    settings = runs[0].settings if len({r.id for r in runs}) == 1 else {}
    resamples, seed = settings.get("bootstrap"), settings.get("seed")
    resamples = resamples if type(resamples) is int and resamples > 0 else PAIRED_RESAMPLES
    return resamples, seed if type(seed) is int and seed >= 0 else PAIRED_SEED


def compare(
    store: Store,
    runs: Sequence[RunInfo],
    *,
    differ: bool | None = True,
    offset: int = 0,
    limit: int = 100,
) -> dict[str, Any]:
    """What ``/compare``, ``GET /api/compare`` and ``runs compare`` show (docs/runs.md
    "Comparing runs"): ``compare_runs``' tables, warnings, paired tests and item matrix."""
    table = compare_runs(runs)
    kind = core.find(table["system"])
    assert kind is not None  # compare_runs refused an unregistered system
    pairing = kind.pairing
    several = {
        r.id: len(kind.columns(r.model, r.metrics or {}, r.intervals or {})) > 1 for r in runs
    }
    sides = [(c["run"], c["model"] if several[c["run"]] else None) for c in table["columns"]]
    columned = {c["run"] for c in table["columns"]}  # a run's model calls alone have none
    unscored = [
        r
        for r in runs
        if r.id not in columned or (r.status != "finished" and store.items_file(r.id) is None)
    ]
    scored_pairs = len(runs) > 1 and not unscored
    truths = store.truth_digests([(r.id, None) for r in runs], pairing) if scored_pairs else None
    same = getattr(kind, "same_settings", {})
    table["warnings"] = _warnings(runs, kind.dataset_inputs, kind.model_settings, truths, same)
    table["not_scored"] = [r.id for r in unscored]
    table["note"] = None
    if unscored:  # its items (if any) are calls: nothing pairs, nothing differs
        listed = ", ".join(f"{r.id} ({r.status})" for r in unscored)
        table["note"] = f"no {kind.item} comparison: run {listed} is not scored"
        differ = None
    from fieldcheck.metrics import paired_bootstrap_test  # numpy: not for 'runs list'

    statistic = pairing.statistic or _mean
    resamples, seed = _paired_test_settings(runs)
    paired = []
    for j in range(1, 1 if unscored else len(sides)):
        found = store.paired_rows(sides[0], sides[j], pairing)
        test = found and paired_bootstrap_test(
            *found[:2],
            statistic,
            counts=found[2],
            resamples=resamples,
            seed=seed,
            stream=pairing.stream,
        )
        a, b = table["columns"][0]["label"], table["columns"][j]["label"]
        shown = ("estimate_a", "estimate_b", "difference", "p_value")
        row = {"metric": pairing.metric, "a": a, "b": b, "items": getattr(test, "units", 0)}
        paired.append(row | {f: getattr(test, f, None) for f in shown})

    table["paired"] = paired
    table["paired_test"] = {"resamples": resamples, "seed": seed}
    table["matrix"] = None
    if differ is not None:
        found_matrix = store.item_matrix(sides, pairing, differ=differ, offset=offset, limit=limit)
        items, differing, rows = found_matrix or (0, 0, [])
        end = offset + limit if offset + limit < (differing if differ else items) else None
        table["matrix"] = {"differ": differ, "items": items, "differing": differing}
        table["matrix"] |= {"offset": offset, "limit": limit, "next_offset": end}
        table["matrix"]["rows"] = [_matrix_row(row, sides) for row in rows]
    return table


def _mean(totals: Any) -> Any:
    """The mean of per-item values from their sums (value, 1)."""
    from fieldcheck.metrics import safe_div_array

    return safe_div_array(totals[:, 0], totals[:, 1])


def _matrix_row(row: Sequence[Any], sides: Sequence[tuple[str, str | None]]) -> dict[str, Any]:
    from fieldcheck.runs._item import item_url  # _item reads _compare's number format

    cells = []
    for i, (run, _) in enumerate(sides):
        key, right, value = row[1 + 3 * i : 4 + 3 * i]
        url = None if key is None else item_url(quote(run, safe=""), key)
        cells.append({"key": key, "right": right, "value": value, "url": url})
    return {"key": row[0], "cells": cells}


def _warnings(
    runs: Sequence[RunInfo],
    roles: Sequence[str],
    model_settings: Sequence[str],
    truths: Sequence[tuple[int, int]] | None = None,
    same: Mapping[str, Mapping[Any, Any]] | None = None,
) -> list[dict[str, Any]]:
    """A warning when the runs' ground truth (``truths``) or dataset inputs of ``roles`` differ,
    and one naming the signature settings they differ in (but ``model_settings``; ``same``: a
    setting's values that mean another, ``{None: "all"}``)."""
    warnings: list[dict[str, Any]] = []
    datasets = {
        r.id: sorted(
            (i["name"], i.get("sha256") or "", i.get("path") or "")
            for i in r.inputs
            if i.get("name") in roles
            or (truths is not None and not any(j.get("name") in roles for j in r.inputs))
        )
        for r in runs
    }
    if truths is not None:  # a run of no dataset input (a batch) named by its inputs
        differ = len(set(truths)) > 1
        known = list(runs)
        counted = {
            r.id: f", ground truth of {n} items" for r, (n, _) in zip(runs, truths, strict=True)
        }
    else:
        known = [r for r in runs if datasets[r.id]]
        roles_of = [{d[0] for d in datasets[r.id]} for r in known]
        # a role only some runs have (a slots score has no conversations) differs
        if shared := set.intersection(*roles_of) if roles_of else set():
            datasets = {k: [d for d in v if d[0] in shared] for k, v in datasets.items()}
        differ = len({tuple(d[:2] for d in datasets[r.id]) for r in known}) > 1
        counted = {}
    if differ:
        listed = "; ".join(
            f"{r.id}: "
            + ", ".join(
                f"{role} {Path(path).name} sha256 {sha[:12]}" for role, sha, path in datasets[r.id]
            )
            + counted.get(r.id, "")
            for r in known
        )
        message = f"the runs differ in dataset ({listed})"
        warnings.append({"kind": "dataset", "message": message, "names": []})
    settings = [_signature_settings(r.signature) for r in runs]

    def meant(name: str, value: Any) -> str:
        aliases = (same or {}).get(name) or {}
        hashable = value is None or isinstance(value, str | int | float)
        return repr(aliases.get(value, value) if hashable else value)

    names = sorted(  # the settings every run recorded (not one a run never had: docs/decisions.md)
        n
        for n in set(settings[0]).intersection(*settings[1:])
        if n.split(".")[0] not in model_settings and len({meant(n, s.get(n)) for s in settings}) > 1
    )
    if names and len(runs) > 1:
        values = {n: [s.get(n) for s in settings] for n in names}
        shown = "; ".join(
            f"{n}: [{', '.join(_setting_value(v) for v in values[n])}]" for n in names
        )
        message = f"the runs differ in signature settings: {shown}"
        warnings.append({"kind": "settings", "message": message, "names": names, "values": values})
    return warnings


SETTING_CHARS = 40  # a setting's value in a warning: longer ones cut in their middle


def _setting_value(value: Any) -> str:
    """A setting's value as a warning names it: JSON (``0.85``, ``"5 fields sha256:03fb…"``,
    ``null``), one over ``SETTING_CHARS`` cut in its middle (a digest keeps its end)."""
    text = dumps(value)
    if len(text) <= SETTING_CHARS:
        return text
    return text[: SETTING_CHARS - 13] + "…" + text[-12:]


def _signature_settings(signature: str) -> dict[str, Any]:
    """A stored signature's settings, nested ones dotted (``semantic.matcher``): the JSON of
    ``Signature``, or the ``system|key:value|...`` text of older runs."""
    try:
        found = loads(signature)
    except ValueError:
        pairs = (part.split(":", 1) for part in signature.split("|")[1:] if ":" in part)
        return {k: v for k, v in pairs if k != "version"}
    flat: dict[str, Any] = {}

    def walk(value: Any, prefix: str) -> None:
        if isinstance(value, dict) and value:
            for k, v in value.items():
                walk(v, f"{prefix}{k}.")
        else:
            flat[prefix[:-1]] = value

    walk(found.get("settings") if isinstance(found, dict) else {}, "")
    flat.pop("", None)
    return flat


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


UNSCORED = {
    "failed": "called, never scored: the run failed",
    "interrupted": "called, never scored: the run was interrupted",
}
"""What the journal's items of a run that stopped are (``format_items``)."""


def item_counts(store: Store, run: RunInfo) -> tuple[dict[str, Any], bool]:
    """A run's item counts as ``runs show`` and the run page give them: failed, not scored (None
    for a model's calls alone) and whether they are still in flight; with whether its items are
    its journal's (called, not scored). ItemsMissing when its items file is not found."""
    counts: dict[str, Any] = {"failed_items": store.count_items(run.id, failed=True)}
    counts["not_scored_items"] = store.count_not_scored(run.id) if run.scored else None
    journal = store.items_in_flight(run.id)  # called, not scored
    counts["items_in_flight"] = journal and run.status == "running"  # else they never will be
    return counts, journal


def format_items(
    run: Any,
    *,
    failed: int | None,
    not_scored: int | None,
    noun: bool = True,
    in_flight: bool = False,
) -> str:
    """A run's item counts as ``runs show`` and the run page give them (docs/runs.md): failed and
    not scored, in flight, or a model's calls alone's call errors; ``noun``: ``7 items (...)``."""
    count = format_count(run.n_done, run.n_items) + (" items" if noun else "")
    if run.kind not in ("model-run", "calls"):
        if in_flight:
            return f"{count} ({UNSCORED.get(run.status, 'in flight: called, not yet scored')})"
        if not_scored is None:  # its items file is not found: the row knows only the failed
            return f"{count} ({failed} failed)"
        return f"{count} ({failed} failed, {not_scored} not scored)"
    return f"{count} ({run.n_errors} with a call error)"

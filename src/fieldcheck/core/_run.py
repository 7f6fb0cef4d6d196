"""A model run through the one pipeline (ARCHITECTURE.md "One evaluation, one path"): ask each
model through the runner, write its predictions and ``score`` them into its model run."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fieldcheck._util.console import SafeConsole
from fieldcheck._util.errors import UsageProblem
from fieldcheck._util.executor import Executor, LocalPool, few_collections
from fieldcheck._util.paths import file_bytes, unique_filenames
from fieldcheck.core._pipeline import (
    NO_CACHE_NOTE,
    NO_STORE_NOTE,
    Events,
    Inputs,
    Into,
    Outcome,
    finish_folder,
    open_folder,
    score,
    writing,
)
from fieldcheck.core._registry import get
from fieldcheck.core._system import Runs
from fieldcheck.reports import RunFolder, interrupts_deferred, write_csv

if TYPE_CHECKING:
    from fieldcheck.runner import ModelSpec, Runner
    from fieldcheck.store import Store


@dataclass
class Ran:
    """A model run scored: each model's ``calls`` (``run_model``'s), the ``outcomes`` (one per
    model, or one for all when ``together``), the rows of comparison.csv and the folder."""

    calls: list[Any]
    outcomes: list[Outcome]
    destination: Path
    comparison: list[Mapping[str, Any]] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """Something was not scored or a model's call or reply failed (exit status 3)."""
        return any(o.scored.failed for o in self.outcomes) or any(c.failures for c in self.calls)


def run(
    system: str,
    inputs: Inputs,
    settings: Mapping[str, Any],
    specs: Sequence[ModelSpec],
    runner: Runner,
    *,
    out: Path | RunFolder | None,
    command: str,
    store: bool | Store = True,
    events: Events | None = None,
    loop: Callable[[Coroutine[Any, Any, list[Any]]], list[Any]] = asyncio.run,
    console: Any = None,
    show_progress: bool = True,
) -> Ran:
    """Ask every model of ``specs`` in turn what ``system`` asks on ``inputs`` and ``score`` the
    predictions into ``out``; ``loop`` runs the calls. Raises as ``score`` does (on Ctrl-C
    before the folder is in place every model run is left ``interrupted``: resumable)."""
    named = get(system)
    if not isinstance(named, Runs):
        raise UsageProblem(f"{named.name} runs no model")
    found: Runs = named
    takes, given = dict(found.run_inputs), [role for role, _ in inputs]
    if [r for r in given if r not in takes] or not given or given[0] != next(iter(takes)):
        raise UsageProblem(f"a {named.name} run takes {', '.join(takes)} (got {', '.join(given)})")
    events = events or Events()
    # a judge asked while reading or scoring caches, waits and runs at once as the runner does
    r = runner.settings
    judge = {"no_cache": not r.use_cache, "timeout": r.timeout, "concurrency": r.concurrency}
    extras = {"store": store, "warn": events.warn, "note": events.note, **judge}
    task = found.read_task(inputs, settings, extras)
    names = [s.name for s in specs]
    label = names[0] if len(names) == 1 else Path(inputs[0][1]).stem
    folder = open_folder(
        out,
        command=command,
        inputs=inputs,
        label=label,
        models=names,
        events=events,
        system=named.name,
    )
    shown = console or SafeConsole(stderr=True)

    calls: list[Any] = []

    async def every_model() -> list[Any]:
        """Each model in turn. Returns nothing big: asyncio.run formats the finished task with
        its result (a second for 10,000 items)."""
        runner.models = len(specs) if found.together else 1
        try:
            for spec in specs:
                calls.append(
                    await found.run_model(
                        task, runner, spec, console=shown, show_progress=show_progress
                    )
                )
                if found.together:  # one evaluation: the other models' runs are its calls
                    runner.part_of = calls[0].run_id
        finally:
            await runner.aclose()
        return []

    note = "" if runner.settings.use_cache else NO_CACHE_NOTE
    if runner.store is None:  # --no-store, or no usable store: no reply kept either
        note = NO_STORE_NOTE
    pooled = _scoring_pool(named, inputs) or contextlib.nullcontext()
    with writing(folder, note), few_collections(), pooled as pool:
        loop(every_model())
        ran = Ran(calls, [], folder.destination)
        try:
            scoring = store if runner.store is not None else False  # the runner's failed: none
            _score(
                named.name, found, task, specs, folder, ran, command, scoring, events, pool,
                judge=judge,
            )  # fmt: skip
            with interrupts_deferred():  # a Ctrl-C meanwhile: once the folder is in place
                finish_folder(folder, events)
        except KeyboardInterrupt:
            if not folder.complete:  # a run left finished, a resume would store it again
                for each in calls:
                    runner.set_status(each.run_id, "interrupted")  # resumed, no call
            raise
    for outcome in ran.outcomes:
        outcome.scored.files = {k: folder.placed(p) for k, p in outcome.scored.files.items()}
    return ran


def _score(
    name: str,
    found: Runs,
    task: Any,
    specs: Sequence[ModelSpec],
    folder: RunFolder,
    ran: Ran,
    command: str,
    store: bool | Store,
    events: Events,
    executor: Executor | None,
    *,
    judge: Mapping[str, Any],
) -> None:
    """Write the predictions and score them: all at once into ``folder`` (``together``),
    else each model into its own run (and its subfolder), its row of comparison.csv kept."""
    groups: list[tuple[list[Any], list[ModelSpec], RunFolder]] = [(ran.calls, list(specs), folder)]
    if not found.together:
        subs = unique_filenames(s.name for s in specs)
        several = len(specs) > 1 or found.folder_per_model
        renamed = [f'"{s.name}" in {subs[s.name]}/' for s in specs if subs[s.name] != s.name]
        if several and renamed:
            events.note("model folders (a name made file-safe): " + "; ".join(renamed))
        groups = [
            ([c], [s], folder.sub(subs[s.name]) if several else folder)
            for c, s in zip(ran.calls, specs, strict=True)
        ]
    for calls, models, target in groups:
        given, settings, extras = found.predictions(task, calls, models, target)
        first, *others = calls
        item_calls = {k: c for each in calls for k, c in each.item_calls.items()}
        outcome = score(
            name,
            [(role, Path(path)) for role, path in given],
            settings,
            out=target,
            command=command,
            model=", ".join(s.name for s in models),
            store=store,
            into=Into(first.run_id, item_calls, [c.run_id for c in others]),
            events=events,
            extras={**extras, **judge},
            executor=executor,
        )
        ran.outcomes.append(outcome)
        row = None if found.together else found.comparison(task, calls[0], outcome.scored)
        if row is not None:
            ran.comparison.append(row)
    if ran.comparison:
        with folder.atomic("comparison.csv") as path:
            write_csv(path, ran.comparison, list(ran.comparison[0]))


POOL_INPUT_BYTES = 8 << 20
"""Inputs this large are scored in a pool started while the models are called (a core idles)."""


def _scoring_pool(system: Any, inputs: Inputs) -> LocalPool | None:
    """A pool to score a large run's replies, warmed during the calls, for a system that says
    ``scores_replies_in_pool``; None otherwise, or when no pool can be started."""
    big = file_bytes(path for _, path in inputs) >= POOL_INPUT_BYTES
    if getattr(system, "scores_replies_in_pool", False) and big:
        with contextlib.suppress(OSError):  # no process to be had: scored in this one
            return LocalPool(min(2, os.cpu_count() or 1), warm=(type(system).__module__,))
    return None

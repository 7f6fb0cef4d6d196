"""Re-score a stored run under a new configuration from the raw values its items keep, with no
model call: the run's system (``core.Rescores``) scores them again and the result is a new run
whose parent is the old one. A system without ``rescore`` (numeric: its turns keep no plan)
cannot be re-scored."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from fieldcheck import core
from fieldcheck._util.errors import InputError
from fieldcheck.store import RunInfo, RunRecorder, Store


def rescore(
    store: Store,
    run_id: str,
    *,
    strategies: Mapping[str, str] | None = None,
    weights: Any = None,
    thresholds: Mapping[str, float] | None = None,
    tp: str | None = None,
    threshold: float | None = None,
    bootstrap: int | None = None,
    seed: int | None = None,
    matchers: Mapping[str, Any] | None = None,
) -> RunInfo:
    """Score run ``run_id`` again with the options given (the others as the run had them) and
    store the result as a new run; returns it. JSON takes ``strategies``, ``weights`` and
    ``thresholds`` ({fuzzy_threshold, semantic_threshold}); slots take ``tp`` and ``threshold``.
    Raises KeyError for an unknown run, InputError when the run cannot be re-scored (its system
    cannot, an unfinished run, items without raw values, an option of another system)."""
    parent = store.get_run(run_id)
    if parent is None:
        raise KeyError(run_id)
    if not parent.scored or parent.status != "finished":
        raise InputError(
            f"run {run_id} is {'an' if parent.status[:1] in 'aeiou' else 'a'} {parent.status} "
            f"{parent.kind} run: only finished scored runs can be re-scored"
        )
    system = core.find(parent.system)
    if not isinstance(system, core.Rescores):
        able = " and ".join(n for n in core.names() if isinstance(core.get(n), core.Rescores))
        raise InputError(f"{parent.system} runs cannot be re-scored (only {able} runs)")
    given = {
        "strategies": strategies,
        "weights": weights,
        "thresholds": thresholds,
        "tp": tp,
        "threshold": threshold,
        "bootstrap": bootstrap,
        "seed": seed,
        "matchers": matchers,
    }
    calls: dict[str, Any] = {}

    def results() -> Iterator[Mapping[str, Any]]:
        for item in store.iter_items(parent.id):
            if "call" in item.result:  # the child's items keep the parent's model calls
                calls[item.key] = item.result["call"]
            yield item.result

    options = {name: value for name, value in given.items() if value is not None}
    settings, signature, write = system.rescore(results(), parent.settings, options, run=parent.id)
    with RunRecorder.open(
        store,
        system=parent.system,
        inputs=[],
        input_digests=parent.inputs,
        settings=settings,
        signature=signature,
        out=None,
        model=parent.model,
        task="rescore",
        parent_id=parent.id,
        calls=calls,
    ) as recorder:
        metrics, intervals = write(recorder)
        return recorder.finish(metrics=metrics, intervals=intervals)

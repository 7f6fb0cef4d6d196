"""Re-score a stored run under a new configuration from the raw values its items keep, asking no
model again (a json judge may be: its system's ``core.Rescores``): a new run whose parent is the
old one."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from fieldcheck import core
from fieldcheck._util.errors import InputError
from fieldcheck._util.jsonio import loads
from fieldcheck.store import RunInfo, RunRecorder, Store

_OPTIONS = (
    "strategies",
    "weights",
    "thresholds",
    "tp",
    "threshold",
    "bootstrap",
    "seed",
    "matchers",
    "matcher_config",
)


def rescore(store: Store, run_id: str, **options: Any) -> RunInfo:
    """Score run ``run_id`` again with the ``options`` given (``_OPTIONS``; None: as the run had
    it; ``matchers`` and ``matcher_config``: the API server's, used whatever the run names) as a
    new run; KeyError for an unknown run, InputError for one that cannot be."""
    if unknown := sorted(set(options) - set(_OPTIONS)):
        raise TypeError(f"rescore() got unknown options: {', '.join(unknown)}")
    parent = store.get_run(run_id)
    if parent is None:
        raise KeyError(run_id)
    if not parent.scored or parent.status != "finished":
        raise InputError(
            f"run {run_id} is {'an' if parent.status[:1] in 'aeiou' else 'a'} {parent.status} "
            f"{'model' if parent.kind == 'run' else parent.kind} run: only finished scored runs "
            "can be re-scored"
        )
    system = core.find(parent.system)
    if not isinstance(system, core.Rescores):
        able = " and ".join(n for n in core.names() if isinstance(core.get(n), core.Rescores))
        raise InputError(f"{parent.system} runs cannot be re-scored (only {able} runs)")
    calls: dict[str, Any] = {}

    def results() -> Iterator[Mapping[str, Any]]:
        for item in store.iter_items(parent.id):
            if "call" in item.result:  # the child's items keep the parent's model calls
                calls[item.key] = item.result["call"]
            yield item.result

    given = {name: value for name, value in options.items() if value is not None}
    try:  # the JSON a system signs with; a run recorded with some other text has none
        signed = loads(parent.signature or "{}")
    except ValueError:
        signed = {}
    signed = signed if isinstance(signed, dict) else {}
    settings, signature, write = system.rescore(
        results(), parent.settings, given, run=parent.id, signature=signed
    )
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
        figures = core.list_figures(parent.system, parent.model, metrics, intervals)
        return recorder.finish(metrics=metrics, intervals=intervals, figures=figures)

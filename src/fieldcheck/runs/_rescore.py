"""Re-score a stored JSON or slot run under a new configuration from the raw values its items
keep (JSON: ground truth and output; slots: gold and predicted slots), with no model call, by the
library's own scoring (``jsoneval.evaluate_batch``, ``slots.SlotScorer``); the result is a new
run whose parent is the old one. Numeric runs are not re-scored (their turns keep no plan)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from fieldcheck import core
from fieldcheck._util.errors import InputError
from fieldcheck._util.iters import chunked
from fieldcheck.jsoneval import BatchRecord, EvalConfig, RecordError, RqsWeights, evaluate_batch
from fieldcheck.matchers import Matcher
from fieldcheck.runs._export import iter_items
from fieldcheck.runs._items import (
    json_error_item,
    json_item,
    json_metrics,
)
from fieldcheck.slots import (
    JudgeFile,
    LatencyFile,
    ModelInput,
    SlotFile,
    SlotScorer,
    TPMode,
    slot_metrics,
)
from fieldcheck.store import RunInfo, RunRecorder, Store

CHUNK = 1000


def _open(
    store: Store,
    parent: RunInfo,
    settings: dict[str, Any],
    signature: Any,
    calls: dict[str, Any],
) -> RunRecorder:
    """The child run, its items keeping the parent's items' model calls (``calls``)."""
    return RunRecorder.open(
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
    )


def rescore(
    store: Store,
    run_id: str,
    *,
    strategies: Mapping[str, str] | None = None,
    weights: RqsWeights | Mapping[str, float] | None = None,
    thresholds: Mapping[str, float] | None = None,
    tp: TPMode | None = None,
    threshold: float | None = None,
    bootstrap: int | None = None,
    seed: int | None = None,
    matchers: dict[str, Matcher] | None = None,
) -> RunInfo:
    """Score run ``run_id`` again with the options given (the others as the run had them) and
    store the result as a new run; returns it. JSON takes ``strategies``, ``weights`` and
    ``thresholds`` ({fuzzy_threshold, semantic_threshold}); slots take ``tp`` and ``threshold``.
    Raises KeyError for an unknown run, InputError when the run cannot be re-scored (numeric, an
    unfinished run, items without raw values, an option of the other system)."""
    parent = store.get_run(run_id)
    if parent is None:
        raise KeyError(run_id)
    if not parent.scored or parent.status != "finished":
        raise InputError(
            f"run {run_id} is {'an' if parent.status[:1] in 'aeiou' else 'a'} {parent.status} "
            f"{parent.kind} run: only finished scored runs can be re-scored"
        )
    if parent.system == "json":
        if tp is not None or threshold is not None:
            raise InputError("--tp and --threshold re-score slot runs, not JSON runs")
        return _rescore_json(
            store, parent, strategies, weights, thresholds, bootstrap, seed, matchers
        )
    if parent.system == "slots":
        if strategies is not None or weights is not None or thresholds is not None:
            raise InputError(
                "--strategies, --weights, --fuzzy-threshold and --semantic-threshold re-score "
                "JSON runs"
            )
        return _rescore_slots(store, parent, tp, threshold, bootstrap, seed)
    raise InputError(f"{parent.system} runs cannot be re-scored (only json and slots runs)")


def _rescore_json(
    store: Store,
    parent: RunInfo,
    strategies: Mapping[str, str] | None,
    weights: RqsWeights | Mapping[str, float] | None,
    thresholds: Mapping[str, float] | None,
    bootstrap: int | None,
    seed: int | None,
    matchers: dict[str, Matcher] | None,
) -> RunInfo:
    config_data = dict(parent.settings.get("config") or {})
    if strategies is not None:
        config_data["strategies"] = dict(strategies)
    if weights is not None:
        config_data["weights"] = (
            weights.model_dump() if isinstance(weights, RqsWeights) else dict(weights)
        )
    if thresholds is not None:
        config_data.update(thresholds)
    config = EvalConfig.model_validate(config_data)
    boot = int(parent.settings.get("bootstrap", 1000)) if bootstrap is None else bootstrap
    draw = int(parent.settings.get("seed", 0)) if seed is None else seed
    records: list[BatchRecord] = []
    failed: list[dict[str, Any]] = []
    calls: dict[str, Any] = {}
    for item in iter_items(store, parent.id):
        result = item.result
        if "call" in result:
            calls[item.key] = result["call"]
        if "error" in result:
            failed.append(result["error"])
            continue
        if "ground_truth" not in result:
            raise InputError(
                f"run {parent.id} keeps no ground truth and output for record "
                f"{result.get('id')!r}: import its folder with the batch file to re-score it"
            )
        records.append(
            BatchRecord(
                id=result["id"],
                ground_truth=result["ground_truth"],
                output=result.get("output"),
                safety_score=result.get("safety_score_given"),
            )
        )
    prior = [RecordError.model_validate(e) for e in failed]  # counted again, as the parent did
    batch = evaluate_batch(
        records, config, matchers=matchers, errors=prior, bootstrap=boot, seed=draw
    )
    by_id = {str(r.id): r for r in records}
    settings = {"config": config.model_dump(mode="json"), "bootstrap": boot, "seed": draw}
    summary = batch.summary.to_json()
    recorder = _open(store, parent, settings, summary.get("signature"), calls)
    with recorder:
        items = [json_item(r, by_id.get(str(r.id))) for r in batch.results]
        items += [json_error_item(e) for e in batch.errors]
        for chunk in chunked(items, CHUNK):
            recorder.add_items(chunk, core.get(parent.system).item_columns)
        metrics, intervals = json_metrics(summary)
        return recorder.finish(metrics=metrics, intervals=intervals)


def _slot_file(path: str) -> SlotFile:
    return SlotFile(Path(path))


def _add(file: SlotFile, key: tuple[str, int], slots: list[list[Any]]) -> None:
    session = file.sessions.setdefault(key, {})
    for topic, name, values in slots:
        slot = (str(topic), str(name))
        session[slot] = [str(v) for v in values]
        file.lines[(key, slot)] = len(file.lines) + 1


def _rescore_slots(
    store: Store,
    parent: RunInfo,
    tp: TPMode | None,
    threshold: float | None,
    bootstrap: int | None,
    seed: int | None,
) -> RunInfo:
    gold = _slot_file(f"run {parent.id} gold")
    models: dict[str, ModelInput] = {}
    calls: dict[str, Any] = {}
    for item in iter_items(store, parent.id):
        r = item.result
        if "call" in r:
            calls[item.key] = r["call"]
        if "gold" not in r or "pred" not in r:
            raise InputError(f"run {parent.id} keeps no gold and predicted slots per session")
        key = (str(r["user"]), int(r["session"]))
        name = str(r["model"])
        if key not in gold.sessions:
            gold.sessions[key] = {}
            _add(gold, key, r["gold"])
        model = models.get(name)
        if model is None:
            model = models[name] = ModelInput(
                name,
                _slot_file(f"run {parent.id} {name}"),
                LatencyFile(Path(f"run {parent.id} {name} latency")),
                JudgeFile(Path(f"run {parent.id} {name} judge")),
                {},
            )
        _add(model.predictions, key, r["pred"])
        if r.get("latency_s") is not None and model.latencies is not None:
            model.latencies.seconds[key] = float(r["latency_s"])
        if r.get("judge") and model.judge_scores is not None:
            model.judge_scores.scores[key] = {(t, f): float(s) for t, f, s in r["judge"]}
        if r.get("not_scored"):
            model.not_scored[key] = str(r["not_scored"])  # type: ignore[index]
    if not models:
        raise InputError(f"run {parent.id} has no stored session to re-score")
    inputs = [
        ModelInput(
            m.name,
            m.predictions,
            m.latencies if m.latencies and m.latencies.seconds else None,
            m.judge_scores if m.judge_scores and m.judge_scores.scores else None,
            m.not_scored,
        )
        for m in models.values()
    ]
    mode: TPMode = tp or parent.settings.get("tp", "presence")
    cut = threshold if threshold is not None or tp is not None else parent.settings.get("threshold")
    if mode in ("presence", "exact"):
        cut = None
    boot = int(parent.settings.get("bootstrap", 1000)) if bootstrap is None else bootstrap
    draw = int(parent.settings.get("seed", 0)) if seed is None else seed
    headers = [replace(m, predictions=SlotFile(m.predictions.path)) for m in inputs]
    scorer = SlotScorer(
        SlotFile(gold.path), headers, tp=mode, threshold=cut, bootstrap=boot, seed=draw
    )
    settings = {"tp": mode, "threshold": cut, "bootstrap": boot, "seed": draw}
    recorder = _open(store, parent, settings, scorer.signature(), calls)
    with recorder:
        scorer.recorder = recorder  # the sessions' items are stored as they are scored
        scorer.add(gold, [m.predictions for m in inputs])
        metrics, intervals = slot_metrics(scorer.finish())
        return recorder.finish(metrics=metrics, intervals=intervals)

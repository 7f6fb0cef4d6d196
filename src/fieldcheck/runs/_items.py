"""The plain dicts a scoring command hands ``RunRecorder.add_items`` (docs/runs.md), built from
the library's results: one per JSON record, slot session (per model) or numeric turn."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from fieldcheck.jsoneval import BatchRecord, RecordError, RecordResult
from fieldcheck.metrics import SESSION_FIELDS, canonical_set
from fieldcheck.slots import ModelInput, SlotFile, SlotsRun


def json_item(
    result: RecordResult | Mapping[str, Any], record: BatchRecord | None
) -> dict[str, Any]:
    """A scored record: its records.jsonl object plus the raw ``ground_truth``, ``output`` and
    ``safety_score`` that ``runs rescore`` scores again."""
    if isinstance(result, RecordResult):
        body: dict[str, Any] = result.result.record_dict(result.id)
    else:
        body = dict(result)
    if record is not None:
        body["ground_truth"] = record.ground_truth
        body["output"] = record.output
        if record.safety_score is not None:
            body["safety_score_given"] = record.safety_score
    return body


def json_error_item(error: RecordError | Mapping[str, Any]) -> dict[str, Any]:
    """A record that could not be scored (an errors.jsonl line)."""
    body = error.model_dump() if isinstance(error, RecordError) else dict(error)
    return {"id": body.get("record") or f"line {body.get('line')}", "error": body}


def _slots(file: SlotFile | None, key: tuple[str, int]) -> list[list[Any]]:
    if file is None:
        return []
    return [[t, f, list(v)] for (t, f), v in sorted(file.sessions.get(key, {}).items())]


def _topics(gold: list[list[Any]], pred: list[list[Any]]) -> dict[str, dict[str, int]]:
    """Per topic of a session, how many of its slots differ between gold and prediction
    (missing, extra, or other values once canonicalised): what the topic filter flags. A plain
    comparison, not the metric (the TP rule lives in the scorer)."""
    gold_slots = {(t, f): canonical_set(v) for t, f, v in gold}
    pred_slots = {(t, f): canonical_set(v) for t, f, v in pred}
    topics: dict[str, dict[str, int]] = {}
    for slot in sorted(gold_slots.keys() | pred_slots.keys()):
        entry = topics.setdefault(slot[0], {"slots": 0, "differ": 0})
        entry["slots"] += 1
        entry["differ"] += int(gold_slots.get(slot) != pred_slots.get(slot))
    return topics


def _session_counts(score: Any) -> dict[tuple[str, int], dict[str, Any]]:
    """Each scored session's counts (tp, fp, fn, gold_slots, ...) from the model's units."""
    units = getattr(score, "units", None)
    if units is None:
        return {}
    names = SESSION_FIELDS
    return {
        key: {n: int(v) for n, v in zip(names, row, strict=True)}
        for key, row in zip(score.keys, units.tolist(), strict=True)
    }


def slot_items(
    run: SlotsRun, gold: SlotFile, models: Sequence[ModelInput]
) -> Iterator[dict[str, Any]]:
    """One item per (model, gold session): its counts (tp, fp, fn, ...), per topic how many
    slots differ from gold, the gold and predicted slots (what ``runs rescore`` scores again),
    its latency and judge scores, or why it was not scored."""
    inputs = {m.name: m for m in models}
    sessions = sorted(gold.sessions)
    for name in run.names or [m.name for m in models]:
        model = inputs[name]
        score = next((m for m in run.models if m.name == name), None)
        counted = _session_counts(score) if score is not None else {}
        for key in sessions:
            gold_slots = _slots(gold, key)
            pred_slots = _slots(model.predictions, key)
            item: dict[str, Any] = {
                "model": name,
                "user": key[0],
                "session": key[1],
                "gold": gold_slots,
                "pred": pred_slots,
                "per_topic": _topics(gold_slots, pred_slots),
            }
            if model.latencies is not None and key in model.latencies.seconds:
                item["latency_s"] = model.latencies.seconds[key]
            if model.judge_scores is not None and key in model.judge_scores.scores:
                scores = model.judge_scores.scores[key]
                item["judge"] = [[t, f, s] for (t, f), s in sorted(scores.items())]
            counts = counted.get(key)
            if counts is None:
                item["not_scored"] = model.not_scored.get(key, "not scored")
            else:
                item["counts"] = counts
            yield item


def json_metrics(summary: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metrics, intervals) of a JSON batch from its summary.json object."""
    metrics = {k: v for k, v in summary.items() if k not in ("ci", "signature")}
    return metrics, dict(summary.get("ci") or {})

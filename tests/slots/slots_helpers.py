"""Builders for the slot benchmark tests (imported by name: the folder is put on sys.path)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from fieldcheck.metrics import TopicTally
from fieldcheck.metrics._slots import TALLY_FIELDS
from fieldcheck.slots._score import (
    Counts,
    LatencySummary,
    ModelInput,
    ModelResult,
    ModelScore,
    TopicResult,
)


def slot(user: str, session: int, topic: str, field: str, *values: str) -> dict[str, Any]:
    return {
        "user": user,
        "session": session,
        "topic": topic,
        "field": field,
        "values": list(values),
    }


def counts(**given: int) -> SimpleNamespace:
    """The given counts (``TALLY_FIELDS``, others 0) with their metrics, as the scorer derives
    them (``TopicTally.metrics``)."""
    tally = TopicTally()
    tally.counts = [given.get(name, 0) for name in TALLY_FIELDS]
    return SimpleNamespace(**tally.metrics())


def model_score(
    name: str,
    *,
    tp: int,
    fp: int,
    fn: int,
    extra_slots: int = 0,
    latency: float | None = None,
    judge: float | None = None,
    topics: dict[str, tuple[int, int, int]] | None = None,
) -> ModelScore:
    """A ModelScore whose metrics follow from the given counts (as the scorer derives them)."""
    c = counts(
        tp=tp, fp=fp, fn=fn, gold_slots=tp + fn, extra_slots=extra_slots, extra_values=extra_slots
    )
    per_topic = {
        t: counts(tp=a, fp=b, fn=d, gold_slots=a + d) for t, (a, b, d) in (topics or {}).items()
    }
    result = ModelResult(
        precision=c.precision,
        recall=c.recall,
        f1=c.f1,
        exact_match_rate=c.exact_match_rate,
        token_precision=0.0,
        token_recall=0.0,
        token_f1=0.0,
        bleu1=0.0,
        llm_judge=judge,
        latency=None
        if latency is None
        else LatencySummary(mean=latency, median=latency, p95=latency, total=latency),
        extra_slots=extra_slots,
        extra_values=extra_slots,
        per_topic={
            t: TopicResult(
                precision=x.precision,
                recall=x.recall,
                f1=x.f1,
                exact_match_rate=0.0,
                extra_slots=0,
                extra_values=0,
            )
            for t, x in per_topic.items()
        },
        counts=Counts(tp=tp, fp=fp, fn=fn, gold_slots=tp + fn, sessions=1),
        ci={},
    )
    topic_gold = {t: x.gold_slots for t, x in per_topic.items()}
    return ModelScore(name, result, topic_gold_slots=topic_gold)


def naive_counts(pred: dict, gold: dict) -> tuple[int, int, int, int, int]:  # type: ignore[type-arg]
    """Slow reference written from the issue's prose: (tp, fp, fn, extra_slots, extra_values)
    of one session. A slot has a value when one of its values is not blank ("any non-empty
    value")."""
    tp = fp = fn = extra = extra_values = 0

    def said(values: list[str] | None) -> list[str]:
        return [v for v in values or [] if v.strip()]

    for key, g in gold.items():
        if not said(g):
            continue
        if said(pred.get(key)):
            tp += 1
        else:
            fn += 1
    for key, p in pred.items():
        if said(p) and not said(gold.get(key)):
            fp += 1
            extra += 1
            extra_values += len(said(p))
    return tp, fp, fn, extra, extra_values


def model_sides(models: list[ModelInput]) -> list[tuple[str, Path]]:
    """The ``sides`` of ``partitioned`` for ``models``: each model's latency file, then its
    judge file, where it has them (the order ``SlotScorer.add_part`` reads them in)."""
    sides: list[tuple[str, Path]] = []
    for m in models:
        if m.latencies is not None:
            sides.append(("latency", m.latencies.path))
        if m.judge_scores is not None:
            sides.append(("judge", m.judge_scores.path))
    return sides

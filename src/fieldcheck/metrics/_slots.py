"""Slot extraction counts per session and their aggregation (slot spec "How Metrics Are Computed").

One session is scored into ``SlotCounts`` (overall and per topic); every metric of the benchmark
is a function of the counts summed over sessions, so a bootstrap resample is only a re-sum.
Pure functions, no I/O, no model calls: value matches and judge scores come in precomputed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from fieldcheck.metrics._stats import f1_from_pr, safe_div
from fieldcheck.metrics._text import (
    bleu1_score,
    canonicalize,
    token_overlap,
    tokenize_values,
)

SlotKey = tuple[str, str]
"""``(topic, field)``: a slot within one session."""


@dataclass(frozen=True, slots=True)
class SlotCounts:
    """Sufficient statistics of slot extraction; add two to pool sessions or topics.

    ``judge_count`` counts the gold slots that carry a judge score (a missed slot counts with 0);
    it stays 0 when no judge was used, so the judge score is then absent, never 0.
    """

    tp: int = 0
    fp: int = 0
    fn: int = 0
    gold_slots: int = 0
    exact_match: int = 0
    token_matched: int = 0
    token_predicted: int = 0
    token_gold: int = 0
    bleu1_sum: float = 0.0
    judge_sum: float = 0.0
    judge_count: int = 0
    judge_missing: int = 0
    extra_slots: int = 0
    extra_values: int = 0
    sessions: int = 0

    def __add__(self, other: SlotCounts) -> SlotCounts:
        return SlotCounts(
            *(getattr(self, f.name) + getattr(other, f.name) for f in fields(SlotCounts))
        )

    @property
    def precision(self) -> float:
        """TP / (TP + FP), 0.0 when nothing was predicted (slot spec §1)."""
        return safe_div(self.tp, self.tp + self.fp)

    @property
    def recall(self) -> float:
        """TP / (TP + FN), 0.0 when there is no gold slot (slot spec §2)."""
        return safe_div(self.tp, self.tp + self.fn)

    @property
    def f1(self) -> float:
        """Harmonic mean of precision and recall, 0.0 when both are 0 (slot spec §3)."""
        return f1_from_pr(self.precision, self.recall)

    @property
    def exact_match_rate(self) -> float:
        """Exact matches / gold slots, 0.0 without gold slots (slot spec §4)."""
        return safe_div(self.exact_match, self.gold_slots)

    @property
    def token_precision(self) -> float:
        """Matched tokens / predicted tokens of gold slots (slot spec §6)."""
        return safe_div(self.token_matched, self.token_predicted)

    @property
    def token_recall(self) -> float:
        """Matched tokens / gold tokens (slot spec §7)."""
        return safe_div(self.token_matched, self.token_gold)

    @property
    def token_f1(self) -> float:
        """F1 of token precision and recall (slot spec §8)."""
        return f1_from_pr(self.token_precision, self.token_recall)

    @property
    def bleu1(self) -> float:
        """Mean BLEU-1 over gold slots, a missed slot scoring 0 (slot spec §9)."""
        return safe_div(self.bleu1_sum, self.gold_slots)

    @property
    def llm_judge(self) -> float | None:
        """Mean judge score over judged gold slots (missed = 0); ``None`` without a judge (§5)."""
        return self.judge_sum / self.judge_count if self.judge_count else None


@dataclass(frozen=True, slots=True)
class SessionCounts:
    """The counts of one session ``(user, session)``, overall and per topic."""

    total: SlotCounts
    per_topic: Mapping[str, SlotCounts] = field(default_factory=dict)


def slot_values(values: Sequence[str]) -> tuple[str, ...]:
    """The values that say something: blank strings (``""``, ``"  "``) are no value, so a slot
    "has a value" only with a non-blank one (issue: "any non-empty value"). ``()`` for none."""
    return tuple(v for v in values if v.strip())


def canonical_set(values: Sequence[str]) -> frozenset[str]:
    """The set of canonicalised non-empty values: what exact match compares (slot spec §4)."""
    return frozenset(c for c in (canonicalize(v) for v in values) if c)


def slot_exact_match(prediction: Sequence[str], reference: Sequence[str]) -> bool:
    """True when the prediction has a value and the canonicalised value sets are equal (§4)."""
    return bool(slot_values(prediction)) and canonical_set(prediction) == canonical_set(reference)


def score_session(
    prediction: Mapping[SlotKey, Sequence[str]],
    reference: Mapping[SlotKey, Sequence[str]],
    *,
    value_matches: Mapping[SlotKey, bool] | None = None,
    judge_scores: Mapping[SlotKey, float] | None = None,
) -> SessionCounts:
    """Count one session's slots (slot spec "True Positives (TP), False Positives (FP), ...").

    A gold slot (a reference slot with at least one non-blank value, see ``slot_values``) is a
    TP when the prediction has a value for it, else an FN. With ``value_matches`` (``--tp exact|fuzzy|semantic``) a predicted
    gold slot is a TP only when ``value_matches[key]`` is true; a present-but-wrong slot is then
    an FP (a wrong value was asserted) and an FN (the gold value was missed). A predicted slot
    with values that is not a gold slot is an FP and an extra slot, its values extra values.
    ``judge_scores`` (when given) scores predicted gold slots; a missed slot adds 0, a predicted
    slot without a score is counted in ``judge_missing`` and left out of the mean.
    Empty input gives zero counts (with ``sessions=1``).
    """
    topics: dict[str, dict[str, float]] = {}

    def bump(topic: str, **deltas: float) -> None:
        slot = topics.setdefault(topic, {})
        for name, delta in deltas.items():
            slot[name] = slot.get(name, 0) + delta

    for key, raw_gold in reference.items():
        gold_values = slot_values(raw_gold)
        if not gold_values:
            continue  # "no value" in the gold: not a gold slot (docs/decisions.md)
        topic = key[0]
        pred_values = slot_values(prediction.get(key, ()))
        gold_tokens = tokenize_values(gold_values)
        pred_tokens = tokenize_values(pred_values)
        overlap = token_overlap(pred_tokens, gold_tokens)
        bump(
            topic,
            gold_slots=1,
            token_matched=overlap.matched,
            token_predicted=overlap.predicted,
            token_gold=overlap.reference,
            bleu1_sum=bleu1_score(pred_tokens, gold_tokens),
            exact_match=int(slot_exact_match(pred_values, gold_values)),
        )
        if not pred_values:
            bump(topic, fn=1)
            if judge_scores is not None:
                bump(topic, judge_count=1)
            continue
        if value_matches is None or value_matches.get(key, False):
            bump(topic, tp=1)
        else:
            bump(topic, fp=1, fn=1)
        if judge_scores is not None:
            if key in judge_scores:
                bump(topic, judge_sum=judge_scores[key], judge_count=1)
            else:
                bump(topic, judge_missing=1)

    for key, raw_pred in prediction.items():
        pred_values = slot_values(raw_pred)
        if pred_values and not slot_values(reference.get(key, ())):
            bump(key[0], fp=1, extra_slots=1, extra_values=len(pred_values))

    per_topic = {t: _counts(d) for t, d in sorted(topics.items())}
    total = replace(sum_counts(per_topic.values()), sessions=1)
    return SessionCounts(total=total, per_topic=per_topic)


_FLOAT_FIELDS = frozenset({"bleu1_sum", "judge_sum"})


def _counts(values: Mapping[str, float]) -> SlotCounts:
    typed: dict[str, Any] = {
        name: float(value) if name in _FLOAT_FIELDS else int(value)
        for name, value in values.items()
    }
    return SlotCounts(**typed)


def sum_counts(counts: Iterable[SlotCounts]) -> SlotCounts:
    """Pool counts (sessions, topics); the empty sum is all zeros."""
    total = SlotCounts()
    for c in counts:
        total = total + c
    return total


def aggregate_sessions(sessions: Iterable[SessionCounts]) -> SessionCounts:
    """Pool sessions into overall and per-topic counts (per-topic sums equal the total)."""
    items = list(sessions)
    per_topic: dict[str, SlotCounts] = {}
    for s in items:
        for topic, counts in s.per_topic.items():
            per_topic[topic] = per_topic.get(topic, SlotCounts()) + counts
    return SessionCounts(
        total=sum_counts(s.total for s in items),
        per_topic=dict(sorted(per_topic.items())),
    )

"""Slot extraction counts and metrics (slot spec "How Metrics Are Computed", §1-9, 14-15), each of
counts summed over sessions or of arrays of bootstrap resample totals alike, and looking up the
metrics it is made of when called (a replaced one changes every output that uses it)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from fieldcheck.metrics import _arrays, _text
from fieldcheck.metrics._arrays import N
from fieldcheck.metrics._stats import ExactSum

SlotKey = tuple[str, str]
"""``(topic, field)``: a slot within one session."""

SESSION_FIELDS = (
    "tp",
    "fp",
    "fn",
    "gold_slots",
    "exact_match",
    "token_matched",
    "token_predicted",
    "token_gold",
)
"""A session's counts that the metrics with intervals are ratios of: the bootstrap's row."""
TALLY_FIELDS = (*SESSION_FIELDS, "judge_count", "judge_missing", "extra_slots", "extra_values")
"""The integer counts of a ``TopicTally``, in this order."""
TP, FP, FN, GOLD, EXACT, TOK_MATCHED, TOK_PRED, TOK_GOLD = range(len(SESSION_FIELDS))
JUDGE_COUNT, JUDGE_MISSING, EXTRA_SLOTS, EXTRA_VALUES = range(len(SESSION_FIELDS), 12)


def exact_match_rate(exact_match: N, gold_slots: N) -> N:
    """Exact matches / gold slots, 0.0 without gold slots (slot spec §4)."""
    return _arrays.safe_div(exact_match, gold_slots)


def token_precision(matched: N, predicted: N) -> N:
    """Matched tokens / predicted tokens of gold slots (slot spec §6)."""
    return _arrays.safe_div(matched, predicted)


def token_recall(matched: N, gold: N) -> N:
    """Matched tokens / gold tokens (slot spec §7)."""
    return _arrays.safe_div(matched, gold)


def token_f1(matched: N, predicted: N, gold: N) -> N:
    """F1 of token precision and recall (slot spec §8)."""
    return _arrays.f1_from_pr(token_precision(matched, predicted), token_recall(matched, gold))


def llm_judge(judge_sum: float, judge_count: int) -> float | None:
    """Mean judge score over judged gold slots (missed = 0); ``None`` without a judge (§5)."""
    return judge_sum / judge_count if judge_count else None


SLOT_STATISTICS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "precision": lambda t: _arrays.precision(t[:, TP], t[:, FP]),
    "recall": lambda t: _arrays.recall(t[:, TP], t[:, FN]),
    "f1": lambda t: _arrays.f1(t[:, TP], t[:, FP], t[:, FN]),
    "exact_match_rate": lambda t: exact_match_rate(t[:, EXACT], t[:, GOLD]),
    "token_f1": lambda t: token_f1(t[:, TOK_MATCHED], t[:, TOK_PRED], t[:, TOK_GOLD]),
}
"""The metrics with bootstrap intervals, each of an array of totals (one row per resample,
columns ``SESSION_FIELDS``)."""


class TopicTally:
    """Running counts of one topic (``TALLY_FIELDS``), mergeable, with exact BLEU-1 and judge
    sums (order-independent) whose values wait in their ``pending`` until ``settle``."""

    __slots__ = ("bleu", "counts", "judge")

    def __init__(self) -> None:
        self.counts = [0] * len(TALLY_FIELDS)
        self.bleu = ExactSum()
        self.judge = ExactSum()

    def settle(self) -> None:
        """Fold the waiting values into the exact sums."""
        self.bleu.settle()
        self.judge.settle()

    def absorb(self, other: TopicTally) -> None:
        """Add ``other``'s counts and sums (exactly)."""
        self.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        self.bleu.absorb(other.bleu)
        self.judge.absorb(other.judge)

    def metrics(self, sessions: int = 0) -> dict[str, Any]:
        """The counts (``TALLY_FIELDS``) with each metric of them (slot spec §1-9, 14-15);
        ``llm_judge`` stays None without a judged slot, never 0."""
        c: dict[str, Any] = dict(zip(TALLY_FIELDS, self.counts, strict=True))
        tp, fp, fn, gold, matched = c["tp"], c["fp"], c["fn"], c["gold_slots"], c["token_matched"]
        bleu = self.bleu.value
        return c | {
            "precision": float(_arrays.precision(tp, fp)),
            "recall": float(_arrays.recall(tp, fn)),
            "f1": float(_arrays.f1(tp, fp, fn)),
            "exact_match_rate": float(exact_match_rate(c["exact_match"], gold)),
            "token_precision": float(token_precision(matched, c["token_predicted"])),
            "token_recall": float(token_recall(matched, c["token_gold"])),
            "token_f1": float(token_f1(matched, c["token_predicted"], c["token_gold"])),
            "bleu1_sum": bleu,
            "bleu1": _arrays.safe_div(bleu, float(gold)),  # missed slots score 0 (§9)
            "llm_judge": llm_judge(self.judge.value, c["judge_count"]),
            "sessions": sessions,
        }


def pooled(topics: Iterable[TopicTally], sessions: int = 0) -> dict[str, Any]:
    """The counts and metrics of several topics together (a model's overall ones)."""
    total = TopicTally()
    for t in topics:
        total.absorb(t)
    return total.metrics(sessions)


def slot_values(values: Sequence[str]) -> tuple[str, ...]:
    """The non-blank values: a slot "has a value" only with one ("any non-empty value")."""
    return tuple(v for v in values if v.strip())


def canonical_set(values: Sequence[str]) -> frozenset[str]:
    """The set of canonicalised non-empty values: what exact match compares (slot spec §4)."""
    return frozenset(c for c in (_text.canonicalize(v) for v in values) if c)


def slot_exact_match(prediction: Sequence[str], reference: Sequence[str]) -> bool:
    """True when the prediction has a value and the canonicalised value sets are equal (§4)."""
    return bool(slot_values(prediction)) and canonical_set(prediction) == canonical_set(reference)


SlotScore = tuple[bool, int, int, int, float, int]
"""One gold slot against its prediction: has a predicted value, matched tokens, predicted tokens,
gold tokens, BLEU-1, exact match (0/1)."""


def score_slot(prediction: Sequence[str], reference: Sequence[str]) -> SlotScore | None:
    """One gold slot's token counts, BLEU-1 and exact match (slot spec §4, §6-9); ``None`` when
    the reference has no value (not a gold slot)."""
    gold_values = slot_values(reference)
    if not gold_values:
        return None
    pred_values = slot_values(prediction)
    gold_tokens = _text.tokenize_values(gold_values)
    pred_tokens = _text.tokenize_values(pred_values)
    overlap = _text.token_overlap(pred_tokens, gold_tokens)
    return (
        bool(pred_values),
        overlap.matched,
        overlap.predicted,
        overlap.reference,
        _text.bleu1_score(pred_tokens, gold_tokens),
        int(slot_exact_match(pred_values, gold_values)),
    )


MEMO_LIMIT = 32_768
"""Distinct value lists (and pairs) ``slot_score_of`` and ``value_count`` remember; a run
starts with ``forget_slots`` (a replaced metric function then changes its output)."""


@lru_cache(maxsize=MEMO_LIMIT)
def slot_score_of(prediction: tuple[str, ...], reference: tuple[str, ...]) -> SlotScore | None:
    """``score_slot``, remembered per distinct value lists: sessions repeat values, so most slots
    are a lookup."""
    return score_slot(prediction, reference)


@lru_cache(maxsize=MEMO_LIMIT)
def value_count(values: tuple[str, ...]) -> int:
    """How many values say something (``slot_values``), remembered as ``slot_score_of``."""
    return len(slot_values(values))


def forget_slots() -> None:
    """Empty ``slot_score_of`` and ``value_count``: a new run computes its slots afresh."""
    slot_score_of.cache_clear()
    value_count.cache_clear()


def score_session(
    prediction: Mapping[SlotKey, Sequence[str]],
    reference: Mapping[SlotKey, Sequence[str]],
    topics: dict[str, TopicTally],
    *,
    value_matches: Mapping[SlotKey, bool] | None = None,
    judge_scores: Mapping[SlotKey, float] | None = None,
) -> tuple[int, int, int, int, int, int, int, int]:
    """Count one session's slots into ``topics`` (a tally per topic) and return its
    ``SESSION_FIELDS`` (slot spec "True Positives (TP), False Positives (FP), ..."; with
    ``value_matches`` a present-but-wrong slot is an FP and an FN: docs/slots.md)."""
    stats, count = slot_score_of, value_count
    m, j = value_matches, judge_scores
    tp = fp = fn = n_gold = exact = matched = predicted = gold_tokens = 0
    for slot, gold_values in reference.items():
        st = stats(tuple(prediction.get(slot, ())), tuple(gold_values))
        if st is None:
            continue  # "no value" in the gold: not a gold slot (docs/decisions.md)
        topic = slot[0]
        t = topics.get(topic)
        if t is None:
            t = topics[topic] = TopicTally()
        c = t.counts
        has_pred, s_matched, s_pred, s_gold, s_bleu, s_exact = st
        c[GOLD] += 1
        c[TOK_MATCHED] += s_matched
        c[TOK_PRED] += s_pred
        c[TOK_GOLD] += s_gold
        c[EXACT] += s_exact
        n_gold += 1
        matched += s_matched
        predicted += s_pred
        gold_tokens += s_gold
        exact += s_exact
        if s_bleu:
            t.bleu.pending.append(s_bleu)
        if not has_pred:
            c[FN] += 1
            fn += 1
            if j is not None:
                c[JUDGE_COUNT] += 1
            continue
        if m is None or m.get(slot, False):
            c[TP] += 1
            tp += 1
        else:
            c[FP] += 1
            c[FN] += 1
            fp += 1
            fn += 1
        if j is not None:
            if slot in j:
                t.judge.pending.append(j[slot])
                c[JUDGE_COUNT] += 1
            else:
                c[JUDGE_MISSING] += 1
    for slot, pred_values in prediction.items():
        known = reference.get(slot)
        if known is not None and count(tuple(known)):
            continue
        n = count(tuple(pred_values))
        if n:
            topic = slot[0]
            t = topics.get(topic)
            if t is None:
                t = topics[topic] = TopicTally()
            t.counts[FP] += 1
            t.counts[EXTRA_SLOTS] += 1
            t.counts[EXTRA_VALUES] += n
            fp += 1
    return tp, fp, fn, n_gold, exact, matched, predicted, gold_tokens

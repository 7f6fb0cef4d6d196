"""Scoring several models against one gold file: counts per session, metrics, intervals, p-values.

The runner layer over ``fieldcheck.metrics._slots``: it pairs files by session, asks the value
matcher and the judge (when chosen) in one batch per model, then only sums per-session counts.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Any, Literal, cast

import numpy as np
from pydantic import BaseModel

from fieldcheck._util.errors import InputError
from fieldcheck._util.signature import Signature
from fieldcheck.matchers import (
    LONG_VALUE_CHARS,
    DiskCache,
    ExactMatcher,
    FuzzyMatcher,
    Matcher,
    SemanticMatcher,
    Similarity,
    compared_linearly,
)
from fieldcheck.metrics._slots import (
    SessionCounts,
    SlotCounts,
    canonical_set,
    slot_exact_match,
    slot_values,
)
from fieldcheck.metrics._stats import (
    ExactSum,
    Interval,
    TotalsGroup,
    TotalsStatistic,
    _percentile_interval,
    bootstrap_groups_ci,
    f1_from_pr_array,
    latency_stats,
    safe_div_array,
)
from fieldcheck.metrics._text import (
    CANONICALIZE_VERSION,
    bleu1_score,
    token_overlap,
    tokenize_values,
)
from fieldcheck.slots._loaders import JudgeFile, LatencyFile, SessionKey, SlotFile, SlotKey

log = logging.getLogger("fieldcheck")

TPMode = Literal["presence", "exact", "fuzzy", "semantic"]
DEFAULT_THRESHOLDS: dict[TPMode, float] = {"exact": 1.0, "fuzzy": 0.8, "semantic": 0.8}
CI_METRICS = ("precision", "recall", "f1", "exact_match_rate", "token_f1")


@dataclass
class ModelInput:
    """One model's files: predictions, and optionally latencies and precomputed judge scores.

    ``not_scored`` maps a session to why it is left out for this model (a call error type of
    ``slots run``): its gold slots are not counted, so a failed call is never a miss.
    """

    name: str
    predictions: SlotFile
    latencies: LatencyFile | None = None
    judge_scores: JudgeFile | None = None
    not_scored: Mapping[SessionKey, str] = field(default_factory=dict)


class TopicResult(BaseModel):
    precision: float
    recall: float
    f1: float
    exact_match_rate: float
    extra_slots: int
    extra_values: int


class Counts(BaseModel):
    tp: int
    fp: int
    fn: int
    gold_slots: int
    sessions: int


class LatencySummary(BaseModel):
    mean: float
    median: float
    p95: float
    total: float


class ModelResult(BaseModel):
    """The per-model object of ``metrics.json`` (exactly the keys of docs/formats.md)."""

    precision: float
    recall: float
    f1: float
    exact_match_rate: float
    token_precision: float
    token_recall: float
    token_f1: float
    bleu1: float
    llm_judge: float | None
    latency: LatencySummary | None
    extra_slots: int
    extra_values: int
    per_topic: dict[str, TopicResult]
    counts: Counts
    ci: dict[str, Interval | None]
    sessions_not_scored: dict[str, int] = {}


class PairedF1(BaseModel):
    """Paired bootstrap test of the F1 difference ``f1_a - f1_b`` over the same sessions: the
    sessions both models were scored on (``sessions``); the F1s are over those sessions."""

    model_a: str
    model_b: str
    f1_a: float
    f1_b: float
    difference: float
    p_value: float | None
    sessions: int


@dataclass
class ModelScore:
    """A model's result with what reports need beyond ``metrics.json``."""

    name: str
    result: ModelResult
    units: np.ndarray  # (sessions, 8): each scored session's bootstrap statistics (_UNIT_FIELDS)
    latency_seconds: list[float] = field(default_factory=list)
    keys: list[SessionKey] = field(default_factory=list)  # the session of each ``units`` row
    session_seconds: dict[SessionKey, float] = field(default_factory=dict)  # latency by session
    topic_gold_slots: dict[str, int] = field(default_factory=dict)  # over the scored sessions

    @property
    def not_scored(self) -> int:
        return sum(self.result.sessions_not_scored.values())


@dataclass
class UnscoredModel:
    """A model none of whose gold sessions could be scored (every call failed): no metrics."""

    name: str
    sessions_not_scored: dict[str, int]

    @property
    def not_scored(self) -> int:
        return sum(self.sessions_not_scored.values())

    def metrics_json(self) -> dict[str, Any]:
        """The keys of a scored model with every metric null and zero counts, so no reader can
        take a model that was never scored for one that scored 0."""
        out: dict[str, Any] = {k: None for k in ModelResult.model_fields}
        out |= {
            "per_topic": {},
            "counts": Counts(tp=0, fp=0, fn=0, gold_slots=0, sessions=0).model_dump(),
            "ci": {name: None for name in CI_METRICS},
            "sessions_not_scored": dict(self.sessions_not_scored),
        }
        return out


@dataclass
class SlotsRun:
    """Everything one ``slots score`` produced; ``metrics_json()`` is the file's object.

    ``models`` are the scored models; ``unscored`` those with nothing scored (left out of every
    comparison, table and plot, and listed as such); ``names`` is the order models were given.
    """

    models: list[ModelScore]
    paired_f1: list[PairedF1]
    signature: Signature
    topics: list[str]
    errors: list[InputError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    unscored: list[UnscoredModel] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    topic_gold_slots: dict[str, int] = field(default_factory=dict)  # gold slots with a value

    def metrics_json(self) -> dict[str, Any]:
        entries: dict[str, dict[str, Any]] = {
            m.name: m.result.model_dump(mode="json") for m in self.models
        }
        entries |= {u.name: u.metrics_json() for u in self.unscored}
        order = self.names or list(entries)
        return {
            "models": {name: entries[name] for name in order if name in entries},
            "paired_f1": [p.model_dump(mode="json") for p in self.paired_f1],
            "signature": self.signature.model_dump(mode="json"),
        }


def make_matcher(tp: TPMode) -> Matcher | None:
    """The value matcher of a ``--tp`` mode; ``None`` for ``presence`` (no value check)."""
    if tp == "exact":
        return ExactMatcher()
    if tp == "fuzzy":
        return FuzzyMatcher()
    if tp == "semantic":
        return SemanticMatcher(cache=DiskCache())
    return None


def slot_text(values: Sequence[str], *, canonical: bool = False) -> str:
    """The one string a matcher or judge sees for a slot: its values sorted, joined by ", "."""
    if canonical:
        return ", ".join(sorted(canonical_set(values)))
    return ", ".join(sorted(v.strip() for v in slot_values(values)))


# Bootstrap: each session is a vector of sufficient statistics; a resample's totals are one
# matrix product, and each statistic is vectorised. The resample weights are drawn a chunk at a
# time (bootstrap_groups_ci), so memory does not grow with the number of sessions.
_UNIT_FIELDS = (
    "tp",
    "fp",
    "fn",
    "gold_slots",
    "exact_match",
    "token_matched",
    "token_predicted",
    "token_gold",
)
TP, FP, FN, GOLD, EXACT, TOK_MATCHED, TOK_PRED, TOK_GOLD = range(len(_UNIT_FIELDS))


def _unit(c: SlotCounts) -> tuple[int, ...]:
    return tuple(getattr(c, name) for name in _UNIT_FIELDS)


def session_units(sessions: Sequence[SessionCounts]) -> np.ndarray:
    """The (sessions, 8) float array of each session's sufficient statistics (``_UNIT_FIELDS``)."""
    units = np.empty((len(sessions), len(_UNIT_FIELDS)))
    for i, s in enumerate(sessions):
        units[i] = _unit(s.total)
    return units


def _stat_precision(t: np.ndarray) -> np.ndarray:
    return safe_div_array(t[:, TP], t[:, TP] + t[:, FP])


def _stat_recall(t: np.ndarray) -> np.ndarray:
    return safe_div_array(t[:, TP], t[:, TP] + t[:, FN])


def _stat_f1(t: np.ndarray) -> np.ndarray:
    return f1_from_pr_array(_stat_precision(t), _stat_recall(t))


def _stat_exact(t: np.ndarray) -> np.ndarray:
    return safe_div_array(t[:, EXACT], t[:, GOLD])


def _stat_token_f1(t: np.ndarray) -> np.ndarray:
    return f1_from_pr_array(
        safe_div_array(t[:, TOK_MATCHED], t[:, TOK_PRED]),
        safe_div_array(t[:, TOK_MATCHED], t[:, TOK_GOLD]),
    )


STATISTICS: dict[str, TotalsStatistic] = {
    "precision": _stat_precision,
    "recall": _stat_recall,
    "f1": _stat_f1,
    "exact_match_rate": _stat_exact,
    "token_f1": _stat_token_f1,
}


def session_intervals(
    units: np.ndarray, *, resamples: int, seed: int, max_cells: int = 2_000_000
) -> dict[str, Interval]:
    """Percentile bootstrap intervals of STATISTICS over sessions (``units``, one row each): the
    same intervals as ``bootstrap_totals_ci`` for the same seed, with the resample weights drawn
    ``max_cells // sessions`` resamples at a time, so memory stays flat in the sessions."""
    rows = cast("Sequence[Sequence[float]]", units)  # an array: bootstrap_groups_ci takes it as is
    group = TotalsGroup(range(len(units)), rows, STATISTICS)
    return (
        bootstrap_groups_ci(
            len(units), [group], resamples=resamples, seed=seed, max_cells=max_cells
        )
        or {}
    )


# Per-topic counts in a list while scoring (no per-slot objects): the first eight are the
# bootstrap units (_UNIT_FIELDS), then these.
JUDGE_COUNT, JUDGE_MISSING, EXTRA_SLOTS, EXTRA_VALUES = range(8, 12)
_INT_FIELDS = (*_UNIT_FIELDS, "judge_count", "judge_missing", "extra_slots", "extra_values")
_CACHE_LIMIT = 32_768
"""Distinct (prediction, gold) value pairs remembered while scoring; the cache starts afresh
past it, so its memory is bounded whatever the input."""

PairStats = tuple[bool, int, int, int, float, int]
"""One gold slot with a value against its prediction: has a predicted value, matched tokens,
predicted tokens, gold tokens, BLEU-1, exact match (0/1)."""


class _Topic:
    """Running counts of one topic (or of a model overall): integers, and the float sums kept
    exact, so they do not depend on the order sessions are read in (docs/slots.md)."""

    __slots__ = ("bleu", "counts", "judge")

    def __init__(self) -> None:
        self.counts = [0] * len(_INT_FIELDS)
        self.bleu = ExactSum()
        self.judge = ExactSum()

    def slot_counts(self, sessions: int = 0) -> SlotCounts:
        ints = dict(zip(_INT_FIELDS, self.counts, strict=True))
        return SlotCounts(
            **ints, bleu1_sum=self.bleu.value, judge_sum=self.judge.value, sessions=sessions
        )


class _PairCache:
    """``PairStats`` of value lists, computed once per distinct pair by the metric functions
    themselves (one tokenisation per value), so the numbers are theirs."""

    def __init__(self) -> None:
        self.pairs: dict[tuple[tuple[str, ...], tuple[str, ...]], PairStats | None] = {}
        self.values: dict[tuple[str, ...], int] = {}

    def stats(self, pred: Sequence[str], gold: Sequence[str]) -> PairStats | None:
        key = (tuple(pred), tuple(gold))
        try:
            return self.pairs[key]
        except KeyError:
            pass
        if len(self.pairs) >= _CACHE_LIMIT:
            self.pairs.clear()
        gold_values = slot_values(gold)
        out: PairStats | None = None
        if gold_values:
            pred_values = slot_values(pred)
            gold_tokens, pred_tokens = tokenize_values(gold_values), tokenize_values(pred_values)
            overlap = token_overlap(pred_tokens, gold_tokens)
            out = (
                bool(pred_values),
                overlap.matched,
                overlap.predicted,
                overlap.reference,
                bleu1_score(pred_tokens, gold_tokens),
                int(slot_exact_match(pred_values, gold_values)),
            )
        self.pairs[key] = out
        return out

    def count(self, values: Sequence[str]) -> int:
        """How many values say something (``slot_values``)."""
        key = tuple(values)
        n = self.values.get(key)
        if n is None:
            if len(self.values) >= _CACHE_LIMIT:
                self.values.clear()
            n = self.values[key] = len(slot_values(values))
        return n


@dataclass
class _ModelFold:
    """One model's running state over the buckets of sessions (``SlotScorer``)."""

    model: ModelInput
    topics: dict[str, _Topic] = field(default_factory=dict)
    total: _Topic = field(default_factory=_Topic)
    rows: list[np.ndarray] = field(default_factory=list)  # units of the scored sessions
    at: list[np.ndarray] = field(default_factory=list)  # their index in SlotScorer.keys
    unknown: int = 0
    unknown_first: int | None = None
    unknown_lines: int = 0
    unknown_shown: list[SessionKey] = field(default_factory=list)
    dropped: int = 0
    absent: int = 0
    pairs: int = 0
    failed: int = 0
    long: int = 0
    judged_pairs: int = 0
    judge_failed: int = 0
    file_errors: list[InputError] = field(default_factory=list)
    value_failures: list[tuple[SessionKey, int, InputError]] = field(default_factory=list)
    judge_failures: list[tuple[SessionKey, int, InputError]] = field(default_factory=list)


class SlotScorer:
    """Scores models on gold sessions fed in buckets (any partition of the sessions, each bucket
    holding a session's every gold and predicted line), folding counts, per-topic tallies and
    one row of bootstrap statistics per session; ``finish`` gives the ``SlotsRun``. The result
    does not depend on how sessions are split into buckets (tests/slots/test_streamed.py)."""

    def __init__(
        self,
        gold: SlotFile,
        models: Sequence[ModelInput],
        *,
        tp: TPMode = "presence",
        threshold: float | None = None,
        matcher: Matcher | None = None,
        judge: Matcher | None = None,
        bootstrap: int = 1000,
        seed: int = 0,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        names = [m.name for m in models]
        if len(set(names)) != len(names):
            raise ValueError(f"model names must be unique (got {names})")
        if tp != "presence" and matcher is None:
            matcher = make_matcher(tp)
        self.gold, self.models = gold, list(models)
        self.tp, self.threshold, self.matcher, self.judge = tp, threshold, matcher, judge
        self.cut = threshold if threshold is not None else DEFAULT_THRESHOLDS.get(tp, 1.0)
        self.bootstrap, self.seed, self.progress = bootstrap, seed, progress
        self.folds = [_ModelFold(m) for m in models]
        self.keys: list[SessionKey] = []  # every gold session, in the order buckets gave them
        self.gold_errors: list[InputError] = []
        self.empty_gold = 0
        self.any_gold_value = False
        self.topic_gold: Counter[str] = Counter()
        self.cache = _PairCache()

    def add(self, gold: SlotFile, predictions: Sequence[SlotFile]) -> None:
        """Score one bucket: ``gold`` and each model's ``predictions`` (in model order) hold the
        same sessions' lines; their ``errors`` are the bucket's duplicate lines."""
        self.gold_errors += gold.errors
        count = self.cache.count
        for slots in gold.sessions.values():
            for (topic, _), values in slots.items():
                if count(values):
                    self.any_gold_value = True
                    self.topic_gold[topic] += 1
                else:
                    self.empty_gold += 1
        keys = sorted(gold.sessions)
        base = len(self.keys)
        self.keys += keys
        for fold, preds in zip(self.folds, predictions, strict=True):
            fold.file_errors += preds.errors
            self._score_bucket(fold, gold, preds, keys, base)

    def _score_bucket(
        self,
        fold: _ModelFold,
        gold: SlotFile,
        preds: SlotFile,
        keys: list[SessionKey],
        base: int,
    ) -> None:
        model = fold.model
        not_scored = model.not_scored
        unknown = [k for k in preds.sessions if k not in gold.sessions]
        if unknown:
            fold.unknown += len(unknown)
            first = min(preds.lines[(k, s)] for k in unknown for s in preds.sessions[k])
            fold.unknown_first = min(first, fold.unknown_first or first)
            fold.unknown_lines += sum(len(preds.sessions[k]) for k in unknown)
            fold.unknown_shown = sorted(fold.unknown_shown + sorted(unknown)[:6])[:6]
        if not_scored:
            fold.dropped += sum(1 for k in preds.sessions if k in not_scored and k in gold.sessions)
        scored = [(i, k) for i, k in enumerate(keys) if k not in not_scored]
        fold.absent += sum(1 for _, k in scored if k not in preds.sessions)
        empty: dict[SlotKey, list[str]] = {}
        # the gold slots with a predicted value: the pairs a matcher or a judge has to see
        count = self.cache.count
        checked = self.matcher is not None and self.tp != "presence"
        pairs: list[tuple[SessionKey, SlotKey]] = []
        if checked or model.judge_scores is not None or self.judge is not None:
            pairs = [
                (sk, slot)
                for _, sk in scored
                for slot, values in gold.sessions[sk].items()
                if count(values) and count(preds.sessions.get(sk, empty).get(slot, ()))
            ]
        fold.pairs += len(pairs)
        matches = self._value_matches(fold, gold, preds, pairs)
        judged = self._judged(fold, gold, preds, pairs)

        stats = self.cache.stats
        topics = fold.topics
        units = np.zeros((len(scored), len(_UNIT_FIELDS)), dtype=np.int32)  # counts of a session
        bleu: dict[str, list[float]] = {}
        judge_sums: dict[str, list[float]] = {}
        for row, (_, sk) in enumerate(scored):
            g = gold.sessions[sk]
            p = preds.sessions.get(sk, empty)
            m = None if matches is None else matches.get(sk, {})
            j = None if judged is None else judged.get(sk, {})
            tp = fp = fn = n_gold = exact = matched = predicted = gold_tokens = 0
            for slot, gold_values in g.items():
                st = stats(p.get(slot, ()), gold_values)
                if st is None:
                    continue  # "no value" in the gold: not a gold slot (docs/decisions.md)
                topic = slot[0]
                t = topics.get(topic)
                if t is None:
                    t = topics[topic] = _Topic()
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
                    bleu.setdefault(topic, []).append(s_bleu)
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
                        judge_sums.setdefault(topic, []).append(j[slot])
                        c[JUDGE_COUNT] += 1
                    else:
                        c[JUDGE_MISSING] += 1
            for slot, pred_values in p.items():
                known = g.get(slot)
                if known is not None and count(known):
                    continue
                n = count(pred_values)
                if n:
                    topic = slot[0]
                    t = topics.get(topic)
                    if t is None:
                        t = topics[topic] = _Topic()
                    t.counts[FP] += 1
                    t.counts[EXTRA_SLOTS] += 1
                    t.counts[EXTRA_VALUES] += n
                    fp += 1
            units[row] = (tp, fp, fn, n_gold, exact, matched, predicted, gold_tokens)
        for topic, values in bleu.items():
            topics[topic].bleu.add(values)
            fold.total.bleu.add(values)
        for topic, values in judge_sums.items():
            topics[topic].judge.add(values)
            fold.total.judge.add(values)
        fold.rows.append(units)
        fold.at.append(np.asarray([base + i for i, _ in scored], dtype=np.int32))

    def _value_matches(
        self,
        fold: _ModelFold,
        gold: SlotFile,
        preds: SlotFile,
        pairs: list[tuple[SessionKey, SlotKey]],
    ) -> dict[SessionKey, dict[SlotKey, bool]] | None:
        matcher = self.matcher
        if self.tp == "presence" or matcher is None:
            return None
        canonical = self.tp == "exact"
        predicted = [slot_text(preds.sessions[sk][slot], canonical=canonical) for sk, slot in pairs]
        golden = [slot_text(gold.sessions[sk][slot], canonical=canonical) for sk, slot in pairs]
        sims = matcher.similarities(predicted, golden) if pairs else []
        fold.failed += _failures(
            preds, gold, pairs, sims, what="value comparison failed", out=fold.value_failures
        )
        if isinstance(matcher, FuzzyMatcher):
            fold.long += sum(map(compared_linearly, predicted, golden))
        matches: dict[SessionKey, dict[SlotKey, bool]] = {}
        for (sk, slot), s in zip(pairs, sims, strict=True):
            matches.setdefault(sk, {})[slot] = bool(s.passes(self.cut))
        return matches

    def _judged(
        self,
        fold: _ModelFold,
        gold: SlotFile,
        preds: SlotFile,
        pairs: list[tuple[SessionKey, SlotKey]],
    ) -> dict[SessionKey, dict[SlotKey, float]] | None:
        model = fold.model
        if model.judge_scores is not None:
            scores = model.judge_scores.scores
            fold.judged_pairs += sum(1 for sk, slot in pairs if slot in scores.get(sk, {}))
            return {sk: scores[sk] for sk in gold.sessions if sk in scores}
        if self.judge is None:
            return None
        if not pairs:
            return {}
        sims = self.judge.similarities(
            [slot_text(preds.sessions[sk][slot]) for sk, slot in pairs],
            [slot_text(gold.sessions[sk][slot]) for sk, slot in pairs],
        )
        fold.judge_failed += _failures(
            preds, gold, pairs, sims, what="judge failed", out=fold.judge_failures
        )
        judged: dict[SessionKey, dict[SlotKey, float]] = {}
        for (sk, slot), s in zip(pairs, sims, strict=True):
            if s.ok and s.score is not None:
                judged.setdefault(sk, {})[slot] = s.score
        return judged

    def finish(self) -> SlotsRun:
        """The run: metrics, warnings in the order of the checks, errors by file and line,
        bootstrap intervals and paired tests over the sessions in sorted order."""
        gold, tp = self.gold, self.tp
        warnings: list[str] = []

        def warn(message: str) -> None:
            warnings.append(message)
            log.warning("%s", message)

        errors = _by_line(gold.errors + self.gold_errors)
        if self.threshold is not None and tp in ("presence", "exact"):
            warn(
                f"--threshold {self.threshold} has no effect with --tp {tp} (only fuzzy and "
                "semantic use it)"
            )
        if not self.any_gold_value:
            warn(f"{gold.path}: no gold slot with a value; every score is 0")
        elif self.empty_gold:
            warn(
                f"{gold.path}: {self.empty_gold} gold line(s) with values [] (or only blank values) "
                "are not gold slots (nothing to "
                "extract: not a miss when unpredicted, an extra slot when predicted); the spec's "
                "code would count them as FN or TP"
            )
        # sessions in sorted order: the order of the bootstrap rows, the latencies, the pairs
        order = sorted(range(len(self.keys)), key=self.keys.__getitem__)
        rank = np.empty(len(order), dtype=np.int64)
        rank[np.asarray(order, dtype=np.int64)] = np.arange(len(order))
        session_keys = [self.keys[i] for i in order]
        gold_set = set(self.keys)

        scores: list[ModelScore] = []
        unscored: list[UnscoredModel] = []
        for fold in self.folds:
            model = fold.model
            errors += _by_line(model.predictions.errors + fold.file_errors)
            left_out = {k: model.not_scored[k] for k in session_keys if k in model.not_scored}
            reasons = dict(sorted(Counter(left_out.values()).items()))
            if left_out and len(left_out) == len(session_keys):
                warn(
                    f"model {model.name!r}: nothing scored: the call failed for all "
                    f"{len(left_out)} gold session(s) ({_reasons(reasons)})"
                )
                unscored.append(UnscoredModel(model.name, reasons))
                continue
            if left_out:
                warn(
                    f"model {model.name!r}: {len(left_out)} of {len(session_keys)} gold session(s) "
                    f"not scored, the call failed ({_reasons(reasons)}); their gold slots are not "
                    "counted"
                )
            score = self._model_score(fold, session_keys, rank, gold_set, left_out, warn, errors)
            score.result.sessions_not_scored = reasons
            scores.append(score)

        topics = sorted({t for s in scores for t in s.result.per_topic})
        for s in scores:  # every model lists every topic, so tables stay rectangular
            for t in topics:
                s.result.per_topic.setdefault(t, _topic_result(SlotCounts()))
            s.result.per_topic = dict(sorted(s.result.per_topic.items()))

        paired = _bootstrap(scores, self.bootstrap, self.seed, self.progress, warn)
        settings: dict[str, Any] = {
            "tp": tp,
            "canonicalize": CANONICALIZE_VERSION,
            "bootstrap": self.bootstrap,
            "seed": self.seed,
            "judge": _judge_signature(self.models, self.judge),
        }
        if tp != "presence" and self.matcher is not None:
            settings["matcher"] = self.matcher.signature()
            settings["threshold"] = self.cut
        signature = Signature(system="slots", settings=settings)
        names = [m.name for m in self.models]
        return SlotsRun(
            scores,
            paired,
            signature,
            topics,
            errors,
            warnings,
            unscored,
            names,
            dict(self.topic_gold),
        )

    def _model_score(
        self,
        fold: _ModelFold,
        session_keys: list[SessionKey],
        rank: np.ndarray,
        gold_set: set[SessionKey],
        left_out: Mapping[SessionKey, str],
        warn: Callable[[str], None],
        errors: list[InputError],
    ) -> ModelScore:
        model, preds = fold.model, fold.model.predictions
        keys = [k for k in session_keys if k not in left_out]
        if fold.unknown:
            shown = ", ".join(f"{u}/{s}" for u, s in fold.unknown_shown[:5]) + (
                " ..." if fold.unknown > 5 else ""
            )
            warn(
                f"{preds.path}:{fold.unknown_first}: model {model.name!r}: {fold.unknown} "
                f"session(s) not in the gold file ({shown}); their {fold.unknown_lines} slot "
                "line(s) are not scored"
            )
        if fold.dropped:
            warn(
                f"model {model.name!r}: {fold.dropped} session(s) with prediction lines are not "
                "scored (their call failed); those lines are ignored"
            )
        if fold.absent:
            warn(
                f"model {model.name!r} has no prediction for {fold.absent} of {len(keys)} gold "
                "session(s); their gold slots count as missed"
            )
        errors += [e for *_, e in sorted(fold.value_failures, key=lambda f: (f[0], f[1]))]
        if fold.failed:
            warn(
                f"model {model.name!r}: {fold.failed} value comparison(s) failed; counted as no "
                "match"
            )
        if fold.long:
            warn(
                f"model {model.name!r}: {fold.long} slot value(s) longer than "
                f"{LONG_VALUE_CHARS:,} characters compared by 3-gram similarity, not edit "
                "distance (docs/slots.md)"
            )
        judged = model.judge_scores is not None or self.judge is not None
        if model.judge_scores is not None:
            errors += model.judge_scores.errors
            scores = model.judge_scores.scores
            stray = sum(len(v) for k, v in scores.items() if k not in gold_set)
            unused = sum(len(v) for v in scores.values()) - stray - fold.judged_pairs
            if stray:
                warn(
                    f"{model.judge_scores.path}: {stray} judge score(s) for sessions not in the "
                    "gold file are ignored"
                )
            if unused:
                warn(
                    f"{model.judge_scores.path}: {unused} judge score(s) for slots that are not "
                    "predicted gold slots (missed slots score 0, extra slots are not judged) are "
                    "ignored"
                )
        elif self.judge is not None:
            errors += [e for *_, e in sorted(fold.judge_failures, key=lambda f: (f[0], f[1]))]
            if fold.judge_failed:
                warn(
                    f"model {model.name!r}: {fold.judge_failed} judge call(s) failed; left out of "
                    "the judge mean"
                )

        for t in fold.topics.values():
            for i, n in enumerate(t.counts):
                fold.total.counts[i] += n
        total = fold.total.slot_counts(sessions=len(keys))
        llm_judge = total.llm_judge
        if judged and fold.pairs and total.judge_missing == fold.pairs:
            warn(
                f"model {model.name!r}: no judge score for any predicted gold slot; the judge "
                "score is absent"
            )
            llm_judge = None
        elif judged and total.judge_missing:
            source = model.judge_scores.path if model.judge_scores is not None else "the judge"
            warn(
                f"model {model.name!r}: {total.judge_missing} predicted gold slot(s) have no "
                f"score from {source}; the judge mean leaves them out"
            )

        seconds: list[float] = []
        latency: LatencySummary | None = None
        by_session: dict[SessionKey, float] = {}
        if model.latencies is not None:
            errors += model.latencies.errors
            known = model.latencies.seconds
            stray_latency = sum(1 for k in known if k not in gold_set)
            if stray_latency:
                warn(
                    f"{model.latencies.path}: {stray_latency} latency line(s) for sessions not in "
                    "the gold file are ignored"
                )
            by_session = {k: known[k] for k in keys if k in known}
            seconds = list(by_session.values())
            if len(seconds) < len(keys):
                warn(
                    f"model {model.name!r}: latency known for {len(seconds)} of {len(keys)} gold "
                    "sessions"
                )
            stats = latency_stats(seconds)
            if stats is not None:
                latency = LatencySummary(
                    mean=stats.mean, median=stats.median, p95=stats.p95, total=stats.total
                )

        per_topic = {t: c.slot_counts() for t, c in sorted(fold.topics.items())}
        result = ModelResult(
            precision=total.precision,
            recall=total.recall,
            f1=total.f1,
            exact_match_rate=total.exact_match_rate,
            token_precision=total.token_precision,
            token_recall=total.token_recall,
            token_f1=total.token_f1,
            bleu1=total.bleu1,
            llm_judge=llm_judge,
            latency=latency,
            extra_slots=total.extra_slots,
            extra_values=total.extra_values,
            per_topic={t: _topic_result(c) for t, c in per_topic.items()},
            counts=Counts(
                tp=total.tp,
                fp=total.fp,
                fn=total.fn,
                gold_slots=total.gold_slots,
                sessions=total.sessions,
            ),
            ci={},
        )
        # the bootstrap rows in sorted session order
        at = rank[np.concatenate(fold.at)] if fold.at else np.empty(0, dtype=np.int64)
        rows = np.concatenate(fold.rows) if fold.rows else np.empty((0, len(_UNIT_FIELDS)))
        units = rows[np.argsort(at, kind="stable")].astype(float)
        fold.rows, fold.at = [], []
        topic_gold = {t: c.gold_slots for t, c in per_topic.items()}
        return ModelScore(model.name, result, units, seconds, keys, by_session, topic_gold)


def _by_line(errors: list[InputError]) -> list[InputError]:
    """A file's errors in line order (bad lines and repeated slots meet in different passes)."""
    return sorted(errors, key=lambda e: e.line or 0)


def score_models(
    gold: SlotFile,
    models: Sequence[ModelInput],
    *,
    tp: TPMode = "presence",
    threshold: float | None = None,
    matcher: Matcher | None = None,
    judge: Matcher | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> SlotsRun:
    """Score every model on the gold's sessions (slot spec, all sections; docs/slots.md), the
    files in memory: one bucket of ``SlotScorer``.

    ``tp`` picks when a predicted gold slot is a TP (``presence`` as the spec, or a value match
    through ``matcher`` at ``threshold``). Precomputed judge scores of a model win over ``judge``.
    Bootstrap intervals resample sessions (seeded); ``bootstrap=0`` skips them.
    """
    header = SlotFile(gold.path)
    inputs = [replace(m, predictions=SlotFile(m.predictions.path)) for m in models]
    scorer = SlotScorer(
        header,
        inputs,
        tp=tp,
        threshold=threshold,
        matcher=matcher,
        judge=judge,
        bootstrap=bootstrap,
        seed=seed,
        progress=progress,
    )
    if progress is not None:
        progress("scoring")
    scorer.add(gold, [m.predictions for m in models])
    return scorer.finish()


def _reasons(reasons: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in reasons.items())


def _bootstrap(
    scores: list[ModelScore],
    bootstrap: int,
    seed: int,
    progress: Callable[[str], None] | None,
    warn: Callable[[str], None],
) -> list[PairedF1]:
    """Each model's intervals and each pair's paired p-value. Every one of them draws the same
    seeded weights for the same number of sessions, so the weights are drawn once per number of
    sessions and shared: the same values as ``session_intervals`` and
    ``paired_bootstrap_groups_pvalue`` one by one, at a fraction of the draws."""
    ci_jobs: list[tuple[ModelScore, np.ndarray]] = [(s, s.units) for s in scores]
    pairs: list[tuple[ModelScore, ModelScore, np.ndarray, np.ndarray, float, float, int]] = []
    for a, b in combinations(scores, 2):
        b_at = {k: i for i, k in enumerate(b.keys)}
        common = [(i, b_at[k]) for i, k in enumerate(a.keys) if k in b_at]
        if not common:
            warn(f"models {a.name!r} and {b.name!r} share no scored session; F1 not compared")
            continue
        units_a, units_b = a.units, b.units
        if len(common) == len(a.keys) == len(b.keys):
            f1_a, f1_b = a.result.f1, b.result.f1  # every session: the models' own F1
        else:
            index = np.asarray(common, dtype=np.intp)
            units_a, units_b = units_a[index[:, 0]], units_b[index[:, 1]]
            f1_a = float(_stat_f1(units_a.sum(axis=0, keepdims=True))[0])
            f1_b = float(_stat_f1(units_b.sum(axis=0, keepdims=True))[0])
        pairs.append((a, b, units_a, units_b, f1_a, f1_b, len(common)))
    intervals: dict[str, dict[str, Interval]] = {s.name: {} for s in scores}
    p_values: list[float | None] = [None] * len(pairs)
    if bootstrap > 0:
        if progress is not None:
            progress("bootstrap")
        sizes = sorted({len(u) for _, u in ci_jobs} | {len(p[2]) for p in pairs})
        for n in sizes:
            cis = [(s.name, u) for s, u in ci_jobs if len(u) == n]
            tests = [(i, p[2], p[3]) for i, p in enumerate(pairs) if len(p[2]) == n]
            found, p_found = _shared_draws(n, cis, tests, resamples=bootstrap, seed=seed)
            intervals |= found
            for i, p in p_found.items():
                p_values[i] = p
    for s in scores:
        s.result.ci = {name: intervals[s.name].get(name) for name in CI_METRICS}
    return [
        PairedF1(
            model_a=a.name,
            model_b=b.name,
            f1_a=f1_a,
            f1_b=f1_b,
            difference=f1_a - f1_b,
            p_value=p_values[i],
            sessions=n,
        )
        for i, (a, b, _, _, f1_a, f1_b, n) in enumerate(pairs)
    ]


def _shared_draws(
    n: int,
    cis: list[tuple[str, np.ndarray]],
    tests: list[tuple[int, np.ndarray, np.ndarray]],
    *,
    resamples: int,
    seed: int,
    max_cells: int = 2_000_000,
) -> tuple[dict[str, dict[str, Interval]], dict[int, float]]:
    """``session_intervals`` of each ``cis`` entry and ``paired_bootstrap_groups_pvalue`` (of
    F1) of each ``tests`` entry, all over ``n`` sessions, from one stream of weights drawn
    exactly as those functions draw them (``max_cells // n`` resamples at a time)."""
    if n < 1:
        return {}, {}
    values = {name: {s: np.empty(resamples) for s in STATISTICS} for name, _ in cis}
    observed = {
        i: float(
            _stat_f1(a.sum(axis=0, keepdims=True))[0] - _stat_f1(b.sum(axis=0, keepdims=True))[0]
        )
        for i, a, b in tests
    }
    extreme = dict.fromkeys(observed, 0)
    rng = np.random.default_rng(seed)
    probabilities = np.full(n, 1.0 / n)
    idx = np.arange(n, dtype=np.intp)
    step = max(1, max_cells // n)
    for start in range(0, resamples, step):
        size = min(step, resamples - start)
        weights = rng.multinomial(n, probabilities, size=size).astype(float)
        if cis:
            picked = weights[:, idx]
            for name, rows in cis:
                totals = picked @ rows
                for stat_name, stat in STATISTICS.items():
                    values[name][stat_name][start : start + size] = stat(totals)
        for i, a, b in tests:
            deltas = _stat_f1(weights @ a) - _stat_f1(weights @ b)
            extreme[i] += int(
                np.count_nonzero(np.abs(deltas - observed[i]) >= abs(observed[i]) - 1e-12)
            )
    intervals = {
        name: {
            s: _percentile_interval(
                values[name][s], float(stat(rows.sum(axis=0, keepdims=True))[0]), 0.95
            )
            for s, stat in STATISTICS.items()
        }
        for name, rows in cis
    }
    return intervals, {i: (k + 1) / (resamples + 1) for i, k in extreme.items()}


def _judge_signature(models: Sequence[ModelInput], judge: Matcher | None) -> str:
    sources = []
    for m in models:
        if m.judge_scores is not None:
            sources.append(f"{m.name}=file")
        elif judge is not None:
            sources.append(f"{m.name}={judge.name}")
    return ";".join(sources) if sources else "none"


def _failures(
    preds: SlotFile,
    gold: SlotFile,
    pairs: Sequence[tuple[SessionKey, SlotKey]],
    sims: Sequence[Similarity],
    *,
    what: str,
    out: list[tuple[SessionKey, int, InputError]],
) -> int:
    """Record every failed comparison as an error at its prediction line (never a score of 0),
    so the run exits 3 and ``errors.jsonl`` lists it; returns how many failed. Each is kept
    with its session and gold line, the order of the comparisons over sorted sessions."""
    count = 0
    for (sk, slot), sim in zip(pairs, sims, strict=True):
        if sim.ok:
            continue
        count += 1
        error = InputError(
            f"{what}: {sim.error or 'no score'}",
            file=preds.path,
            line=preds.lines.get((sk, slot)),
            record=f"{sk[0]}/{sk[1]} {slot[0]}/{slot[1]}",
            field="values",
        )
        out.append((sk, gold.lines.get((sk, slot), 0), error))
    return count


def _topic_result(c: SlotCounts) -> TopicResult:
    return TopicResult(
        precision=c.precision,
        recall=c.recall,
        f1=c.f1,
        exact_match_rate=c.exact_match_rate,
        extra_slots=c.extra_slots,
        extra_values=c.extra_values,
    )

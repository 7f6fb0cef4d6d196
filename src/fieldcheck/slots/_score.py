"""Scoring several models against one gold file: counts per session, metrics, intervals, p-values
(slot spec); the value matcher and the judge are asked in one batch per model and bucket."""

from __future__ import annotations

import logging
import marshal
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import numpy as np
import orjson
from pydantic import BaseModel

from fieldcheck._util.errors import ErrorList, InputError, check_type, shown_path
from fieldcheck._util.iters import chunked
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
from fieldcheck.metrics import (
    CANONICALIZE_VERSION,
    SESSION_FIELDS,
    SLOT_STATISTICS,
    Interval,
    RowClasses,
    TopicTally,
    TotalsStatistic,
    bootstrap_classes_ci,
    canonical_set,
    forget_slots,
    latency_stats,
    paired_bootstrap_classes_pvalue,
    pooled,
    score_session,
    slot_values,
    value_count,
)
from fieldcheck.slots._loaders import JudgeFile, LatencyFile, SessionKey, SlotFile, SlotKey
from fieldcheck.slots._stream import Bucket, gc_paused
from fieldcheck.store import MODEL_CHARS, ItemColumns, add_tag

if TYPE_CHECKING:
    from fieldcheck.store import RunRecorder

log = logging.getLogger("fieldcheck")


TPMode = Literal["presence", "exact", "fuzzy", "semantic"]
DEFAULT_THRESHOLDS: dict[TPMode, float] = {"exact": 1.0, "fuzzy": 0.8, "semantic": 0.8}
CI_METRICS = ("precision", "recall", "f1", "exact_match_rate", "token_f1")


@dataclass
class ModelInput:
    """One model's files (latencies and judge scores optional); ``not_scored``: the sessions
    whose call failed in ``slots run``, left out so a failed call is never a miss."""

    name: str
    predictions: SlotFile
    latencies: LatencyFile | None = None
    judge_scores: JudgeFile | None = None
    not_scored: Mapping[SessionKey, str] = field(default_factory=dict)
    # sessions whose reply was invalid (scored: their gold slots missed; said once, not as absent)
    invalid_replies: Collection[SessionKey] = ()


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
    session_seconds: dict[SessionKey, float] = field(default_factory=dict)  # latency by session
    topic_gold_slots: dict[str, int] = field(default_factory=dict)  # over the scored sessions
    judge_failed: int = 0  # the judge model's calls that failed (its slots left out of llm_judge)

    @property
    def not_scored(self) -> int:
        return sum(self.result.sessions_not_scored.values())

    @property
    def sessions(self) -> int:
        return self.result.counts.sessions


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
    """Everything one ``slots score`` produced (``metrics_json()``: the file's object); the
    ``unscored`` models are left out of every comparison; ``names``: the order given."""

    models: list[ModelScore]
    paired_f1: list[PairedF1]
    signature: Signature
    topics: list[str]
    errors: ErrorList = field(default_factory=ErrorList)
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
    semantic: Callable[[], Matcher] = lambda: SemanticMatcher(cache=DiskCache())  # noqa: E731
    makers = {"exact": ExactMatcher, "fuzzy": FuzzyMatcher, "semantic": semantic}
    return makers[tp]() if tp in makers else None


def slot_text(values: Sequence[str], *, canonical: bool = False) -> str:
    """The one string a matcher or judge sees for a slot: its values sorted, joined by ", "."""
    if canonical:
        return ", ".join(sorted(canonical_set(values)))
    return ", ".join(sorted(v.strip() for v in slot_values(values)))


# Bootstrap: each session is a vector of sufficient statistics (SESSION_FIELDS); a resample's
# totals are a weighted sum of them, and each metric is vectorised over resamples.
TP, FP, FN, GOLD, EXACT, TOK_MATCHED, TOK_PRED, TOK_GOLD = range(len(SESSION_FIELDS))


ITEMS: dict[str, tuple[int, ...]] = {
    "precision": (TP, FP),  # predicted slots
    "recall": (TP, FN),  # gold slots
    "f1": (TP, FP, FN),  # predicted or gold slots
    "exact_match_rate": (GOLD,),
    "token_f1": (TOK_PRED, TOK_GOLD),
}
"""The counts of the items each statistic is a ratio over: none in a resample, no value."""


def _on_columns(columns: tuple[int, ...], name: str, *, items: bool = True) -> TotalsStatistic:
    """``SLOT_STATISTICS[name]`` of totals given only at ``columns`` (the others are not needed by
    it); with ``items``, NaN on a resample with none of its ``ITEMS`` (left out of the interval:
    the spec's 0 is for a model that predicted nothing, kept by the point estimate)."""
    stat, counted = SLOT_STATISTICS[name], list(ITEMS[name]) if items else []

    def on(totals: np.ndarray) -> np.ndarray:
        full = np.zeros((len(totals), len(SESSION_FIELDS)))
        full[:, columns] = totals
        values = np.asarray(stat(full), dtype=float)
        return np.where(full[:, counted].sum(axis=1) > 0, values, np.nan) if items else values

    return on


# The intervals draw over classes of equal rows (RowClasses), so each group of statistics keeps
# only the columns it reads: few distinct rows (tp, fp, fn), whatever the number of sessions.
CI_GROUPS: tuple[tuple[tuple[int, ...], dict[str, TotalsStatistic]], ...] = tuple(
    (columns, {name: _on_columns(columns, name) for name in names})
    for columns, names in (
        ((TP, FP, FN), ("precision", "recall", "f1")),
        ((EXACT, GOLD), ("exact_match_rate",)),
        ((TOK_MATCHED, TOK_PRED, TOK_GOLD), ("token_f1",)),
    )
)
PAIR_COLUMNS = (TP, FP, FN)
_PAIR_F1 = _on_columns(PAIR_COLUMNS, "f1", items=False)
_PAIR_STREAM = len(CI_GROUPS)
"""The paired test's draws come from their own stream (the groups' are 0, 1, 2)."""


@dataclass
class _ModelFold:
    """One model's running state over the buckets of sessions (``SlotScorer``)."""

    model: ModelInput
    topics: dict[str, TopicTally] = field(default_factory=dict)
    classes: list[RowClasses] = field(
        default_factory=lambda: [RowClasses(len(c)) for c, _ in CI_GROUPS]
    )
    scored: int = 0
    left_out: Counter[str] = field(default_factory=Counter)  # gold sessions not scored: why
    session_seconds: dict[SessionKey, float] = field(default_factory=dict)  # of scored sessions
    latency_in_gold: int = 0  # latency lines of gold sessions
    judge_in_gold: int = 0  # judge scores of gold sessions
    latency: LatencyFile | None = None  # the bucket's latencies
    judge_scores: JudgeFile | None = None  # the bucket's judge scores
    judged: dict[SessionKey, dict[SlotKey, float]] | None = None  # the bucket's, file or judge
    latency_lines: int = 0  # valid latency lines over the buckets
    judge_lines: int = 0  # valid judge scores over the buckets
    latency_errors: ErrorList = field(default_factory=ErrorList)  # the buckets' duplicates
    judge_errors: ErrorList = field(default_factory=ErrorList)
    unknown: int = 0
    unknown_first: int | None = None
    unknown_lines: int = 0
    unknown_shown: list[SessionKey] = field(default_factory=list)
    dropped: int = 0
    absent: int = 0
    pairs: int = 0
    long: int = 0
    judged_pairs: int = 0
    file_errors: ErrorList = field(default_factory=ErrorList)
    # failed comparisons (``_compare``): (session, gold line, error)
    value_failures: list[tuple[SessionKey, int, InputError]] = field(default_factory=list)
    judge_failures: list[tuple[SessionKey, int, InputError]] = field(default_factory=list)


_FOLD_SUMS = (
    "scored", "latency_in_gold", "judge_in_gold", "unknown", "unknown_lines", "dropped",
    "absent", "pairs", "long", "judged_pairs", "latency_lines", "judge_lines",
)  # fmt: skip
_FOLD_LISTS = (
    "latency_errors", "judge_errors", "file_errors", "value_failures",
    "judge_failures",
)  # fmt: skip


def _absorb_fold(fold: _ModelFold, later: _ModelFold) -> None:
    """Fold in ``later``, the same model's state over buckets that come after ``fold``'s: the
    state one fold over all those buckets in order would have (dicts keep that key order)."""
    for name, topic in later.topics.items():
        if name in fold.topics:
            fold.topics[name].absorb(topic)
        else:
            fold.topics[name] = topic
    for classes, more in zip(fold.classes, later.classes, strict=True):
        classes.absorb(more)
    for name in _FOLD_SUMS:
        setattr(fold, name, getattr(fold, name) + getattr(later, name))
    for name in _FOLD_LISTS:
        getattr(fold, name).extend(getattr(later, name))
    fold.left_out.update(later.left_out)
    fold.session_seconds.update(later.session_seconds)
    firsts = [f for f in (fold.unknown_first, later.unknown_first) if f is not None]
    fold.unknown_first = min(firsts) if firsts else None
    fold.unknown_shown = sorted(fold.unknown_shown + later.unknown_shown)[:6]


@dataclass
class ScorerState:
    """What a ``SlotScorer`` folded over some buckets, without its inputs (picklable): a chunk's
    digest (``score_chunk``). ``absorb`` merges a later one in place, associatively."""

    folds: list[_ModelFold]
    pairs: dict[tuple[int, int], RowClasses]
    sessions: int = 0  # gold sessions so far
    gold_errors: ErrorList = field(default_factory=ErrorList)
    empty_gold: int = 0
    any_gold_value: bool = False
    topic_gold: Counter[str] = field(default_factory=Counter)

    def absorb(self, later: ScorerState) -> None:
        """Fold in ``later``, the state of the same inputs and settings over later buckets, so
        ``finish`` gives what one scorer over all of them would."""
        for fold, more in zip(self.folds, later.folds, strict=True):  # ValueError: other models
            _absorb_fold(fold, more)
        self.sessions += later.sessions
        for key, classes in self.pairs.items():
            classes.absorb(later.pairs[key])
        self.gold_errors += later.gold_errors
        self.empty_gold += later.empty_gold
        self.any_gold_value = self.any_gold_value or later.any_gold_value
        self.topic_gold.update(later.topic_gold)


class SlotScorer(ScorerState):
    """Scores models on gold sessions fed in buckets by session (the result does not depend on
    the split: tests/slots/test_streamed.py), folding counts, topic tallies and bootstrap row
    classes; ``finish`` gives the ``SlotsRun`` (slot spec; docs/slots.md "Large files")."""

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
        recorder: RunRecorder | ChunkItems | None = None,  # where each bucket's items go
    ) -> None:
        names = [m.name for m in models]
        if len(set(names)) != len(names):
            raise ValueError(f"model names must be unique (got {names})")
        _check_options(tp, threshold, bootstrap, seed)
        if tp != "presence" and matcher is None:
            matcher = make_matcher(tp)
        self.gold, self.models = gold, list(models)
        self.tp, self.threshold, self.matcher, self.judge = tp, threshold, matcher, judge
        self.cut = threshold if threshold is not None else DEFAULT_THRESHOLDS.get(tp, 1.0)
        self.bootstrap, self.seed, self.progress = bootstrap, seed, progress
        pairs = {p: RowClasses(2 * len(PAIR_COLUMNS)) for p in combinations(range(len(models)), 2)}
        super().__init__([_ModelFold(m) for m in models], pairs)
        self.recorder = recorder
        # build the items here (``_item_tuples``), not in the store's writer: when two scoring
        # processes feed one writer, building every item would make it the slowest of three
        self.build_items = False

    def signature(self) -> Signature:
        """The run's signature (its settings), known before any session is scored, so a
        recorder can be opened with it first."""
        settings: dict[str, Any] = {
            "tp": self.tp,
            "canonicalize": CANONICALIZE_VERSION,
            "bootstrap": self.bootstrap,
            "seed": self.seed,
            "judge": _judge_signature(self.models, self.judge),
        }
        if self.tp != "presence" and self.matcher is not None:
            settings["matcher"] = self.matcher.signature()
            settings["threshold"] = self.cut
        return Signature(system="slots", settings=settings)

    def state(self) -> ScorerState:
        """What it folded so far, without its inputs (the absorbing scorer has its own)."""
        state = {f.name: getattr(self, f.name) for f in fields(ScorerState)}
        state["folds"] = [
            replace(f, model=None, latency=None, judge_scores=None, judged=None)  # type: ignore[arg-type]
            for f in self.folds
        ]
        return ScorerState(**state)

    def add_part(self, bucket: Bucket) -> None:
        """Score one bucket of a ``Partition`` of the gold, each model's slot file, then each
        model's latency and judge files where it has them."""
        slots, found = bucket.part()
        sides = iter(found)
        pairs = [
            (next(sides) if m.latencies else None, next(sides) if m.judge_scores else None)
            for m in self.models
        ]
        self.add(slots[0], slots[1:], *zip(*pairs, strict=True))

    @gc_paused()
    def add(
        self,
        gold: SlotFile,
        predictions: Sequence[SlotFile],
        latencies: Sequence[LatencyFile | None],
        judges: Sequence[JudgeFile | None],
    ) -> None:
        """Score one bucket: ``gold`` and, in model order, each model's files of the same
        sessions (None: no such file); their ``errors`` are the bucket's duplicate lines."""
        for fold, latency, judge in zip(self.folds, latencies, judges, strict=True):
            fold.latency, fold.judge_scores = latency, judge
            if latency is not None:
                fold.latency_lines += len(latency.seconds)
                fold.latency_errors += latency.errors
            if judge is not None:
                fold.judge_lines += judge.records
                fold.judge_errors += judge.errors
        self.gold_errors += gold.errors
        for slots in gold.sessions.values():
            for (topic, _), values in slots.items():
                if value_count(tuple(values)):
                    self.any_gold_value = True
                    self.topic_gold[topic] += 1
                else:
                    self.empty_gold += 1
        keys = sorted(gold.sessions)
        self.sessions += len(keys)
        bucket: list[tuple[np.ndarray, np.ndarray, Rejected]] = []
        for fold, preds in zip(self.folds, predictions, strict=True):
            fold.file_errors += preds.errors
            bucket.append(self._score_bucket(fold, gold, preds, keys))
        for (i, j), classes in self.pairs.items():
            (units_a, scored_a, _), (units_b, scored_b, _) = bucket[i], bucket[j]
            both = scored_a & scored_b
            if both.any():
                cols = list(PAIR_COLUMNS)
                classes.add(np.hstack([units_a[both][:, cols], units_b[both][:, cols]]))
        if self.recorder is not None:
            payload = self._store_payload(gold, predictions, keys, bucket)
            n_items = len(keys) * len(self.folds)
            if self.build_items:
                for piece in chunked(_item_tuples(payload), PIECE_ITEMS):
                    self.recorder.add_built(
                        PREBUILT_ROWS, marshal.dumps(piece), len(piece), plain=True
                    )
            else:
                self.recorder.add_built(STORE_ROWS, payload, n_items, plain=True)

    def _store_payload(
        self,
        gold: SlotFile,
        predictions: Sequence[SlotFile],
        keys: list[SessionKey],
        bucket: list[tuple[np.ndarray, np.ndarray, Rejected]],
    ) -> StorePayload:
        """What ``store_rows`` makes the bucket's items of (picklable: the store's writer process
        may build them): the sessions, their gold slots, and per model what its items hold."""
        models = []
        for fold, preds, (units, scored, rejected) in zip(
            self.folds, predictions, bucket, strict=True
        ):
            model = fold.model
            flags = scored.tolist()
            seconds = fold.latency.seconds if fold.latency is not None else None
            judged = fold.judged  # a judge model's scores are stored as a judge file's are
            models.append(
                (
                    model.name,
                    [preds.sessions.get(k) for k in keys],
                    units.tolist(),
                    flags,
                    None if seconds is None else {k: seconds[k] for k in keys if k in seconds},
                    None if judged is None else {k: judged[k] for k in keys if k in judged},
                    {
                        k: model.not_scored.get(k, "not scored")
                        for k, done in zip(keys, flags, strict=True)
                        if not done
                    },
                    rejected,
                )
            )
        return keys, [gold.sessions[k] for k in keys], models

    def _score_bucket(
        self,
        fold: _ModelFold,
        gold: SlotFile,
        preds: SlotFile,
        keys: list[SessionKey],
    ) -> tuple[np.ndarray, np.ndarray, Rejected]:
        """Fold one model's bucket in; returns each session's counts (0: not scored), which were
        scored, and per session the gold slots the matcher rejected (each an FP and an FN)."""
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
        if len(scored) < len(keys):
            fold.left_out.update(not_scored[k] for k in keys if k in not_scored)
        fold.scored += len(scored)
        fold.absent += sum(
            1 for _, k in scored if k not in preds.sessions and k not in model.invalid_replies
        )
        if fold.latency is not None:
            timed = fold.latency.seconds
            fold.latency_in_gold += sum(1 for k in keys if k in timed)
            for _, k in scored:
                if k in timed:
                    fold.session_seconds[k] = timed[k]
        if fold.judge_scores is not None:
            scores = fold.judge_scores.scores
            fold.judge_in_gold += sum(len(scores[k]) for k in keys if k in scores)
        empty: dict[SlotKey, list[str]] = {}
        # the gold slots with a predicted value: the pairs a matcher or a judge has to see
        count = value_count
        checked = self.matcher is not None and self.tp != "presence"
        pairs: list[tuple[SessionKey, SlotKey]] = []
        if checked or fold.judge_scores is not None or self.judge is not None:
            pairs = [
                (sk, slot)
                for _, sk in scored
                for slot, values in gold.sessions[sk].items()
                if count(tuple(values))
                and count(tuple(preds.sessions.get(sk, empty).get(slot, ())))
            ]
        fold.pairs += len(pairs)
        matches = self._value_matches(fold, gold, preds, pairs)
        judged = fold.judged = self._judged(fold, gold, preds, pairs)

        topics = fold.topics
        units = np.zeros((len(keys), len(SESSION_FIELDS)), dtype=np.int64)  # counts of a session
        for row, sk in scored:
            units[row] = score_session(
                preds.sessions.get(sk, empty),
                gold.sessions[sk],
                topics,
                value_matches=None if matches is None else matches.get(sk, {}),
                judge_scores=None if judged is None else judged.get(sk, {}),
            )
        for t in topics.values():
            t.settle()
        mask = np.zeros(len(keys), dtype=bool)
        mask[[i for i, _ in scored]] = True
        for classes, (columns, _) in zip(fold.classes, CI_GROUPS, strict=True):
            classes.add(units[mask][:, list(columns)])
        rejected: Rejected = {}
        for sk, verdicts in (matches or {}).items():
            wrong = [slot for slot, ok in verdicts.items() if not ok]
            if wrong:
                rejected[sk] = sorted(wrong)
        return units, mask, rejected

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
        failed = "value comparison failed", fold.value_failures
        texts, sims = _compare(matcher, preds, gold, pairs, failed, canonical=self.tp == "exact")
        if isinstance(matcher, FuzzyMatcher):
            fold.long += sum(map(compared_linearly, *texts))
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
        if fold.judge_scores is not None:
            scores = fold.judge_scores.scores
            fold.judged_pairs += sum(1 for sk, slot in pairs if slot in scores.get(sk, {}))
            return {sk: scores[sk] for sk in gold.sessions if sk in scores}
        if self.judge is None:
            return None
        what = f"the judge failed on model {fold.model.name!r}"
        _, sims = _compare(self.judge, preds, gold, pairs, (what, fold.judge_failures), at=None)
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

        # each file's errors in line order: bad lines and repeated slots meet in different passes
        errors = (gold.errors + self.gold_errors).by_line()
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

        scores: list[ModelScore] = []
        scored_folds: list[int] = []
        unscored: list[UnscoredModel] = []
        for index, fold in enumerate(self.folds):
            model = fold.model
            errors += (model.predictions.errors + fold.file_errors).by_line()
            left_out = sum(fold.left_out.values())
            reasons = dict(sorted(fold.left_out.items()))
            if left_out and left_out == self.sessions:
                warn(
                    f"model {model.name!r}: nothing scored: the call failed for all "
                    f"{left_out} gold session(s) ({reasons_text(reasons)})"
                )
                unscored.append(UnscoredModel(model.name, reasons))
                continue
            if left_out:
                warn(
                    f"model {model.name!r}: {left_out} of {self.sessions} gold session(s) "
                    f"not scored, the call failed ({reasons_text(reasons)}); their gold slots are not "
                    "counted"
                )
            if model.invalid_replies:
                warn(
                    f"model {model.name!r}: {len(model.invalid_replies)} session(s) got an invalid "
                    "reply (session_errors.jsonl): scored, their gold slots count as missed"
                )
            score = self._model_score(fold, warn, errors)
            score.result.sessions_not_scored = reasons
            scores.append(score)
            scored_folds.append(index)

        # a model lists only the topics it has gold or predictions in: no 0.000 for a topic
        # another model invented (the spec fills per_topic from the model's own slots)
        topics = sorted({t for s in scores for t in s.result.per_topic})

        paired = self._bootstrap(scores, scored_folds, warn)
        names = [m.name for m in self.models]
        return SlotsRun(
            scores,
            paired,
            self.signature(),
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
        warn: Callable[[str], None],
        errors: ErrorList,
    ) -> ModelScore:
        model, preds = fold.model, fold.model.predictions
        n_scored = fold.scored
        if fold.unknown:
            shown = ", ".join(f"{u}/{s}" for u, s in fold.unknown_shown[:5]) + (
                " ..." if fold.unknown > 5 else ""
            )
            warn(
                f"{shown_path(preds.path)}:{fold.unknown_first}: model {model.name!r}: "
                f"{fold.unknown} session(s) not in the gold file ({shown}); their "
                f"{fold.unknown_lines} slot line(s) are not scored"
            )
        if fold.dropped:
            warn(
                f"model {model.name!r}: {fold.dropped} session(s) with prediction lines are not "
                "scored (their call failed); those lines are ignored"
            )
        if fold.absent:
            warn(
                f"model {model.name!r} has no prediction for {fold.absent} of {n_scored} gold "
                "session(s); their gold slots count as missed"
            )
        errors += _in_gold_order(fold.value_failures)
        if fold.value_failures:
            warn(
                f"model {model.name!r}: {len(fold.value_failures)} value comparison(s) failed; "
                "counted as no match"
            )
        if fold.long:
            warn(
                f"model {model.name!r}: {fold.long} slot value(s) longer than "
                f"{LONG_VALUE_CHARS:,} characters compared by 3-gram similarity, not edit "
                "distance (docs/slots.md)"
            )
        judged = model.judge_scores is not None or self.judge is not None
        if model.judge_scores is not None:
            errors += (model.judge_scores.errors + fold.judge_errors).by_line()
            stray = fold.judge_lines - fold.judge_in_gold
            unused = fold.judge_in_gold - fold.judged_pairs
            if stray:
                warn(
                    f"{shown_path(model.judge_scores.path)}: {stray} judge score(s) for "
                    "sessions not in the gold file are ignored"
                )
            if unused:
                warn(
                    f"{shown_path(model.judge_scores.path)}: {unused} judge score(s) for "
                    "slots that are not predicted gold slots (missed slots score 0, extra slots are not judged) are "
                    "ignored"
                )
        elif self.judge is not None:
            errors += _in_gold_order(fold.judge_failures)
            if fold.judge_failures:
                warn(
                    f"model {model.name!r}: {len(fold.judge_failures)} judge call(s) failed; "
                    "those predicted gold slots have no judge score, the judge mean leaves them out"
                )

        total = pooled(fold.topics.values(), sessions=n_scored)
        llm_judge = total["llm_judge"]
        if judged and fold.pairs and total["judge_missing"] == fold.pairs:
            warn(
                f"model {model.name!r}: no judge score for any predicted gold slot; the judge "
                "score is absent"
            )
            llm_judge = None
        elif model.judge_scores is not None and total["judge_missing"]:  # a judge's: said above
            source = model.judge_scores.path
            warn(
                f"model {model.name!r}: {total['judge_missing']} predicted gold slot(s) have no "
                f"score from {source}; the judge mean leaves them out"
            )

        seconds = list(fold.session_seconds.values())
        latency: LatencySummary | None = None
        if model.latencies is not None:
            errors += (model.latencies.errors + fold.latency_errors).by_line()
            stray_latency = fold.latency_lines - fold.latency_in_gold
            if stray_latency:
                warn(
                    f"{shown_path(model.latencies.path)}: {stray_latency} latency line(s) "
                    "for sessions not in the gold file are ignored"
                )
            if len(seconds) < n_scored:
                warn(
                    f"model {model.name!r}: latency known for {len(seconds)} of {n_scored} gold "
                    "sessions"
                )
            stats = latency_stats(seconds)
            if stats is not None:
                latency = LatencySummary(**stats.model_dump())

        per_topic = {t: c.metrics() for t, c in sorted(fold.topics.items())}
        result = ModelResult(
            **total | {"llm_judge": llm_judge, "latency": latency, "ci": {}},
            per_topic={t: TopicResult(**c) for t, c in per_topic.items()},
            counts=Counts(**total),
        )
        topic_gold = {t: c["gold_slots"] for t, c in per_topic.items()}
        failed = len(fold.judge_failures) if model.judge_scores is None else 0
        return ModelScore(model.name, result, fold.session_seconds, topic_gold, failed)

    def _bootstrap(
        self, scores: list[ModelScore], folds: list[int], warn: Callable[[str], None]
    ) -> list[PairedF1]:
        """Each model's intervals and each pair's F1 p-value over the sessions both were scored
        on: Poisson bootstraps over classes of equal rows (docs/decisions.md)."""
        bootstrap, seed = self.bootstrap, self.seed
        if bootstrap > 0 and self.progress is not None:
            self.progress("bootstrap")
        for score, index in zip(scores, folds, strict=True):
            found: dict[str, Interval] = {}  # none without resamples
            for stream, (classes, (_, statistics)) in enumerate(
                zip(self.folds[index].classes, CI_GROUPS, strict=True)
            ):
                ci = bootstrap_classes_ci(
                    classes, statistics, resamples=bootstrap, seed=seed, stream=stream
                )
                found |= ci or {}
            score.result.ci = {name: found.get(name) for name in CI_METRICS}
        paired: list[PairedF1] = []
        for (ia, a), (ib, b) in combinations(zip(folds, scores, strict=True), 2):
            classes = self.pairs[(ia, ib)]
            if not classes.units:
                warn(f"models {a.name!r} and {b.name!r} share no scored session; F1 not compared")
                continue
            n = len(PAIR_COLUMNS)
            if classes.units == a.sessions == b.sessions:
                f1_a, f1_b = a.result.f1, b.result.f1  # every session: the models' own F1
            else:
                full = classes.totals()
                f1_a = float(_PAIR_F1(full[:, :n])[0])
                f1_b = float(_PAIR_F1(full[:, n:])[0])
            p_value = paired_bootstrap_classes_pvalue(  # None without resamples
                classes, n, _PAIR_F1, resamples=bootstrap, seed=seed, stream=_PAIR_STREAM
            )
            paired.append(
                PairedF1(
                    model_a=a.name,
                    model_b=b.name,
                    f1_a=f1_a,
                    f1_b=f1_b,
                    difference=f1_a - f1_b,
                    p_value=p_value,
                    sessions=classes.units,
                )
            )
        return paired


def _slot_list(
    slots: Mapping[SlotKey, Sequence[str]], order: list[SlotKey]
) -> list[tuple[str, str, Sequence[str]]]:
    """``[(topic, field, values), ...]`` in slot order (``order``: the sorted keys): a
    session's slots in an item, serialised as ``[[topic, field, [values]], ...]``."""
    out: list[tuple[str, str, Sequence[str]]] = []
    for k in order:
        v = slots[k]
        out.append((k[0], k[1], v if type(v) is list or type(v) is tuple else list(v)))
    return out


def _differ(
    gold: Mapping[SlotKey, frozenset[str]], pred: Mapping[SlotKey, frozenset[str]]
) -> dict[str, dict[str, int]]:
    """Per topic of a session, how many slots differ between gold and prediction (missing, extra,
    other canonical values): what the store's topic filter flags; not the metric's TP rule."""
    topics: dict[str, dict[str, int]] = {}
    get = pred.get
    for slot, values in gold.items():
        other = get(slot)
        differ = other is not values and other != values  # equal sets are often one object
        entry = topics.get(slot[0])
        if entry is None:
            topics[slot[0]] = {"slots": 1, "differ": int(differ)}
        else:
            entry["slots"] += 1
            entry["differ"] += differ
    for slot in pred.keys() - gold.keys():
        entry = topics.get(slot[0])
        if entry is None:
            topics[slot[0]] = {"slots": 1, "differ": 1}
        else:
            entry["slots"] += 1
            entry["differ"] += 1
    return topics


def _topic_failures(
    topics: dict[str, dict[str, int]],
    gold: Mapping[SlotKey, Sequence[str]],
    pred: Mapping[SlotKey, Sequence[str]],
    rejected: set[SlotKey],
) -> None:
    """Add to ``topics`` (``_differ``'s) each topic's FPs and FNs as ``score_session`` counts
    them, a ``rejected`` gold slot an FP and an FN (docs/slots.md glossary)."""
    for slot, values in gold.items():
        if not slot_values(values):
            continue
        entry = topics[slot[0]]
        if not slot_values(pred.get(slot, ())):
            entry["fn"] = entry.get("fn", 0) + 1
        elif slot in rejected:
            entry["fp"] = entry.get("fp", 0) + 1
            entry["fn"] = entry.get("fn", 0) + 1
    for slot, values in pred.items():
        if slot_values(values) and not slot_values(gold.get(slot, ())):
            entry = topics[slot[0]]
            entry["fp"] = entry.get("fp", 0) + 1


Rejected = dict[SessionKey, list[SlotKey]]
StorePayload = tuple[list[SessionKey], list[Any], list[tuple[Any, ...]]]
STORE_ROWS = "fieldcheck.slots._score:store_rows"
PREBUILT_ROWS = "fieldcheck.slots._score:prebuilt_rows"
PIECE_ITEMS = 1024
"""A pool's task hands its bucket's built items on in pieces of this many (about 1 MB): the
store's writer tasks stay near their ``TASK_BYTES`` (docs/decisions.md)."""


def prebuilt_rows(data: bytes) -> Iterator[tuple[ItemColumns, bytes]]:
    """The items of ``_item_tuples``, marshalled: handed on as bytes, the scoring process never
    decodes them."""
    for key, failed, model, turn, error_type, tags, result in marshal.loads(data):
        yield ItemColumns(key, failed, model, turn, error_type, tags), result


def store_rows(payload: StorePayload) -> Iterator[tuple[ItemColumns, bytes]]:
    """A bucket's items for the run store (``SlotScorer._store_payload``; docs/runs.md), model by
    model over the sessions in sorted order, with their ``item_columns``."""
    for *columns, result in _item_tuples(payload):
        yield ItemColumns(*columns), result


def _item_tuples(payload: StorePayload) -> Iterator[tuple[Any, ...]]:
    """``store_rows``'s items as plain tuples: ``ItemColumns``'s fields, then the result."""
    keys, gold_slots, models = payload
    canonical = _canonical
    dumps, fragment, sort = orjson.dumps, orjson.Fragment, orjson.OPT_SORT_KEYS
    gold_texts = []
    gold_sets = []
    for g in gold_slots:
        order = sorted(g)
        gold_texts.append(fragment(dumps(_slot_list(g, order))))
        gold_sets.append({k: canonical(tuple(g[k])) for k in order})
    for name, predicted, counts, scored, seconds, judged, not_scored, rejected in models:
        for i, key in enumerate(keys):
            slots = predicted[i]
            if slots:
                order = sorted(slots)
                pred = _slot_list(slots, order)
                per_topic = _differ(gold_sets[i], {k: canonical(tuple(slots[k])) for k in order})
            else:
                pred = []
                per_topic = _differ(gold_sets[i], {})
            item: dict[str, Any] = {
                "model": name,
                "user": key[0],
                "session": key[1],
                "gold": gold_texts[i],
                "pred": pred,
                "per_topic": per_topic,
            }
            if seconds is not None and key in seconds:
                item["latency_s"] = seconds[key]
            if judged is not None and key in judged:
                item["judge"] = [[t, f, s] for (t, f), s in sorted(judged[key].items())]
            if scored[i]:
                item["counts"] = dict(zip(SESSION_FIELDS, counts[i], strict=True))
                wrong = rejected.get(key, ())
                if wrong:
                    item["unmatched"] = [list(slot) for slot in wrong]
                if counts[i][FP] or counts[i][FN]:  # where it failed: few sessions, counted here
                    _topic_failures(per_topic, gold_slots[i], slots or {}, set(wrong))
            else:
                item["not_scored"] = not_scored[key]
            yield (*item_columns(item), dumps(item, option=sort))


def item_columns(item: Mapping[str, Any]) -> ItemColumns:
    """A model's session as columns: failed with an FP or FN, tagged with its topics (failed on
    one with an FP or FN); neither when not scored. A ``key`` given wins over model/user/session."""
    model = str(item.get("model", ""))
    key = str(item.get("key", f"{model}/{item.get('user')}/{item.get('session')}"))
    not_scored = item.get("not_scored")
    counts = item.get("counts") or {}
    failed = None if not_scored else bool(counts.get("fp") or counts.get("fn"))
    tags: dict[str, bool] = {}
    for topic, c in () if not_scored else (item.get("per_topic") or {}).items():
        add_tag(tags, str(topic), bool(c.get("fp") or c.get("fn")))
    error_type = str(not_scored) if not_scored else None
    return ItemColumns(key, failed, model[:MODEL_CHARS], error_type=error_type, tags=tags)


@lru_cache(maxsize=32_768)
def _canonical(values: tuple[str, ...]) -> frozenset[str]:
    """``canonical_set`` of a slot's values, remembered in whichever process builds the store's
    items (sessions repeat values); a cached set is one object, which ``_differ`` relies on."""
    return canonical_set(values)


@dataclass(frozen=True)
class SlotJob:
    """What scoring a bucket needs besides it (``score_chunk``; picklable without a ``judge`` and
    a ``matcher``): the files' ``headers``, the ``SlotScorer`` options of the TP rule (``tp``,
    ``threshold``, ``matcher``, ``judge``), whether items are stored and built here."""

    gold: SlotFile
    models: tuple[ModelInput, ...]
    options: Mapping[str, Any] = field(default_factory=dict)
    store: bool = False
    built: bool = False


def headers(models: Sequence[ModelInput]) -> tuple[ModelInput, ...]:
    """The models as a job has them: their files' paths (not what was read of them) and the
    sessions not scored."""
    return tuple(
        replace(
            m,
            predictions=SlotFile(m.predictions.path),
            latencies=None if m.latencies is None else LatencyFile(m.latencies.path),
            judge_scores=None if m.judge_scores is None else JudgeFile(m.judge_scores.path),
        )
        for m in models
    )


class ChunkItems:
    """A chunk scorer's items as ``RunRecorder.add_built``'s arguments, given back when iterated;
    in a pool, their bytes wait in the file ``spill`` (held whole, they grew the peak RSS)."""

    def __init__(self, spill: Path | None = None) -> None:
        self.rows: list[tuple[str, Any, int]] = []  # spilled: the payload's size
        self.spill = spill

    def add_built(self, builder: str, payload: Any, count: int, *, plain: bool = False) -> int:
        if self.spill is not None:
            with self.spill.open("ab") as file:
                file.write(payload)
            payload = len(payload)
        self.rows.append((builder, payload, count))
        return count

    def __iter__(self) -> Iterator[tuple[str, Any, int]]:
        if self.spill is None or not self.rows:
            yield from self.rows
            return
        with self.spill.open("rb") as file:
            for builder, size, count in self.rows:
                yield builder, file.read(size), count
        self.spill.unlink()


def score_chunk(job: SlotJob, bucket: Bucket) -> tuple[ChunkItems, ScorerState]:
    """One bucket scored: its items for the store (``ChunkItems``) and its digest
    (``ScorerState``, merged in bucket order by ``absorb``)."""
    sink = ChunkItems(bucket.spill if job.built else None)
    scorer = SlotScorer(job.gold, job.models, **job.options, recorder=sink if job.store else None)
    scorer.build_items = job.built
    with gc_paused():  # reading the bucket makes as many objects as scoring it
        scorer.add_part(bucket)
    return sink, scorer.state()


def score_models(gold: SlotFile, models: Sequence[ModelInput], **options: Any) -> SlotsRun:
    """Score every model on the gold's sessions, the files in memory: one bucket of a
    ``SlotScorer`` made with ``options`` (slot spec, all sections; docs/slots.md)."""
    check_type("gold", gold, SlotFile, "a SlotFile (load_slots')")
    check_type("models", models, ModelInput, "a ModelInput", each=True)
    forget_slots()
    scorer = SlotScorer(SlotFile(gold.path), headers(models), **options)
    if scorer.progress is not None:
        scorer.progress("scoring")
    scorer.add(
        gold,
        [m.predictions for m in models],
        [m.latencies for m in models],
        [m.judge_scores for m in models],
    )
    return scorer.finish()


def _check_options(tp: Any, threshold: Any, bootstrap: Any, seed: Any) -> None:
    """A bad ``tp``, ``threshold``, ``bootstrap`` or ``seed`` is a ValueError naming it, never a
    run scored with other settings (a bad ``tp`` once scored as presence)."""
    if not isinstance(tp, str) or tp not in get_args(TPMode):
        raise ValueError(f"tp must be one of {', '.join(get_args(TPMode))} (got {tp!r})")
    if threshold is not None and not (
        isinstance(threshold, int | float)
        and not isinstance(threshold, bool)
        and 0.0 <= threshold <= 1.0
    ):
        raise ValueError(f"threshold must be a number in [0, 1] or None (got {threshold!r})")
    for name, value in (("bootstrap", bootstrap), ("seed", seed)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a whole number >= 0 (got {value!r})")


def reasons_text(reasons: Mapping[str, int]) -> str:
    """How many sessions were not scored for each reason: ``timeout=2, server_error=1``."""
    return ", ".join(f"{k}={v}" for k, v in sorted(reasons.items()))


def _judge_signature(models: Sequence[ModelInput], judge: Matcher | None) -> str:
    sources = []
    for m in models:
        if m.judge_scores is not None:
            sources.append(f"{m.name}=file")
        elif judge is not None:
            sources.append(f"{m.name}={judge.name}")
    return ";".join(sources) if sources else "none"


def _compare(
    matcher: Matcher,
    preds: SlotFile,
    gold: SlotFile,
    pairs: Sequence[tuple[SessionKey, SlotKey]],
    failed: tuple[str, list[tuple[SessionKey, int, InputError]]],
    *,
    canonical: bool = False,
    at: str | None = "values",
) -> tuple[tuple[list[str], list[str]], list[Similarity]]:
    """The pairs' texts (predicted, gold) and the matcher's similarities; each failed comparison
    is an error ``failed[0]: why`` at its prediction line and field ``at`` (``at`` None: a
    judge's failure, of no input file: the record alone) (never a score of 0: the run exits 3),
    added to ``failed[1]`` with its session and gold line for ordering (``_in_gold_order``)."""
    what, failures = failed
    predicted = [slot_text(preds.sessions[sk][slot], canonical=canonical) for sk, slot in pairs]
    golden = [slot_text(gold.sessions[sk][slot], canonical=canonical) for sk, slot in pairs]
    sims = matcher.similarities(predicted, golden) if pairs else []
    for (sk, slot), sim in zip(pairs, sims, strict=True):
        if not sim.ok:
            error = InputError(
                f"{what}: {sim.error or 'no score'}",
                file=preds.path if at else None,
                line=preds.lines.get((sk, slot)) if at else None,
                record=f"{sk[0]}/{sk[1]} {slot[0]}/{slot[1]}",
                field=at,
            )
            failures.append((sk, gold.lines.get((sk, slot), 0), error))
    return (predicted, golden), sims


def _in_gold_order(failures: list[tuple[SessionKey, int, InputError]]) -> list[InputError]:
    return [e for *_, e in sorted(failures, key=lambda f: (f[0], f[1]))]

"""Scoring several models against one gold file: counts per session, metrics, intervals, p-values.

The runner layer over ``fieldcheck.metrics._slots``: it pairs files by session, asks the value
matcher and the judge (when chosen) in one batch per model, then only sums per-session counts.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from types import MappingProxyType
from typing import Any, Literal, TypeVar, cast

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
    aggregate_sessions,
    canonical_set,
    score_session,
    slot_values,
)
from fieldcheck.metrics._stats import (
    Interval,
    TotalsGroup,
    TotalsStatistic,
    bootstrap_groups_ci,
    f1_from_pr_array,
    latency_stats,
    paired_bootstrap_groups_pvalue,
    safe_div_array,
)
from fieldcheck.metrics._text import CANONICALIZE_VERSION
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
    sessions: list[SessionCounts]
    latency_seconds: list[float] = field(default_factory=list)
    keys: list[SessionKey] = field(default_factory=list)  # the session of each ``sessions`` item
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
    """Score every model on the gold's sessions (slot spec, all sections; docs/slots.md).

    ``tp`` picks when a predicted gold slot is a TP (``presence`` as the spec, or a value match
    through ``matcher`` at ``threshold``). Precomputed judge scores of a model win over ``judge``.
    Bootstrap intervals resample sessions (seeded); ``bootstrap=0`` skips them.
    """
    names = [m.name for m in models]
    if len(set(names)) != len(names):
        raise ValueError(f"model names must be unique (got {names})")
    if tp != "presence" and matcher is None:
        matcher = make_matcher(tp)
    cut = threshold if threshold is not None else DEFAULT_THRESHOLDS.get(tp, 1.0)
    session_keys = sorted(gold.sessions)
    errors: list[InputError] = list(gold.errors)
    warnings: list[str] = []

    def warn(message: str) -> None:
        warnings.append(message)
        log.warning("%s", message)

    if threshold is not None and tp in ("presence", "exact"):
        warn(
            f"--threshold {threshold} has no effect with --tp {tp} (only fuzzy and semantic use it)"
        )
    gold_values = [slot_values(v) for slots in gold.sessions.values() for v in slots.values()]
    empty = sum(1 for values in gold_values if not values)
    if not any(gold_values):
        warn(f"{gold.path}: no gold slot with a value; every score is 0")
    elif empty:
        warn(
            f"{gold.path}: {empty} gold line(s) with values [] (or only blank values) are not gold "
            "slots (nothing to "
            "extract: not a miss when unpredicted, an extra slot when predicted); the spec's "
            "code would count them as FN or TP"
        )

    scores: list[ModelScore] = []
    unscored: list[UnscoredModel] = []
    for model in models:
        if progress is not None:
            progress(f"scoring {model.name}")
        errors += model.predictions.errors
        left_out = {k: model.not_scored[k] for k in session_keys if k in model.not_scored}
        reasons = dict(sorted(Counter(left_out.values()).items()))
        keys = [k for k in session_keys if k not in left_out]
        if left_out and not keys:
            warn(
                f"model {model.name!r}: nothing scored: the call failed for all {len(left_out)} "
                f"gold session(s) ({_reasons(reasons)})"
            )
            unscored.append(UnscoredModel(model.name, reasons))
            continue
        if left_out:
            warn(
                f"model {model.name!r}: {len(left_out)} of {len(session_keys)} gold session(s) not "
                f"scored, the call failed ({_reasons(reasons)}); their gold slots are not counted"
            )
        score = _score_model(
            gold,
            model,
            keys,
            left_out,
            tp=tp,
            cut=cut,
            matcher=matcher,
            judge=judge,
            warn=warn,
            errors=errors,
        )
        score.result.sessions_not_scored = reasons
        scores.append(score)

    topics = sorted({t for s in scores for t in s.result.per_topic})
    for s in scores:  # every model lists every topic, so tables stay rectangular
        for t in topics:
            s.result.per_topic.setdefault(t, _topic_result(SlotCounts()))
        s.result.per_topic = dict(sorted(s.result.per_topic.items()))

    units = {s.name: session_units(s.sessions) for s in scores}
    for s in scores:
        if bootstrap > 0 and progress is not None:
            progress(f"bootstrap {s.name}")
        intervals = (
            session_intervals(units[s.name], resamples=bootstrap, seed=seed)
            if bootstrap > 0
            else {}
        )
        s.result.ci = {name: intervals.get(name) for name in CI_METRICS}

    paired: list[PairedF1] = []
    for a, b in combinations(scores, 2):
        if progress is not None:
            progress(f"paired bootstrap {a.name} vs {b.name}")
        pair = _paired(a, b, units[a.name], units[b.name], bootstrap=bootstrap, seed=seed)
        if pair is None:
            warn(f"models {a.name!r} and {b.name!r} share no scored session; F1 not compared")
        else:
            paired.append(pair)

    settings: dict[str, Any] = {
        "tp": tp,
        "canonicalize": CANONICALIZE_VERSION,
        "bootstrap": bootstrap,
        "seed": seed,
        "judge": _judge_signature(models, judge),
    }
    if tp != "presence" and matcher is not None:
        settings["matcher"] = matcher.signature()
        settings["threshold"] = cut
    signature = Signature(system="slots", settings=settings)
    topic_gold = Counter(
        slot[0]
        for slots in gold.sessions.values()
        for slot, values in slots.items()
        if slot_values(values)
    )
    return SlotsRun(
        scores, paired, signature, topics, errors, warnings, unscored, names, dict(topic_gold)
    )


def _reasons(reasons: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in reasons.items())


def _paired(
    a: ModelScore,
    b: ModelScore,
    units_a: np.ndarray,
    units_b: np.ndarray,
    *,
    bootstrap: int,
    seed: int,
) -> PairedF1 | None:
    """F1 of ``a`` and ``b`` on the sessions both were scored on, and the paired bootstrap
    p-value of the difference on those sessions; ``None`` when they share no session.
    ``units_a`` and ``units_b`` are the models' ``session_units``."""
    b_at = {k: i for i, k in enumerate(b.keys)}
    common = [(i, b_at[k]) for i, k in enumerate(a.keys) if k in b_at]
    if not common:
        return None
    if len(common) == len(a.keys) == len(b.keys):
        f1_a, f1_b = a.result.f1, b.result.f1  # every session: the models' own F1
    else:
        index = np.asarray(common, dtype=np.intp)
        units_a, units_b = units_a[index[:, 0]], units_b[index[:, 1]]
        f1_a = float(_stat_f1(units_a.sum(axis=0, keepdims=True))[0])
        f1_b = float(_stat_f1(units_b.sum(axis=0, keepdims=True))[0])
    p_value = (
        paired_bootstrap_groups_pvalue(units_a, units_b, _stat_f1, resamples=bootstrap, seed=seed)
        if bootstrap > 0
        else None
    )
    return PairedF1(
        model_a=a.name,
        model_b=b.name,
        f1_a=f1_a,
        f1_b=f1_b,
        difference=f1_a - f1_b,
        p_value=p_value,
        sessions=len(common),
    )


def _judge_signature(models: Sequence[ModelInput], judge: Matcher | None) -> str:
    sources = []
    for m in models:
        if m.judge_scores is not None:
            sources.append(f"{m.name}=file")
        elif judge is not None:
            sources.append(f"{m.name}={judge.name}")
    return ";".join(sources) if sources else "none"


V = TypeVar("V")
_NO_TOPICS: Mapping[str, SlotCounts] = MappingProxyType({})


def _failures(
    preds: SlotFile,
    pairs: Sequence[tuple[SessionKey, SlotKey]],
    sims: Sequence[Similarity],
    *,
    what: str,
    errors: list[InputError],
) -> int:
    """Record every failed comparison as an error at its prediction line (never a score of 0),
    so the run exits 3 and ``errors.jsonl`` lists it; returns how many failed."""
    count = 0
    for (sk, slot), sim in zip(pairs, sims, strict=True):
        if sim.ok:
            continue
        count += 1
        errors.append(
            InputError(
                f"{what}: {sim.error or 'no score'}",
                file=preds.path,
                line=preds.lines.get((sk, slot)),
                record=f"{sk[0]}/{sk[1]} {slot[0]}/{slot[1]}",
                field="values",
            )
        )
    return count


def _by_session(
    values: dict[tuple[SessionKey, SlotKey], V] | None,
) -> dict[SessionKey, dict[SlotKey, V]] | None:
    """Group per-slot values by session once (a scan per session would be quadratic)."""
    if values is None:
        return None
    grouped: dict[SessionKey, dict[SlotKey, V]] = {}
    for (sk, slot), value in values.items():
        grouped.setdefault(sk, {})[slot] = value
    return grouped


def _topic_result(c: SlotCounts) -> TopicResult:
    return TopicResult(
        precision=c.precision,
        recall=c.recall,
        f1=c.f1,
        exact_match_rate=c.exact_match_rate,
        extra_slots=c.extra_slots,
        extra_values=c.extra_values,
    )


def _score_model(
    gold: SlotFile,
    model: ModelInput,
    session_keys: list[SessionKey],
    left_out: Mapping[SessionKey, str],
    *,
    tp: TPMode,
    cut: float,
    matcher: Matcher | None,
    judge: Matcher | None,
    warn: Callable[[str], None],
    errors: list[InputError],
) -> ModelScore:
    """Score ``model`` on ``session_keys`` (the gold sessions not ``left_out``)."""
    preds = model.predictions
    gold_set = set(gold.sessions)
    unknown = sorted(k for k in preds.sessions if k not in gold_set)
    if unknown:
        first = min(preds.lines[(k, s)] for k in unknown for s in preds.sessions[k])
        lines = sum(len(preds.sessions[k]) for k in unknown)
        shown = ", ".join(f"{u}/{s}" for u, s in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
        warn(
            f"{preds.path}:{first}: model {model.name!r}: {len(unknown)} session(s) not in the gold "
            f"file ({shown}); their {lines} slot line(s) are not scored"
        )
    dropped = [k for k in preds.sessions if k in left_out]
    if dropped:
        warn(
            f"model {model.name!r}: {len(dropped)} session(s) with prediction lines are not scored "
            "(their call failed); those lines are ignored"
        )
    absent = [k for k in session_keys if k not in preds.sessions]
    if absent:
        warn(
            f"model {model.name!r} has no prediction for {len(absent)} of {len(session_keys)} gold "
            "session(s); their gold slots count as missed"
        )

    # The gold slots with a predicted value: the pairs a matcher or a judge has to see.
    pairs: list[tuple[SessionKey, SlotKey]] = [
        (sk, slot)
        for sk in session_keys
        for slot, values in gold.sessions[sk].items()
        if slot_values(values) and slot_values(preds.sessions.get(sk, {}).get(slot, ()))
    ]

    matches: dict[tuple[SessionKey, SlotKey], bool] | None = None
    if tp != "presence" and matcher is not None:
        canonical = tp == "exact"
        predicted = [slot_text(preds.sessions[sk][slot], canonical=canonical) for sk, slot in pairs]
        golden = [slot_text(gold.sessions[sk][slot], canonical=canonical) for sk, slot in pairs]
        sims = matcher.similarities(predicted, golden)
        failed = _failures(preds, pairs, sims, what="value comparison failed", errors=errors)
        if failed:
            warn(f"model {model.name!r}: {failed} value comparison(s) failed; counted as no match")
        if isinstance(matcher, FuzzyMatcher):
            long = sum(map(compared_linearly, predicted, golden))
            if long:
                warn(
                    f"model {model.name!r}: {long} slot value(s) longer than {LONG_VALUE_CHARS:,} "
                    "characters compared by 3-gram similarity, not edit distance (docs/slots.md)"
                )
        matches = {pair: bool(s.passes(cut)) for pair, s in zip(pairs, sims, strict=True)}

    judged: dict[tuple[SessionKey, SlotKey], float] | None = None
    if model.judge_scores is not None:
        errors += model.judge_scores.errors
        judged = {
            (sk, slot): score
            for sk, slots in model.judge_scores.scores.items()
            for slot, score in slots.items()
        }
        stray = sum(1 for k in judged if k[0] not in gold_set)
        unused = len(set(judged) - set(pairs)) - stray
        if stray:
            warn(
                f"{model.judge_scores.path}: {stray} judge score(s) for sessions not in the gold "
                "file are ignored"
            )
        if unused:
            warn(
                f"{model.judge_scores.path}: {unused} judge score(s) for slots that are not "
                "predicted gold slots (missed slots score 0, extra slots are not judged) are ignored"
            )
    elif judge is not None and pairs:
        sims = judge.similarities(
            [slot_text(preds.sessions[sk][slot]) for sk, slot in pairs],
            [slot_text(gold.sessions[sk][slot]) for sk, slot in pairs],
        )
        failed = _failures(preds, pairs, sims, what="judge failed", errors=errors)
        if failed:
            warn(f"model {model.name!r}: {failed} judge call(s) failed; left out of the judge mean")
        judged = {
            pair: s.score
            for pair, s in zip(pairs, sims, strict=True)
            if s.ok and s.score is not None
        }
    elif judge is not None:
        judged = {}

    match_by = _by_session(matches)
    judged_by = _by_session(judged)
    sessions = [
        score_session(
            preds.sessions.get(sk, {}),
            gold.sessions[sk],
            value_matches=None if match_by is None else match_by.get(sk, {}),
            judge_scores=None if judged_by is None else judged_by.get(sk, {}),
        )
        for sk in session_keys
    ]
    pooled = aggregate_sessions(sessions)
    total = pooled.total
    # kept per session: the totals (bootstrap, reports); the per-topic counts live on pooled
    sessions = [SessionCounts(total=c.total, per_topic=_NO_TOPICS) for c in sessions]

    llm_judge = total.llm_judge
    if judged is not None and pairs and total.judge_missing == len(pairs):
        warn(
            f"model {model.name!r}: no judge score for any predicted gold slot; the judge score is absent"
        )
        llm_judge = None
    elif judged is not None and total.judge_missing:
        source = model.judge_scores.path if model.judge_scores is not None else "the judge"
        warn(
            f"model {model.name!r}: {total.judge_missing} predicted gold slot(s) have no score from "
            f"{source}; the judge mean leaves them out"
        )

    seconds: list[float] = []
    latency: LatencySummary | None = None
    if model.latencies is not None:
        errors += model.latencies.errors
        stray_latency = [k for k in model.latencies.seconds if k not in gold_set]
        if stray_latency:
            warn(
                f"{model.latencies.path}: {len(stray_latency)} latency line(s) for sessions not in the "
                "gold file are ignored"
            )
        seconds = [model.latencies.seconds[k] for k in session_keys if k in model.latencies.seconds]
        if len(seconds) < len(session_keys):
            warn(
                f"model {model.name!r}: latency known for {len(seconds)} of {len(session_keys)} gold sessions"
            )
        stats = latency_stats(seconds)
        if stats is not None:
            latency = LatencySummary(
                mean=stats.mean, median=stats.median, p95=stats.p95, total=stats.total
            )

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
        per_topic={t: _topic_result(c) for t, c in pooled.per_topic.items()},
        counts=Counts(
            tp=total.tp,
            fp=total.fp,
            fn=total.fn,
            gold_slots=total.gold_slots,
            sessions=total.sessions,
        ),
        ci={},
    )
    by_session = {
        k: model.latencies.seconds[k]
        for k in session_keys
        if model.latencies is not None and k in model.latencies.seconds
    }
    topic_gold = {t: c.gold_slots for t, c in pooled.per_topic.items()}
    return ModelScore(
        model.name, result, sessions, seconds, list(session_keys), by_session, topic_gold
    )

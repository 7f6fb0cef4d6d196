"""The JSON evaluation pipeline (json-evaluation.md phases 0-4) for one output or a whole batch.

A batch is scored in three passes: classify every record and settle EXACT fields; send every
distinct FUZZY and SEMANTIC (output, ground truth) pair of the whole batch to its matcher once (the
semantic matcher then encodes each distinct string once); assemble the per-record scores.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from fieldcheck._util.errors import FieldcheckError, InputError
from fieldcheck._util.signature import Signature
from fieldcheck.jsoneval._config import EvalConfig
from fieldcheck.jsoneval._models import (
    MAX_DEPTH,
    TOO_DEEP,
    BatchRecord,
    BatchResult,
    BatchSummary,
    FieldResult,
    FieldSummary,
    JsonEvalResult,
    OutputKind,
    RecordError,
    RecordResult,
)
from fieldcheck.jsoneval._safety import SafetyFinding, find_leaks
from fieldcheck.matchers import (
    DiskCache,
    FuzzyMatcher,
    LLMJudge,
    Matcher,
    SemanticMatcher,
    Similarity,
    cache_key,
)
from fieldcheck.metrics._json_fields import (
    KeyBuckets,
    Strategy,
    accuracy,
    canonical_text,
    classify_keys,
    completeness,
    exact_match,
    flatten_pair,
    hallucination,
    nesting_depth,
    resolve_strategy,
    rqs,
    wildcard_path,
)
from fieldcheck.metrics._stats import bootstrap_means_ci

logger = logging.getLogger("fieldcheck")
Matchers = Mapping[str, Matcher]  # "FUZZY" and "SEMANTIC" -> matcher
Progress = Callable[[str, int, int], None]  # (phase, done, total)
MATCH_CHUNK = 256
SCORES = ("completeness", "hallucination", "accuracy", "safety_score", "rqs")


class MatcherError(FieldcheckError):
    """A FUZZY/SEMANTIC matcher (e.g. the LLM judge) gave no similarity for a field."""


def build_matchers(config: EvalConfig, *, cache: DiskCache | None = None) -> dict[str, Matcher]:
    """The FUZZY and SEMANTIC matchers of ``config.matcher``: local (rapidfuzz + MiniLM) or llm (judge)."""
    cache = cache if cache is not None else DiskCache()
    if config.matcher == "llm":
        if not (config.judge_model and config.judge_base_url):  # EvalConfig validates this too
            raise ValueError("matcher 'llm' needs judge_base_url and judge_model")
        return {
            "FUZZY": LLMJudge(
                model=config.judge_model, base_url=config.judge_base_url, kind="fuzzy", cache=cache
            ),
            "SEMANTIC": LLMJudge(
                model=config.judge_model,
                base_url=config.judge_base_url,
                kind="semantic",
                cache=cache,
            ),
        }
    return {"FUZZY": FuzzyMatcher(), "SEMANTIC": SemanticMatcher(cache=cache)}


def make_signature(
    config: EvalConfig,
    matchers: Matchers,
    *,
    bootstrap: int | None = None,
    seed: int | None = None,
) -> Signature:
    """What produced the numbers: matcher family and names, model or judge, thresholds, weights.

    A batch's summary adds ``bootstrap`` and ``seed`` (its intervals depend on them); without
    them (one record, ``json score``) the signature is exactly as before.
    """
    batch = {} if bootstrap is None else {"bootstrap": bootstrap, "seed": seed or 0}
    return Signature(
        system="json",
        settings={
            "matcher": config.matcher,
            "fuzzy": matchers["FUZZY"].signature(),
            "semantic": matchers["SEMANTIC"].signature(),
            "fuzzy_threshold": config.fuzzy_threshold,
            "semantic_threshold": config.semantic_threshold,
            "weights": config.weights.model_dump(),
            "flatten": config.flatten,
            "safety_check": config.safety_check,
            "strategies": strategies_digest(config.strategies),
            **batch,
        },
    )


def strategies_digest(strategies: Mapping[str, str]) -> str:
    """``none``, or ``<n> fields sha256:<12 hex>`` of the sorted mapping: same config, same digest."""
    if not strategies:
        return "none"
    return f"{len(strategies)} fields sha256:{cache_key(sorted(strategies.items()))[:12]}"


def _strip_fence(text: str) -> str:
    if text.startswith("```") and text.endswith("```") and len(text) >= 6:
        body = text[3:-3]
        first, _, rest = body.partition("\n")
        return (rest if first.strip().isalpha() or not first.strip() else body).strip()
    return text


def coerce_output(output: Any) -> tuple[dict[str, Any] | None, OutputKind, list[str]]:
    """The output as an object, its kind, and flags (the documented non-object rule's first step).

    A dict is used as it is. A string holding a JSON object (optionally in a Markdown code fence)
    is parsed and flagged ``parsed_from_text``. Anything else is not an object: kind ``array``,
    ``invalid_json`` (text starting with ``{`` or ``[`` that does not parse), ``text``, ``number``,
    ``boolean`` or ``null``, flagged ``not_an_object``.
    """
    if isinstance(output, Mapping):
        return dict(output), "object", []
    if isinstance(output, str):
        text = _strip_fence(output.strip())
        if text.startswith(("{", "[")):
            try:
                parsed = orjson.loads(text)
            except orjson.JSONDecodeError:
                return None, "invalid_json", ["not_an_object"]
            if isinstance(parsed, dict):
                return parsed, "object", ["parsed_from_text"]
            return None, "array", ["not_an_object"]
        return None, "text", ["not_an_object"]
    if isinstance(output, list | tuple):
        return None, "array", ["not_an_object"]
    if isinstance(output, bool):
        return None, "boolean", ["not_an_object"]
    if output is None:
        return None, "null", ["not_an_object"]
    return None, "number", ["not_an_object"]


@dataclass
class _Prepared:
    id: str | int
    key: str
    line: int | None
    kind: OutputKind
    flags: list[str]
    buckets: KeyBuckets
    strategies: dict[str, Strategy]
    exact: dict[str, FieldResult]
    pending: dict[str, tuple[Strategy, str, str]]  # field -> (strategy, output text, gt text)
    safety_score: float
    gt_keys: list[str] = field(default_factory=list)
    findings: list[SafetyFinding] = field(default_factory=list)


def _check_depth(value: Any, *, field: str, record: str | None = None) -> None:
    """Raise InputError when ``value`` nests deeper than MAX_DEPTH arrays/objects (too deep to score)."""
    if nesting_depth(value, limit=MAX_DEPTH) > MAX_DEPTH:
        raise InputError(
            TOO_DEEP,
            field=field,
            record=record,
        )


def _prepare(record: BatchRecord, config: EvalConfig) -> _Prepared:
    """Phases 0-3 without the matchers: buckets, strategies, EXACT scores and the pending pairs.

    Raises InputError (naming the record and field) when either side nests deeper than MAX_DEPTH.
    """
    gt: dict[str, Any] = record.ground_truth
    _check_depth(gt, field="ground_truth", record=record.key)
    obj, kind, flags = coerce_output(record.output)
    _check_depth(obj if obj is not None else record.output, field="output", record=record.key)
    safety = 1.0 if record.safety_score is None else record.safety_score
    findings: list[SafetyFinding] = []
    if config.safety_check == "leaks":
        findings = find_leaks(obj if obj is not None else record.output, gt)
        if findings:
            safety = 0.0
            flags.append("safety_leak")
    aio: dict[str, Any] = obj if obj is not None else {}
    if config.flatten:
        aio, gt = flatten_pair(aio, gt)
    buckets = classify_keys(aio, gt)
    strategies: dict[str, Strategy] = {}
    exact: dict[str, FieldResult] = {}
    pending: dict[str, tuple[Strategy, str, str]] = {}
    for name in buckets.both_non_null:
        strategy = resolve_strategy(name, gt[name], strategies=config.strategies)
        strategies[name] = strategy
        if strategy == "IGNORE":
            exact[name] = FieldResult(strategy=strategy, similarity=None, score=None)
        elif strategy == "EXACT":
            hit = 1.0 if exact_match(aio[name], gt[name]) else 0.0
            exact[name] = FieldResult(strategy=strategy, similarity=hit, score=hit)
        else:
            out_text, gt_text = canonical_text(aio[name]), canonical_text(gt[name])
            if out_text == gt_text:  # identical text needs no matcher: similarity 1
                exact[name] = FieldResult(strategy=strategy, similarity=1.0, score=1.0)
            else:
                pending[name] = (strategy, out_text, gt_text)
    return _Prepared(
        id=record.id,
        key=record.key,
        line=record.line,
        kind=kind,
        flags=flags,
        buckets=buckets,
        strategies=strategies,
        exact=exact,
        pending=pending,
        safety_score=safety,
        gt_keys=list(gt),
        findings=findings,
    )


def _loading(progress: Progress | None) -> Callable[[str], None] | None:
    """``progress("loading <model>", 0, 0)``: the phase shown while a matcher's model loads."""
    if progress is None:
        return None
    report = progress
    return lambda model: report(f"loading {model}", 0, 0)


def _match_all(
    prepared: Sequence[_Prepared], matchers: Matchers, progress: Progress | None
) -> tuple[dict[tuple[str, str, str], Similarity], dict[str, int]]:
    """Every distinct (strategy, output text, gt text) of the batch, sent once, in chunks."""
    distinct: dict[str, list[tuple[str, str]]] = {"FUZZY": [], "SEMANTIC": []}
    seen: set[tuple[str, str, str]] = set()
    for prep in prepared:
        for strategy, out_text, gt_text in prep.pending.values():
            key = (strategy, out_text, gt_text)
            if key not in seen:
                seen.add(key)
                distinct[strategy].append((out_text, gt_text))
    total = sum(len(pairs) for pairs in distinct.values())
    done = 0
    if progress:
        progress("match", 0, total)
    found: dict[tuple[str, str, str], Similarity] = {}
    for family, pairs in distinct.items():
        # A semantic encoder gets the whole batch in one call, so each distinct string is encoded
        # once even without a cache; judges and fuzzy go in chunks so the progress bar moves.
        matcher = matchers[family]
        size = len(pairs) if isinstance(matcher, SemanticMatcher) else MATCH_CHUNK
        for start in range(0, len(pairs), max(1, size)):
            chunk = pairs[start : start + max(1, size)]
            predictions, references = [p for p, _ in chunk], [r for _, r in chunk]
            if isinstance(matcher, SemanticMatcher):
                # the model loads on its first encode (seconds): say so, as its own phase
                sims = matcher.similarities(predictions, references, on_load=_loading(progress))
            else:
                sims = matcher.similarities(predictions, references)
            for (p, r), sim in zip(chunk, sims, strict=True):
                found[(family, p, r)] = sim
            done += len(chunk)
            if progress:
                progress("match", done, total)
    return found, {k: len(v) for k, v in distinct.items()}


def _assemble(
    prep: _Prepared,
    found: Mapping[tuple[str, str, str], Similarity],
    config: EvalConfig,
    signature: Signature,
) -> JsonEvalResult:
    fields = dict(prep.exact)
    for name, (strategy, out_text, gt_text) in prep.pending.items():
        sim = found[(strategy, out_text, gt_text)]
        if not sim.ok or sim.score is None:
            raise MatcherError(f"field {name!r}: {strategy} matcher failed: {sim.error}")
        threshold = config.fuzzy_threshold if strategy == "FUZZY" else config.semantic_threshold
        fields[name] = FieldResult(
            strategy=strategy, similarity=sim.score, score=1.0 if sim.score >= threshold else 0.0
        )
    fields = {name: fields[name] for name in sorted(fields)}
    b = prep.buckets
    if prep.kind != "object":
        # Documented rule: nothing can be compared, so every score is at its worst.
        comp, hall, acc = 0.0, 1.0, 0.0
    else:
        scored = [f.score for f in fields.values() if f.score is not None]
        comp = completeness(len(b.both_non_null), len(b.gt_non_null))
        hall = hallucination(b.hallucination_count, b.total_distinct)
        acc = accuracy(math.fsum(scored), len(scored))
    total = rqs(
        accuracy=acc,
        completeness=comp,
        hallucination=hall,
        safety_score=prep.safety_score,
        weights=config.weights,
    )
    return JsonEvalResult(
        completeness=comp,
        hallucination=hall,
        accuracy=acc,
        safety_score=prep.safety_score,
        rqs=total,
        buckets=b.as_dict(),
        fields=fields,
        signature=signature,
        output_kind=prep.kind,
        flags=prep.flags,
        safety_findings=prep.findings,
    )


def score_arrays(results: Sequence[RecordResult]) -> dict[str, np.ndarray]:
    """Each score of every scored record, in record order, as a compact float array (NaN where a
    score is absent, left out of that mean): the per-example statistics of the batch means."""
    return {
        s: np.fromiter(
            (math.nan if (v := getattr(r.result, s)) is None else v for r in results),
            dtype=float,
            count=len(results),
        )
        for s in SCORES
    }


def summarize(
    results: Sequence[RecordResult],
    *,
    errors: Sequence[RecordError] = (),
    signature: Signature,
    matcher_pairs: Mapping[str, int] | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
) -> BatchSummary:
    """Means of each score over the scored records, counts, and per field (``[*]`` paths) how often
    GT expected it and it was scored, matched, missing, hallucinated or ignored. Means are None
    when nothing was scored. ``ci``: a 95% percentile bootstrap interval of each mean over the
    scored records (``bootstrap`` resamples, seeded by ``seed``; none when ``bootstrap`` is 0)."""
    n = len(results)
    means: dict[str, float | None] = {
        s: (math.fsum(getattr(r.result, s) for r in results) / n if n else None) for s in SCORES
    }
    ci = bootstrap_means_ci(score_arrays(results), resamples=bootstrap, seed=seed)
    fields: dict[str, FieldSummary] = {}
    strategies: dict[str, set[str]] = {}

    def entry(name: str) -> FieldSummary:
        key = wildcard_path(name)
        strategies.setdefault(key, set())
        return fields.setdefault(key, FieldSummary())

    for rec in results:
        buckets = rec.result.buckets
        for name in buckets["gt_non_null"]:
            entry(name).expected += 1
        for name in buckets["aio_missing_or_null"]:
            entry(name).missing += 1
        for name in buckets["extra_keys"] + buckets["gt_null_aio_has_value"]:
            entry(name).hallucinated += 1
        for name, fr in rec.result.fields.items():
            summary = entry(name)
            strategies[wildcard_path(name)].add(fr.strategy)
            if fr.score is None:
                summary.ignored += 1
            else:
                summary.scored += 1
                summary.matched += fr.score == 1.0
    for key, summary in fields.items():
        summary.strategies = sorted(strategies[key])
    return BatchSummary(
        records=n + len(errors),
        scored=n,
        failed=len(errors),
        errors=[e.message for e in errors],
        not_an_object=sum(r.result.not_an_object for r in results),
        safety_flagged=sum("safety_leak" in r.result.flags for r in results),
        means=means,
        ci=ci,
        fields=dict(sorted(fields.items())),
        matcher_pairs=dict(matcher_pairs or {"FUZZY": 0, "SEMANTIC": 0}),
        signature=signature,
    )


def _warn_unused_strategies(config: EvalConfig, prepared: Sequence[_Prepared]) -> None:
    """A strategy naming a field no ground truth has is probably a typo: warn once per batch
    (or per ``evaluate`` call, as ``json score`` does)."""
    if not config.strategies or not prepared:
        return
    seen: set[str] = set()
    for prep in prepared:
        seen.update(prep.gt_keys)
    seen |= {wildcard_path(k) for k in seen}
    unused = sorted(k for k in config.strategies if k not in seen)
    if unused:
        logger.warning(
            "the strategy config names fields that no ground truth has: %s%s",
            ", ".join(repr(k) for k in unused),
            "" if config.flatten else " (nested paths need --flatten)",
        )


def evaluate_batch(
    records: Iterable[BatchRecord],
    config: EvalConfig | None = None,
    *,
    matchers: Matchers | None = None,
    errors: Sequence[RecordError] = (),
    progress: Progress | None = None,
    source: str | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
) -> BatchResult:
    """Score many records; each distinct FUZZY/SEMANTIC pair goes to its matcher once per batch.

    ``errors`` (lines that failed to load) are carried into the result and the summary's counts;
    ``source`` (the batch file) names the file in the errors of records that fail here.
    A record whose matcher fails (judge error) is moved to the errors, never scored as 0.
    ``bootstrap`` resamples (0: none) seeded by ``seed`` give the summary's 95% intervals; both
    go into the summary's signature. Raises ValueError when either is negative.
    """
    if bootstrap < 0 or seed < 0:
        raise ValueError(f"bootstrap and seed must be >= 0 (got {bootstrap}, {seed})")
    config = config or EvalConfig()
    matchers = matchers if matchers is not None else build_matchers(config)
    signature = make_signature(config, matchers)
    records = list(records)
    prepared = []
    failures = list(errors)
    for i, record in enumerate(records, start=1):
        try:
            prepared.append(_prepare(record, config))
        except InputError as exc:
            located = InputError(
                exc.reason, file=source, line=record.line, record=record.key, field=exc.field
            )
            failures.append(RecordError.model_validate(located.to_dict()))
        if progress:
            progress("prepare", i, len(records))
    _warn_unused_strategies(config, prepared)
    found, pair_counts = _match_all(prepared, matchers, progress)
    results: list[RecordResult] = []
    for i, prep in enumerate(prepared, start=1):
        try:
            result = _assemble(prep, found, config, signature)
        except MatcherError as exc:
            located = InputError(str(exc), file=source, line=prep.line, record=prep.key)
            failures.append(RecordError.model_validate(located.to_dict()))
        else:
            results.append(RecordResult(id=prep.id, line=prep.line, result=result))
        if progress:
            progress("score", i, len(prepared))
    summary = summarize(
        results,
        errors=failures,
        signature=make_signature(config, matchers, bootstrap=bootstrap, seed=seed),
        matcher_pairs=pair_counts,
        bootstrap=bootstrap,
        seed=seed,
    )
    return BatchResult(results=results, errors=failures, summary=summary)


def evaluate(
    output: Any,
    ground_truth: Mapping[str, Any],
    config: EvalConfig | None = None,
    *,
    safety_score: float | None = None,
    matchers: Matchers | None = None,
) -> JsonEvalResult:
    """Score one model ``output`` against its ``ground_truth`` object (spec phases 0-4).

    ``output`` may be any JSON value or raw text; a non-object is scored by the documented rule
    and flagged. ``safety_score`` in [0, 1] overrides the default 1.0. Raises InputError (its
    ``field`` is ``ground_truth`` or ``output``) when the ground truth is not an object or either
    side nests deeper than MAX_DEPTH, MatcherError when a judge gives no similarity.
    """
    if not isinstance(ground_truth, Mapping):
        raise InputError(
            "ground truth must be a JSON object", field="ground_truth", value=ground_truth
        )
    config = config or EvalConfig()
    matchers = matchers if matchers is not None else build_matchers(config)
    record = BatchRecord(
        id="1", ground_truth=dict(ground_truth), output=output, safety_score=safety_score
    )
    try:
        prep = _prepare(record, config)
    except InputError as exc:  # the same error without the placeholder record id
        raise InputError(exc.reason, field=exc.field) from None
    _warn_unused_strategies(config, [prep])  # the same warning as a batch (issue 9)
    found, _ = _match_all([prep], matchers, None)
    return _assemble(prep, found, config, make_signature(config, matchers))

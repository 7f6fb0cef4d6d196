"""The JSON evaluation (json-evaluation.md phases 0-4) of one output or a batch in memory: the
streamed scorer (``_stream``) with one chunk, keeping every result."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from fieldcheck._util.errors import InputError, check_type
from fieldcheck._util.iters import chunked
from fieldcheck._util.signature import Signature
from fieldcheck.jsoneval._config import EvalConfig
from fieldcheck.jsoneval._models import (
    BatchRecord,
    BatchResult,
    JsonEvalResult,
    RecordError,
    RecordResult,
    duplicate_id,
)
from fieldcheck.jsoneval._stream import (
    Failed,
    Job,
    MatcherError,
    Matchers,
    Progress,
    Scored,
    Scorer,
    coerce_output,
    record_items,
    run_stream,
)
from fieldcheck.matchers import (
    DiskCache,
    FuzzyMatcher,
    LLMJudge,
    Matcher,
    SemanticMatcher,
    cache_key,
)

if TYPE_CHECKING:
    from fieldcheck.store import RunRecorder

__all__ = ["MatcherError", "coerce_output"]
logger = logging.getLogger("fieldcheck")


def build_matchers(
    config: EvalConfig, *, cache: DiskCache | None = None, judge: Mapping[str, Any] | None = None
) -> dict[str, Matcher]:
    """The FUZZY and SEMANTIC matchers of ``config.matcher``: local (rapidfuzz + MiniLM) or llm
    (judge); ``judge``: how a judge caches and calls (``matchers.judge_options``)."""
    if config.matcher == "llm":
        if not (config.judge_model and config.judge_base_url):  # EvalConfig validates this too
            raise ValueError("matcher 'llm' needs judge_base_url and judge_model")
        return {
            kind.upper(): LLMJudge(
                model=config.judge_model,
                base_url=config.judge_base_url,
                kind=kind,
                **(judge or {}),
            )
            for kind in ("fuzzy", "semantic")
        }
    return {
        "FUZZY": FuzzyMatcher(),
        "SEMANTIC": SemanticMatcher(cache=cache if cache is not None else DiskCache()),
    }


def make_signature(
    config: EvalConfig,
    matchers: Matchers,
    *,
    bootstrap: int | None = None,
    seed: int | None = None,
) -> Signature:
    """What produced the numbers: matchers, thresholds, weights, and for a batch's summary the
    ``bootstrap`` and ``seed`` of its intervals."""
    batch = {} if bootstrap is None else {"bootstrap": bootstrap, "seed": seed or 0}
    strategies = config.strategies  # by the sorted mapping's digest: same config, same digest
    digest = cache_key(sorted(strategies.items()))[:12]
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
            "strategies": f"{len(strategies)} fields sha256:{digest}" if strategies else "none",
            **batch,
        },
    )


NESTED_HINT = " (nested paths need --flatten)"
"""The end of the unused strategies' warning without ``flatten`` (a caller renames the option)."""
UNSCORED_NESTED = ContextVar("UNSCORED_NESTED", default=NESTED_HINT)
"""That end where the caller cannot flatten: a re-score says its run was scored without it."""


def warn_unused_strategies(config: EvalConfig, unused: Sequence[str]) -> None:
    """Warn once about strategies naming a field no ground truth has (probably a typo)."""
    if unused:
        logger.warning(
            "the strategy config names fields that no ground truth has: %s%s",
            ", ".join(repr(k) for k in unused),
            "" if config.flatten else UNSCORED_NESTED.get(),
        )


def evaluate_batch(
    records: Iterable[BatchRecord],
    config: EvalConfig | None = None,
    *,
    matchers: Matchers | None = None,
    errors: Sequence[RecordError | InputError] = (),
    progress: Progress | None = None,
    source: str | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    chunk_size: int | None = None,
    recorder: RunRecorder | None = None,
) -> BatchResult:
    """Score many records in memory, each distinct FUZZY/SEMANTIC pair matched once per chunk,
    after the load ``errors`` (``read_batch``'s); a judge error moves a record to the errors, never
    scores it 0, and a record whose id an earlier one has is not scored either (``duplicate id
    (first on line N)``, as ``json batch``; N the record's ``line``, else its place in
    ``records``). Raises ValueError when ``bootstrap`` or ``seed`` is negative."""
    if bootstrap < 0 or seed < 0:
        raise ValueError(f"bootstrap and seed must be >= 0 (got {bootstrap}, {seed})")
    records = records if isinstance(records, list) else list(records)
    check_type("records", records, BatchRecord, "a BatchRecord (read_batch's)", each=True)
    check_type("config", config, EvalConfig | None, "an EvalConfig")
    config = config or EvalConfig()
    matchers = matchers if matchers is not None else build_matchers(config)
    signature = make_signature(config, matchers)
    prior = [e if isinstance(e, RecordError) else RecordError.of(e) for e in errors]
    items: list[Any] = []
    first: dict[str, int] = {}
    for item in record_items(records):
        at = item.line or item.index + 1
        if item.key in first:
            error = duplicate_id(first[item.key], file=source, line=at, record=item.key)
            items.append(Failed(item.index, RecordError.of(error), error))
        else:
            first[item.key] = at
            items.append(item)
    job = Job(
        config, matchers, source=source, store=recorder is not None, keep=True, progress=progress
    )
    kept: list[Scored] = []
    kept_errors: list[RecordError] = []
    chunks = chunked(items, chunk_size or max(1, len(items)))
    digest = run_stream(
        chunks,
        job,
        prior=prior,
        bootstrap=bootstrap,
        seed=seed,
        keep=kept,
        kept_errors=kept_errors,
        recorder=recorder,
        total=len(items) + len(prior),
    )
    if items:
        warn_unused_strategies(config, digest.unused(config))
    results = [RecordResult(id=r.id, line=r.line, result=r.result(signature)) for r in kept]
    summary = digest.summary(make_signature(config, matchers, bootstrap=bootstrap, seed=seed))
    return BatchResult(results=results, errors=kept_errors, summary=summary)


def evaluate(
    output: Any,
    ground_truth: Mapping[str, Any],
    config: EvalConfig | None = None,
    *,
    safety_score: float | None = None,
    matchers: Matchers | None = None,
) -> JsonEvalResult:
    """Score one ``output`` (any JSON value or text) against its ``ground_truth`` object (spec
    phases 0-4). Raises InputError naming the bad side, MatcherError when a judge gives none."""
    if not isinstance(ground_truth, Mapping):
        raise InputError(
            "ground truth must be a JSON object", field="ground_truth", value=ground_truth
        )
    check_type("config", config, EvalConfig | None, "an EvalConfig")
    config = config or EvalConfig()
    matchers = matchers if matchers is not None else build_matchers(config)
    record = BatchRecord(
        id="1", ground_truth=dict(ground_truth), output=output, safety_score=safety_score
    )
    signature = make_signature(config, matchers)
    scorer = Scorer(config, matchers)
    scored, failed, _, seen = scorer.score(list(record_items([record])))  # a chunk of one
    problem = failed[0].problem if failed else None
    if isinstance(problem, InputError):  # the same error without the placeholder record id
        raise InputError(problem.reason, field=problem.field) from None
    warn_unused_strategies(config, sorted(set(config.strategies) - seen))  # as a batch does
    if problem is not None:
        raise problem
    return scored[0].result(signature)

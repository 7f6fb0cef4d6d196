"""The JSON batch scorer, streamed chunk by chunk (issue 10; json-evaluation.md phases 0-4):
memory depends on the chunk, the numbers do not. ``evaluate_batch`` is the same code."""

from __future__ import annotations

import heapq
import itertools
import logging
import marshal
import math
import operator
import os
import re
from collections import Counter, deque
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from functools import cached_property, lru_cache, partial
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import orjson
from pydantic import ValidationError

from fieldcheck import metrics
from fieldcheck._util import jsonio
from fieldcheck._util.errors import (
    KEPT_ERRORS,
    FieldcheckError,
    InputError,
    input_error_of,
)
from fieldcheck._util.executor import Executor, InProcess, LocalPool, few_collections, finish
from fieldcheck._util.jsonio import (
    _BOM,
    _INT64,
    _SCALARS,
    BLANK,
    dumps_bytes,
    id_text,
    loads,
    may_hold_big_int,
    nesting_depth,
    parse_jsonl_line,
    read_lines,
)
from fieldcheck._util.signature import Signature
from fieldcheck.jsoneval._config import EvalConfig
from fieldcheck.jsoneval._models import (
    MAX_DEPTH,
    TOO_DEEP,
    BatchRecord,
    BatchSummary,
    FieldSummary,
    JsonEvalResult,
    OutputKind,
    RecordError,
    duplicate_id,
)
from fieldcheck.jsoneval._safety import SafetyFinding, find_leaks
from fieldcheck.matchers import FuzzyMatcher, Matcher, SemanticMatcher, Similarity
from fieldcheck.metrics import KeyBuckets, MeansBootstrap, Strategy, wildcard_path

if TYPE_CHECKING:
    from fieldcheck.store import RunRecorder

logger = logging.getLogger("fieldcheck")
Matchers = Mapping[str, Matcher]
Progress = Callable[[str, int, int], None]  # (phase, done, total)
CHUNK_LINES = 4096
MATCH_CHUNK = 256
SCORES = ("completeness", "hallucination", "accuracy", "safety_score", "rqs")
HISTOGRAMS = ("completeness", "hallucination", "accuracy", "rqs")
HISTOGRAM_BINS = 20
WORST_RECORDS = 10
_KNOWN_KEYS = frozenset(("id", "ground_truth", "output", "safety_score"))
_REASONS = {
    "missing": "missing",
    "dict_type": "must be a JSON object",
    "string_type": "must be a string or an integer",
    "int_type": "must be a string or an integer",
}
_FEW_OPENERS = MAX_DEPTH + 1  # a line with no more "{" and "[" cannot nest too deep (too_deep)
_MAX_PLANS = 4096  # key sequences (and outcomes per sequence) remembered by the kernel
POOL_WORKERS = min(4, os.cpu_count() or 1)  # processes scoring unparsed chunks (``run_stream``)
UNPARSED_BYTES = 8 << 20  # files this large are read unparsed (``BatchReader.unparsed``)


class MatcherError(FieldcheckError):
    """A FUZZY/SEMANTIC matcher (e.g. the LLM judge) gave no similarity for a field."""


# ------------------------------------------------------------------ plain records


@dataclass(slots=True)
class Item:
    """One record to score, plain; ``checked``: its depth was checked when its line was read."""

    index: int
    id: str | int
    line: int | None
    ground_truth: dict[str, Any]
    output: Any
    safety_score: float | None
    checked: bool = False

    @property
    def key(self) -> str:
        return str(self.id)


@dataclass(slots=True)
class Failed:
    """A line or record that could not be scored, at its position in the batch."""

    index: int
    error: RecordError
    # the error itself (``read_batch``, ``evaluate``); not sent to another process
    problem: InputError | MatcherError | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return Failed, (self.index, self.error)


@dataclass(slots=True)
class Scored:
    """A scored record as plain data: its key buckets, fields by sorted name as
    (strategy, similarity, score), the five scores in SCORES order."""

    index: int
    id: str | int
    line: int | None
    kind: OutputKind
    flags: list[str]
    buckets: KeyBuckets
    fields: dict[str, tuple[Strategy, float | None, float | None]]
    scores: tuple[float, float, float, float, float]
    findings: list[SafetyFinding] = field(default_factory=list)
    # the kernel's records: their records.jsonl line before and after the id, shared
    line_parts: tuple[bytes, bytes] | None = None

    def failed_on(self) -> list[str]:
        """The fields this record failed on: scored below 1 (IGNORE fields have no score),
        missing, hallucinated (a value where the ground truth has null) or extra (docs/json.md)."""
        buckets = self.buckets
        below = [n for n, f in self.fields.items() if f[2] is not None and f[2] < 1]
        return [
            *below,
            *buckets.aio_missing_or_null,
            *buckets.gt_null_aio_has_value,
            *buckets.extra_keys,
        ]

    @property
    def failed(self) -> bool:
        """The one definition of a failed record: a field it failed on or not an object."""
        return self.kind != "object" or bool(self.failed_on())

    def result(self, signature: Signature) -> JsonEvalResult:
        """The public pydantic result (the API's; the hot path writes lines without it)."""
        body = self.line_dict()
        del body["id"]
        return JsonEvalResult(**body, signature=signature)

    def line_dict(self) -> dict[str, Any]:
        """One line of records.jsonl: the id, then ``JsonEvalResult``'s fields."""
        c, h, a, s, r = self.scores
        return {
            "id": self.id,
            "completeness": c,
            "hallucination": h,
            "accuracy": a,
            "safety_score": s,
            "rqs": r,
            "buckets": self.buckets.as_dict(),
            "fields": {
                name: {"strategy": st, "similarity": sim, "score": sc}
                for name, (st, sim, sc) in self.fields.items()
            },
            "output_kind": self.kind,
            "flags": self.flags,
            "safety_findings": [f.model_dump(mode="json") for f in self.findings],
        }

    def unmatched(self) -> str:
        """The fields scored 0 (the report's "fields not matched")."""
        if "not_an_object" in self.flags:
            return f"(not an object: {self.kind})"
        return ", ".join(name for name, f in self.fields.items() if f[2] == 0.0) or "-"


_LINE_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE
_ID_MARK = "\x00fieldcheck id\x00"  # where the id goes in a kernel record's line
_ID_MARK_JSON = orjson.dumps(_ID_MARK)


@dataclass(slots=True)
class _Plan:
    """What a record's two key sequences decide: the sorted ground-truth keys, their configured
    strategy (None: detected), and the result built for each outcome."""

    keys: tuple[str, ...]
    configured: tuple[Strategy | None, ...]
    seen: frozenset[str]  # the strategy config's keys these keys use (``Scorer.seen``)
    # the codes of a record whose output is its ground truth with no null value (every key
    # EXACT or IGNORE), or None
    identical: tuple[int, ...] | None = None
    outcomes: dict[tuple[tuple[int, ...], float], Scored] = field(default_factory=dict)


@dataclass(slots=True)
class _Prep:
    item: Item
    kind: OutputKind
    flags: list[str]
    buckets: KeyBuckets
    fields: dict[str, tuple[Strategy, float | None, float | None]]
    pending: dict[str, tuple[Strategy, str, str]]
    safety: float
    findings: list[SafetyFinding]
    seen: frozenset[str]


def record_items(records: Iterable[BatchRecord]) -> Iterator[Item]:
    """Validated BatchRecords (the API's input) as plain items, depth not yet checked."""
    for i, r in enumerate(records):
        yield Item(i, r.id, r.line, r.ground_truth, r.output, r.safety_score)


# ------------------------------------------------------------------ phases 0-4 on plain data


def _strip_fence(text: str) -> str:
    if text.startswith("```") and text.endswith("```") and len(text) >= 6:
        body = text[3:-3]
        first, _, rest = body.partition("\n")
        return (rest if first.strip().isalpha() or not first.strip() else body).strip()
    return text


def coerce_output(
    output: Any, *, record: str | None = None
) -> tuple[dict[str, Any] | None, OutputKind, list[str]]:
    """The output as an object, its kind, and flags (the documented non-object rule's first step):
    a JSON object in a string (optionally fenced; a leading byte order mark skipped, as a file's
    is) is parsed and flagged ``parsed_from_text``; anything else is flagged ``not_an_object``. A
    string nesting past orjson's depth limit is InputError ``TOO_DEEP`` naming ``record``, as one
    past MAX_DEPTH is."""
    if isinstance(output, Mapping):
        return dict(output), "object", []
    kind: OutputKind = "number"
    if isinstance(output, str):
        text, kind = _strip_fence(output.strip().removeprefix("\ufeff").lstrip()), "text"
        if text.startswith(("{", "[")):
            try:
                parsed = loads(text)
            except orjson.JSONDecodeError as exc:
                if "depth limit" in exc.msg:  # orjson's 1024 levels: deeper than MAX_DEPTH
                    raise InputError(TOO_DEEP, field="output", record=record) from None
                return None, "invalid_json", ["not_an_object"]
            if isinstance(parsed, dict):
                return parsed, "object", ["parsed_from_text"]
            kind = "array"
    elif isinstance(output, list | tuple):
        kind = "array"
    elif isinstance(output, bool):
        kind = "boolean"
    elif output is None:
        kind = "null"
    return None, kind, ["not_an_object"]


_ABSENT = object()


def _too_deep(value: Any, *, field: str, record: str) -> None:
    if nesting_depth(value, limit=MAX_DEPTH) > MAX_DEPTH:
        raise InputError(TOO_DEEP, field=field, record=record)


# where a top-level value may be null or blank in orjson's text of an object: ``:null``, or a
# string opening with a quote, a backslash escape or the first byte of a space in ASCII or UTF-8
# (U+0085, U+00A0, U+1680, U+2000-U+205F, U+3000); a match only sends records to ``_outcome``
_MAYBE_NULL = re.compile(rb':(?:null|"[ "\\\xc2\xe1\xe2\xe3])')


class Scorer:
    """Phases 0-4 of json-evaluation.md for chunks of plain items: every number from the
    ``fieldcheck.metrics`` function the spec names; the EXACT/IGNORE kernel (``_outcome``,
    ``columnar``) only reuses results already computed that way."""

    def __init__(
        self,
        config: EvalConfig,
        matchers: Matchers,
        *,
        source: str | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.config, self.matchers, self.source, self.progress = config, matchers, source, progress
        self._strategies = config.strategies
        self.identical = 0  # records ``columnar`` scored from their key sequence alone
        # the EXACT/IGNORE kernel serves records read from a file (depth checked), object outputs
        self._kernel = not config.flatten and config.safety_check == "off"
        # caches only (a result never depends on them): the kernel's plans, by key sequences
        self._plans: dict[tuple[tuple[str, ...], tuple[str, ...]], _Plan] = {}
        self._used: dict[int, _Plan] = {}  # the plans of the chunk being scored

    def _seen(self, keys: Iterable[str]) -> frozenset[str]:
        """The strategy config's keys that these ground-truth keys (their ``[*]`` forms, their
        parents) name: a strategy no record's ground truth names is reported as unused."""
        strategies = self._strategies
        if not strategies:
            return frozenset()
        return frozenset(p for k in keys for p in metrics.config_paths(k) if p in strategies)

    def _plan(
        self,
        shape: tuple[tuple[str, ...], tuple[str, ...]],
        gt: dict[str, Any],
        aio: dict[str, Any],
    ) -> _Plan:
        """The plan of records with these key sequences (``shape``), remembered (up to
        _MAX_PLANS) and marked used by the chunk being scored."""
        plan = self._plans.get(shape)
        if plan is None:
            keys, strategies = tuple(sorted(gt)), self._strategies
            configured = tuple(
                metrics.configured_strategy(k, strategies) if strategies else None for k in keys
            )
            identical = None
            if all(k in gt for k in aio) and all(c in ("EXACT", "IGNORE") for c in configured):
                identical = tuple(3 if c == "EXACT" else 5 for c in configured)
            plan = _Plan(keys, configured, self._seen(keys), identical)
            if len(self._plans) < _MAX_PLANS:
                self._plans[shape] = plan
        self._used[id(plan)] = plan
        return plan

    def _outcome(self, item: Item) -> Scored | None:
        """The outcome (``_shared``) of a record whose compared fields are all EXACT or IGNORE,
        decided by its per-key outcome codes (0/1: gt null, output null or not; 2: missing; 3/4:
        EXACT hit or not; 5: IGNORE); None when a FUZZY/SEMANTIC field needs the general path."""
        gt = item.ground_truth
        aio: dict[str, Any] = item.output
        plan = self._plan((tuple(gt), tuple(aio)), gt, aio)
        codes: list[int] = []
        add = codes.append
        is_null, exact_match = metrics.is_null, metrics.exact_match
        for k, strategy in zip(plan.keys, plan.configured, strict=True):
            gv = gt[k]
            av = aio.get(k, _ABSENT)
            # one scalar on both sides: both null, or (``exact_match`` of a value and itself)
            # an EXACT hit
            same = (t := gv.__class__) is av.__class__ and t in _SCALARS and av == gv
            if is_null(gv):
                add(0 if same or av is _ABSENT or is_null(av) else 1)
            elif not same and (av is _ABSENT or is_null(av)):
                add(2)
            else:
                if strategy is None:
                    strategy = metrics.auto_strategy(gv)
                if strategy == "EXACT":
                    add(3 if same or exact_match(av, gv) else 4)
                elif strategy == "IGNORE":
                    add(5)
                else:
                    return None
        return self._shared(plan, tuple(codes), item)

    def _shared(self, plan: _Plan, codes: tuple[int, ...], item: Item) -> Scored:
        """The outcome of every record of ``plan`` with these outcome codes and safety score
        (``_of_record`` makes it a record's result): the first such record is scored by the
        general path."""
        s = item.safety_score
        key = (codes, 1.0 if s is None else float(s))
        done = plan.outcomes.get(key)
        if done is None:
            done = self.assemble(self.prepare(item), {})
            parts = record_line(replace(done, id=_ID_MARK)).split(_ID_MARK_JSON)
            if len(parts) == 2:  # else a key holds the mark's text: the line is built each time
                done.line_parts = (parts[0], parts[1])
            if len(plan.outcomes) < _MAX_PLANS:
                plan.outcomes[key] = done
        return done

    def columnar(self, items: Sequence[Item]) -> list[Scored | None]:
        """``_outcome`` over a chunk, as each record's result: records whose output is their
        ground truth to the byte, no value null or blank (found for the whole chunk at once),
        take the plan's result unlooked; the others go through ``_outcome``, record by record."""
        return list(map(_of_record, self._outcomes(items), items))

    def _outcomes(self, items: Sequence[Item]) -> list[Scored | None]:
        """``columnar``'s results as the outcomes the records share."""
        gts = [it.ground_truth for it in items]
        aios = [it.output for it in items]
        same = list(itertools.compress(range(len(items)), map(operator.eq, gts, aios)))
        if same:
            try:
                text = orjson.dumps([gts[i] for i in same])
                if text != orjson.dumps([aios[i] for i in same]) or _MAYBE_NULL.search(text):
                    dumped = ((i, orjson.dumps(gts[i]), orjson.dumps(aios[i])) for i in same)
                    same = [i for i, g, a in dumped if g == a and not _MAYBE_NULL.search(g)]
            except orjson.JSONEncodeError:  # a value orjson cannot write: ``_outcome`` decides
                same = []
        out: list[Scored | None] = [None] * len(items)
        for i in same:
            keys = tuple(gts[i])
            plan = self._plan((keys, keys), gts[i], aios[i])
            codes = plan.identical
            if codes is None:
                continue
            out[i] = self._shared(plan, codes, items[i])
            self.identical += 1
        fast = self._outcome
        return [fast(items[i]) if r is None else r for i, r in enumerate(out)]

    def prepare(self, item: Item) -> _Prep:
        """Phases 0-3 without the matchers. Raises InputError (field ``ground_truth`` or
        ``output``) when a side nests deeper than MAX_DEPTH."""
        gt, output = item.ground_truth, item.output
        if not item.checked:
            _too_deep(gt, field="ground_truth", record=item.key)
        obj, kind, flags = (
            (output, "object", [])
            if type(output) is dict
            else coerce_output(output, record=item.key)
        )
        if not item.checked or flags == ["parsed_from_text"]:
            _too_deep(obj if obj is not None else output, field="output", record=item.key)
        safety = 1.0 if item.safety_score is None else float(item.safety_score)
        findings: list[SafetyFinding] = []
        if self.config.safety_check == "leaks":
            findings = find_leaks(obj if obj is not None else item.output, gt)
            if findings:
                safety = 0.0
                flags.append("safety_leak")
        aio: dict[str, Any] = obj if obj is not None else {}
        if self.config.flatten:
            aio, gt = metrics.flatten_pair(aio, gt)
        seen = self._seen(gt)
        buckets = metrics.classify_keys(aio, gt)
        fields: dict[str, tuple[Strategy, float | None, float | None]] = {}
        pending: dict[str, tuple[Strategy, str, str]] = {}
        strategies = self._strategies
        for k in buckets.both_non_null:
            av, gv = aio[k], gt[k]
            strategy = metrics.resolve_strategy(k, gv, strategies=strategies)
            if strategy == "EXACT":
                hit = 1.0 if metrics.exact_match(av, gv) else 0.0
                fields[k] = (strategy, hit, hit)
            elif strategy == "IGNORE":
                fields[k] = (strategy, None, None)
            else:
                out_text, gt_text = metrics.canonical_text(av), metrics.canonical_text(gv)
                if out_text == gt_text:  # identical text needs no matcher: similarity 1
                    fields[k] = (strategy, 1.0, 1.0)
                else:
                    pending[k] = (strategy, out_text, gt_text)
        return _Prep(item, kind, flags, buckets, fields, pending, safety, findings, seen)

    def match(
        self, prepared: Sequence[_Prep]
    ) -> tuple[dict[tuple[str, str, str], Similarity], dict[str, int]]:
        """Every distinct (strategy, output text, gt text) of the chunk, sent once."""
        unique: dict[str, dict[tuple[str, str], None]] = {"FUZZY": {}, "SEMANTIC": {}}
        for prep in prepared:
            for strategy, out_text, gt_text in prep.pending.values():
                unique[strategy][(out_text, gt_text)] = None
        distinct = {family: list(pairs) for family, pairs in unique.items()}
        counts = {k: len(v) for k, v in distinct.items()}
        total = sum(counts.values())
        found: dict[tuple[str, str, str], Similarity] = {}
        if not total:
            return found, counts
        progress = self.progress
        done = 0
        if progress:
            progress("match", 0, total)
        for family, pairs in distinct.items():
            # a semantic encoder gets the whole chunk in one call (each distinct string encoded
            # once); judges and fuzzy go in smaller pieces so the progress bar moves
            if not pairs:
                continue
            matcher = self.matchers.get(family)
            if matcher is None:
                raise _Unmatched(family)
            size = max(1, len(pairs) if isinstance(matcher, SemanticMatcher) else MATCH_CHUNK)
            for start in range(0, len(pairs), size):
                piece = pairs[start : start + size]
                predictions, references = [p for p, _ in piece], [r for _, r in piece]
                if isinstance(matcher, SemanticMatcher):
                    loading = (lambda m: progress(f"loading {m}", 0, 0)) if progress else None
                    sims = matcher.similarities(predictions, references, on_load=loading)
                else:
                    sims = matcher.similarities(predictions, references)
                for (p, r), sim in zip(piece, sims, strict=True):
                    found[(family, p, r)] = sim
                done += len(piece)
                if progress:
                    progress("match", done, total)
        return found, counts

    def assemble(self, prep: _Prep, found: Mapping[tuple[str, str, str], Similarity]) -> Scored:
        """Phase 3's matched fields and phase 4. Raises MatcherError when a matcher failed."""
        fields = prep.fields
        if prep.pending:
            fields = dict(fields)
            for name in sorted(prep.pending):
                strategy, out_text, gt_text = prep.pending[name]
                sim = found[(strategy, out_text, gt_text)]
                if not sim.ok or sim.score is None:
                    raise MatcherError(f"field {name!r}: {strategy} matcher failed: {sim.error}")
                threshold = getattr(self.config, f"{strategy.lower()}_threshold")
                fields[name] = (strategy, sim.score, 1.0 if sim.score >= threshold else 0.0)
        fields = {name: fields[name] for name in sorted(fields)}
        b = prep.buckets
        if prep.kind != "object":
            # documented rule: nothing can be compared, so every score is at its worst
            comp, hall, acc = 0.0, 1.0, 0.0
        else:
            scored = [f[2] for f in fields.values() if f[2] is not None]
            comp = metrics.completeness(len(b.both_non_null), len(b.gt_non_null))
            hall = metrics.hallucination(b.hallucination_count, b.total_distinct)
            acc = metrics.accuracy(math.fsum(scored), len(scored))
        rqs = metrics.rqs(
            accuracy=acc,
            completeness=comp,
            hallucination=hall,
            safety_score=prep.safety,
            weights=self.config.weights,
        )
        item = prep.item
        return Scored(
            item.index,
            item.id,
            item.line,
            prep.kind,
            prep.flags,
            b,
            fields,
            (comp, hall, acc, prep.safety, rqs),
            prep.findings,
        )

    def _failure(self, item: Item, exc: InputError | MatcherError) -> Failed:
        reason, field = (exc.reason, exc.field) if isinstance(exc, InputError) else (str(exc), None)
        located = InputError(reason, file=self.source, line=item.line, record=item.key, field=field)
        return Failed(item.index, RecordError.of(located), exc)

    def score(
        self, items: Sequence[Item]
    ) -> tuple[Sequence[Scored], list[Failed], dict[str, int], frozenset[str]]:
        """A chunk's scored records and failures (each in batch order), the distinct pairs sent
        to each matcher, and the strategy config's keys its ground truths name (``_seen``)."""
        prepared: list[_Prep] = []
        done: list[Scored | _Prep] = []
        failed: list[Failed] = []
        fast: list[Scored | None] = []
        self._used = {}
        if self._kernel:
            eligible = [it.checked and it.output.__class__ is dict for it in items]
            picked = list(itertools.compress(items, eligible))
            shared = self._outcomes(picked)
            whole = items and len(picked) == len(items)
            if whole and all(map(operator.is_not, shared, itertools.repeat(None))):
                return Outcomes(shared, items), [], self.match([])[1], self._plans_seen()
            kernel = map(_of_record, shared, picked)
            fast = [next(kernel) if e else None for e in eligible]
        for item, result in itertools.zip_longest(items, fast):
            if result is not None:
                done.append(result)
                continue
            try:
                prep = self.prepare(item)
            except InputError as exc:
                failed.append(self._failure(item, exc))
                continue
            prepared.append(prep)
            done.append(prep)
        found, counts = self.match(prepared)
        scored: list[Scored] = []
        for x in done:
            if isinstance(x, Scored):
                scored.append(x)
                continue
            try:
                scored.append(self.assemble(x, found))
            except MatcherError as exc:
                failed.append(self._failure(x.item, exc))
        failed.sort(key=lambda f: f.index)
        seen = self._plans_seen().union(*(p.seen for p in prepared))
        return scored, failed, counts, seen

    def _plans_seen(self) -> frozenset[str]:
        return frozenset().union(*(p.seen for p in self._used.values()))


def _of_record(done: Scored | None, item: Item) -> Scored | None:
    """A kernel's outcome (``Scorer._shared``) as ``item``'s result; None stays None."""
    if done is None:
        return None
    return Scored(
        item.index, item.id, item.line, "object", [], done.buckets, done.fields,
        done.scores, [], done.line_parts,
    )  # fmt: skip


class Outcomes(Sequence[Scored]):
    """A chunk scored by the kernel alone: its distinct outcomes (``results``) and which one
    each record has (``which``); a record's ``Scored`` is made only when asked for
    (``Aggregate.add``, ``record_pieces`` and ``_spliced`` read the outcomes: no object per
    record)."""

    __slots__ = ("items", "results", "which")

    def __init__(self, shared: Sequence[Scored | None], items: Sequence[Item]) -> None:
        first, _, self.which = _by_identity(shared)
        self.results: list[Scored] = [shared[i] for i in first]  # type: ignore[misc]
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: Any) -> Any:  # an index: slices are not asked for
        return _of_record(self.results[self.which[i]], self.items[i])


# ------------------------------------------------------------------ running aggregates


_OF = operator.attrgetter


def _by_identity(objects: Sequence[Any]) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The first position of each distinct object (by identity) of ``objects``, how often it
    occurs, and which distinct object each position holds."""
    keys = np.fromiter(map(id, objects), dtype=np.uint64, count=len(objects))
    _, first, inverse, counts = np.unique(
        keys, return_index=True, return_inverse=True, return_counts=True
    )
    return first.tolist(), counts, inverse.reshape(-1)


class Aggregate:
    """The digest of consecutive records (chunks.md): all the summary and report need. ``merge``
    is associative with a batch's start (``Aggregate(bootstrap=, seed=)``) its left identity;
    a chunk's digest (``of_chunk``) keeps its score rows until merged into one."""

    def __init__(self, *, bootstrap: int = 1000, seed: int = 0, start: bool = True) -> None:
        self.means = MeansBootstrap(SCORES, resamples=bootstrap, seed=seed) if start else None
        self.rows: list[np.ndarray] = []  # a chunk's score rows (``means`` is None)
        self.scored = 0
        self.failed = 0
        self.not_scored = 0
        self.errors: list[str] = []  # the first KEPT_ERRORS messages (all in errors.jsonl)
        self.not_an_object = 0
        self.safety_flagged = 0
        self.matcher_pairs = Counter({"FUZZY": 0, "SEMANTIC": 0})
        self.expected: Counter[str] = Counter()
        self.missing: Counter[str] = Counter()
        self.hallucinated: Counter[str] = Counter()
        self.field_scores: Counter[tuple[str, str, float | None]] = Counter()
        self._worst: list[tuple[float, int, Scored]] = []  # max-heap of (-rqs, -index)
        self.histograms = {s: np.zeros(HISTOGRAM_BINS, dtype=np.int64) for s in HISTOGRAMS}
        self.seen: set[str] = set()

    @classmethod
    def of_chunk(
        cls,
        scored: Sequence[Scored],
        errors: Iterable[RecordError] = (),
        pair_counts: Mapping[str, int] | None = None,
        seen: Iterable[str] = (),
    ) -> Aggregate:
        """The digest of a chunk: its scored records, then its errors, in batch order."""
        digest, errors = cls(start=False), list(errors)
        digest.not_scored, digest.errors = len(errors), [e.message for e in errors[:KEPT_ERRORS]]
        digest.add(scored, pair_counts)
        digest.seen.update(seen)
        return digest

    def merge(self, other: Aggregate) -> Aggregate:
        """Fold in ``other``, the digest of the records right after these (in place)."""
        if other.means is not None:
            raise ValueError("a batch's start merges only into nothing")
        if self.means is not None:
            for rows in other.rows:
                self.means.add(rows)
        else:
            self.rows += other.rows
        for name in ("scored", "failed", "not_scored", "not_an_object", "safety_flagged"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("matcher_pairs", "expected", "missing", "hallucinated", "field_scores"):
            getattr(self, name).update(getattr(other, name))
        self.errors = (self.errors + other.errors)[:KEPT_ERRORS]
        for entry in other._worst:
            self._keep_worst(entry)
        for name, counts in other.histograms.items():
            self.histograms[name] += counts
        self.seen |= other.seen
        return self

    def unused(self, config: EvalConfig) -> list[str]:
        """The strategy config's keys no ground truth named (probably typos), sorted."""
        return sorted(set(config.strategies) - self.seen)

    def _keep_worst(self, entry: tuple[float, int, Scored]) -> None:
        worst = self._worst
        if len(worst) < WORST_RECORDS:
            heapq.heappush(worst, entry)
        elif entry[:2] > worst[0][:2]:
            heapq.heapreplace(worst, entry)

    def add(self, scored: Sequence[Scored], pair_counts: Mapping[str, int] | None = None) -> None:
        self.matcher_pairs.update(pair_counts or {})
        if not scored:
            return
        if isinstance(scored, Outcomes):
            outcomes, which = scored.results, scored.which
        else:  # the kernel's records share their fields (and all but index, id and line)
            first, _, which = _by_identity(list(map(_OF("fields"), scored)))
            outcomes = [scored[i] for i in first]
        self.scored += len(scored)
        rows = np.array([r.scores for r in outcomes], dtype=float)[which]
        if self.means is not None:
            self.means.add(rows)
        else:
            self.rows.append(rows)
        for j, name in enumerate(SCORES):
            if name in self.histograms:
                self.histograms[name] += np.histogram(
                    rows[:, j], bins=HISTOGRAM_BINS, range=(0.0, 1.0)
                )[0]
        # counted once per outcome, by the field's own name ([*] paths at the summary)
        counts = np.bincount(which, minlength=len(outcomes)).tolist()
        field_scores = self.field_scores
        for r, n in zip(outcomes, counts, strict=True):
            self.failed += n if r.failed else 0
            extra, gt_null_value, gt_non_null, missing, *_ = r.buckets
            for counter, names in (
                (self.expected, gt_non_null),
                (self.missing, missing),
                (self.hallucinated, extra),
                (self.hallucinated, gt_null_value),
            ):
                for name in names:
                    counter[name] += n
            for name, f in r.fields.items():
                field_scores[(name, f[0], f[2])] += n
            if r.flags:
                self.not_an_object += n * ("not_an_object" in r.flags)
                self.safety_flagged += n * ("safety_leak" in r.flags)
        for i in np.argsort(rows[:, 4], kind="stable")[:WORST_RECORDS].tolist():
            r = scored[i]
            self._keep_worst((-r.scores[4], -r.index, r))

    def fields(self) -> dict[str, FieldSummary]:
        """Per field (``[*]`` paths), sorted by name."""
        out: dict[str, FieldSummary] = {}
        strategies: dict[str, set[str]] = {}

        def entry(name: str, strategy: str | None = None) -> FieldSummary:
            key = wildcard_path(name) if "[" in name else name
            strategies.setdefault(key, set()).update([strategy] if strategy else [])
            return out.setdefault(key, FieldSummary())

        for name, n in self.expected.items():
            entry(name).expected += n
        for name, n in self.missing.items():
            entry(name).missing += n
        for name, n in self.hallucinated.items():
            entry(name).hallucinated += n
        for (name, strategy, score), n in self.field_scores.items():
            summary = entry(name, strategy)
            if score is None:
                summary.ignored += n
            else:
                summary.scored += n
                summary.matched += n if score == 1.0 else 0
        for key, summary in out.items():
            summary.strategies = sorted(strategies[key])
        return dict(sorted(out.items()))

    def worst(self) -> list[Scored]:
        """The WORST_RECORDS lowest RQS, lowest first (ties: batch order)."""
        return [e[2] for e in sorted(self._worst, key=lambda e: (-e[0], -e[1]))]

    def summary(self, signature: Signature) -> BatchSummary:
        """The batch's summary (the finished metrics and intervals): of a batch's digest, one
        that starts at its first record."""
        boot = self.means
        if boot is None:
            raise ValueError("a chunk's digest has no summary: merge it into a batch's start")
        means: dict[str, float | None] = {
            name: (boot.sums[j].value / self.scored if self.scored else None)
            for j, name in enumerate(SCORES)
        }
        return BatchSummary(
            records=self.scored + self.not_scored,
            scored=self.scored,
            failed=self.failed,
            not_scored=self.not_scored,
            errors=list(self.errors),
            not_an_object=self.not_an_object,
            safety_flagged=self.safety_flagged,
            means=means,
            ci=boot.intervals(),
            fields=self.fields(),
            matcher_pairs=dict(self.matcher_pairs),
            signature=signature,
        )


# ------------------------------------------------------------------ reading a batch file


def plain_items(
    numbers: range, lines: list[bytes], warned_extra: bool
) -> tuple[list[Item], list[str], list[dict[str, Any]]] | None:
    """The common chunk's items, ids and lines' values (plainly valid lines, no unknown key
    unless warned of, no id twice) read with C-level maps, no loop per record; None for any
    other chunk, read line by line (``BatchReader._chunk``)."""
    opens = map(operator.add, map(bytes.count, lines, itertools.repeat(b"{")),
                map(bytes.count, lines, itertools.repeat(b"[")))  # fmt: skip
    if max(opens) > _FEW_OPENERS:
        return None
    try:
        values = list(map(orjson.loads, lines))
    except orjson.JSONDecodeError:
        return None
    if may_hold_big_int(b"".join(lines)):
        return None  # an integer beyond 64 bits, read as a double: line by line, exactly
    if set(map(type, values)) != {dict}:
        return None
    get = dict.get
    ids: list[Any] = list(map(get, values, itertools.repeat("id")))
    id_types = set(map(type, ids))
    if not id_types <= {int, str}:
        return None
    ints = ids if id_types == {int} else [i for i in ids if i.__class__ is int]
    if ints and (min(ints) < -_INT64 or max(ints) >= _INT64):
        return None
    texts = ids if id_types == {str} else [i for i in ids if i.__class__ is str]
    if not all(map(str.strip, texts)):
        return None
    keys: list[str] = ids if id_types == {str} else list(map(str, ids))
    gts = list(map(get, values, itertools.repeat("ground_truth")))
    if set(map(type, gts)) != {dict}:
        return None
    if not all(map(dict.__contains__, values, itertools.repeat("output"))):
        return None
    given = list(map(dict.__contains__, values, itertools.repeat("safety_score")))
    safety: Iterable[float | None] = itertools.repeat(None)
    if any(given):  # each null or a number in [0, 1], else line by line
        scores = list(map(get, values, itertools.repeat("safety_score")))
        if not all(s is None or (type(s) in (float, int) and 0 <= s <= 1) for s in scores):
            return None
        safety = [None if s is None else float(s) for s in scores]
    known = map(operator.add, given, itertools.repeat(3))
    if not warned_extra and any(map(operator.gt, map(len, values), known)):
        return None  # an unknown key, to warn of: line by line
    if len(set(keys)) < len(keys):
        return None
    outputs = list(map(get, values, itertools.repeat("output")))
    true = itertools.repeat(True)
    return list(map(Item, numbers, ids, numbers, gts, outputs, safety, true)), keys, values


_RECORD_KEYS = ("id", "ground_truth", "output")


def _canonical(lines: list[bytes], values: list[dict[str, Any]]) -> bool:
    """Whether each line is ``{"id":…,"ground_truth":…,"output":…}`` as orjson writes its
    value, with its newline: then its text after the id is its stored item's (``_spliced``)."""
    if not lines[-1].endswith(b"\n") or set(map(tuple, values)) != {_RECORD_KEYS}:
        return False
    try:
        text = orjson.dumps(values)
    except orjson.JSONEncodeError:
        return False
    return text[1:-1] == b",".join(lines).replace(b"\n", b"")


class Lines(list[Item | Failed]):
    """A chunk of a batch file read but not parsed (``BatchReader.unparsed``): its lines' bytes
    as one ``data`` and each line's start, then the end (``offsets``, in the file). Parsed where
    it is scored (``score_chunk``, by ``plain_items``), then its ids checked, in file order, by
    its reader (``BatchReader.taken``), which reads it again where they are not new. An empty
    list to the code that passes chunks on: only ``run_stream`` reads one."""

    __slots__ = ("data", "numbers", "offsets", "reader", "warned_extra")

    def __init__(
        self,
        numbers: range,
        offsets: list[int],
        data: bytes,
        warned_extra: bool,
        reader: BatchReader | None = None,
    ) -> None:
        super().__init__()
        self.numbers, self.offsets, self.data = numbers, offsets, data
        self.warned_extra, self.reader = warned_extra, reader

    @property
    def lines(self) -> list[bytes]:
        """Each line, with its newline."""
        at = list(map(operator.sub, self.offsets, itertools.repeat(self.offsets[0])))
        return list(map(self.data.__getitem__, map(slice, at, at[1:])))

    def __reduce__(self) -> tuple[Any, ...]:  # sent without its reader
        return Lines, (self.numbers, self.offsets, self.data, self.warned_extra)


class _Blocks:
    """The whole lines of a file read a block at a time, each chunk of them as one bytes and its
    lines' ends (``BatchReader``'s unparsed chunks: no object per line, 0.9 s of the main
    process's CPU at 1M records)."""

    SIZE = 4 << 20

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle, self.buf, self.eof = handle, b"", False
        self.ends: np.ndarray = np.zeros(0, np.int64)  # after each line of ``buf``
        self.taken = 0  # lines of ``buf`` given

    def take(self, n: int) -> tuple[bytes, np.ndarray] | None:
        """The next ``n`` lines (fewer at the end of the file, none past it) and where each ends
        in them; None when one of them is longer than MAX_LINE_BYTES: the handle is then at the
        first line not given (``read_lines`` tells it)."""
        limit = jsonio.MAX_LINE_BYTES
        while len(self.ends) - self.taken < n and not self.eof:
            tail = int(self.ends[-1]) if len(self.ends) else 0
            if len(self.buf) - tail > limit:
                break
            first = int(self.ends[self.taken - 1]) if self.taken else 0
            more = self.handle.read(self.SIZE)
            self.buf = self.buf[first:] + more
            self.ends = np.flatnonzero(np.frombuffer(self.buf, np.uint8) == 10) + 1
            self.taken, self.eof = 0, not more
            if self.eof and len(self.buf) > (int(self.ends[-1]) if len(self.ends) else 0):
                self.ends = np.append(self.ends, len(self.buf))  # a last line with no newline
        first = int(self.ends[self.taken - 1]) if self.taken else 0
        ends = self.ends[self.taken : self.taken + n]
        if (len(ends) < n and not self.eof) or np.diff(ends, prepend=first).max(initial=0) > limit:
            self.handle.seek(first - len(self.buf), os.SEEK_CUR)
            return None
        self.taken += len(ends)
        return self.buf[first : int(ends[-1]) if len(ends) else first], ends - first


_HASH_BASE = 0x100000001B3  # odd, so invertible modulo 2**64
_HASH_UNDO = pow(_HASH_BASE, -1, 1 << 64)


def id_hashes(keys: Sequence[str]) -> np.ndarray:
    """A 64-bit hash of each id, the same in every process (``hash`` of a str is not: a pool
    process's ids are looked up in the reading one's index, ``_SeenIds``): the polynomial of
    its UTF-8 bytes, mixed (splitmix64's finisher); a chunk's ids at once, no loop per id."""
    raw = [k.encode("utf-8", "surrogatepass") for k in keys]
    ends = np.cumsum([0, *map(len, raw)], dtype=np.int64)
    data = np.frombuffer(b"".join(raw), np.uint8).astype(np.uint64) + np.uint64(1)
    base = np.array([[_HASH_BASE], [_HASH_UNDO]], np.uint64)
    powers = np.cumprod(np.repeat(base, len(data) + 1, 1), 1)  # BASE**(i+1), BASE**-(i+1)
    sums = np.cumsum(np.append(np.uint64(0), data * powers[0, :-1]))  # of the bytes before i
    # each id's sum brought to its first byte's power: times BASE**-start
    h = (sums[ends[1:]] - sums[ends[:-1]]) * np.append(np.uint64(1), powers[1])[ends[:-1]]
    h ^= np.diff(ends).astype(np.uint64)
    for shift, factor in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB), (31, 1)):
        h = (h ^ (h >> np.uint64(shift))) * np.uint64(factor)
    return h.view(np.int64)  # type: ignore[no-any-return]


class _SeenIds:
    """The ids read so far as sorted runs of their hashes (``id_hashes``) with line and byte
    offset, a hit confirmed by re-reading the line (docs/decisions.md): numbers only, no
    object per id (the reading process's memory and CPU)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.runs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # hashes, lines, offsets
        self._handle: IO[bytes] | None = None

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def _key_at(self, offset: int) -> str | None:
        if self._handle is None:
            self._handle = self.path.open("rb")
        self._handle.seek(offset)
        raw = self._handle.readline()
        if offset == 0:
            raw = raw.removeprefix(_BOM)
        try:
            return id_text(loads(raw).get("id"))
        except (orjson.JSONDecodeError, AttributeError):
            return None

    def candidates(self, hashes: np.ndarray) -> np.ndarray:
        """For each id's hash, whether an older id may be the same (one lookup per run)."""
        order = np.argsort(hashes)
        wanted = hashes[order]  # sorted needles: searchsorted walks each run once
        found = np.zeros(len(hashes), dtype=bool)
        for run, _, _ in self.runs:
            found |= run[np.minimum(np.searchsorted(run, wanted), len(run) - 1)] == wanted
        hit = np.empty(len(hashes), dtype=bool)
        hit[order] = found
        return hit

    def first_line(self, key: str, h: int) -> int | None:
        """The line where ``key`` (of hash ``h``) was first seen, or None."""
        for hashes, lines, offsets in self.runs:
            i = int(np.searchsorted(hashes, h))
            while i < len(hashes) and hashes[i] == h:
                if self._key_at(int(offsets[i])) == key:
                    return int(lines[i])
                i += 1
        return None

    def add(self, hashes: np.ndarray, lines: Sequence[int], offsets: Sequence[int]) -> None:
        """New ids (their hashes, lines and offsets) as a sorted run; runs merged as they grow,
        each more than twice the next: at most log2(ids) + 1 runs."""
        at = np.argsort(hashes, kind="stable")
        self.runs.append((hashes[at], np.array(lines, np.uint32)[at], np.array(offsets)[at]))
        while len(self.runs) > 1 and len(self.runs[-2][0]) <= 2 * len(self.runs[-1][0]):
            older, newer = list(self.runs.pop(-2)), self.runs.pop()
            # inserted after equal hashes (the first line stays first), one column at a time
            at = np.searchsorted(older[0], newer[0], side="right")
            hashes_, lines_, offsets_ = (np.insert(older.pop(0), at, c) for c in newer)
            self.runs.append((hashes_, lines_, offsets_))


class BatchReader:
    """A batch file read in chunks of lines: each chunk as plain items (valid records) and
    failures (a line that is not JSON, too deep, not a valid record, or a duplicate id), in
    file order. The same rules and messages as ``read_batch``."""

    def __init__(self, path: str | Path, *, chunk_lines: int = CHUNK_LINES) -> None:
        self.path = Path(path)
        self.chunk_lines = max(1, chunk_lines)
        self.size = 0
        self.warned_extra = False
        # past the first record, chunks come unparsed (``Lines``) to be parsed where scored
        self.unparsed = False
        self._seen = _SeenIds(self.path)
        self.restart()

    def restart(self) -> None:
        """Count again from the start, for a second ``chunks()`` (extra keys stay warned)."""
        # first_error: the first line's, until the first valid record (then the file is
        # refused naming it and ``failures``; each bad line kept was a tenth of its cost)
        self.records = self.failures = self.bytes_read = 0
        self.first_error: InputError | None = None

    def chunks(self) -> Generator[list[Item | Failed]]:
        """Raises InputError when the file cannot be read."""
        p = self.path
        handle = jsonio.open_input(p)
        self.size = os.fstat(handle.fileno()).st_size
        seen = self._seen = _SeenIds(p)
        try:
            with handle:
                offset = 0
                number = 0
                source = read_lines(handle)
                blocks: _Blocks | None = None
                while True:
                    taken = None
                    # past the first record of a large file, unparsed (read as ``_Blocks``)
                    if self.unparsed and self.records and self.size >= UNPARSED_BYTES:
                        blocks = blocks or _Blocks(handle)
                        taken = blocks.take(self.chunk_lines)
                        if taken is None:  # a line too long: this chunk line by line
                            blocks = None
                    if taken is not None:
                        data, ends = taken
                        if not data:
                            return
                        lines: list[Any] = []
                        offsets = [offset, *(ends + offset).tolist()]
                    else:
                        lines = list(itertools.islice(source, self.chunk_lines))
                        if not lines:
                            return
                        offsets = list(itertools.accumulate(map(len, lines), initial=offset))
                    count = len(offsets) - 1
                    numbers = range(number + 1, number + 1 + count)
                    number += count
                    offset = offsets[-1]
                    self.bytes_read = offset
                    if taken is not None:
                        yield Lines(numbers, offsets, data, self.warned_extra, self)
                    else:  # offsets: each line's start, then the end (left over)
                        yield self._chunk(list(zip(numbers, offsets, lines, strict=False)))
        finally:
            seen.close()

    def _fail(self, index: int, error: InputError) -> Failed:
        self.failures += 1
        if self.first_error is None and not self.records:
            self.first_error = error
        return Failed(index, RecordError.of(error), error)

    def taken(self, chunk: Lines, hashes: np.ndarray | None) -> list[Item | Failed] | None:
        """A chunk read unparsed (``Lines``), scored where it was parsed (``plain_items``): None
        when its ids (their ``hashes``, in order; None: it was not plain) are new, its records
        then counted read and its ids seen; else the chunk read here, by the rules of every line
        (a duplicate id, an unknown key)."""
        if hashes is not None and not self._seen.candidates(hashes).any():
            self._seen.add(hashes, chunk.numbers, chunk.offsets[:-1])
            self.records += len(hashes)
            return None
        return self._chunk(list(zip(chunk.numbers, chunk.offsets, chunk.lines, strict=False)))

    def _chunk(self, raws: list[tuple[int, int, bytes]]) -> list[Item | Failed]:
        p, seen = self.path, self._seen
        parsed: list[tuple[int, int, Any, InputError | None]] = []
        for number, offset, raw in raws:
            value = parse_jsonl_line(raw, number, p, record_key="id")
            if isinstance(value, InputError):
                parsed.append((number, offset, None, value))
            elif value is not BLANK:
                parsed.append((number, offset, value, None))
        out: list[Item | Failed] = []
        keys = [id_text(v.get("id")) if type(v) is dict else None for _, _, v, _ in parsed]
        hashes = id_hashes([k or "" for k in keys])
        maybe_old = seen.candidates(hashes).tolist()
        here: dict[str, int] = {}  # this chunk's ids, by their first line
        new: list[tuple[int, int, int]] = []  # their (hash, line, offset)
        rows = zip(parsed, keys, maybe_old, hashes.tolist(), strict=True)
        for (number, offset, value, problem), key, old, h in rows:
            if problem is not None:
                out.append(self._fail(number, problem))
                continue
            if type(value) is not dict:
                error = InputError(
                    "a line must be a JSON object with id, ground_truth and output",
                    file=p,
                    line=number,
                    value=value,
                )
                out.append(self._fail(number, error))
                continue
            try:
                r = BatchRecord.model_validate({**value, "line": number})
            except ValidationError as exc:
                error = input_error_of(exc, file=p, line=number, record=key, reasons=_REASONS)
                if error.field == "safety_score":
                    error = error.replace(reason="must be a number in [0, 1] or null")
                out.append(self._fail(number, error))
                continue
            item = Item(number, r.id, number, r.ground_truth, r.output, r.safety_score, True)
            k = item.key
            if k != key:  # validated into another id: its own hash
                h, old = int(id_hashes([k])[0]), True
            first = here.get(k)
            if first is None and old:
                first = seen.first_line(k, h)
            if first is not None:
                out.append(self._fail(number, duplicate_id(first, file=p, line=number, record=k)))
                continue
            here[k] = number
            new.append((h, number, offset))
            # a valid record has id, ground_truth and output: more keys than those and
            # safety_score are unknown ones
            if not self.warned_extra and len(value) > 3 + ("safety_score" in value):
                self.warned_extra = True
                extra = sorted(set(value) - _KNOWN_KEYS)
                logger.warning("%s:%d: ignoring unknown keys %s", p, number, ", ".join(extra))
            self.records += 1
            out.append(item)
        if new:
            found, lines, offsets = zip(*new, strict=True)
            seen.add(np.array(found, dtype=np.int64), lines, offsets)
        return out


# ------------------------------------------------------------------ the streamed batch


def record_line(scored: Scored) -> bytes:
    """One line of records.jsonl."""
    if (parts := scored.line_parts) is not None:
        return parts[0] + dumps_bytes(scored.id, 0) + parts[1]
    return dumps_bytes(scored.line_dict(), _LINE_OPTIONS)


Pieces = tuple[list[tuple[bytes, bytes]], list[int], list[bytes]]


def record_pieces(scored: Sequence[Scored]) -> Pieces | None:
    """An ``Outcomes`` chunk's records.jsonl lines in pieces: each distinct outcome's line before
    and after the id, which one each record has, and its id as JSON (sent from a pool process
    for ``joined`` to make: a fortieth of the bytes); None for another chunk, or an id beyond 64
    bits (which orjson refuses: written exactly, ``record_line``)."""
    if not isinstance(scored, Outcomes) or None in (
        parts := [r.line_parts for r in scored.results]
    ):
        return None
    try:
        ids = list(map(orjson.dumps, map(_OF("id"), scored.items)))
    except TypeError:
        return None
    return parts, scored.which.tolist(), ids  # type: ignore[return-value]


def joined(records: bytes | Pieces) -> bytes:
    """A chunk's records.jsonl bytes, from ``record_pieces``' pieces."""
    if isinstance(records, bytes):
        return records
    parts, which, ids = records
    heads, tails = zip(*parts, strict=True)
    lines = zip(map(heads.__getitem__, which), ids, map(tails.__getitem__, which), strict=True)
    return b"".join(itertools.chain.from_iterable(lines))


_TOKENS = itertools.count()


@dataclass(eq=False)
class Job:
    """What scoring a chunk reads besides the chunk (chunks.md). Immutable; pickled without
    ``progress`` and its matchers but fuzzy (a chunk that needs another comes back to be
    scored here)."""

    config: EvalConfig
    matchers: Matchers | None = None
    _: KW_ONLY
    source: str | None = None
    store: bool = False
    keep: bool = False
    progress: Progress | None = None
    sent: bool = False
    token: int = field(default_factory=_TOKENS.__next__)

    def __getstate__(self) -> dict[str, Any]:
        # rapidfuzz's matcher is stateless, sent along; a model (semantic, a judge) is not
        sent = {k: m for k, m in (self.matchers or {}).items() if isinstance(m, FuzzyMatcher)}
        state = {**self.__dict__, "matchers": sent, "progress": None, "sent": True}
        state.pop("scorer", None)
        return state

    @cached_property
    def scorer(self) -> Scorer:
        return Scorer(self.config, self.matchers or {}, source=self.source, progress=self.progress)


@lru_cache(maxsize=65536)
def _tag(path: str) -> str:
    """A field's tag in the store: its name as fields.csv writes it, cut to TAG_CHARS."""
    from fieldcheck.store import TAG_CHARS

    return wildcard_path(path)[:TAG_CHARS]


StoreRow = tuple[str, bool | None, str | None, tuple[str, ...], bytes]
"""A store item as plain data (key, failed, error type, tags, result text) (``stored_items``)."""


@dataclass(slots=True)
class ChunkRows:
    """What a chunk gives the output files and the store: its records.jsonl lines (or their
    ``record_pieces``) and errors.jsonl lines, its store rows (``Job.store``: how many,
    marshalled, or ``_spliced``'s columns and the ids), its scored records and errors
    (``Job.keep``), and the ids' ``id_hashes`` of a ``Lines`` chunk."""

    records: bytes | Pieces
    errors: bytes
    stored: int
    store: bytes | tuple[Any, ...]
    scored: list[Scored]
    failures: list[RecordError]
    hashes: np.ndarray | None = None


class _Unmatched(Exception):
    """A chunk needs a matcher that this process does not have (``Job``)."""


_sent: list[Job] = []  # in a pool's process: the last job sent, its scorer's plans kept


def score_chunk(
    job: Job, chunk: Sequence[Item | Failed] | Lines
) -> tuple[ChunkRows, Aggregate] | None:
    """A chunk's rows and digest; None when it needs a matcher the job was sent without, or
    is a ``Lines`` chunk that is not plain (both then scored by the caller)."""
    if job.sent:
        if not _sent or _sent[0].token != job.token:
            _sent[:] = [job]
        job = _sent[0]
    keys, hashes, canonical = None, None, False
    if isinstance(chunk, Lines):
        lines = chunk.lines
        found = plain_items(chunk.numbers, lines, chunk.warned_extra)
        if found is None:
            return None
        canonical = job.store and _canonical(lines, found[2])
        chunk, keys, hashes = found[0], found[1], id_hashes(found[1])
    if set(map(type, chunk)) == {Item}:
        items: Sequence[Item] = chunk  # type: ignore[assignment]
        read_failed: list[Failed] = []
    else:
        items = [x for x in chunk if isinstance(x, Item)]
        read_failed = [x for x in chunk if isinstance(x, Failed)]
    try:
        scored, failed, counts, seen = job.scorer.score(items)
    except _Unmatched:
        return None
    failures = sorted(read_failed + failed, key=lambda f: f.index) if failed else read_failed
    errors = [f.error for f in failures]
    digest = Aggregate.of_chunk(scored, errors, counts, seen)
    store: bytes | tuple[Any, ...] | None = None
    if job.store and canonical and not errors and (columns := _spliced(scored)) is not None:
        store = (*columns, keys)
    if job.store and store is None:
        lines = list(map(record_line, scored))
        records: bytes | Pieces = b"".join(lines)
        store = marshal.dumps(_store_rows(scored, lines, items, errors))
    else:
        records = record_pieces(scored) or b"".join(map(record_line, scored))
    keep = job.keep
    rows = ChunkRows(
        records,
        b"".join(dumps_bytes(e.fields(), _LINE_OPTIONS) for e in errors),
        len(scored) + len(errors) if job.store else 0,
        store or b"",
        list(scored) if keep else [],
        errors if keep else [],
        hashes,
    )
    return rows, digest


def _spliced(scored: Sequence[Scored]) -> tuple[list[tuple[Any, ...]], list[int]] | None:
    """The store columns of a chunk of canonical lines (``_canonical``), no error among them:
    each distinct outcome's failed flag, tags and records.jsonl line before and after the id
    (less its closing brace and newline), and which outcome each record has; None when a record
    is not the kernel's (no shared line parts). The store's writer splices each item's text
    from them and its input line (``stored_items``)."""
    if not isinstance(scored, Outcomes):
        return None
    ends = [r.line_parts for r in scored.results]
    if None in ends:
        return None
    table = [
        (r.failed, tuple(dict.fromkeys(map(_tag, map(str, r.failed_on())))), p[0], p[1][:-2])  # type: ignore[index]
        for r, p in zip(scored.results, ends, strict=True)
    ]
    return table, scored.which.tolist()


def spliced_payload(rows: ChunkRows, chunk: Lines, path: str) -> tuple[Any, ...]:
    """What the store's writer splices a canonical chunk's items from (``stored_items``): the
    ``_spliced`` columns, where its input lines are in the file ``path`` (read there again by
    the writer, not sent: 318 MB less marshalled and piped at 1M) and its ids."""
    table, which, keys = rows.store
    return table, which, (path, chunk.offsets[0], chunk.offsets[-1]), keys


def _store_rows(
    scored: Sequence[Scored],
    lines: Sequence[bytes],
    items: Sequence[Item],
    errors: Sequence[RecordError],
) -> list[StoreRow]:
    """The store's items of a chunk (issue 11): a record's line with ``ground_truth``,
    ``output`` and ``safety_score_given`` added, tagged with the fields it failed on; an error
    is ``{id, error}``, ``failed`` null."""
    by_index = {it.index: it for it in items} if len(items) != len(scored) else None
    shared: dict[tuple[int, int, str], tuple[bool, tuple[str, ...]]] = {}
    dumps, non_str = orjson.dumps, orjson.OPT_NON_STR_KEYS
    rows: list[StoreRow] = []
    add = rows.append
    for n, (r, line) in enumerate(zip(scored, lines, strict=True)):
        # kernel records share their fields and buckets: their tags are worked out once
        outcome = (id(r.fields), id(r.buckets), r.kind)
        found = shared.get(outcome)
        if found is None:
            tags = tuple(dict.fromkeys(map(_tag, map(str, r.failed_on()))))
            found = shared[outcome] = (r.failed, tags)
        item = items[n] if by_index is None else by_index[r.index]
        gt, output = item.ground_truth, item.output
        try:
            gt_text = dumps(gt, option=non_str)
            out_text = gt_text if output is gt else dumps(output, option=non_str)
        except TypeError:  # an integer beyond 64 bits: written exactly
            gt_text = dumps_bytes(gt, non_str)
            out_text = dumps_bytes(output, non_str)
        s = item.safety_score
        text = b"".join(
            (
                line[:-2],  # the line without its closing brace and newline
                b',"ground_truth":',
                gt_text,
                b',"output":',
                out_text,
                b"}" if s is None else b',"safety_score_given":' + dumps(s) + b"}",
            )
        )
        add((str(r.id), found[0], None, found[1], text))
    for e in errors:
        body = e.fields()
        key = body.get("record") or f"line {body.get('line')}"
        text = dumps({"id": key, "error": body})
        add((str(key), None, str(e.reason), (), text))
    return rows


def stored_items(data: bytes | tuple[Any, ...]) -> Any:
    """A chunk's store items, run by the store's writer (``RunRecorder.add_built``): marshalled
    ``StoreRow``s as (columns, result text) pairs; or ``spliced_payload``'s as the store's table
    (``store.spliced``), each text spliced as ``_store_rows`` would write it: the record's line
    up to its id, the id and the rest of the record's line, then its input line after the id."""
    from fieldcheck.store import ItemColumns, spliced

    if isinstance(data, bytes):
        rows: list[StoreRow] = marshal.loads(data)
        return [
            (ItemColumns(key, failed, error_type=error, tags=dict.fromkeys(tags, True)), text)
            for key, failed, error, tags, text in rows
        ]
    table, which, (path, start, end), keys = data
    with open(path, "rb") as handle:
        handle.seek(start)
        lines = handle.read(end - start)
    return spliced(keys, table, which, lines, b',"ground_truth":', len(b'{"id":'))


_STORED_ITEMS = f"{__name__}:stored_items"


def batch_pool(path: str | Path) -> LocalPool | None:
    """The pool that scores a batch file this large (its chunks come unparsed,
    ``BatchReader.unparsed``), started now: its processes start while the file is read; None
    for a smaller file (or none)."""
    big = os.path.isfile(path) and os.stat(path).st_size >= UNPARSED_BYTES
    return LocalPool(POOL_WORKERS, warm=(__name__,)) if big else None


def run_stream(
    chunks: Iterable[Sequence[Item | Failed]],
    job: Job,
    *,
    prior: Sequence[RecordError] = (),
    executor: Executor | None = None,
    records_out: IO[bytes] | None = None,
    errors_out: IO[bytes] | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    recorder: RunRecorder | None = None,
    keep: list[Scored] | None = None,
    kept_errors: list[RecordError] | None = None,
    total: int = 0,
) -> Aggregate:
    """Every chunk through ``score_chunk`` on ``executor``, in order: its lines written, its
    items to ``recorder``, its digest merged; ``keep``/``kept_errors`` collect every result.
    The ``prior`` errors (of lines no chunk holds: a json run's documents, a re-scored run's)
    come first in the files but last in the store, with no model call: a record keeps its id
    there and the error of a duplicate of it is the item keyed ``id~seq``, as in json batch."""
    digest = Aggregate(bootstrap=bootstrap, seed=seed)
    first: list[Item | Failed] = [Failed(-1, e) for e in prior]
    later: list[ChunkRows] = []  # its store rows
    held: deque[Sequence[Item | Failed] | Lines] = deque()
    task = partial(score_chunk, job)
    run_on: Executor = executor or InProcess()
    pool: LocalPool | None = None
    readers: set[BatchReader] = set()

    def take(result: tuple[ChunkRows, Aggregate] | None) -> None:
        chunk = held.popleft()
        store_last = chunk is first  # the prior errors: stored after the rest
        if isinstance(chunk, Lines):
            assert chunk.reader is not None
            readers.add(chunk.reader)
            parsed = chunk.reader.taken(chunk, None if result is None else result[0].hashes)
            if parsed is not None:
                chunk, result = parsed, None
        found = result if result is not None else score_chunk(job, chunk)
        if found is None:  # the job here has every matcher
            raise RuntimeError("a chunk was not scored")
        rows, part = found
        if records_out is not None and rows.records:
            records_out.write(joined(rows.records))
        if errors_out is not None and rows.errors:
            errors_out.write(rows.errors)
        if recorder is not None and rows.stored and store_last:
            later.append(rows)
        elif recorder is not None and rows.stored:
            store = rows.store
            if isinstance(store, tuple):  # spliced with the chunk's lines (``stored_items``)
                assert isinstance(chunk, Lines) and chunk.reader is not None
                store = spliced_payload(rows, chunk, str(chunk.reader.path))
            recorder.add_built(_STORED_ITEMS, store, rows.stored, plain=True)
        if keep is not None:
            keep.extend(rows.scored)
        if kept_errors is not None:
            kept_errors.extend(rows.failures)
        digest.merge(part)
        if job.progress is not None and (part.scored or part.not_scored):
            job.progress("score", digest.scored + digest.not_scored, total)

    if executor is None and job.source and (pool := batch_pool(job.source)) is not None:
        run_on = pool
    try:
        with few_collections():
            for chunk in itertools.chain([first] if first else (), chunks):
                if executor is None and pool is None and isinstance(chunk, Lines):
                    # unparsed chunks: parsed and scored by a pool (its results in order)
                    run_on = pool = LocalPool(POOL_WORKERS, warm=(__name__,))
                held.append(chunk)
                for result in run_on.submit(task, chunk):
                    take(result)
            for result in finish(run_on):
                take(result)
    except BaseException:
        if pool is not None:
            pool.close(kill=True)
        raise
    if pool is not None:
        pool.close()
    if recorder is not None and later:
        recorder.add_failed_calls()  # a record's failed call before a duplicate's error
        for rows in later:
            recorder.add_built(_STORED_ITEMS, rows.store, rows.stored, plain=True, calls=False)
    for reader in readers:  # the ids' index (20 MB at 1M records) let go before the report
        reader._seen = _SeenIds(reader.path)
    return digest

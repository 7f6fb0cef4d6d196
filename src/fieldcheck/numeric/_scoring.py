"""Scoring a model's predictions against a ConvFinQA dataset: per turn, per conversation, overall.

Layer 3: it joins records and predictions and calls the pure metric functions of
``fieldcheck.metrics._numbers`` and ``fieldcheck.metrics._programs``. Spec: numeric-qa-evaluation.md.
"""

from __future__ import annotations

import functools
import logging
import math
from array import array
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, cast

import numpy as np
from pydantic import BaseModel, ConfigDict

from fieldcheck._util.errors import ErrorList, InputError
from fieldcheck._util.paths import unique_filenames
from fieldcheck._util.signature import Signature
from fieldcheck.metrics._numbers import (
    ABSOLUTE_TOLERANCE,
    RELATIVE_TOLERANCE,
    AnswerRule,
    FailureMode,
    match_values,
    parse_answer,
)
from fieldcheck.metrics._programs import (
    ProgramParseError,
    logic_order_score,
    logic_precision,
    logic_recall,
    plan_operations,
    program_operations,
)
from fieldcheck.metrics._stats import (
    Interval,
    TotalsGroup,
    TotalsStatistic,
    bootstrap_groups_ci,
    latency_stats,
    ratio_array,
)
from fieldcheck.numeric._loaders import LoadResult, PlainTurn
from fieldcheck.numeric._predictions import (
    Prediction,
    PredictionsResult,
    PredictionValues,
    prediction_values,
    sorted_keys,
)
from fieldcheck.numeric._records import Conversation, Turn
from fieldcheck.runner._errors import ERROR_TYPES

MISSING_PREDICTION = "missing_prediction"
# A model call that failed (issue 8): says nothing about the model's answers, so the turn is not
# scored. ``invalid_reply`` (and the agent's ``invalid_plan``) are the model's own failures.
CALL_ERRORS: tuple[str, ...] = tuple(t for t in ERROR_TYPES if t != "invalid_reply")
logger = logging.getLogger("fieldcheck")


class TurnScore(BaseModel):
    """Everything known about one turn: gold, prediction, the five matches, logic scores, cost.

    Match fields are ``None`` when the turn is not scored: no gold answer (``not_scored`` =
    ``no_gold``) or its model call failed (``call_error``, issue 8: an infrastructure error is
    not a wrong answer); logic scores are ``None`` then too, and without a plan or without a
    parsable gold program.
    """

    conversation_id: str
    turn_idx: int
    question: str
    expected_answer: float | str | None
    predicted_answer: str | float | None
    parsed_answer: float | str | None
    answer_rule: AnswerRule | None = None  # which parse_answer rule read the answer (issue 9)
    scored: bool
    not_scored: Literal["no_gold", "call_error"] | None = None
    numerical_match: bool | None
    soft_match: bool | None
    unit_agnostic_match: bool | None
    sign_agnostic_match: bool | None
    general_match: bool | None
    failure_mode: FailureMode | None
    ground_truth_program: str | None
    ground_truth_operations: list[str] | None
    plan: dict[str, Any] | None
    plan_steps: int | None
    plan_operations: list[str] | None
    operations_per_turn: int | None
    logic_recall: float | None
    logic_precision: float | None
    logic_order_score: float | None
    qa_split: bool | None
    input_tokens: int
    output_tokens: int
    tokens_estimated: bool = False  # the counts are characters / 4 (no usable usage)
    latency_s: float | None
    error_type: str | None
    error_message: str | None
    validation: list[dict[str, Any]]

    @property
    def call_error(self) -> bool:
        """The turn's model call failed (rate_limited, server_error, timeout, connection,
        bad_request, context_length, bad_response): listed everywhere, scored nowhere."""
        return self.not_scored == "call_error"


class ConversationScore(BaseModel):
    """One conversation's turns and its per-conversation aggregates (summary.csv row)."""

    conversation_id: str
    trace_id: str
    features: dict[str, Any]
    turns: list[TurnScore]

    def _scored(self) -> list[TurnScore]:
        return [t for t in self.turns if t.scored]

    def accuracy(self, field: str) -> float | None:
        """Share of scored turns where ``field`` (a match type) is True; ``None`` if none scored."""
        scored = self._scored()
        if not scored:
            return None
        return sum(bool(getattr(t, field)) for t in scored) / len(scored)

    def mean(self, field: str) -> float | None:
        """Mean of a per-turn number (logic scores, operations, latency) over the turns that have
        it, call-error turns left out; ``None`` if none has it (a turn without a plan has no
        logic scores, never 0)."""
        return _mean([getattr(t, field) for t in self.turns if not t.call_error])

    @property
    def success(self) -> bool | None:
        """Every scored turn is a numerical match; ``None`` when no turn is scored (no gold
        answers, or every call failed)."""
        scored = self._scored()
        return all(t.numerical_match for t in scored) if scored else None

    @property
    def input_tokens(self) -> int:
        return sum(t.input_tokens for t in self.turns)

    @property
    def output_tokens(self) -> int:
        return sum(t.output_tokens for t in self.turns)


class ReportTallies(NamedTuple):
    """What the report reads beyond statistics.json, folded while scoring (issue 10): scored turns
    and numerical matches by plan operations, scored turns matching each looser type but not the
    numerical match, the worst conversations' rows, and the failed validator checks."""

    by_operations: list[tuple[int, int, int]]
    extra: dict[str, int]
    worst: list[list[str]]
    failed_checks: int


class NumericResult(BaseModel):
    """The whole scoring run: conversations, every input problem, statistics and signature.

    ``conversations`` is empty for a streamed run (``numeric score``), which keeps ``tallies``
    instead; the in-memory ``score_numeric`` keeps every turn and no tallies."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    conversations: list[ConversationScore]
    input_errors: ErrorList
    statistics: dict[str, Any]
    signature: Signature
    tallies: ReportTallies | None = None


def _mean(values: Sequence[float | int | bool | None]) -> float | None:
    present = [float(v) for v in values if v is not None]
    return math.fsum(present) / len(present) if present else None


@functools.lru_cache(maxsize=4096)
def _program_operations(program: str) -> tuple[str, ...] | None:
    try:
        return program_operations(program)
    except ProgramParseError:
        return None


def gold_operations(
    program: str | None, known: Mapping[str, tuple[str, ...] | None]
) -> list[str] | None:
    """A gold program's operations (``known``: parsed while loading); ``None`` without a
    program or for one that does not parse."""
    if program is None:
        return None
    ops = known[program] if program in known else _program_operations(program)
    return list(ops) if ops is not None else None


def turn_record(
    conversation: Conversation,
    turn_idx: int,
    prediction: Prediction | None,
    operations: Mapping[str, tuple[str, ...] | None] = MappingProxyType({}),
) -> dict[str, Any]:
    """One turn scored as plain data: exactly ``TurnScore.model_dump(mode="json")``, built without
    a model (the hot path of ``numeric score``; issue 10). ``prediction`` None = no line for it.
    ``operations``: gold programs already parsed (``LoadResult.operations``), not parsed again."""
    turn = conversation.turns[turn_idx]
    return turn_values(
        conversation.id,
        turn_idx,
        turn,
        prediction_values(prediction) if prediction is not None else None,
        gold_operations(turn.program, operations),
    )


_LOGIC_CACHED = 64  # longer plans and programs are scored without the cache (bounded memory)


@functools.lru_cache(maxsize=4096)
def _logic_scores(plan_ops: Sequence[str], gold_ops: Sequence[str]) -> tuple[float, float, float]:
    """Logic recall, precision and order score; the few distinct (plan, gold) pairs of a run
    are scored once."""
    return (
        logic_recall(plan_ops, gold_ops),
        logic_precision(plan_ops, gold_ops),
        logic_order_score(plan_ops, gold_ops),
    )


_NO_PREDICTION = PredictionValues(
    None, None, 0, 0, None, MISSING_PREDICTION, "no prediction for this turn", []
)


def turn_values(
    conversation_id: str,
    turn_idx: int,
    turn: Turn | PlainTurn,
    prediction: PredictionValues | None,
    gold_ops: list[str] | None,
) -> dict[str, Any]:
    """``turn_record`` from plain values: the prediction's (``None``: no line for the turn) and
    the gold program's operations (``None``: no program, or one that does not parse)."""
    gold = turn.executed_answer
    (
        raw_answer,
        plan,
        tokens_in,
        tokens_out,
        latency,
        error_type,
        error_message,
        validation,
        estimated,
    ) = prediction if prediction is not None else _NO_PREDICTION._replace(validation=[])
    parsed = parse_answer(raw_answer)
    parsed_value: float | str | None = None
    if parsed is not None:
        parsed_value = (
            parsed.value if parsed.boolean is None else ("yes" if parsed.boolean else "no")
        )
    not_scored: Literal["no_gold", "call_error"] | None = None
    if error_type in CALL_ERRORS:
        not_scored = "call_error"
    elif gold is None:
        not_scored = "no_gold"
    matches = (
        match_values(parsed, gold, error=error_type is not None) if not_scored is None else None
    )
    plan_ops = plan_operations(plan)
    recall = precision = order = None
    # a plan cut short by a failed repair call is listed but not scored
    if plan_ops is not None and gold_ops is not None and not_scored != "call_error":
        if len(plan_ops) + len(gold_ops) <= _LOGIC_CACHED:
            recall, precision, order = _logic_scores(tuple(plan_ops), tuple(gold_ops))
        else:
            recall, precision, order = _logic_scores.__wrapped__(plan_ops, gold_ops)
    if matches is None:
        numerical = soft = unit = sign = general = None
        mode: FailureMode | None = None
    else:
        numerical, soft, unit, sign, general, mode = matches
    return {
        "conversation_id": conversation_id,
        "turn_idx": turn_idx,
        "question": turn.question,
        "expected_answer": gold,
        "predicted_answer": raw_answer,
        "parsed_answer": parsed_value,
        "answer_rule": parsed.rule if parsed is not None else None,
        "scored": not_scored is None,
        "not_scored": not_scored,
        "numerical_match": numerical,
        "soft_match": soft,
        "unit_agnostic_match": unit,
        "sign_agnostic_match": sign,
        "general_match": general,
        "failure_mode": mode,
        "ground_truth_program": turn.program,
        "ground_truth_operations": gold_ops,
        "plan": plan,
        "plan_steps": len(plan.get("steps") or []) if plan is not None else None,
        "plan_operations": plan_ops,
        "operations_per_turn": (
            len(plan_ops) if plan_ops is not None and not_scored != "call_error" else None
        ),
        "logic_recall": recall,
        "logic_precision": precision,
        "logic_order_score": order,
        "qa_split": turn.qa_split,
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "tokens_estimated": estimated,
        "latency_s": latency,
        "error_type": error_type,
        "error_message": error_message,
        "validation": validation,
    }


def score_turn(
    conversation: Conversation, turn_idx: int, prediction: Prediction | None
) -> TurnScore:
    """Score one turn (``prediction`` None = the predictions file has no line for it)."""
    return TurnScore.model_validate(turn_record(conversation, turn_idx, prediction))


def trace_ids(conversation_ids: Sequence[str]) -> dict[str, str]:
    """A file-safe, unique trace id per conversation id (``safe_filename``, ``-2`` on collision).

    ``unique_filenames``: linear however many ids share their first 120 characters (the search
    from ``-2`` on every clash took 44 s for 20k such ids).
    """
    return unique_filenames(conversation_ids)


def prediction_errors(data: LoadResult, predictions: PredictionsResult) -> ErrorList:
    """The input errors known before scoring: the loaders', then each prediction for an unknown
    conversation (not in the split) or a turn out of range, in (id, turn) order."""
    errors = data.errors + predictions.errors
    turns_of = data.turn_counts()
    for cid, turn in sorted_keys(predictions.predictions):
        line = predictions.lines.get((cid, turn))
        count = turns_of.get(cid)
        if count is None:
            if cid not in data.all_ids:
                errors.append(
                    InputError(
                        f"unknown conversation id (not in split {data.split!r} of {Path(data.path).name})",
                        file=predictions.path,
                        line=line,
                        record=cid,
                        field="conversation_id",
                        value=cid,
                    )
                )
            continue
        if turn >= count:
            errors.append(
                InputError(
                    f"turn out of range: the conversation has {count} turns",
                    file=predictions.path,
                    line=line,
                    record=cid,
                    field="turn",
                    value=turn,
                )
            )
    unscored = data.no_gold_turns()
    if unscored:
        logger.warning(
            "%d turn(s) have no gold answer (e.g. the private test set): not scored", unscored
        )
    return errors


def missing_turn_error(
    predictions: PredictionsResult, conversation_id: str, turn: int
) -> InputError:
    """A turn with a gold answer and no prediction line (it counts as a failure)."""
    return InputError(
        "missing turn: no prediction for this turn (counted as a failure)",
        file=predictions.path,
        record=conversation_id,
        field="turn",
        value=turn,
    )


def run_signature(
    data: LoadResult,
    predictions: PredictionsResult,
    *,
    bootstrap: int,
    seed: int,
    sample_size: int | None,
    sample_seed: int | None,
) -> Signature:
    """The run's signature: the files, the sample, the tolerance and the bootstrap."""
    return Signature(
        system="numeric",
        settings={
            "data": Path(data.path).name,
            "format": data.source_format,
            "split": data.split,
            "sample_size": sample_size if sample_size is not None else "all",
            "sample_seed": sample_seed if sample_seed is not None else "first",
            "predictions": Path(predictions.path).name,
            "numerical_match": f"rel<={RELATIVE_TOLERANCE},abs<{ABSOLUTE_TOLERANCE}",
            "bootstrap": bootstrap,
            "bootstrap_seed": seed,
        },
    )


def score_numeric(
    data: LoadResult,
    predictions: PredictionsResult,
    *,
    price_in: float | None = None,
    price_out: float | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    sample_size: int | None = None,
    sample_seed: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> NumericResult:
    """Score every turn of ``data`` against ``predictions``; return turns, aggregates, statistics.

    The in-memory path (every TurnScore kept; ``numeric score`` streams with
    ``numeric._stream.score_to_folder``). A conversation turn without a prediction counts as a
    failure (``missing_prediction``); a prediction for an unknown conversation or a turn out of
    range is an input error and ignored. Both are listed in ``input_errors`` with file, line,
    record id and field. ``price_in``/``price_out`` are US dollars per million tokens (both or
    neither).
    """
    if (price_in is None) != (price_out is None):
        raise ValueError("give both price_in and price_out, or neither")
    errors = prediction_errors(data, predictions)
    ids = trace_ids(data.conversation_ids())
    conversations: list[ConversationScore] = []
    for n, conversation in enumerate(data.conversations, start=1):
        turns: list[TurnScore] = []
        for i in range(len(conversation.turns)):
            prediction = predictions.predictions.get((conversation.id, i))
            if prediction is None and conversation.turns[i].executed_answer is not None:
                errors.append(missing_turn_error(predictions, conversation.id, i))
            turns.append(score_turn(conversation, i, prediction))
        conversations.append(
            ConversationScore(
                conversation_id=conversation.id,
                trace_id=ids[conversation.id],
                features=conversation.features.model_dump(),
                turns=turns,
            )
        )
        if progress is not None:
            progress(n)
    signature = run_signature(
        data,
        predictions,
        bootstrap=bootstrap,
        seed=seed,
        sample_size=sample_size,
        sample_seed=sample_seed,
    )
    statistics = compute_statistics(
        conversations,
        price_in=price_in,
        price_out=price_out,
        bootstrap=bootstrap,
        seed=seed,
    )
    statistics["num_input_errors"] = len(errors)
    statistics["signature"] = signature.format()
    statistics["signature_settings"] = signature.model_dump(mode="json")
    return NumericResult(
        conversations=conversations, input_errors=errors, statistics=statistics, signature=signature
    )


_MATCHES = {
    "numerical_match_accuracy": "numerical_match",
    "soft_match_accuracy": "soft_match",
    "unit_agnostic_accuracy": "unit_agnostic_match",
    "sign_agnostic_accuracy": "sign_agnostic_match",
    "general_match_accuracy": "general_match",
}


_LOGIC = {
    "avg_logic_recall": "logic_recall",
    "avg_logic_precision": "logic_precision",
    "avg_logic_order_score": "logic_order_score",
}
# Per-turn-position intervals for the first positions only: ConvFinQA has at most a few turns,
# and a hostile conversation of 100,000 turns must not hold 100,000 x resamples values.
MAX_TURN_INTERVALS = 100
_SCORED = len(_MATCHES)  # column of the scored-turn count in a conversation's totals
_SUCCESS = _SCORED + 1 + 2 * len(_LOGIC)  # columns: successful (0/1), judged (0/1)


class Intervals(NamedTuple):
    """Bootstrap intervals: the headline statistics (``None`` where nothing is counted) and the
    numerical-match accuracy per turn position."""

    overall: dict[str, Interval | None]
    by_turn: dict[int, Interval]


def conversation_totals(conversation: ConversationScore) -> list[float]:
    """A conversation's sufficient statistics for the bootstrap: its turns matching under each of
    the five types, its scored turns, the sum and the count of each logic score (turns that have
    one), and whether it succeeded and was judged (0/1 each)."""
    scored = [t for t in conversation.turns if t.scored]
    row = [float(sum(bool(getattr(t, f)) for t in scored)) for f in _MATCHES.values()]
    row.append(float(len(scored)))
    for field in _LOGIC.values():
        values = [getattr(t, field) for t in conversation.turns if getattr(t, field) is not None]
        row += [math.fsum(values), float(len(values))]
    success = conversation.success
    row += [float(bool(success)), float(success is not None)]
    return row


def _ratio(numerator: int, denominator: int) -> TotalsStatistic:
    """Summed column ``numerator`` / summed column ``denominator``; NaN for a resample whose
    denominator is 0 (it drew no item of the statistic: left out of its interval)."""

    def statistic(totals: np.ndarray) -> np.ndarray:
        return ratio_array(totals[:, numerator], totals[:, denominator])

    return statistic


def bootstrap_intervals(
    conversations: Sequence[ConversationScore], *, resamples: int = 1000, seed: int = 0
) -> Intervals:
    """95% percentile bootstrap intervals resampling conversations (spec "Reasoning Quality" and
    "Complexity Analysis"; docs/numeric.md): each statistic is a ratio of summed per-conversation
    counts (``conversation_totals``), so a resample is a matrix product
    (``bootstrap_groups_ci``, seeded). The units are the conversations with a scored turn or a
    logic score; a statistic with nothing counted has no interval. Per turn position (the first
    ``MAX_TURN_INTERVALS``): numerical-match accuracy over the conversations scored there. A
    resample that draws no item of a statistic (no conversation scored at that position, no
    logic score, no judged conversation) is left out of that statistic's interval, whose
    ``resamples`` counts those kept of the ``drawn``.
    """
    units = BootstrapUnits()
    for c in conversations:
        units.add(
            conversation_totals(c),
            [(t.turn_idx, bool(t.numerical_match)) for t in c.turns if t.scored],
        )
    return units.intervals(resamples=resamples, seed=seed)


Rows = Sequence[Sequence[float]]


class BootstrapUnits:
    """The bootstrap's units folded one conversation at a time: each kept conversation's totals
    (``conversation_totals``, 14 floats) and, per turn position, which units were scored there
    and whether they matched. A few floats per conversation: the seeded multinomial draws of
    ``bootstrap_groups_ci`` need every unit's totals at once."""

    def __init__(self) -> None:
        self.rows = array("d")
        self.count = 0
        self.positions: dict[int, tuple[array[int], array[float]]] = {}

    def add(self, row: Sequence[float], scored_turns: Sequence[tuple[int, bool]]) -> None:
        """One conversation: its totals and its scored turns as (turn index, numerical match)."""
        if not (row[_SCORED] or any(row[_SCORED + 2 : _SUCCESS : 2])):
            return
        unit = self.count
        self.count += 1
        self.rows.extend(row)
        positions = self.positions
        for idx, match in scored_turns:
            if idx in positions or len(positions) < MAX_TURN_INTERVALS:
                members, flags = positions.setdefault(idx, (array("q"), array("d")))
                members.append(unit)
                flags.append(1.0 if match else 0.0)

    def intervals(self, *, resamples: int, seed: int) -> Intervals:
        width = _SUCCESS + 2
        units = np.frombuffer(self.rows, dtype=float).reshape(self.count, width)
        full = [math.fsum(units[:, j].tolist()) for j in range(width)] if self.count else []
        statistics: dict[str, TotalsStatistic] = {}
        overall: dict[str, Interval | None] = {}
        for k, key in enumerate(_MATCHES):
            overall[key] = None
            if full and full[_SCORED]:
                statistics[key] = _ratio(k, _SCORED)
        for j, key in enumerate(_LOGIC):
            column = _SCORED + 1 + 2 * j
            if full and full[column + 1]:
                overall[key] = None
                statistics[key] = _ratio(column, column + 1)
        overall["conversation_success_rate"] = None
        if full and full[_SUCCESS + 1]:
            statistics["conversation_success_rate"] = _ratio(_SUCCESS, _SUCCESS + 1)
        # bootstrap_groups_ci reads any array-like through np.asarray
        groups = [TotalsGroup(range(self.count), cast(Rows, units), statistics)]
        for k, (members, flags) in self.positions.items():
            counts = np.ones((len(flags), 2))
            counts[:, 0] = np.frombuffer(flags, dtype=float)
            groups.append(TotalsGroup(members, cast(Rows, counts), {f"turn {k}": _ratio(0, 1)}))
        found = bootstrap_groups_ci(self.count, groups, resamples=resamples, seed=seed) or {}
        overall |= {key: found.get(key) for key in statistics}
        by_turn = {k: found[f"turn {k}"] for k in sorted(self.positions) if f"turn {k}" in found}
        return Intervals(overall=overall, by_turn=by_turn)


def nothing_scored_reason(turns: int, call_errors: Counter[str], no_gold: int) -> str | None:
    """One plain sentence when no turn was scored (so no metric exists), else ``None``."""
    if turns == 0:
        return "no turns: nothing was scored"
    lost = sum(call_errors.values())
    if lost + no_gold < turns:
        return None
    if lost == turns:
        kinds = ", ".join(f"{k}={call_errors[k]}" for k in sorted(call_errors))
        return f"nothing was scored: every turn's model call failed ({kinds})"
    if no_gold == turns:
        return "nothing was scored: no turn has a gold answer"
    return f"nothing was scored: {lost} turn(s) hit a call error, {no_gold} have no gold answer"


def compute_statistics(
    conversations: Sequence[ConversationScore],
    *,
    price_in: float | None = None,
    price_out: float | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """statistics.json: per-turn accuracies, logic scores, cost, by-turn tables, intervals.

    Accuracies are over scored turns (turns with a gold answer whose model call did not fail);
    ``None`` when there are none. A turn whose call failed (``CALL_ERRORS``, issue 8) is left out
    of every metric, of latency and of the cost per correct answer, and counted in
    ``turns_not_scored_call_errors``; ``nothing_scored`` says when no turn is left to score.
    ``cost_per_correct_answer`` = tokens of the turns not lost to a call error / successful
    conversations (every scored turn a numerical match), ``None`` when none succeeded: the
    spec's name for tokens per successful conversation; ``tokens_per_correct_turn`` = the same
    tokens / turns that are a numerical match, ``None`` when none; the ``total_*_tokens`` count
    every token spent; ``num_turns_tokens_estimated`` counts the turns whose tokens are the
    runner's characters / 4 estimate (predictions ``tokens_estimated``). ``num_failed_turns``: scored turns that are not a numerical match (each
    has a failure mode and an errors.csv row).
    """
    turns = [t for c in conversations for t in c.turns]
    answered = [t for t in turns if not t.call_error]
    scored = [t for t in turns if t.scored]
    stats: dict[str, Any] = {}
    for key, field in _MATCHES.items():
        stats[key] = _mean([getattr(t, field) for t in scored])
    stats["avg_logic_recall"] = _mean([t.logic_recall for t in answered])
    stats["avg_logic_precision"] = _mean([t.logic_precision for t in answered])
    stats["avg_logic_order_score"] = _mean([t.logic_order_score for t in answered])
    stats["avg_operations_per_turn"] = _mean([t.operations_per_turn for t in answered])

    flags = [c.success for c in conversations if c.success is not None]
    successes = sum(bool(f) for f in flags)
    total_in = sum(t.input_tokens for t in turns)
    total_out = sum(t.output_tokens for t in turns)
    counted_in = sum(t.input_tokens for t in answered)
    counted_out = sum(t.output_tokens for t in answered)
    call_errors = Counter(str(t.error_type) for t in turns if t.call_error)
    no_gold = sum(1 for t in turns if t.not_scored == "no_gold")
    stats["num_conversations"] = len(conversations)
    stats["num_turns"] = len(turns)
    stats["num_scored_turns"] = len(scored)
    correct = sum(1 for t in scored if t.numerical_match)
    stats["num_failed_turns"] = len(scored) - correct
    stats["num_turns_not_scored_call_errors"] = sum(call_errors.values())
    stats["turns_not_scored_call_errors"] = {k: call_errors[k] for k in sorted(call_errors)}
    stats["num_turns_not_scored_no_gold"] = no_gold
    stats["nothing_scored"] = not scored
    stats["nothing_scored_reason"] = nothing_scored_reason(len(turns), call_errors, no_gold)
    stats["num_successful_conversations"] = successes
    stats["conversation_success_rate"] = successes / len(flags) if flags else None
    stats["total_input_tokens"] = total_in
    stats["total_output_tokens"] = total_out
    stats["total_tokens"] = total_in + total_out
    stats["num_turns_tokens_estimated"] = sum(1 for t in turns if t.tokens_estimated)
    stats["cost_per_correct_answer"] = (counted_in + counted_out) / successes if successes else None
    stats["tokens_per_correct_turn"] = (counted_in + counted_out) / correct if correct else None
    if price_in is not None and price_out is not None:
        dollars = (total_in * price_in + total_out * price_out) / 1_000_000
        counted = (counted_in * price_in + counted_out * price_out) / 1_000_000
        stats["total_cost_usd"] = dollars
        stats["cost_per_correct_answer_usd"] = counted / successes if successes else None
        stats["price_in_usd_per_1m"] = price_in
        stats["price_out_usd_per_1m"] = price_out

    by_turn: dict[int, list[TurnScore]] = {}
    for t in scored:
        by_turn.setdefault(t.turn_idx, []).append(t)
    stats["accuracy_by_turn_number"] = {
        str(k): _mean([t.numerical_match for t in v]) for k, v in sorted(by_turn.items())
    }
    stats["avg_operations_by_turn"] = {
        str(k): _mean([t.operations_per_turn for t in v]) for k, v in sorted(by_turn.items())
    }
    stats["turns_by_turn_number"] = {str(k): len(v) for k, v in sorted(by_turn.items())}
    modes = Counter(t.failure_mode for t in scored if t.failure_mode is not None)
    stats["failure_modes"] = {mode: modes[mode] for mode in sorted(modes)}
    stats["num_prediction_errors"] = sum(
        1 for t in turns if t.error_type is not None and t.error_type != MISSING_PREDICTION
    )
    stats["num_missing_predictions"] = sum(1 for t in turns if t.error_type == MISSING_PREDICTION)
    latency = latency_stats([t.latency_s for t in answered if t.latency_s is not None])
    stats["latency_s"] = latency.model_dump() if latency else None

    intervals = (
        bootstrap_intervals(conversations, resamples=bootstrap, seed=seed)
        if bootstrap > 0
        else None
    )
    return stats | interval_statistics(intervals)


def interval_statistics(intervals: Intervals | None) -> dict[str, Any]:
    """statistics.json's ``bootstrap_95_ci`` and ``bootstrap_95_ci_by_turn_number`` (null
    without a bootstrap), for the in-memory and the streamed path alike."""
    if intervals is None:
        return {"bootstrap_95_ci": None, "bootstrap_95_ci_by_turn_number": None}
    return {
        "bootstrap_95_ci": {
            key: (ci.model_dump() if ci is not None else None)
            for key, ci in intervals.overall.items()
        },
        "bootstrap_95_ci_by_turn_number": {
            str(k): ci.model_dump() for k, ci in intervals.by_turn.items()
        },
    }

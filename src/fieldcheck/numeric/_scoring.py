"""Scoring predictions against a ConvFinQA dataset: one turn (``turn_values``, through the pure
``fieldcheck.metrics``), the input problems, the signature and the bootstrap's units.
Spec: numeric-qa-evaluation.md.
"""

from __future__ import annotations

import functools
import logging
import math
from array import array
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple, cast

from pydantic import BaseModel, ConfigDict

from fieldcheck import metrics
from fieldcheck._util.errors import ErrorList, InputError
from fieldcheck._util.paths import unique_filenames
from fieldcheck._util.signature import Signature
from fieldcheck.metrics import (
    ABSOLUTE_TOLERANCE,
    RELATIVE_TOLERANCE,
    Interval,
    ProgramParseError,
    TotalsGroup,
    TotalsStatistic,
    plan_operations,
    program_operations,
)
from fieldcheck.numeric._loaders import LoadResult, PlainTurn
from fieldcheck.numeric._predictions import PredictionIndex, PredictionsResult, PredictionValues
from fieldcheck.numeric._records import Turn
from fieldcheck.runner import CALL_ERRORS

MISSING_PREDICTION = "missing_prediction"
logger = logging.getLogger("fieldcheck")


class OperationsRow(NamedTuple):
    """Scored turns whose plan has ``operations`` compute steps, and how many were right."""

    operations: int
    scored: int
    correct: int


class ReportTallies(NamedTuple):
    """What the report reads beyond statistics.json, folded while scoring (issue 10); ``extra``:
    failed turns matching each looser type; ``missing_gold``: turns with a gold answer and no
    prediction (statistics.json's ``num_missing_predictions`` counts turns without gold too)."""

    by_operations: list[OperationsRow]
    extra: dict[str, int]
    worst: list[list[str]]
    failed_checks: int
    missing_gold: int = 0


class NumericResult(BaseModel):
    """A scoring run's results: every input problem, statistics.json, the signature and what
    the report reads beyond the statistics (no turn is kept: ``score_to_folder`` streams)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    input_errors: ErrorList
    statistics: dict[str, Any]
    signature: Signature
    tallies: ReportTallies


@functools.lru_cache(maxsize=4096)
def _program_operations(program: str) -> tuple[str, ...] | None:
    try:
        return program_operations(program)
    except ProgramParseError:
        return None


def gold_operations(program: str | None) -> list[str] | None:
    """A gold program's operations; ``None`` without a program or for one that does not parse."""
    ops = _program_operations(program) if program is not None else None
    return list(ops) if ops is not None else None


_LOGIC_CACHED = 64  # longer plans and programs are scored without the cache (bounded memory)


@functools.lru_cache(maxsize=4096)
def cached_logic_scores(
    plan_ops: Sequence[str], gold_ops: Sequence[str]
) -> tuple[float, float, float]:
    """``metrics.logic_scores``: the few distinct (plan, gold) pairs of a run are scored once
    (emptied as each chunk starts, ``score_chunk``)."""
    return metrics.logic_scores(plan_ops, gold_ops)


_NOT_MATCHED = (None, None, None, None, None, None)  # a turn not scored: no match type, no mode
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
    """One turn scored as plain data (a turns.csv row and the trace's turn, issue 10). Not
    scored (match fields ``None``): no gold answer, or a failed model call (issue 8)."""
    gold = turn.executed_answer
    values = prediction if prediction is not None else _NO_PREDICTION._replace(validation=[])
    plan, error_type = values.plan, values.error_type
    parsed = metrics.parse_answer(values.answer)
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
    numerical, soft, unit, sign, general, mode = (
        metrics.match_answer(parsed, gold, error=error_type is not None)
        if not_scored is None
        else _NOT_MATCHED
    )
    plan_ops = plan_operations(plan)
    recall = precision = order = None
    # a plan cut short by a failed repair call is listed but not scored
    if plan_ops is not None and gold_ops is not None and not_scored != "call_error":
        if len(plan_ops) + len(gold_ops) <= _LOGIC_CACHED:
            recall, precision, order = cached_logic_scores(tuple(plan_ops), tuple(gold_ops))
        else:
            recall, precision, order = cached_logic_scores.__wrapped__(plan_ops, gold_ops)
    return {
        "conversation_id": conversation_id,
        "turn_idx": turn_idx,
        "question": turn.question,
        "expected_answer": gold,
        "predicted_answer": values.answer,
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
        "input_tokens": values.input_tokens,
        "output_tokens": values.output_tokens,
        "tokens_estimated": values.tokens_estimated,
        "latency_s": values.latency_s,
        "error_type": error_type,
        "error_message": values.error_message,
        "validation": values.validation,
    }


trace_ids = unique_filenames
"""A file-safe, unique trace id per conversation id (``safe_filename``, ``-2`` on collision)."""


def prediction_errors(data: LoadResult, predictions: PredictionsResult) -> ErrorList:
    """The input errors known before scoring: the loaders', then each prediction for an unknown
    conversation (not in the split) or a turn out of range, in (id, turn) order."""
    errors = data.errors + predictions.errors
    turns_of = data.turn_counts()
    found, file = predictions.predictions, predictions.path
    for cid, turn in found.sorted_keys() if isinstance(found, PredictionIndex) else sorted(found):
        count = turns_of.get(cid)
        value: str | int = cid
        if count is None and cid not in data.all_ids:
            where = f"not in split {data.split!r} of {Path(data.path).name}"
            reason, field = f"unknown conversation id ({where})", "conversation_id"
        elif count is not None and turn >= count:
            reason = f"turn out of range: the conversation has {count} turns"
            field, value = "turn", turn
        else:
            continue
        line = predictions.lines.get((cid, turn))
        errors.append(
            InputError(reason, file=file, line=line, record=cid, field=field, value=value)
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
    reason = "missing turn: no prediction for this turn (counted as a failure)"
    return InputError(
        reason, file=predictions.path, record=conversation_id, field="turn", value=turn
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


MATCH_FIELDS = metrics.AnswerMatches._fields[:5]  # a turn's five match types, numerical first
MATCH_KEYS = (
    "numerical_match_accuracy",
    "soft_match_accuracy",
    "unit_agnostic_accuracy",
    "sign_agnostic_accuracy",
    "general_match_accuracy",
)
_LOGIC = ("avg_logic_recall", "avg_logic_precision", "avg_logic_order_score")
# Per-turn-position intervals for the lowest positions only: ConvFinQA has at most a few turns,
# and a hostile conversation of 100,000 turns must not hold 100,000 x resamples values.
MAX_TURN_INTERVALS = 100
PLOTS = {
    "accuracy_by_turn": "accuracy_by_turn.png",
    "match_types": "plot_match_types.png",
    "failure_modes": "plot_failure_modes.png",
    "operations": "plot_operations_vs_accuracy.png",
}
WORST = 10  # conversations the report lists as the worst
_SCORED = len(MATCH_KEYS)  # column of the scored-turn count in a conversation's totals
_SUCCESS = _SCORED + 1 + 2 * len(_LOGIC)  # columns: successful (0/1), judged (0/1)


class Intervals(NamedTuple):
    """Bootstrap intervals: the headline statistics (``None`` where nothing is counted) and the
    numerical-match accuracy per turn position."""

    overall: dict[str, Interval | None]
    by_turn: dict[int, Interval]


def _ratio(numerator: int, denominator: int) -> TotalsStatistic:
    """Summed column ``numerator`` / summed column ``denominator``; NaN for a resample whose
    denominator is 0 (it drew no item of the statistic: left out of its interval)."""
    return lambda totals: metrics.ratio_array(totals[:, numerator], totals[:, denominator])


Rows = Sequence[Sequence[float]]


class BootstrapUnits:
    """The bootstrap's units: each conversation's totals (14 floats) and, per turn position,
    the units scored there and whether they matched (``bootstrap_groups_ci`` needs them all)."""

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
        for idx, match in scored_turns:
            members, flags = self._position(idx)
            members.append(unit)
            flags.append(1.0 if match else 0.0)

    def _position(self, idx: int) -> tuple[array[int], array[float]]:
        """Turn position ``idx``'s units and matches; kept for the ``MAX_TURN_INTERVALS``
        lowest positions only (a position past them gets arrays that are dropped)."""
        positions = self.positions
        found = positions.get(idx)
        if found is None:
            found = (array("q"), array("d"))
            if len(positions) < MAX_TURN_INTERVALS:
                positions[idx] = found
            elif idx < (highest := max(positions)):
                del positions[highest]
                positions[idx] = found
        return found

    def absorb(self, other: BootstrapUnits) -> None:
        """``other``'s units after these (as if added here one by one)."""
        for idx, (members, flags) in other.positions.items():
            mine, matched = self._position(idx)
            mine.extend(m + self.count for m in members)
            matched.extend(flags)
        self.rows.extend(other.rows)
        self.count += other.count

    def intervals(self, *, resamples: int, seed: int) -> Intervals:
        import numpy as np  # here only: a pool worker that scores turns does not import it

        width = _SUCCESS + 2
        units = np.frombuffer(self.rows, dtype=float).reshape(self.count, width)
        full = [math.fsum(units[:, j].tolist()) for j in range(width)] if self.count else []
        statistics: dict[str, TotalsStatistic] = {}
        overall: dict[str, Interval | None] = {}
        for k, key in enumerate(MATCH_KEYS):
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
        for k, (members, flags) in sorted(self.positions.items()):
            counts = np.ones((len(flags), 2))
            counts[:, 0] = np.frombuffer(flags, dtype=float)
            groups.append(TotalsGroup(members, cast(Rows, counts), {f"turn {k}": _ratio(0, 1)}))
        found = (
            metrics.bootstrap_groups_ci(self.count, groups, resamples=resamples, seed=seed) or {}
        )
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


def interval_statistics(intervals: Intervals | None) -> dict[str, Any]:
    """statistics.json's ``bootstrap_95_ci`` and ``bootstrap_95_ci_by_turn_number`` (null
    without a bootstrap)."""
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

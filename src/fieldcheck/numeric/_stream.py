"""``numeric score`` (issue 10), the one scoring path: each conversation is scored into plain dicts,
its rows are appended to summary.csv, turns.csv, validation.csv and errors.csv and its trace is
written, and it is folded into running aggregates (``Tally``); no turn is kept once its
conversation is done. Accuracies are exact counts, logic means exact sums (``ExactSum``), the
bootstrap draws seeded multinomial weights over per-conversation totals, so the numbers do not
depend on the chunk size. Spec: numeric-qa-evaluation.md, "Output Files".
"""

from __future__ import annotations

import csv
import io
import logging
import math
import os
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from fieldcheck._util.errors import ErrorList, error_dicts, short_repr
from fieldcheck._util.executor import Executor, InProcess, LocalPool, finish
from fieldcheck._util.jsonio import dumps_bytes
from fieldcheck.metrics import ExactSum, latency_stats
from fieldcheck.numeric._loaders import LoadResult, StoredConversations, plain_conversation
from fieldcheck.numeric._predictions import (
    PredictionIndex,
    PredictionsResult,
    prediction_values,
)
from fieldcheck.numeric._report import PLOTS, WORST, plot_files, write_numeric_report
from fieldcheck.numeric._scoring import (
    MISSING_PREDICTION,
    BootstrapUnits,
    NumericResult,
    ReportTallies,
    cached_logic_scores,
    gold_operations,
    interval_statistics,
    missing_turn_error,
    nothing_scored_reason,
    prediction_errors,
    run_signature,
    trace_ids,
    turn_values,
)
from fieldcheck.reports import OutputFolder, neutralise_cell, write_csv
from fieldcheck.store import ItemColumns

if TYPE_CHECKING:  # the store (SQLAlchemy) is imported only by a run that records
    from fieldcheck.store import RunRecorder

log = logging.getLogger(__name__)

Turn = dict[str, Any]  # a scored turn (``turn_values``) as plain data

SUMMARY_COLUMNS = (
    "conversation_id",
    "trace_id",
    "num_turns",
    "num_dialogue_turns",
    "has_type2_question",
    "has_duplicate_columns",
    "has_non_numeric_values",
    "numerical_match_accuracy",
    "soft_match_accuracy",
    "unit_agnostic_accuracy",
    "sign_agnostic_accuracy",
    "general_match_accuracy",
    "avg_logic_recall",
    "avg_logic_precision",
    "avg_logic_order_score",
    "avg_operations_per_turn",
    "conversation_success",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "total_latency_s",
    "mean_latency_s",
    "failed_turns",
)
TURN_COLUMNS = (
    "conversation_id",
    "turn_idx",
    "question",
    "expected_answer",
    "predicted_answer",
    "parsed_answer",
    "answer_rule",
    "numerical_match",
    "soft_match",
    "unit_agnostic_match",
    "sign_agnostic_match",
    "general_match",
    "failure_mode",
    "logic_recall",
    "logic_precision",
    "logic_order_score",
    "operations_per_turn",
    "plan_steps",
    "plan_operations",
    "ground_truth_program",
    "ground_truth_operations",
    "qa_split",
    "has_type2_question",
    "has_non_numeric_values",
    "input_tokens",
    "output_tokens",
    "latency_s",
    "error_type",
    "error_message",
    "not_scored",
)
INPUT_ERROR_COLUMNS = ("file", "line", "record", "field", "reason", "value", "message")
VALIDATION_COLUMNS = ("conversation_id", "turn_idx", "check", "passed", "message")
# Exactly the spec's columns ("Error CSV Output"), in its order.
ERROR_COLUMNS = (
    "trace_id",
    "conversation_id",
    "turn_idx",
    "question",
    "expected_answer",
    "error_type",
    "error_message",
    "has_type2_question",
    "has_non_numeric_values",
    "plan_steps",
    "operations_per_turn",
    "error_context",
)
MATCH_FIELDS = (
    "numerical_match",
    "soft_match",
    "unit_agnostic_match",
    "sign_agnostic_match",
    "general_match",
)
MATCH_KEYS = (
    "numerical_match_accuracy",
    "soft_match_accuracy",
    "unit_agnostic_accuracy",
    "sign_agnostic_accuracy",
    "general_match_accuracy",
)
LOGIC_FIELDS = ("logic_recall", "logic_precision", "logic_order_score")
EXTRA_FIELDS = {
    "unit_agnostic": "unit_agnostic_match",
    "sign_agnostic": "sign_agnostic_match",
    "general": "general_match",
    "soft": "soft_match",
}
_PLAIN = (int, float, bool)
# neutralise_cell's JSON text of a dict cell
_CELL_JSON = orjson.OPT_NON_STR_KEYS | orjson.OPT_SORT_KEYS
# RunRecorder.add_items' JSON options (sorted keys): the stored text is the same bytes
_STORE_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
# write_json's options (dumps(indent=True)): the traces are the same bytes
_TRACE_OPTIONS = (
    orjson.OPT_NON_STR_KEYS
    | orjson.OPT_SORT_KEYS
    | orjson.OPT_SERIALIZE_NUMPY
    | orjson.OPT_INDENT_2
)


def _cells(row: Mapping[str, Any], columns: Sequence[str]) -> list[Any]:
    """``neutralise_cell`` of each column, with the common cells (empty, numbers) inline."""
    out: list[Any] = []
    for column in columns:
        value = row.get(column)
        if value is None:
            out.append("")
        elif type(value) in _PLAIN:
            out.append(value)
        else:
            out.append(neutralise_cell(value))
    return out


def _cell_list(values: Iterable[Any]) -> list[Any]:
    """``_cells`` of values already in column order."""
    return ["" if v is None else v if type(v) in _PLAIN else neutralise_cell(v) for v in values]


_TURN_HEAD = itemgetter(*TURN_COLUMNS[: TURN_COLUMNS.index("plan_operations")])
_TURN_TAIL = itemgetter(*TURN_COLUMNS[TURN_COLUMNS.index("input_tokens") :])
_AVERAGED = (*LOGIC_FIELDS, "operations_per_turn", "latency_s")


def turn_cells(features: Mapping[str, Any], t: Turn) -> list[Any]:
    """A scored turn's turns.csv cells: ``neutralise_cell`` of each of ``TURN_COLUMNS``, the
    operations joined by spaces, the conversation's features beside the turn's values."""
    plan_ops, gold_ops = t["plan_operations"], t["ground_truth_operations"]
    return _cell_list(
        (
            *_TURN_HEAD(t),
            " ".join(plan_ops) if plan_ops is not None else None,
            t["ground_truth_program"],
            " ".join(gold_ops) if gold_ops is not None else None,
            t["qa_split"],
            features["has_type2_question"],
            features["has_non_numeric_values"],
            *_TURN_TAIL(t),
        )
    )


def summary_cells(
    conversation_id: str, trace_id: str, features: Mapping[str, Any], turns: Sequence[Turn]
) -> tuple[list[Any], bool | None]:
    """A conversation's summary.csv cells (``SUMMARY_COLUMNS``) in one pass over its turns, and
    its success (every scored turn a numerical match; ``None`` when none is scored). Accuracies
    are over scored turns; means over the turns not lost to a call error that have the value."""
    scored = failed = tokens_in = tokens_out = 0
    hits = [0] * len(MATCH_FIELDS)
    present: list[list[float]] = [[] for _ in _AVERAGED]
    latencies: list[Any] = []
    for t in turns:
        tokens_in += t["input_tokens"]
        tokens_out += t["output_tokens"]
        if t["not_scored"] != "call_error":
            for values, field in zip(present, _AVERAGED, strict=True):
                value = t[field]
                if value is not None:
                    values.append(float(value))
            if t["latency_s"] is not None:
                latencies.append(t["latency_s"])
        if t["scored"]:
            scored += 1
            for k, field in enumerate(MATCH_FIELDS):
                if t[field]:
                    hits[k] += 1
            if not t["numerical_match"]:
                failed += 1
    success = failed == 0 if scored else None
    means = [math.fsum(v) / len(v) if v else None for v in present]
    cells = _cell_list(
        (
            conversation_id,
            trace_id,
            len(turns),
            features["num_dialogue_turns"],
            features["has_type2_question"],
            features["has_duplicate_columns"],
            features["has_non_numeric_values"],
            *((h / scored if scored else None) for h in hits),
            *means[:-1],
            success,
            tokens_in,
            tokens_out,
            tokens_in + tokens_out,
            sum(latencies) if latencies else None,
            means[-1],
            failed,
        )
    )
    return cells, success


# the ASCII characters float() can start with (white space, sign, digits, point, inf, nan)
_FLOAT_START = frozenset("0123456789+-. \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f_iInN")


def stored_cell(value: Any) -> Any:
    """A turns.csv cell as the store keeps it: the value the CSV text reads back as (``''`` is
    null, ``True``/``False`` booleans, number text a number), as ``runs`` reads a folder."""
    if type(value) is not str:
        return value
    if value == "":
        return None
    if value[0] not in _FLOAT_START and value[0].isascii() and value not in ("True", "False"):
        return value  # not a number: float() would refuse it
    if value in ("True", "False"):
        return value == "True"
    try:
        number = float(value)
    except ValueError:
        return value
    return int(number) if number.is_integer() and "." not in value and "e" not in value else number


def stored_item(cells: Sequence[Any]) -> dict[str, Any]:
    """A turn's item for the store (issue 11): its turns.csv row, cell by cell as read back."""
    return {
        column: c if type(c) is not str else stored_cell(c)
        for column, c in zip(TURN_COLUMNS, cells, strict=True)
    }


def _truthy(value: Any) -> bool:
    """A boolean from JSON or a CSV cell (``True``/``true``/``1``)."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def numeric_columns(item: Mapping[str, Any]) -> ItemColumns:
    """A ``turns.csv`` row: failed when not a numerical match (errors.csv's rows), not scored
    when ``not_scored`` is set (a call error, no gold); its turn is ``turn_idx``. A ``key``
    given wins over ``conversation_id#turn_idx``."""
    turn_text = item.get("turn_idx")
    try:
        turn = int(turn_text) if turn_text not in (None, "") else None  # type: ignore[arg-type]
    except (TypeError, ValueError):
        turn = None
    key = str(item.get("key", f"{item.get('conversation_id')}#{turn_text}"))
    error = item.get("error_type") or None
    failed = None if item.get("not_scored") else not _truthy(item.get("numerical_match"))
    return ItemColumns(key, failed, turn=turn, error_type=str(error)[:32] if error else None)


def stored_row(cells: Sequence[Any]) -> tuple[ItemColumns, bytes]:
    """``stored_item`` ready for ``RunRecorder.add_prepared``: the columns ``add_items`` would
    derive (``numeric_columns``) and the JSON text it would store (the same orjson options)."""
    item = stored_item(cells)
    return numeric_columns(item), dumps_bytes(item, _STORE_OPTIONS)


STORED_TURNS = "fieldcheck.numeric._stream:stored_turns"


def stored_turns(
    conversations: Iterable[tuple[Mapping[str, Any], Sequence[Turn]]],
) -> Iterator[tuple[ItemColumns, bytes]]:
    """``stored_row`` of the turns.csv row of each turn of ``(features, turns)``: what the
    store's writer builds the items with (their cells are its CPU, not the scoring's)."""
    for features, turns in conversations:
        for t in turns:
            yield stored_row(turn_cells(features, t))


def _error_kind(t: Turn) -> tuple[str, str]:
    """A failed scored turn's error type and message: the agent's error, else the failure
    mode with both answers cut short (the full ones are in turns.csv, error_context and the
    trace)."""
    if t["error_type"] is not None:
        return t["error_type"], t["error_message"] or ""
    expected, got = short_repr(t["expected_answer"]), short_repr(t["predicted_answer"])
    return t["failure_mode"] or "wrong", f"expected {expected}, got {got}"


def _error_context(features: Mapping[str, Any], t: Turn) -> dict[str, Any]:
    """errors.csv's ``error_context`` of a turn."""
    return {
        "failure_mode": t["failure_mode"],
        "predicted_answer": t["predicted_answer"],
        "parsed_answer": t["parsed_answer"],
        "ground_truth_program": t["ground_truth_program"],
        "ground_truth_operations": t["ground_truth_operations"],
        "plan_operations": t["plan_operations"],
        "logic_recall": t["logic_recall"],
        "soft_match": t["soft_match"],
        "unit_agnostic_match": t["unit_agnostic_match"],
        "sign_agnostic_match": t["sign_agnostic_match"],
        "general_match": t["general_match"],
        "qa_split": t["qa_split"],
        "has_duplicate_columns": features["has_duplicate_columns"],
    }


def error_cells(
    trace_id: str, conversation_id: str, features: Mapping[str, Any], t: Turn
) -> list[Any] | None:
    """The errors.csv cells (exactly the spec's columns) of a failed scored turn, ``None`` for
    any other turn. ``error_type`` is the agent's error type for errored turns
    (``invalid_reply``, ``invalid_plan``), ``missing_prediction`` for a turn without a
    prediction, else the failure mode (``scale``, ``sign``, ``rounding``, ``wrong``,
    ``no_answer``). A turn not scored (no gold answer, issue 9; a failed call, issue 8) is not an
    error: turns.csv lists it with ``not_scored``."""
    if not t["scored"] or t["numerical_match"]:
        return None
    error_type, message = _error_kind(t)
    return _cell_list(
        (
            trace_id,
            conversation_id,
            t["turn_idx"],
            t["question"],
            t["expected_answer"],
            error_type,
            message,
            features["has_type2_question"],
            features["has_non_numeric_values"],
            t["plan_steps"],
            t["operations_per_turn"],
            dumps_bytes(_error_context(features, t), _CELL_JSON).decode(),
        )
    )


class _Sum:
    """``ExactSum`` fed in blocks (one ``add`` per few thousand values, not per turn)."""

    __slots__ = ("count", "exact", "pending")

    def __init__(self) -> None:
        self.exact = ExactSum()
        self.pending: list[float] = []
        self.count = 0

    def add(self, value: float) -> None:
        self.pending.append(value)
        self.count += 1
        if len(self.pending) >= 4096:
            self.exact.add(self.pending)
            self.pending = []

    def mean(self) -> float | None:
        if self.pending:
            self.exact.add(self.pending)
            self.pending = []
        return self.exact.value / self.count if self.count else None


class Tally:
    """Running aggregates of a scoring run, one conversation at a time: every statistics.json
    value and the report's ``ReportTallies``. Memory: the bootstrap's
    totals (14 floats per conversation) and one float per turn with a latency (the median and
    p95 need them all); everything else is a count or an exact sum."""

    def __init__(self) -> None:
        self.conversations = self.turns = self.scored = 0
        self.matches = [0] * len(MATCH_FIELDS)
        self.logic = {field: _Sum() for field in LOGIC_FIELDS}
        self.operations = [0, 0]  # sum, turns with a count (answered)
        self.successes = self.judged = 0
        self.total_in = self.total_out = self.counted_in = self.counted_out = 0
        self.estimated = 0  # turns whose tokens are estimated (characters / 4)
        self.call_errors: Counter[str] = Counter()
        self.no_gold = self.prediction_errors = self.missing = 0
        self.by_turn: dict[int, list[int]] = {}  # scored, numerical, ops sum, ops count
        self.failure_modes: Counter[str] = Counter()
        self.latencies = array("d")
        self.units = BootstrapUnits()
        self.by_operations: dict[int, list[int]] = {}
        self.extra = dict.fromkeys(EXTRA_FIELDS, 0)
        self.worst: list[tuple[float, int, str, list[str]]] = []
        self.failed_checks = 0

    def add(self, conversation_id: str, turns: Sequence[Turn]) -> None:
        """Fold one conversation's turns (``turn_values`` dicts)."""
        self.conversations += 1
        self.turns += len(turns)
        scored_turns: list[tuple[int, bool]] = []
        totals = [0.0] * (len(MATCH_FIELDS) + 1)
        logic_values: list[list[float]] = [[], [], []]
        first_failure = ""
        for t in turns:
            call_error = t["not_scored"] == "call_error"
            self.total_in += t["input_tokens"]
            self.total_out += t["output_tokens"]
            if t.get("tokens_estimated"):
                self.estimated += 1
            error_type = t["error_type"]
            if error_type is not None:
                if error_type == MISSING_PREDICTION:
                    self.missing += 1
                else:
                    self.prediction_errors += 1
            for entry in t["validation"]:
                if not entry.get("passed"):
                    self.failed_checks += 1
            if call_error:
                self.call_errors[str(error_type)] += 1
            else:
                self.counted_in += t["input_tokens"]
                self.counted_out += t["output_tokens"]
                for j, field in enumerate(LOGIC_FIELDS):
                    value = t[field]
                    if value is not None:
                        self.logic[field].add(float(value))
                        logic_values[j].append(float(value))
                ops = t["operations_per_turn"]
                if ops is not None:
                    self.operations[0] += ops
                    self.operations[1] += 1
                if t["latency_s"] is not None:
                    self.latencies.append(t["latency_s"])
            if t["not_scored"] == "no_gold":
                self.no_gold += 1
            if not t["scored"]:
                continue
            numerical = bool(t["numerical_match"])
            for k, field in enumerate(MATCH_FIELDS):
                if t[field]:
                    self.matches[k] += 1
                    totals[k] += 1.0
            totals[-1] += 1.0
            idx = t["turn_idx"]
            scored_turns.append((idx, numerical))
            position = self.by_turn.setdefault(idx, [0, 0, 0, 0])
            position[0] += 1
            position[1] += numerical
            ops = t["operations_per_turn"]
            if ops is not None:
                position[2] += ops
                position[3] += 1
                group = self.by_operations.setdefault(ops, [0, 0])
                group[0] += 1
                group[1] += numerical
            if t["failure_mode"] is not None:
                self.failure_modes[t["failure_mode"]] += 1
            if not numerical:
                for name, field in EXTRA_FIELDS.items():
                    self.extra[name] += bool(t[field])
                if not first_failure:
                    first_failure = f"turn {idx}: {t['failure_mode']}"
        scored = len(scored_turns)
        self.scored += scored
        success = all(m for _, m in scored_turns) if scored else None
        if success is not None:
            self.judged += 1
            self.successes += success
        row = totals
        for values in logic_values:
            row += [math.fsum(values), float(len(values))]
        row += [float(bool(success)), float(success is not None)]
        self.units.add(row, scored_turns)
        if scored:
            accuracy = totals[0] / scored
            if accuracy < 1.0:
                self._worst(accuracy, scored, conversation_id, len(turns), first_failure)

    def _worst(self, accuracy: float, scored: int, cid: str, turns: int, first: str) -> None:
        row = [cid, str(turns), str(scored), f"{accuracy:.3f}", first or "none"]
        self.worst.append((accuracy, -scored, cid, row))
        if len(self.worst) >= 8 * WORST:
            self.worst.sort(key=lambda w: w[:3])
            del self.worst[WORST:]

    def report_tallies(self) -> ReportTallies:
        worst = sorted(self.worst, key=lambda w: w[:3])[:WORST]
        return ReportTallies(
            by_operations=[(k, n, right) for k, (n, right) in sorted(self.by_operations.items())],
            extra=dict(self.extra),
            worst=[w[3] for w in worst],
            failed_checks=self.failed_checks,
        )

    def statistics(
        self,
        *,
        price_in: float | None = None,
        price_out: float | None = None,
        bootstrap: int = 1000,
        seed: int = 0,
    ) -> dict[str, Any]:
        """statistics.json: per-turn accuracies, logic scores, cost, by-turn tables, intervals.

        Accuracies are over scored turns (a gold answer and no failed model call); ``None`` when
        there are none. A turn whose call failed (``CALL_ERRORS``, issue 8) is left out of every
        metric, of latency and of the cost per correct answer, and counted in
        ``turns_not_scored_call_errors``; ``nothing_scored`` says when no turn is left to score.
        ``cost_per_correct_answer`` = tokens of the turns not lost to a call error / successful
        conversations (every scored turn a numerical match), ``None`` when none succeeded: the
        spec's name for tokens per successful conversation; ``tokens_per_correct_turn`` = the
        same tokens / numerically matching turns; the ``total_*_tokens`` count every token spent;
        ``num_turns_tokens_estimated`` counts the turns whose tokens are the runner's
        characters / 4 estimate. ``num_failed_turns``: scored turns that are not a numerical
        match (each has a failure mode and an errors.csv row)."""
        stats: dict[str, Any] = {}
        scored = self.scored
        for key, count in zip(MATCH_KEYS, self.matches, strict=True):
            stats[key] = float(count) / scored if scored else None
        for field in LOGIC_FIELDS:
            stats["avg_" + field] = self.logic[field].mean()
        ops_sum, ops_count = self.operations
        stats["avg_operations_per_turn"] = float(ops_sum) / ops_count if ops_count else None
        successes = self.successes
        lost = sum(self.call_errors.values())
        stats["num_conversations"] = self.conversations
        stats["num_turns"] = self.turns
        stats["num_scored_turns"] = scored
        correct = self.matches[0]  # numerical matches
        stats["num_failed_turns"] = scored - correct
        stats["num_turns_not_scored_call_errors"] = lost
        stats["turns_not_scored_call_errors"] = {
            k: self.call_errors[k] for k in sorted(self.call_errors)
        }
        stats["num_turns_not_scored_no_gold"] = self.no_gold
        stats["nothing_scored"] = not scored
        stats["nothing_scored_reason"] = nothing_scored_reason(
            self.turns, self.call_errors, self.no_gold
        )
        stats["num_successful_conversations"] = successes
        stats["conversation_success_rate"] = successes / self.judged if self.judged else None
        total_in, total_out = self.total_in, self.total_out
        counted = self.counted_in + self.counted_out
        stats["total_input_tokens"] = total_in
        stats["total_output_tokens"] = total_out
        stats["total_tokens"] = total_in + total_out
        stats["num_turns_tokens_estimated"] = self.estimated
        stats["cost_per_correct_answer"] = counted / successes if successes else None
        stats["tokens_per_correct_turn"] = counted / correct if correct else None
        if price_in is not None and price_out is not None:
            dollars = (total_in * price_in + total_out * price_out) / 1_000_000
            spent = (self.counted_in * price_in + self.counted_out * price_out) / 1_000_000
            stats["total_cost_usd"] = dollars
            stats["cost_per_correct_answer_usd"] = spent / successes if successes else None
            stats["price_in_usd_per_1m"] = price_in
            stats["price_out_usd_per_1m"] = price_out
        positions = sorted(self.by_turn.items())
        stats["accuracy_by_turn_number"] = {str(k): float(v[1]) / v[0] for k, v in positions}
        stats["avg_operations_by_turn"] = {
            str(k): float(v[2]) / v[3] if v[3] else None for k, v in positions
        }
        stats["turns_by_turn_number"] = {str(k): v[0] for k, v in positions}
        stats["failure_modes"] = {m: self.failure_modes[m] for m in sorted(self.failure_modes)}
        stats["num_prediction_errors"] = self.prediction_errors
        stats["num_missing_predictions"] = self.missing
        latency = latency_stats(self.latencies.tolist())
        stats["latency_s"] = latency.model_dump() if latency else None
        intervals = self.units.intervals(resamples=bootstrap, seed=seed) if bootstrap > 0 else None
        return stats | interval_statistics(intervals)


ROW_FILES = (
    ("summary.csv", SUMMARY_COLUMNS),
    ("turns.csv", TURN_COLUMNS),
    ("validation.csv", VALIDATION_COLUMNS),
    ("errors.csv", ERROR_COLUMNS),
)
"""The row files of a run, in the order ``write_block`` returns them."""

_LAST_FILES = ("input_errors.csv", "report.md", "report.html", "statistics.json")
"""Written once every conversation is scored (with the plots), statistics.json last."""

WRITER_CONVERSATIONS = 2_000
"""Runs of at least this many conversations write their traces and row cells in a pool
process (``LocalPool``), on the other core; smaller ones do not pay its start."""


def write_block(task: tuple[str, list[tuple[Any, ...]]]) -> dict[str, str]:
    """A task (``fieldcheck._util.executor``): the trace of each ``(conversation_id, trace_id,
    features, turns, document)`` of a block written in the folder ``traces``; returns the
    block's rows of each row file as CSV text, which the run appends in block order."""
    traces, block = task
    folder = f"{traces}{os.sep}"
    texts = {name: io.StringIO() for name, _ in ROW_FILES}
    summary, rows, validation, errors = (csv.writer(texts[name]) for name, _ in ROW_FILES)
    for conversation_id, trace_id, features, turns, document in block:
        cells, success = summary_cells(conversation_id, trace_id, features, turns)
        summary.writerow(cells)
        for t in turns:
            rows.writerow(turn_cells(features, t))
            for entry in t["validation"]:
                line = {"conversation_id": conversation_id, "turn_idx": t["turn_idx"], **entry}
                validation.writerow(_cells(line, VALIDATION_COLUMNS))
            error = error_cells(trace_id, conversation_id, features, t)
            if error is not None:
                errors.writerow(error)
        trace = {
            "trace_id": trace_id,
            "conversation_id": conversation_id,
            "features": features,
            "document": document,
            "conversation_success": success,
            "turns": turns,
        }
        with open(f"{folder}{trace_id}.json", "wb") as handle:
            handle.write(dumps_bytes(trace, _TRACE_OPTIONS) + b"\n")
    return {name: text.getvalue() for name, text in texts.items()}


class OutputStreams:
    """The row files and traces/ of a run, each written under a temporary name and renamed
    when the ``ExitStack`` closes without an error. Every ``chunk`` conversations are a task
    (``write_block``): run here, or with ``process`` (a large run) in a pool process while this
    one scores; if the pool cannot start, here."""

    def __init__(
        self,
        folder: OutputFolder,
        stack: ExitStack,
        *,
        chunk: int = 256,
        recorder: RunRecorder | None = None,
        process: bool = False,
    ) -> None:
        self.chunk = max(1, chunk)
        self.recorder = recorder
        self.items: list[tuple[Mapping[str, Any], Sequence[Turn]]] = []  # for the store
        self.turns = 0
        self.block: list[tuple[Any, ...]] = []
        folder.expect(*(name for name, _ in ROW_FILES), "traces", *_LAST_FILES)
        files = {name: stack.enter_context(folder.atomic(name)) for name, _ in ROW_FILES}
        self.traces = str(stack.enter_context(folder.bulk("traces")))
        self.executor: Executor = InProcess()
        if process:
            try:
                # 32 blocks (of 256 conversations: about 10 MB) may wait: the scoring goes on
                # while the pool's process starts (about 0.6 s)
                self.executor = LocalPool(1, in_flight=32, warm=(__name__,))
            except OSError as exc:
                log.warning("the output writer process could not start (%s); writing here", exc)
        self.files: dict[str, Any] = {}
        stack.push(self._exit)
        for name, columns in ROW_FILES:
            self.files[name] = handle = open(files[name], "w", newline="", encoding="utf-8")  # noqa: SIM115
            csv.writer(handle).writerow(columns)

    def write(
        self,
        conversation_id: str,
        trace_id: str,
        features: Mapping[str, Any],
        turns: Sequence[Turn],
        document: dict[str, Any] | None,
    ) -> None:
        """Queue one conversation's rows and trace (written by its block's task)."""
        self.block.append((conversation_id, trace_id, features, turns, document))
        if self.recorder is not None:
            self.items.append((features, turns))
            self.turns += len(turns)
        if len(self.block) >= self.chunk:
            self.flush()

    def _append(self, done: list[dict[str, str]]) -> None:
        for texts in done:
            for name, text in texts.items():
                self.files[name].write(text)

    def flush(self) -> None:
        if self.block:
            block, self.block = self.block, []
            self._append(self.executor.submit(write_block, (self.traces, block)))
        if self.recorder is not None and self.items:
            # built by the store's task (in a large run, a pool process): not the scoring's CPU
            self.recorder.add_built(STORED_TURNS, self.items, self.turns)
            self.items, self.turns = [], 0

    def _exit(self, kind: type[BaseException] | None, *_: object) -> None:
        """Everything written and closed (the tasks waited for), or, on an error, the files
        closed and the pool's process killed, before the temporary names go."""
        ok = kind is None
        try:
            if ok:
                self.flush()
                self._append(finish(self.executor))
        finally:
            try:
                self.executor.close(kill=not ok)
            finally:
                for handle in self.files.values():
                    handle.close()


OUTPUT_FILES = (*(name for name, _ in ROW_FILES), "traces", *_LAST_FILES, *PLOTS.values())
"""Every file (and traces/) ``numeric score`` may write in its folder."""


def write_report_files(result: NumericResult, out: OutputFolder) -> None:
    """input_errors.csv, the report and its plots (the row files may still be being written)."""
    out.expect(*_LAST_FILES[:-1], *plot_files(result), _LAST_FILES[-1])
    with out.atomic("input_errors.csv") as tmp:
        write_csv(tmp, error_dicts(result.input_errors), INPUT_ERROR_COLUMNS)
    write_numeric_report(result, out)


class ScoredConversation(NamedTuple):
    """One conversation scored: its trace id, features (``Features.model_dump()``), scored turns
    (``turn_values``) and document (for its trace)."""

    id: str
    trace_id: str
    features: dict[str, Any]
    turns: list[Turn]
    document: dict[str, Any] | None


def scored_conversations(
    data: LoadResult, predictions: PredictionsResult, errors: ErrorList
) -> Iterator[ScoredConversation]:
    """Every kept conversation of ``data`` scored against ``predictions``, in file order, one at
    a time (the conversations are read again from the file, one record at a time). A turn with
    a gold answer and no prediction counts as a failure (``missing_prediction``) and is
    appended to ``errors``."""
    ids = trace_ids(data.conversation_ids())
    cached_logic_scores.cache_clear()
    found = predictions.predictions
    stored = data.conversations
    indexed = found if isinstance(found, PredictionIndex) else None
    plain = (
        stored.plain()
        if isinstance(stored, StoredConversations)
        else map(plain_conversation, stored)
    )
    for conversation in plain:
        cid = conversation.id
        # a stored file: this conversation's lines read at once, its programs parsed once
        if indexed is not None:
            mine = indexed.conversation_values(cid)
        else:
            mine = {
                i: prediction_values(p)
                for i in range(len(conversation.turns))
                if (p := found.get((cid, i))) is not None
            }
        operations = getattr(stored, "operations", data.operations)
        turns: list[Turn] = []
        for i, gold in enumerate(conversation.turns):
            prediction = mine.get(i)
            if prediction is None and gold.executed_answer is not None:
                errors.append(missing_turn_error(predictions, cid, i))
            gold_ops = gold_operations(gold.program, operations)
            turns.append(turn_values(cid, i, gold, prediction, gold_ops))
        yield ScoredConversation(cid, ids[cid], conversation.features, turns, conversation.document)


def score_to_folder(
    data: LoadResult,
    predictions: PredictionsResult,
    out: Path | OutputFolder,
    *,
    price_in: float | None = None,
    price_out: float | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    sample_size: int | None = None,
    sample_seed: int | None = None,
    progress: Callable[[int], None] | None = None,
    chunk: int = 256,
    recorder: RunRecorder | None = None,
    writer_process: bool | None = None,
) -> NumericResult:
    """Score every turn of ``data`` against ``predictions`` and write every output file of the
    spec's "Output Files" into ``out``, streaming: a conversation's rows are written (in blocks
    of ``chunk`` conversations) and folded, then dropped. Returns the statistics, input errors,
    signature and report tallies. Every input problem is listed in ``input_errors`` (file, line,
    record id, field): the loaders', a prediction for an unknown conversation or a turn out of
    range (ignored), a missing turn (a failure). ``price_in``/``price_out``: US dollars per
    million tokens (both or neither). statistics.json is written last. ``recorder``: each
    block's turns.csv rows are also stored as items (``stored_item``), as they are written
    (issue 11); the caller opens and finishes the run. ``writer_process``: write the row files
    and traces in a pool process (default: when there are at least ``WRITER_CONVERSATIONS``
    conversations)."""
    if (price_in is None) != (price_out is None):
        raise ValueError("give both price_in and price_out, or neither")
    folder = OutputFolder.of(out)
    errors = prediction_errors(data, predictions)
    tally = Tally()
    total = len(data.conversations)
    with ExitStack() as stack:
        streams = OutputStreams(
            folder,
            stack,
            chunk=chunk,
            recorder=recorder,
            process=total >= WRITER_CONVERSATIONS if writer_process is None else writer_process,
        )
        for n, scored in enumerate(scored_conversations(data, predictions, errors), start=1):
            streams.write(
                scored.id, scored.trace_id, scored.features, scored.turns, scored.document
            )
            tally.add(scored.id, scored.turns)
            if progress is not None and (n % 256 == 0 or n == total):
                progress(n)
        # while the pool's process (a large run) finishes the row files and traces
        signature = run_signature(
            data,
            predictions,
            bootstrap=bootstrap,
            seed=seed,
            sample_size=sample_size,
            sample_seed=sample_seed,
        )
        statistics = tally.statistics(
            price_in=price_in, price_out=price_out, bootstrap=bootstrap, seed=seed
        )
        statistics["num_input_errors"] = len(errors)
        statistics["signature"] = signature.format()
        statistics["signature_settings"] = signature.model_dump(mode="json")
        result = NumericResult(
            input_errors=errors,
            statistics=statistics,
            signature=signature,
            tallies=tally.report_tallies(),
        )
        write_report_files(result, folder)
    folder.write_summary("statistics.json", result.statistics)
    return result

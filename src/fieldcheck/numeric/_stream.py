"""``numeric score`` (issues 10, 27): chunks scored by ``score_chunk`` into rows and a digest
(``Tally``) merged in chunk order; exact counts and sums, so no number depends on the chunking.
Spec: numeric-qa-evaluation.md, "Output Files".
"""

from __future__ import annotations

import csv
import io
import logging
import marshal
import math
import os
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from functools import partial
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from fieldcheck._util.errors import check_type, error_dicts, short_repr
from fieldcheck._util.executor import Executor, InProcess, LocalPool, finish, run_map
from fieldcheck._util.iters import chunked
from fieldcheck._util.jsonio import dumps_bytes, loads
from fieldcheck.metrics import ExactSum, cost_usd, latency_stats
from fieldcheck.numeric._loaders import (
    LoadResult,
    StoredConversations,
    plain_conversation,
    read_record,
)
from fieldcheck.numeric._predictions import (
    PredictionIndex,
    PredictionsResult,
    PredictionValues,
    line_values,
    prediction_values,
)
from fieldcheck.numeric._scoring import (
    MATCH_FIELDS,
    MATCH_KEYS,
    MISSING_PREDICTION,
    PLOTS,
    WORST,
    BootstrapUnits,
    Intervals,
    NumericResult,
    OperationsRow,
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
from fieldcheck.numeric._story import table_rows
from fieldcheck.reports import OutputFolder, neutralise_cell, pyplot, restored_cell, write_csv
from fieldcheck.store import MARSHALLED, ItemColumns

if TYPE_CHECKING:  # the store (SQLAlchemy) is imported only by a run that records
    from fieldcheck.store import RunRecorder

log = logging.getLogger(__name__)

Turn = dict[str, Any]  # a scored turn (``turn_values``) as plain data

LOGIC_FIELDS = ("logic_recall", "logic_precision", "logic_order_score")
SUMMARY_COLUMNS = (
    "conversation_id",
    "trace_id",
    "num_turns",
    "num_dialogue_turns",
    "has_type2_question",
    "has_duplicate_columns",
    "has_non_numeric_values",
    *MATCH_KEYS,
    *(f"avg_{field}" for field in LOGIC_FIELDS),
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
    *MATCH_FIELDS,
    "failure_mode",
    *LOGIC_FIELDS,
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
EXTRA_FIELDS = {field.removesuffix("_match"): field for field in MATCH_FIELDS[1:]}
_PLAIN = (int, float, bool)
_BOM = "\ufeff".encode()
# neutralise_cell's JSON text of a dict cell
_CELL_JSON = orjson.OPT_NON_STR_KEYS | orjson.OPT_SORT_KEYS
# write_json's options (dumps(indent=True)): the traces are the same bytes
_TRACE_OPTIONS = _CELL_JSON | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_INDENT_2


def _cell_list(values: Iterable[Any]) -> list[Any]:
    """``neutralise_cell`` of each value, with the common cells (empty, numbers) inline."""
    return ["" if v is None else v if type(v) in _PLAIN else neutralise_cell(v) for v in values]


_TURN_HEAD = itemgetter(*TURN_COLUMNS[: TURN_COLUMNS.index("plan_operations")])
_TURN_TAIL = itemgetter(*TURN_COLUMNS[TURN_COLUMNS.index("input_tokens") :])
_AVERAGED = (*LOGIC_FIELDS, "operations_per_turn", "latency_s")
_AVERAGED_OF = itemgetter(*_AVERAGED)
_MATCHES_OF = itemgetter(*MATCH_FIELDS)


def turn_cells(features: Mapping[str, Any], t: Turn) -> list[Any]:
    """A scored turn's turns.csv cells (``TURN_COLUMNS``), the conversation's features beside."""
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


class Totals(NamedTuple):
    """A conversation's totals (``Tally.add``); ``present``: ``_AVERAGED``'s values."""

    hits: list[int]
    scored: int
    tokens_in: int
    tokens_out: int
    present: list[list[float]]
    success: bool | None


def summary_cells(
    conversation_id: str, trace_id: str, features: Mapping[str, Any], turns: int, totals: Totals
) -> list[Any]:
    """A conversation's summary.csv cells (``SUMMARY_COLUMNS``) from its totals."""
    hits, scored, tokens_in, tokens_out, present, success = totals
    means = [math.fsum(v) / len(v) if v else None for v in present]
    return _cell_list(
        (
            conversation_id,
            trace_id,
            turns,
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
            sum(present[-1]) if present[-1] else None,
            means[-1],
            scored - hits[0],
        )
    )


# the ASCII characters float() can start with (white space, sign, digits, point, inf, nan)
_FLOAT_START = frozenset("0123456789+-. \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f_iInN")


TEXT_COLUMNS = frozenset(
    (
        "conversation_id",
        "question",
        "predicted_answer",
        "answer_rule",
        "failure_mode",
        "plan_operations",
        "ground_truth_program",
        "ground_truth_operations",
        "error_type",
        "error_message",
    )
)
"""turns.csv columns of text: stored as the text scored, never read as a number ("0012", "1e5")."""
# the other turns.csv cells ``stored_row`` reads back: those that may be text, and the
# conversation's features (not in a turn's values)
_READ_BACK = (
    *("expected_answer", "parsed_answer", "not_scored"),
    *("has_type2_question", "has_non_numeric_values"),
)


def stored_cell(value: Any, text: bool = False) -> Any:
    """A turns.csv cell as the store keeps it: the value its CSV text reads back as in ``runs``;
    a ``text`` column's cell is the text scored (its formula neutraliser's ``'`` taken off)."""
    if type(value) is not str:
        return value
    if value == "":
        return None
    if text:
        return restored_cell(value)
    if value[0] not in _FLOAT_START and value[0].isascii() and value not in ("True", "False"):
        return value  # not a number: float() would refuse it
    if value[0] in "iInN" and value.rstrip().lower() not in ("inf", "infinity", "nan"):
        return value  # "number", "no_answer": float() would refuse it too (no exception)
    if value in ("True", "False"):
        return value == "True"
    try:
        number = float(value)
    except ValueError:
        return value
    return int(number) if number.is_integer() and "." not in value and "e" not in value else number


def _truthy(value: Any) -> bool:
    """A boolean from JSON or a CSV cell (``True``/``true``/``1``)."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def numeric_columns(item: Mapping[str, Any]) -> ItemColumns:
    """A ``turns.csv`` row's store columns: failed when not a numerical match, ``None`` when not
    scored; a ``key`` given wins over ``conversation_id#turn_idx``."""
    turn_text = item.get("turn_idx")
    try:
        turn = int(turn_text) if turn_text not in (None, "") else None  # type: ignore[arg-type]
    except (TypeError, ValueError):
        turn = None
    key = str(item.get("key", f"{item.get('conversation_id')}#{turn_text}"))
    error = item.get("error_type") or None
    failed = None if item.get("not_scored") else not _truthy(item.get("numerical_match"))
    return ItemColumns(key, failed, turn=turn, error_type=str(error) if error else None)


# turns.csv columns never of text (numbers, flags or None): the item keeps the turn's values
_VALUE_COLUMNS = tuple(k for k in TURN_COLUMNS if k not in TEXT_COLUMNS and k not in _READ_BACK)
_VALUES_OF = itemgetter(*_VALUE_COLUMNS)
_CELL_COLUMNS = tuple(
    (k, TURN_COLUMNS.index(k), k in TEXT_COLUMNS) for k in TURN_COLUMNS if k not in _VALUE_COLUMNS
)


def stored_row(
    t: Turn, cells: Sequence[Any], story: Mapping[str, Any]
) -> tuple[ItemColumns, bytes]:
    """A turn's store item (issue 11): ``numeric_columns`` and the JSON ``add_items`` would
    store of its turns.csv row (``cells``) as read back (``stored_cell``), with ``story`` (the
    item's page, issue 28); the cells that are never text are the turn's values."""
    item = dict(zip(_VALUE_COLUMNS, _VALUES_OF(t), strict=True))
    for k, i, text in _CELL_COLUMNS:
        v = cells[i]
        item[k] = stored_cell(v, text) if type(v) is str else v
    failed = None if t["not_scored"] else not t["numerical_match"]
    key = f"{item['conversation_id']}#{t['turn_idx']}"
    columns = ItemColumns(key, failed, turn=t["turn_idx"], error_type=item["error_type"])
    item.update(story)  # keys no row has
    # a copy of its exact size: orjson's larger buffer, kept to the chunk's end, took a fresh
    # page a turn (0.8 minor faults a turn in a worker, a few us each on a VM)
    return columns, bytes(memoryview(dumps_bytes(item, orjson.OPT_SORT_KEYS)))


def error_cells(
    trace_id: str, conversation_id: str, features: Mapping[str, Any], t: Turn
) -> list[Any] | None:
    """The errors.csv cells (the spec's columns) of a failed scored turn, else ``None``;
    ``error_type`` is the turn's own, else its failure mode (docs/numeric.md)."""
    if not t["scored"] or t["numerical_match"]:
        return None
    error_type, message = t["error_type"], t["error_message"] or ""
    if error_type is None:  # both answers cut short: the full ones are in turns.csv and the trace
        error_type = t["failure_mode"] or "wrong"
        expected, got = short_repr(t["expected_answer"]), short_repr(t["predicted_answer"])
        message = f"expected {expected}, got {got}"
    context = {
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
            dumps_bytes(context, _CELL_JSON).decode(),
        )
    )


def _merged(mine: Any, theirs: Any) -> Any:
    """``theirs`` folded into ``mine``: counts added (in dicts by key, in lists by position),
    arrays of values extended, exact sums and bootstrap units absorbed."""
    if isinstance(mine, int):
        return mine + theirs
    if isinstance(mine, dict):
        for key, value in theirs.items():
            mine[key] = _merged(mine[key], value) if key in mine else value
        return mine
    if isinstance(mine, array):
        mine.extend(theirs)
        return mine
    if isinstance(mine, list):
        return [a + b for a, b in zip(mine, theirs, strict=True)]
    mine.absorb(theirs)
    return mine


class Tally:
    """A run's (or a chunk's) aggregates for statistics.json and ``ReportTallies``: counts,
    exact sums, the bootstrap's totals and every latency (for the median and p95)."""

    def __init__(self) -> None:
        self.conversations = self.turns = self.scored = 0
        self.matches = [0] * len(MATCH_FIELDS)
        self.logic = {field: ExactSum() for field in LOGIC_FIELDS}
        self.logic_counts = [0] * len(LOGIC_FIELDS)
        self.operations = [0, 0]  # sum, turns with a count (answered)
        self.successes = self.judged = 0
        self.total_in = self.total_out = 0
        self.estimated = 0  # turns whose tokens are estimated (characters / 4)
        self.call_errors: Counter[str] = Counter()
        self.no_gold = self.prediction_errors = self.missing = 0
        self.missing_gold = 0  # of ``missing``: turns with a gold answer (they count as failures)
        self.by_turn: dict[int, list[int]] = {}  # scored, numerical, ops sum, ops count
        self.failure_modes: Counter[str] = Counter()
        self.latencies = array("d")
        self.units = BootstrapUnits()
        self.by_operations: dict[int, list[int]] = {}
        self.extra = dict.fromkeys(EXTRA_FIELDS, 0)
        self.worst: list[tuple[float, int, str, list[str]]] = []
        self.failed_checks = 0

    def add(self, conversation_id: str, turns: Sequence[Turn]) -> Totals:
        """Fold one conversation's turns (``turn_values`` dicts); returns its totals."""
        self.conversations += 1
        self.turns += len(turns)
        scored_turns: list[tuple[int, bool]] = []
        hits = [0] * len(MATCH_FIELDS)
        present: list[list[float]] = [[] for _ in _AVERAGED]
        tokens_in = tokens_out = 0
        first_failure = ""
        for t in turns:
            tokens_in += t["input_tokens"]
            tokens_out += t["output_tokens"]
            if t.get("tokens_estimated"):
                self.estimated += 1
            error_type = t["error_type"]
            if error_type is not None:
                if error_type == MISSING_PREDICTION:
                    self.missing += 1
                    self.missing_gold += t["not_scored"] != "no_gold"
                else:
                    self.prediction_errors += 1
            for entry in t["validation"]:
                if not entry.get("passed"):
                    self.failed_checks += 1
            not_scored = t["not_scored"]
            if not_scored == "call_error":
                self.call_errors[str(error_type)] += 1
            else:
                for values, value in zip(present, _AVERAGED_OF(t), strict=True):
                    if value is not None:
                        values.append(float(value))
            if not_scored == "no_gold":
                self.no_gold += 1
            if not t["scored"]:
                continue
            matches = _MATCHES_OF(t)
            numerical = bool(matches[0])
            for k, match in enumerate(matches):
                if match:
                    hits[k] += 1
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
        self.total_in += tokens_in
        self.total_out += tokens_out
        for k, field in enumerate(LOGIC_FIELDS):
            self.logic[field].extend(present[k])
            self.logic_counts[k] += len(present[k])
        operations = present[_AVERAGED.index("operations_per_turn")]
        self.operations[0] += int(sum(operations))  # counts: exact in floats
        self.operations[1] += len(operations)
        self.latencies.extend(present[-1])
        scored = len(scored_turns)
        for k, count in enumerate(hits):
            self.matches[k] += count
        self.scored += scored
        success = hits[0] == scored if scored else None
        if success is not None:
            self.judged += 1
            self.successes += success
        row = [float(h) for h in hits] + [float(scored)]
        for values in present[: len(LOGIC_FIELDS)]:
            row += [math.fsum(values), float(len(values))]
        row += [float(bool(success)), float(success is not None)]
        self.units.add(row, scored_turns)
        if scored and hits[0] < scored:
            accuracy = hits[0] / scored
            cells = [conversation_id, str(len(turns)), str(scored), f"{accuracy:.3f}"]
            cells.append(first_failure or "none")
            self.worst.append((accuracy, -scored, conversation_id, cells))
            self._trim_worst()
        return Totals(hits, scored, tokens_in, tokens_out, present, success)

    def absorb(self, other: Tally) -> Tally:
        """Fold in ``other`` (the conversations after these; its values are taken over), as if
        its conversations were added here one by one. Returns this tally."""
        for name, mine in vars(self).items():
            if name != "worst":
                setattr(self, name, _merged(mine, getattr(other, name)))
        self.worst += other.worst
        self._trim_worst()
        return self

    def _trim_worst(self) -> None:
        if len(self.worst) >= 8 * WORST:
            self.worst.sort(key=lambda w: w[:3])
            del self.worst[WORST:]

    def report_tallies(self) -> ReportTallies:
        worst = sorted(self.worst, key=lambda w: w[:3])[:WORST]
        return ReportTallies(
            by_operations=[OperationsRow(k, *v) for k, v in sorted(self.by_operations.items())],
            extra=dict(self.extra),
            worst=[w[3] for w in worst],
            failed_checks=self.failed_checks,
            missing_gold=self.missing_gold,
        )

    def statistics(
        self,
        *,
        price_in: float | None = None,
        price_out: float | None = None,
        bootstrap: int = 1000,
        seed: int = 0,
        intervals: Intervals | None = None,
    ) -> dict[str, Any]:
        """statistics.json (keys: docs/numeric.md); ``intervals``: ``bootstrap_intervals`` of
        these units drawn elsewhere, else drawn here. Accuracies are over scored turns."""
        stats: dict[str, Any] = {}
        scored = self.scored
        for key, count in zip(MATCH_KEYS, self.matches, strict=True):
            stats[key] = float(count) / scored if scored else None
        for field, count in zip(LOGIC_FIELDS, self.logic_counts, strict=True):
            stats["avg_" + field] = self.logic[field].value / count if count else None
        ops_sum, ops_count = self.operations
        stats["avg_operations_per_turn"] = float(ops_sum) / ops_count if ops_count else None
        successes = self.successes
        stats["num_conversations"] = self.conversations
        stats["num_turns"] = self.turns
        stats["num_scored_turns"] = scored
        correct = self.matches[0]  # numerical matches
        stats["num_failed_turns"] = scored - correct
        stats["num_turns_not_scored_call_errors"] = sum(self.call_errors.values())
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
        counted = total_in + total_out  # the spec's "Total Tokens": failed calls' tokens too
        stats["total_input_tokens"] = total_in
        stats["total_output_tokens"] = total_out
        stats["total_tokens"] = total_in + total_out
        stats["num_turns_tokens_estimated"] = self.estimated
        stats["cost_per_correct_answer"] = counted / successes if successes else None
        stats["tokens_per_correct_turn"] = counted / correct if correct else None
        if price_in is not None and price_out is not None:
            dollars = cost_usd(total_in, total_out, price_in, price_out)
            stats["total_cost_usd"] = dollars
            stats["cost_per_correct_answer_usd"] = dollars / successes if successes else None
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
        if intervals is None and bootstrap > 0:
            intervals = bootstrap_intervals((bootstrap, seed), self.units)
        return stats | interval_statistics(intervals if bootstrap > 0 else None)


def bootstrap_intervals(settings: tuple[int, int], units: BootstrapUnits) -> Intervals:
    """The bootstrap's intervals of ``units`` (a pure task, run while the caller imports
    matplotlib), on one BLAS thread: more spin on the caller's core, for the same numbers."""
    from threadpoolctl import threadpool_limits  # with numpy, by the one process that runs this

    resamples, seed = settings
    with threadpool_limits(1, user_api="blas"):
        return units.intervals(resamples=resamples, seed=seed)


ROW_FILES = (
    ("summary.csv", SUMMARY_COLUMNS),
    ("turns.csv", TURN_COLUMNS),
    ("validation.csv", VALIDATION_COLUMNS),
    ("errors.csv", ERROR_COLUMNS),
)
"""The row files of a run, in the order ``score_chunk`` returns their rows."""

_LAST_FILES = ("input_errors.csv", "report.md", "report.html", "statistics.json")
"""Written once every conversation is scored (with the plots), statistics.json last."""

WRITER_CONVERSATIONS = 2_000
"""Runs of at least this many conversations score their chunks in a pool (``LocalPool``)."""

POOL_WORKERS = 2
CHUNK_CONVERSATIONS = 256
"""Conversations per chunk (about 1,000 turns)."""


class ScoreJob(NamedTuple):
    """What every chunk's scoring shares (``score_chunk``; picklable)."""

    traces: str
    data: str
    fmt: str
    predictions: str
    store: bool


Entry = tuple[str, str, Any, Any]
"""A chunk's conversation: id, trace id, the conversation or its record's (number, offset,
length), and its predictions by turn or their ``PredictionIndex`` entries."""


class ChunkRows(NamedTuple):
    """A chunk's row files' bytes (``ROW_FILES``' order), its marshalled store rows (``None``
    without a store), and its turns with a gold answer and no prediction."""

    files: tuple[bytes, ...]
    store: bytes | None
    missing: list[tuple[str, int]]


def _read_entries(job: ScoreJob, chunk: Sequence[Entry]) -> Iterator[tuple[str, str, Any, Any]]:
    """Each entry's conversation (``PlainConversation``), read from the job's files where the
    chunk gives where it is, and its predictions by turn."""
    data_file, preds_file = Path(job.data), Path(job.predictions)
    spans = [c for _, _, c, _ in chunk if type(c) is tuple]
    text, base = b"", 0
    if spans:  # a chunk's records are next to each other in the file: one read
        base = spans[0][1]
        with open(data_file, "rb") as handle:
            handle.seek(base)
            text = handle.read(spans[-1][1] + spans[-1][2] - base)
    preds = open(preds_file, "rb") if any(type(p) is array for *_, p in chunk) else None  # noqa: SIM115
    try:
        for cid, trace_id, conversation, found in chunk:
            if type(conversation) is tuple:
                index, start, size = conversation
                record = text[start - base : start - base + size]
                conversation, _ = read_record(job.fmt, record, index, data_file)  # type: ignore[arg-type]
            if type(found) is array:
                entries, found = found, {}
                for k in range(0, len(entries), 4):
                    preds.seek(entries[k + 2])  # type: ignore[union-attr]
                    raw = preds.read(entries[k + 3])  # type: ignore[union-attr]
                    # a line the index read as valid: its value again, without the checks
                    found[entries[k]] = line_values(loads(raw.removeprefix(_BOM)))
            yield cid, trace_id, conversation, found
    finally:
        if preds is not None:
            preds.close()


_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)


def _write_file(path: str, data: bytes) -> None:
    """``data`` as the file ``path`` (a trace): ``open``'s buffered file took a sixth more CPU."""
    handle = os.open(path, _NEW_FILE, 0o666)  # not inherited (PEP 446)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(handle, view) :]
    finally:
        os.close(handle)


def score_chunk(job: ScoreJob, chunk: Sequence[Entry]) -> tuple[ChunkRows, Tally]:
    """A chunk's rows of every row file and of the store, and its digest (a pure task); each
    conversation's trace written in ``job.traces``. Spec: "Output Files"."""
    folder = f"{job.traces}{os.sep}"
    texts = {name: io.StringIO() for name, _ in ROW_FILES}
    summary, rows, validation, errors = (csv.writer(texts[name]) for name, _ in ROW_FILES)
    store: list[tuple[Any, ...]] | None = [] if job.store else None
    tally = Tally()
    missing: list[tuple[str, int]] = []
    cached_logic_scores.cache_clear()  # a chunk's (plan, gold) pairs: what metrics says now
    for cid, trace_id, conversation, found in _read_entries(job, chunk):
        features = conversation.features
        turns: list[Turn] = []
        for i, gold in enumerate(conversation.turns):
            prediction = found.get(i)
            if prediction is None and gold.executed_answer is not None:
                missing.append((cid, i))
            gold_ops = gold_operations(gold.program)
            turns.append(turn_values(cid, i, gold, prediction, gold_ops))
        totals = tally.add(cid, turns)
        summary.writerow(summary_cells(cid, trace_id, features, len(turns), totals))
        for t in turns:
            turn_row = turn_cells(features, t)
            rows.writerow(turn_row)
            if store is not None:
                story = {"plan": t["plan"], "validation": t["validation"]}
                if not t["turn_idx"]:  # once per conversation: a later turn's page reads it here
                    story["table"] = table_rows((conversation.document or {}).get("table"))
                columns, result = stored_row(t, turn_row, story)
                store.append(
                    (columns.key, columns.failed, columns.turn, columns.error_type, result)
                )
            for entry in t["validation"]:
                line = {"conversation_id": cid, "turn_idx": t["turn_idx"], **entry}
                validation.writerow(_cell_list(map(line.get, VALIDATION_COLUMNS)))
            error = error_cells(trace_id, cid, features, t)
            if error is not None:
                errors.writerow(error)
        trace = {
            "trace_id": trace_id,
            "conversation_id": cid,
            "features": features,
            "document": conversation.document,
            "conversation_success": totals.success,
            "turns": turns,
        }
        _write_file(f"{folder}{trace_id}.json", dumps_bytes(trace, _TRACE_OPTIONS) + b"\n")
    files = tuple(texts[name].getvalue().encode() for name, _ in ROW_FILES)
    packed = marshal.dumps(store) if store is not None else None
    return ChunkRows(files, packed, missing), tally


def _chunks(data: LoadResult, predictions: PredictionsResult, size: int) -> Iterator[list[Entry]]:
    """The run's conversations in file order, ``size`` at a time, as ``score_chunk`` reads
    them: where a stored file's records and prediction lines are, else the values."""
    ids = trace_ids(data.conversation_ids())
    stored, found = data.conversations, predictions.predictions
    conversations: Iterable[tuple[str, Any]]
    if isinstance(stored, StoredConversations):
        spans = stored.spans
        conversations = ((cid, tuple(spans[3 * k : 3 * k + 3])) for k, cid in enumerate(stored.ids))
    else:
        conversations = ((c.id, plain_conversation(c)) for c in stored)
    if isinstance(found, PredictionIndex):
        by_conversation: Mapping[str, Any] = found.by_conversation
    else:
        grouped: dict[str, dict[int, PredictionValues]] = {}
        for (cid, turn), prediction in found.items():
            grouped.setdefault(cid, {})[turn] = prediction_values(prediction)
        by_conversation = grouped
    entries = ((cid, ids[cid], c, by_conversation.get(cid, {})) for cid, c in conversations)
    yield from chunked(entries, size)


OUTPUT_FILES = (*(name for name, _ in ROW_FILES), "traces", *_LAST_FILES, *PLOTS.values())
"""Every file (and traces/) ``numeric score`` may write in its folder."""


def _check_numbers(**given: float | None) -> None:
    """A price that is negative or not finite, or a negative ``bootstrap``/``seed``, is a
    ValueError naming it (a price of -1 gave a negative total cost, NaN a null one)."""
    for name, value in given.items():
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number >= 0 (got {value!r})")


def score_to_folder(
    data: LoadResult,
    predictions: PredictionsResult,
    out: str | Path | OutputFolder,
    *,
    price_in: float | None = None,
    price_out: float | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    sample_size: int | None = None,
    sample_seed: int | None = None,
    progress: Callable[[int], None] | None = None,
    chunk: int | None = None,
    recorder: RunRecorder | None = None,
    executor: Executor | None = None,
) -> NumericResult:
    """Score every turn into the spec's "Output Files" in ``out`` (statistics.json last),
    ``chunk`` conversations at a time. Prices: USD per million tokens, both or neither;
    ``recorder``: each turns.csv row also stored as an item (issue 11). The signature names the
    sample ``load_convfinqa`` kept (``data.sample``); ``sample_size`` and ``sample_seed`` name
    it only for data without one (ValueError when they differ from it)."""
    check_type("data", data, LoadResult, "a LoadResult (load_convfinqa's)")
    check_type("predictions", predictions, PredictionsResult, "a PredictionsResult")
    check_type("out", out, str | os.PathLike | OutputFolder, "a folder's path")
    if (price_in is None) != (price_out is None):
        raise ValueError("give both price_in and price_out, or neither")
    _check_numbers(price_in=price_in, price_out=price_out, bootstrap=bootstrap, seed=seed)
    if sample_size is not None and sample_size < 1:
        raise ValueError(f"sample_size must be None or >= 1 (got {sample_size!r})")
    if data.sample is not None and sample_size is None:
        sample_size, sample_seed = data.sample
    elif data.sample is not None and (sample_size, sample_seed) != data.sample:
        raise ValueError(f"the data was loaded with (sample_size, seed) {data.sample}")
    folder = OutputFolder.of(out)
    errors = prediction_errors(data, predictions)
    tally = Tally()
    stored = data.conversations
    with ExitStack() as stack:
        folder.expect(*(name for name, _ in ROW_FILES), "traces", *_LAST_FILES)
        paths = [stack.enter_context(folder.atomic(name)) for name, _ in ROW_FILES]
        job = ScoreJob(
            traces=str(stack.enter_context(folder.bulk("traces"))),
            data=str(stored.file) if isinstance(stored, StoredConversations) else "",
            fmt=stored.fmt if isinstance(stored, StoredConversations) else data.source_format,
            predictions=str(predictions.path),
            store=recorder is not None,
        )
        files = [stack.enter_context(open(path, "wb")) for path in paths]
        for handle, (_, columns) in zip(files, ROW_FILES, strict=True):
            handle.write((",".join(columns) + "\r\n").encode())
        runner = executor or InProcess()
        if executor is None and len(stored) >= WRITER_CONVERSATIONS:
            try:  # its processes start while the first chunks are read
                runner = LocalPool(POOL_WORKERS, in_flight=8, warm=(__name__,))
            except OSError as exc:
                log.warning("the scoring process could not start (%s); scoring here", exc)
            stack.push(lambda kind, *_: runner.close(kill=kind is not None))
        size = max(1, chunk or CHUNK_CONVERSATIONS)
        for rows, digest in run_map(
            runner, partial(score_chunk, job), _chunks(data, predictions, size)
        ):
            for handle, text in zip(files, rows.files, strict=True):
                handle.write(text)
            if rows.store is not None and digest.turns:
                recorder.add_built(MARSHALLED, rows.store, digest.turns, plain=True)  # type: ignore[union-attr]
            errors.extend(missing_turn_error(predictions, cid, i) for cid, i in rows.missing)
            tally.absorb(digest)
            if progress is not None:
                progress(tally.conversations)
        signature = run_signature(
            data,
            predictions,
            bootstrap=bootstrap,
            seed=seed,
            sample_size=sample_size,
            sample_seed=sample_seed,
        )
        intervals = None
        if bootstrap > 0:  # in a pool's process, while this one imports matplotlib
            done = runner.submit(partial(bootstrap_intervals, (bootstrap, seed)), tally.units)
            if tally.scored:
                pyplot()
            (intervals,) = done + finish(runner)
        statistics = tally.statistics(
            price_in=price_in,
            price_out=price_out,
            bootstrap=bootstrap,
            seed=seed,
            intervals=intervals,
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
        # imported here: the pool's processes, which import this module, never write a report
        from fieldcheck.numeric._report import plot_files, write_numeric_report

        folder.expect(*_LAST_FILES[:-1], *plot_files(result), _LAST_FILES[-1])
        with folder.atomic("input_errors.csv") as tmp:
            write_csv(tmp, error_dicts(result.input_errors), INPUT_ERROR_COLUMNS)
        write_numeric_report(result, folder)
    folder.write_summary("statistics.json", result.statistics)
    return result

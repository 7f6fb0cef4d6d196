"""Writing every output file of the spec's "Output Files" section into one directory.

summary.csv, turns.csv, validation.csv, errors.csv, statistics.json, traces/<id>.json,
accuracy_by_turn.png, plus input_errors.csv (every bad input line), report.md, report.html and
the report's plots (numeric/_report.py). Every CSV goes through
``fieldcheck.reports.write_csv``, which neutralises spreadsheet formulas.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fieldcheck._util.errors import short_repr
from fieldcheck._util.jsonio import write_json
from fieldcheck.numeric._records import Conversation
from fieldcheck.numeric._report import PLOTS, write_numeric_report
from fieldcheck.numeric._scoring import ConversationScore, NumericResult, TurnScore
from fieldcheck.reports._csv import write_csv
from fieldcheck.reports._outdir import OutputFolder

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
INPUT_ERROR_COLUMNS = ("file", "line", "record", "field", "reason", "value", "message")


def summary_rows(result: NumericResult) -> list[dict[str, Any]]:
    """One row per conversation (summary.csv)."""
    rows = []
    for c in result.conversations:
        latencies = [t.latency_s for t in c.turns if t.latency_s is not None and not t.call_error]
        rows.append(
            {
                "conversation_id": c.conversation_id,
                "trace_id": c.trace_id,
                "num_turns": len(c.turns),
                **c.features,
                "numerical_match_accuracy": c.accuracy("numerical_match"),
                "soft_match_accuracy": c.accuracy("soft_match"),
                "unit_agnostic_accuracy": c.accuracy("unit_agnostic_match"),
                "sign_agnostic_accuracy": c.accuracy("sign_agnostic_match"),
                "general_match_accuracy": c.accuracy("general_match"),
                "avg_logic_recall": c.mean("logic_recall"),
                "avg_logic_precision": c.mean("logic_precision"),
                "avg_logic_order_score": c.mean("logic_order_score"),
                "avg_operations_per_turn": c.mean("operations_per_turn"),
                "conversation_success": c.success,
                "input_tokens": c.input_tokens,
                "output_tokens": c.output_tokens,
                "total_tokens": c.input_tokens + c.output_tokens,
                "total_latency_s": sum(latencies) if latencies else None,
                "mean_latency_s": c.mean("latency_s"),
                "failed_turns": sum(1 for t in c.turns if t.scored and not t.numerical_match),
            }
        )
    return rows


def _turn_row(c: ConversationScore, t: TurnScore) -> dict[str, Any]:
    row = t.model_dump(mode="json")
    row["has_type2_question"] = c.features["has_type2_question"]
    row["has_non_numeric_values"] = c.features["has_non_numeric_values"]
    row["plan_operations"] = " ".join(t.plan_operations) if t.plan_operations is not None else None
    row["ground_truth_operations"] = (
        " ".join(t.ground_truth_operations) if t.ground_truth_operations is not None else None
    )
    return row


def turn_rows(result: NumericResult) -> list[dict[str, Any]]:
    """One row per turn (turns.csv)."""
    return [_turn_row(c, t) for c in result.conversations for t in c.turns]


def error_rows(result: NumericResult) -> list[dict[str, Any]]:
    """Every failed scored turn (an error, a missing prediction, or an answer that is not a
    numerical match), with exactly the spec's columns (errors.csv).

    ``error_type`` is the agent's error type for errored turns (``invalid_reply``,
    ``invalid_plan``, an agent's own name), ``missing_prediction`` for a turn without a
    prediction, else the failure mode (``scale``, ``sign``, ``rounding``, ``wrong``,
    ``no_answer``). A turn that is not scored is not an error and is left out (issue 9): no gold
    answer (the private test split), whatever its prediction, or a failed model call (issue 8);
    turns.csv lists it with ``not_scored`` and statistics.json counts it."""
    rows = []
    for c in result.conversations:
        for t in c.turns:
            if not t.scored or t.numerical_match:
                continue
            if t.error_type is not None:
                error_type = t.error_type
                message = t.error_message or ""
            else:
                error_type = t.failure_mode or "wrong"
                # cut: the full answer is in turns.csv, error_context and the trace
                expected, got = short_repr(t.expected_answer), short_repr(t.predicted_answer)
                message = f"expected {expected}, got {got}"
            rows.append(
                {
                    "trace_id": c.trace_id,
                    "conversation_id": c.conversation_id,
                    "turn_idx": t.turn_idx,
                    "question": t.question,
                    "expected_answer": t.expected_answer,
                    "error_type": error_type,
                    "error_message": message,
                    "has_type2_question": c.features["has_type2_question"],
                    "has_non_numeric_values": c.features["has_non_numeric_values"],
                    "plan_steps": t.plan_steps,
                    "operations_per_turn": t.operations_per_turn,
                    "error_context": {
                        "failure_mode": t.failure_mode,
                        "predicted_answer": t.predicted_answer,
                        "parsed_answer": t.parsed_answer,
                        "ground_truth_program": t.ground_truth_program,
                        "ground_truth_operations": t.ground_truth_operations,
                        "plan_operations": t.plan_operations,
                        "logic_recall": t.logic_recall,
                        "soft_match": t.soft_match,
                        "unit_agnostic_match": t.unit_agnostic_match,
                        "sign_agnostic_match": t.sign_agnostic_match,
                        "general_match": t.general_match,
                        "qa_split": t.qa_split,
                        "has_duplicate_columns": c.features["has_duplicate_columns"],
                    },
                }
            )
    return rows


def validation_rows(result: NumericResult) -> list[dict[str, Any]]:
    """The validator log lines of every turn (validation.csv)."""
    return [
        {"conversation_id": c.conversation_id, "turn_idx": t.turn_idx, **entry}
        for c in result.conversations
        for t in c.turns
        for entry in t.validation
    ]


def trace_document(c: ConversationScore, conversation: Conversation | None) -> dict[str, Any]:
    """traces/<trace_id>.json: the conversation, its features, and every scored turn."""
    return {
        "trace_id": c.trace_id,
        "conversation_id": c.conversation_id,
        "features": c.features,
        "document": conversation.doc.model_dump(mode="json") if conversation else None,
        "conversation_success": c.success,
        "turns": [t.model_dump(mode="json") for t in c.turns],
    }


def write_outputs(
    result: NumericResult,
    out_dir: str | Path | OutputFolder,
    *,
    conversations: Sequence[Conversation] = (),
) -> dict[str, Path]:
    """Write every output file into ``out_dir`` (created), each under a temporary name then
    renamed, statistics.json last with ``complete: true``; return name -> path. The plots
    (accuracy_by_turn.png, plot_*.png) are written only when a turn was scored."""
    out = OutputFolder.of(out_dir)
    traces = out.sub("traces")
    names = [
        "summary.csv",
        "turns.csv",
        "validation.csv",
        "errors.csv",
        "input_errors.csv",
        "report.md",
        "report.html",
    ]
    nothing = result.statistics.get("nothing_scored", True)
    plots = [] if nothing else [PLOTS["accuracy_by_turn"], PLOTS["match_types"]]
    out.expect(*names, *plots, "traces/", "statistics.json")
    tables = (
        ("summary.csv", summary_rows(result), SUMMARY_COLUMNS),
        ("turns.csv", turn_rows(result), TURN_COLUMNS),
        ("validation.csv", validation_rows(result), VALIDATION_COLUMNS),
        ("errors.csv", error_rows(result), ERROR_COLUMNS),
        ("input_errors.csv", [e.to_dict() for e in result.input_errors], INPUT_ERROR_COLUMNS),
    )
    for name, rows, columns in tables:
        with out.atomic(name) as tmp:
            write_csv(tmp, rows, columns)
    by_id = {c.id: c for c in conversations}
    for c in result.conversations:
        with traces.atomic(f"{c.trace_id}.json") as tmp:
            write_json(tmp, trace_document(c, by_id.get(c.conversation_id)))
    paths: dict[str, Path] = {name: out / name for name in names[:5]}
    paths |= write_numeric_report(result, out)
    paths["traces"] = traces.path
    paths["statistics.json"] = out.write_summary("statistics.json", result.statistics)
    return paths

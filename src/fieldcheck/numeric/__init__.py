"""ConvFinQA numeric QA: records, loaders for both file formats, the plan-and-execute agent and
its validator, predictions, scoring, outputs.

Spec: numeric-qa-evaluation.md. The pure metrics live in ``fieldcheck.metrics`` (answer parsing,
match types, program parser and executor, logic recall); this package joins data and predictions.
"""

from fieldcheck.numeric._agent import (
    PROMPT_ID,
    SYSTEM_PROMPT,
    evaluate_model,
    prediction_lines,
    render_document,
    run_turn,
)
from fieldcheck.numeric._loaders import LoadResult, load_convfinqa
from fieldcheck.numeric._predictions import (
    Plan,
    PlanStep,
    Prediction,
    PredictionError,
    PredictionsResult,
    ValidationEntry,
    load_predictions,
)
from fieldcheck.numeric._records import Conversation, Document, Features, Turn
from fieldcheck.numeric._report import build_report, report_tallies, write_numeric_report
from fieldcheck.numeric._scoring import (
    ConversationScore,
    Intervals,
    NumericResult,
    ReportTallies,
    TurnScore,
    bootstrap_intervals,
    compute_statistics,
    score_numeric,
    score_turn,
    trace_ids,
    turn_record,
)
from fieldcheck.numeric._stream import (
    ERROR_COLUMNS,
    SUMMARY_COLUMNS,
    TURN_COLUMNS,
    Tally,
    score_to_folder,
)
from fieldcheck.numeric._validator import CHECKS, Validation, validate_reply
from fieldcheck.numeric._writers import write_outputs

__all__ = [
    "CHECKS",
    "ERROR_COLUMNS",
    "PROMPT_ID",
    "SUMMARY_COLUMNS",
    "SYSTEM_PROMPT",
    "TURN_COLUMNS",
    "Conversation",
    "ConversationScore",
    "Document",
    "Features",
    "Intervals",
    "LoadResult",
    "NumericResult",
    "Plan",
    "PlanStep",
    "Prediction",
    "PredictionError",
    "PredictionsResult",
    "ReportTallies",
    "Tally",
    "Turn",
    "TurnScore",
    "Validation",
    "ValidationEntry",
    "bootstrap_intervals",
    "build_report",
    "compute_statistics",
    "evaluate_model",
    "load_convfinqa",
    "load_predictions",
    "prediction_lines",
    "render_document",
    "report_tallies",
    "run_turn",
    "score_numeric",
    "score_to_folder",
    "score_turn",
    "trace_ids",
    "turn_record",
    "validate_reply",
    "write_numeric_report",
    "write_outputs",
]

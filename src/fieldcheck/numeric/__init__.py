"""ConvFinQA numeric QA: records, loaders for both file formats, predictions, scoring, outputs.

Spec: numeric-qa-evaluation.md. The pure metrics live in ``fieldcheck.metrics`` (answer parsing,
match types, program parser and executor, logic recall); this package joins data and predictions.
"""

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
from fieldcheck.numeric._scoring import (
    ConversationScore,
    NumericResult,
    TurnScore,
    compute_statistics,
    score_numeric,
    score_turn,
    trace_ids,
)
from fieldcheck.numeric._writers import ERROR_COLUMNS, SUMMARY_COLUMNS, TURN_COLUMNS, write_outputs

__all__ = [
    "ERROR_COLUMNS",
    "SUMMARY_COLUMNS",
    "TURN_COLUMNS",
    "Conversation",
    "ConversationScore",
    "Document",
    "Features",
    "LoadResult",
    "NumericResult",
    "Plan",
    "PlanStep",
    "Prediction",
    "PredictionError",
    "PredictionsResult",
    "Turn",
    "TurnScore",
    "ValidationEntry",
    "compute_statistics",
    "load_convfinqa",
    "load_predictions",
    "score_numeric",
    "score_turn",
    "trace_ids",
    "write_outputs",
]

"""ConvFinQA numeric QA: records, loaders for both file formats, the plan-and-execute agent and
its validator, predictions, scoring, outputs.

Spec: numeric-qa-evaluation.md. The pure metrics live in ``fieldcheck.metrics`` (answer parsing,
match types, program parser and executor, logic recall); this package joins data and predictions.

Names are imported on first use (``fieldcheck.numeric.X``), so a process that needs one module
(the output writer, the store writer) does not load the agent and its model client.
"""

from typing import TYPE_CHECKING

from fieldcheck._util.lazy import lazy_names

if TYPE_CHECKING:  # the names as type checkers and editors see them
    from fieldcheck.numeric._agent import (
        DOC_END,
        DOC_START,
        PROMPT_ID,
        REPAIR_INTRO,
        SYSTEM_PROMPT,
        AgentRun,
        render_document,
        run_turn,
    )
    from fieldcheck.numeric._loaders import (
        LoadResult,
        load_convfinqa,
    )
    from fieldcheck.numeric._predictions import (
        Plan,
        PlanStep,
        Prediction,
        PredictionError,
        PredictionsResult,
        ValidationEntry,
        load_predictions,
    )
    from fieldcheck.numeric._records import (
        Conversation,
        Document,
        Features,
        Turn,
    )
    from fieldcheck.numeric._report import (
        build_report,
        estimated_note,
        write_numeric_report,
    )
    from fieldcheck.numeric._scoring import (
        CALL_ERRORS,
        Intervals,
        NumericResult,
        ReportTallies,
        trace_ids,
    )
    from fieldcheck.numeric._stream import (
        ERROR_COLUMNS,
        SUMMARY_COLUMNS,
        TURN_COLUMNS,
        Tally,
        score_chunk,
        score_to_folder,
    )
    from fieldcheck.numeric._system import GATED, SYSTEM, NumericSettings, read_data, stored_metrics
    from fieldcheck.numeric._validator import (
        CHECKS,
        DocumentNumbers,
        Validation,
        validate_reply,
    )

_HOME = {
    "AgentRun": "_agent",
    "CALL_ERRORS": "_scoring",
    "DOC_END": "_agent",
    "DOC_START": "_agent",
    "REPAIR_INTRO": "_agent",
    "DocumentNumbers": "_validator",
    "SYSTEM": "_system",
    "GATED": "_system",
    "NumericSettings": "_system",
    "read_data": "_system",
    "stored_metrics": "_system",
    "CHECKS": "_validator",
    "Conversation": "_records",
    "Document": "_records",
    "ERROR_COLUMNS": "_stream",
    "Features": "_records",
    "Intervals": "_scoring",
    "LoadResult": "_loaders",
    "NumericResult": "_scoring",
    "PROMPT_ID": "_agent",
    "Plan": "_predictions",
    "PlanStep": "_predictions",
    "Prediction": "_predictions",
    "PredictionError": "_predictions",
    "PredictionsResult": "_predictions",
    "ReportTallies": "_scoring",
    "SUMMARY_COLUMNS": "_stream",
    "SYSTEM_PROMPT": "_agent",
    "TURN_COLUMNS": "_stream",
    "Tally": "_stream",
    "Turn": "_records",
    "Validation": "_validator",
    "ValidationEntry": "_predictions",
    "build_report": "_report",
    "estimated_note": "_report",
    "load_convfinqa": "_loaders",
    "load_predictions": "_predictions",
    "render_document": "_agent",
    "run_turn": "_agent",
    "score_to_folder": "_stream",
    "score_chunk": "_stream",
    "trace_ids": "_scoring",
    "validate_reply": "_validator",
    "write_numeric_report": "_report",
}


__getattr__, __dir__ = lazy_names(__name__, _HOME, globals())

__all__ = [
    "CALL_ERRORS",
    "CHECKS",
    "DOC_END",
    "DOC_START",
    "ERROR_COLUMNS",
    "GATED",
    "PROMPT_ID",
    "REPAIR_INTRO",
    "SUMMARY_COLUMNS",
    "SYSTEM",
    "SYSTEM_PROMPT",
    "TURN_COLUMNS",
    "AgentRun",
    "Conversation",
    "Document",
    "DocumentNumbers",
    "Features",
    "Intervals",
    "LoadResult",
    "NumericResult",
    "NumericSettings",
    "Plan",
    "PlanStep",
    "Prediction",
    "PredictionError",
    "PredictionsResult",
    "ReportTallies",
    "Tally",
    "Turn",
    "Validation",
    "ValidationEntry",
    "build_report",
    "estimated_note",
    "load_convfinqa",
    "load_predictions",
    "read_data",
    "render_document",
    "run_turn",
    "score_chunk",
    "score_to_folder",
    "stored_metrics",
    "trace_ids",
    "validate_reply",
    "write_numeric_report",
]

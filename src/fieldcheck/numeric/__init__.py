"""ConvFinQA numeric QA (spec numeric-qa-evaluation.md): records, loaders, the agent and its
validator, predictions, scoring, outputs; the pure metrics are ``fieldcheck.metrics``. Names are
imported on first use, so a process that needs one module does not load the agent."""

from typing import TYPE_CHECKING

from fieldcheck._util.lazy import typed_lazy_names

if TYPE_CHECKING:  # the names as type checkers and editors see them
    from fieldcheck.numeric._agent import (
        DOC_END,
        DOC_START,
        PROMPT_ID,
        REPAIR_INTRO,
        SYSTEM_PROMPT,
        AgentRun,
        render_document,
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
    from fieldcheck.numeric._report import build_report, estimated_note
    from fieldcheck.numeric._scoring import Intervals, NumericResult, ReportTallies, trace_ids
    from fieldcheck.numeric._stream import (
        ERROR_COLUMNS,
        SUMMARY_COLUMNS,
        TURN_COLUMNS,
        Tally,
        score_chunk,
        score_to_folder,
    )
    from fieldcheck.numeric._system import GATED, SYSTEM, NumericSettings, stored_metrics
    from fieldcheck.numeric._validator import CHECKS, DocumentNumbers, Validation, validate_reply

__getattr__, __dir__, __all__ = typed_lazy_names(globals())

"""ConvFinQA numeric QA: records, loaders for both file formats, the plan-and-execute agent and
its validator, predictions, scoring, outputs.

Spec: numeric-qa-evaluation.md. The pure metrics live in ``fieldcheck.metrics`` (answer parsing,
match types, program parser and executor, logic recall); this package joins data and predictions.

Names are imported on first use (``fieldcheck.numeric.X``), so a process that needs one module
(the output writer, the store writer) does not load the agent and its model client.
"""

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
    from fieldcheck.numeric._report import build_report, estimated_note
    from fieldcheck.numeric._scoring import (
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
    from fieldcheck.numeric._system import GATED, SYSTEM, NumericSettings, stored_metrics
    from fieldcheck.numeric._validator import (
        CHECKS,
        DocumentNumbers,
        Validation,
        validate_reply,
    )

__getattr__, __dir__, __all__ = typed_lazy_names(globals())

"""The slot extraction benchmark: run models over conversations with a slot memory, load gold and
predictions, score several models, write reports.

Spec: slot-extraction-benchmark.md; user guide: docs/slots.md; file formats: docs/formats.md.
"""

from fieldcheck.slots._extract import (
    PROMPT_ID,
    SYSTEM_PROMPT,
    Conversation,
    Extraction,
    Memory,
    ReplyError,
    SessionOutcome,
    build_messages,
    load_conversations,
    merge,
    parse_reply,
    run_extraction,
)
from fieldcheck.slots._loaders import (
    JudgeFile,
    LatencyFile,
    SlotFile,
    load_judge_scores,
    load_latencies,
    load_slots,
)
from fieldcheck.slots._records import JudgeRecord, LatencyRecord, SlotRecord
from fieldcheck.slots._report import (
    render_html,
    render_markdown,
    topic_lines,
    write_outputs,
    write_plots,
)
from fieldcheck.slots._score import (
    DEFAULT_THRESHOLDS,
    ModelInput,
    ModelResult,
    ModelScore,
    PairedF1,
    SlotsRun,
    TPMode,
    UnscoredModel,
    make_matcher,
    score_models,
    slot_text,
)
from fieldcheck.slots._summary import (
    Finding,
    Item,
    SummaryRow,
    key_findings,
    not_scored_lines,
    results_summary,
)

__all__ = [
    "DEFAULT_THRESHOLDS",
    "PROMPT_ID",
    "SYSTEM_PROMPT",
    "Conversation",
    "Extraction",
    "Finding",
    "Item",
    "JudgeFile",
    "JudgeRecord",
    "LatencyFile",
    "LatencyRecord",
    "Memory",
    "ModelInput",
    "ModelResult",
    "ModelScore",
    "PairedF1",
    "ReplyError",
    "SessionOutcome",
    "SlotFile",
    "SlotRecord",
    "SlotsRun",
    "SummaryRow",
    "TPMode",
    "UnscoredModel",
    "build_messages",
    "key_findings",
    "load_conversations",
    "load_judge_scores",
    "load_latencies",
    "load_slots",
    "make_matcher",
    "merge",
    "not_scored_lines",
    "parse_reply",
    "render_html",
    "render_markdown",
    "results_summary",
    "run_extraction",
    "score_models",
    "slot_text",
    "topic_lines",
    "write_outputs",
    "write_plots",
]

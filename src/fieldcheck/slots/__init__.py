"""The slot extraction benchmark: load gold and predictions, score several models, write reports.

Spec: slot-extraction-benchmark.md; user guide: docs/slots.md; file formats: docs/formats.md.
"""

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
    make_matcher,
    score_models,
    slot_text,
)
from fieldcheck.slots._summary import Finding, Item, SummaryRow, key_findings, results_summary

__all__ = [
    "DEFAULT_THRESHOLDS",
    "Finding",
    "Item",
    "JudgeFile",
    "JudgeRecord",
    "LatencyFile",
    "LatencyRecord",
    "ModelInput",
    "ModelResult",
    "ModelScore",
    "PairedF1",
    "SlotFile",
    "SlotRecord",
    "SlotsRun",
    "SummaryRow",
    "TPMode",
    "key_findings",
    "load_judge_scores",
    "load_latencies",
    "load_slots",
    "make_matcher",
    "render_html",
    "render_markdown",
    "results_summary",
    "score_models",
    "slot_text",
    "topic_lines",
    "write_outputs",
    "write_plots",
]

"""The slot extraction benchmark: run models over conversations with a slot memory, load gold and
predictions, score several models, write reports.

Spec: slot-extraction-benchmark.md; user guide: docs/slots.md; file formats: docs/formats.md.
"""

from typing import TYPE_CHECKING

from fieldcheck._util.lazy import lazy_names

if TYPE_CHECKING:  # the names as type checkers and editors see them
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
        SessionCount,
        SlotScorer,
        SlotsRun,
        TPMode,
        UnscoredModel,
        make_matcher,
        model_sides,
        score_models,
        slot_text,
    )
    from fieldcheck.slots._stream import Part, Partition, partitioned
    from fieldcheck.slots._summary import (
        Finding,
        Item,
        SummaryRow,
        key_findings,
        not_scored_lines,
        results_summary,
    )
    from fieldcheck.slots._system import SYSTEM

# each public name's private module, imported on first use (PEP 562): a process that needs only
# the readers (the helper reader of large inputs, ``_reader``) starts without the scoring's,
# the report's and the runner's imports
_HOME = {
    "SYSTEM": "_system",
    "Conversation": "_extract",
    "DEFAULT_THRESHOLDS": "_score",
    "Extraction": "_extract",
    "Finding": "_summary",
    "Item": "_summary",
    "JudgeFile": "_loaders",
    "JudgeRecord": "_records",
    "LatencyFile": "_loaders",
    "LatencyRecord": "_records",
    "Memory": "_extract",
    "ModelInput": "_score",
    "ModelResult": "_score",
    "ModelScore": "_score",
    "PROMPT_ID": "_extract",
    "PairedF1": "_score",
    "Part": "_stream",
    "Partition": "_stream",
    "ReplyError": "_extract",
    "SYSTEM_PROMPT": "_extract",
    "SessionCount": "_score",
    "SessionOutcome": "_extract",
    "SlotFile": "_loaders",
    "SlotRecord": "_records",
    "SlotScorer": "_score",
    "SlotsRun": "_score",
    "SummaryRow": "_summary",
    "TPMode": "_score",
    "UnscoredModel": "_score",
    "build_messages": "_extract",
    "key_findings": "_summary",
    "load_conversations": "_extract",
    "load_judge_scores": "_loaders",
    "load_latencies": "_loaders",
    "load_slots": "_loaders",
    "make_matcher": "_score",
    "merge": "_extract",
    "model_sides": "_score",
    "not_scored_lines": "_summary",
    "parse_reply": "_extract",
    "partitioned": "_stream",
    "render_html": "_report",
    "render_markdown": "_report",
    "results_summary": "_summary",
    "run_extraction": "_extract",
    "score_models": "_score",
    "slot_text": "_score",
    "topic_lines": "_report",
    "write_outputs": "_report",
    "write_plots": "_report",
}


__getattr__, __dir__ = lazy_names(__name__, _HOME, globals())

__all__ = [
    "DEFAULT_THRESHOLDS",
    "PROMPT_ID",
    "SYSTEM",
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
    "Part",
    "Partition",
    "ReplyError",
    "SessionCount",
    "SessionOutcome",
    "SlotFile",
    "SlotRecord",
    "SlotScorer",
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
    "model_sides",
    "not_scored_lines",
    "parse_reply",
    "partitioned",
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

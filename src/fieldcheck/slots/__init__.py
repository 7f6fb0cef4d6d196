"""The slot extraction benchmark (slot-extraction-benchmark.md; docs/slots.md): run models over
conversations with a slot memory, load gold and predictions, score several models, write reports."""

from typing import TYPE_CHECKING

from fieldcheck._util.lazy import typed_lazy_names

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
        render_transcript,
        run_extraction,
        transcript_digest,
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
        METRIC_COLUMNS,
        render_markdown,
        topic_lines,
        write_outputs,
    )
    from fieldcheck.slots._score import (
        ModelInput,
        ModelResult,
        ModelScore,
        PairedF1,
        SlotScorer,
        SlotsRun,
        TPMode,
        UnscoredModel,
        score_models,
    )
    from fieldcheck.slots._summary import (
        Finding,
        Item,
        SummaryRow,
        key_findings,
        results_summary,
    )
    from fieldcheck.slots._system import SYSTEM, check_gold, slot_metrics

__getattr__, __dir__, __all__ = typed_lazy_names(globals())

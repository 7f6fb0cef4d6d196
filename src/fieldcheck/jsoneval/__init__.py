"""JSON evaluation (json-evaluation.md): ``evaluate`` scores one output against its ground truth,
``evaluate_batch`` many, ``stream_batch_outputs`` a batch file in chunks (docs/json.md)."""

from typing import TYPE_CHECKING

from fieldcheck._util.lazy import typed_lazy_names

if TYPE_CHECKING:  # the names as type checkers and editors see them
    from fieldcheck.jsoneval._config import (
        LISTED_TWICE,
        EvalConfig,
        MatcherFamily,
        SafetyCheck,
        load_strategies,
        parse_strategies,
        parse_weights,
    )
    from fieldcheck.jsoneval._evaluate import (
        NESTED_HINT,
        MatcherError,
        build_matchers,
        coerce_output,
        evaluate,
        evaluate_batch,
        make_signature,
    )
    from fieldcheck.jsoneval._extract import (
        PROMPT_ID,
        ExtractRecord,
        ModelRun,
        build_messages,
        document_digest,
        document_from_prompt,
        load_schema,
        parse_reply,
        read_documents,
    )
    from fieldcheck.jsoneval._io import (
        StreamedBatch,
        read_batch,
        stream_batch_outputs,
    )
    from fieldcheck.jsoneval._models import (
        MAX_DEPTH,
        BatchRecord,
        BatchResult,
        BatchSummary,
        FieldResult,
        FieldSummary,
        JsonEvalResult,
        OutputKind,
        RecordError,
        RecordResult,
    )
    from fieldcheck.jsoneval._report import write_batch_report
    from fieldcheck.jsoneval._safety import LeakKind, SafetyFinding, find_leaks
    from fieldcheck.jsoneval._saved import (
        SavedConfig,
        Section,
        SectionError,
        merged_config,
        parse_section,
        resolve_config,
    )
    from fieldcheck.jsoneval._stream import CHUNK_LINES, BatchReader, Failed, Item
    from fieldcheck.jsoneval._system import SYSTEM
    from fieldcheck.metrics import RqsWeights, Strategy

__getattr__, __dir__, __all__ = typed_lazy_names(globals())

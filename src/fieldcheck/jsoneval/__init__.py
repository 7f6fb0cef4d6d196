"""JSON evaluation (json-evaluation.md): score a model's JSON output against ground truth.

``evaluate(output, ground_truth, config)`` scores one output; ``evaluate_batch`` scores many with
every distinct FUZZY/SEMANTIC pair matched once; ``read_batch``/``write_batch_outputs`` handle files.
"""

from fieldcheck.jsoneval._config import (
    EvalConfig,
    MatcherFamily,
    SafetyCheck,
    StrategyConfig,
    load_strategies,
    parse_strategies,
    parse_weights,
)
from fieldcheck.jsoneval._evaluate import (
    MatcherError,
    build_matchers,
    coerce_output,
    evaluate,
    evaluate_batch,
    make_signature,
    summarize,
)
from fieldcheck.jsoneval._io import (
    FIELDS_CSV_COLUMNS,
    read_batch,
    record_error,
    write_batch_outputs,
)
from fieldcheck.jsoneval._models import (
    MAX_DEPTH,
    PUBLIC_KEYS,
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
from fieldcheck.jsoneval._safety import LeakKind, SafetyFinding, find_leaks
from fieldcheck.metrics._json_fields import RqsWeights, Strategy

__all__ = [
    "FIELDS_CSV_COLUMNS",
    "MAX_DEPTH",
    "PUBLIC_KEYS",
    "BatchRecord",
    "BatchResult",
    "BatchSummary",
    "EvalConfig",
    "FieldResult",
    "FieldSummary",
    "JsonEvalResult",
    "LeakKind",
    "MatcherError",
    "MatcherFamily",
    "OutputKind",
    "RecordError",
    "RecordResult",
    "RqsWeights",
    "SafetyCheck",
    "SafetyFinding",
    "Strategy",
    "StrategyConfig",
    "build_matchers",
    "coerce_output",
    "evaluate",
    "evaluate_batch",
    "find_leaks",
    "load_strategies",
    "make_signature",
    "parse_strategies",
    "parse_weights",
    "read_batch",
    "record_error",
    "summarize",
    "write_batch_outputs",
]

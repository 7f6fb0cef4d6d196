"""Pure metric functions, one private module per spec area, each named as its spec names it;
imported on first use, so a process that needs one spec area loads that module alone."""

from typing import TYPE_CHECKING

from fieldcheck._util.lazy import typed_lazy_names

if TYPE_CHECKING:  # the names as type checkers and editors see them
    # Shared statistics on numpy arrays: P/R/F1, bootstrap intervals, paired tests.
    from fieldcheck.metrics._arrays import (
        MeansBootstrap,
        PairedTest,
        RowClasses,
        bootstrap_classes_ci,
        bootstrap_groups_ci,
        f1,
        f1_from_pr,
        paired_bootstrap_classes_pvalue,
        paired_bootstrap_test,
        precision,
        ratio_array,
        recall,
        safe_div,
        safe_div_array,
    )

    # A model's cost in USD at per-1M-token prices (numeric's statistics, the runner, the store).
    from fieldcheck.metrics._cost import cost_usd

    # JSON evaluation (json-evaluation.md): null rule, key buckets, completeness, hallucination,
    # accuracy, RQS.
    from fieldcheck.metrics._json_fields import (
        BUCKET_NAMES,
        STRATEGIES,
        BucketName,
        KeyBuckets,
        RqsWeights,
        Strategy,
        ValueType,
        accuracy,
        auto_strategy,
        canonical_text,
        classify_keys,
        completeness,
        config_paths,
        configured_strategy,
        detect_value_type,
        exact_match,
        flatten,
        flatten_pair,
        hallucination,
        is_date_text,
        is_email_text,
        is_identifier_text,
        is_null,
        resolve_strategy,
        rqs,
        wildcard_path,
    )

    # Numbers (numeric-qa-evaluation.md): answer parsing, the five match types, failure modes.
    from fieldcheck.metrics._numbers import (
        ABSOLUTE_TOLERANCE,
        RELATIVE_TOLERANCE,
        UNIT_FACTORS,
        AnswerMatches,
        FailureMode,
        ParsedAnswer,
        failure_mode,
        general_match,
        match_answer,
        numerical_match,
        parse_answer,
        sign_agnostic_match,
        soft_match,
        unit_agnostic_match,
    )

    # Programs (numeric-qa-evaluation.md): parse and execute, logic recall/precision/order.
    from fieldcheck.metrics._programs import (
        MAX_PROGRAM_CHARS,
        OPERATION_ALIASES,
        OPERATIONS,
        TABLE_OPERATIONS,
        ConstArg,
        NumberArg,
        Program,
        ProgramExecutionError,
        ProgramParseError,
        RefArg,
        RowArg,
        Step,
        cell_number,
        execute_program,
        logic_order_score,
        logic_precision,
        logic_recall,
        logic_scores,
        longest_common_subsequence,
        normalise_operation,
        parse_program,
        plan_operations,
        program_from_plan,
        program_operations,
        table_entry,
    )

    # Slots (slot-extraction-benchmark.md): TP/FP/FN, exact match, extras, per topic.
    from fieldcheck.metrics._slots import (
        SESSION_FIELDS,
        SLOT_STATISTICS,
        SlotKey,
        TopicTally,
        canonical_set,
        forget_slots,
        pooled,
        score_session,
        score_slot,
        slot_exact_match,
        slot_score_of,
        slot_values,
        token_f1,
        token_precision,
        token_recall,
        value_count,
    )

    # Shared statistics without numpy: latency, exact sums, what an interval is.
    from fieldcheck.metrics._stats import (
        ExactSum,
        Interval,
        LatencyStats,
        TotalsGroup,
        TotalsStatistic,
        latency_stats,
        median,
        p95_nearest_rank,
    )

    # Text and tokens (slot-extraction-benchmark.md): canonicalize, token overlap, BLEU-1.
    from fieldcheck.metrics._text import (
        CANONICALIZE_VERSION,
        NON_ASCII_RE,
        PUNCT_RE,
        TokenOverlap,
        bleu1_score,
        canonicalize,
        token_overlap,
        tokenize,
        tokenize_values,
    )

__getattr__, __dir__, __all__ = typed_lazy_names(globals())

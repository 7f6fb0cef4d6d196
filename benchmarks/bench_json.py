"""JSON evaluation: ``evaluate_batch`` (every distinct FUZZY/SEMANTIC pair matched once per batch)
against scoring the same records one by one with ``evaluate`` (the matcher called per record)."""

from __future__ import annotations

from benchmarks._harness import Comparison, measure
from fieldcheck.jsoneval import BatchRecord, EvalConfig, evaluate, evaluate_batch
from fieldcheck.jsoneval._example import STRATEGIES, generate_records
from fieldcheck.matchers import FuzzyMatcher, Matcher, SemanticMatcher
from fieldcheck.matchers._semantic import load_model


def run() -> list[Comparison]:
    n = 600
    raw = generate_records(n, seed=11)
    records = [BatchRecord.model_validate(r) for r in raw]
    config = EvalConfig(strategies=STRATEGIES, flatten=True)
    load_model()  # model load is start-up, not throughput

    def fresh() -> dict[str, Matcher]:
        # no disk cache: every run pays for its own encoding
        return {"FUZZY": FuzzyMatcher(), "SEMANTIC": SemanticMatcher(cache=None)}

    def batched() -> None:
        evaluate_batch(records, config, matchers=fresh())

    def one_by_one() -> None:
        matchers = fresh()
        for r in records:
            evaluate(
                r.output, r.ground_truth, config, matchers=matchers, safety_score=r.safety_score
            )

    return [
        Comparison(
            "json evaluate_batch, local matchers, --flatten",
            "records",
            measure(batched, n, repeat=2),
            measure(one_by_one, n, repeat=1),
            "evaluate() record by record",
        )
    ]

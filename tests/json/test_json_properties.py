"""Hypothesis: bounds, identity, and agreement with a slow literal reference of the spec's pseudocode."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fieldcheck.jsoneval import EvalConfig, RqsWeights, evaluate
from fieldcheck.matchers import FuzzyMatcher, fuzzy_similarity

MATCHERS = {"FUZZY": FuzzyMatcher(), "SEMANTIC": FuzzyMatcher()}  # deterministic and cheap
KEYS = st.sampled_from(["a", "b", "c", "d", "e", "f"])
# Letters and spaces only: never a number, date or email; and never capitals alone ("AB"),
# which auto-detection reads as a code (an identifier, EXACT: issue 9). So it gives SEMANTIC.
TEXT = st.text(alphabet="abcAB xy", max_size=6).filter(
    lambda s: re.fullmatch(r"\s*[AB]{2,}\s*", s) is None
)
FLOATS = st.floats(allow_nan=False, allow_infinity=False, width=32).filter(
    lambda f: not f.is_integer()
)
SCALARS = st.one_of(st.none(), TEXT, st.integers(-3, 3), FLOATS, st.booleans())
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)),
    max_leaves=6,
)
OBJECTS = st.dictionaries(KEYS, VALUES, max_size=6)
STRATEGY_MAPS = st.dictionaries(
    KEYS, st.sampled_from(["EXACT", "FUZZY", "SEMANTIC", "IGNORE"]), max_size=3
)
UNIT = st.floats(0, 1)
WEIGHTS = st.builds(RqsWeights, accuracy=UNIT, completeness=UNIT, hallucination=UNIT, safety=UNIT)


def reference(
    gt: dict[str, Any],
    aio: dict[str, Any],
    field_strategies: dict[str, str],
    fuzzy_threshold: float,
    semantic_threshold: float,
    w: RqsWeights,
    safety_score: float,
) -> dict[str, Any]:
    """The spec's phases written out literally, slowly, with no shared code."""

    def is_null(value: Any) -> bool:
        if value is None:
            return True
        if isinstance(value, str) and value.strip() == "":  # noqa: SIM103 - the spec's code, verbatim
            return True
        return False

    def text(value: Any) -> str:
        if isinstance(value, dict | list):
            return json.dumps(value, sort_keys=True)
        return str(value)

    def compact(value: Any) -> str:
        if isinstance(value, str):
            return value
        return json.dumps(value, sort_keys=True, separators=(",", ":"))

    gt_keys, aio_keys = set(gt.keys()), set(aio.keys())
    extra_keys = [k for k in aio_keys if k not in gt_keys]
    gt_null_aio_has_value = [
        k for k in gt_keys if is_null(gt[k]) and k in aio_keys and not is_null(aio[k])
    ]
    gt_non_null = [k for k in gt_keys if not is_null(gt[k])]
    aio_missing_or_null = [k for k in gt_non_null if k not in aio_keys or is_null(aio[k])]
    both_non_null = [
        k for k in gt_keys if k in aio_keys and not is_null(gt[k]) and not is_null(aio[k])
    ]

    gt_non_null_count = len(gt_non_null)
    aio_matched_non_null_count = len(both_non_null)
    completeness = 1.0 if gt_non_null_count == 0 else aio_matched_non_null_count / gt_non_null_count

    total_distinct = len(gt_keys | aio_keys)
    hallucination_count = len(extra_keys) + len(gt_null_aio_has_value)
    hallucination = 0.0 if total_distinct == 0 else hallucination_count / total_distinct

    ignored = []
    total_acc_score = 0.0
    for k in both_non_null:
        strategy = field_strategies.get(k)
        if strategy is None:
            strategy = "SEMANTIC" if isinstance(gt[k], str) else "EXACT"
        if strategy == "IGNORE":
            ignored.append(k)
        elif strategy == "EXACT":
            total_acc_score += 1.0 if text(gt[k]).lower() == text(aio[k]).lower() else 0.0
        else:
            threshold = fuzzy_threshold if strategy == "FUZZY" else semantic_threshold
            total_acc_score += (
                1.0 if fuzzy_similarity(compact(aio[k]), compact(gt[k])) >= threshold else 0.0
            )
    scorable_count = len(both_non_null) - len(ignored)
    accuracy = 1.0 if scorable_count == 0 else total_acc_score / scorable_count

    rqs = (
        (w.accuracy * accuracy)
        + (w.completeness * completeness)
        + (w.safety * safety_score)
        - (w.hallucination * hallucination)
    )
    rqs = max(0.0, min(1.0, rqs))
    return {
        "completeness": completeness,
        "hallucination": hallucination,
        "accuracy": accuracy,
        "rqs": rqs,
        "buckets": {
            "extra_keys": sorted(extra_keys),
            "gt_null_aio_has_value": sorted(gt_null_aio_has_value),
            "gt_non_null": sorted(gt_non_null),
            "aio_missing_or_null": sorted(aio_missing_or_null),
            "both_non_null": sorted(both_non_null),
        },
    }


@settings(max_examples=200, deadline=None)
@given(
    gt=OBJECTS,
    aio=OBJECTS,
    field_strategies=STRATEGY_MAPS,
    fuzzy_threshold=UNIT,
    semantic_threshold=UNIT,
    weights=WEIGHTS,
    safety_score=UNIT,
)
def test_agrees_with_literal_reference(
    gt: dict[str, Any],
    aio: dict[str, Any],
    field_strategies: dict[str, Any],
    fuzzy_threshold: float,
    semantic_threshold: float,
    weights: RqsWeights,
    safety_score: float,
) -> None:
    cfg = EvalConfig(
        strategies=field_strategies,
        fuzzy_threshold=fuzzy_threshold,
        semantic_threshold=semantic_threshold,
        weights=weights,
    )
    got = evaluate(aio, gt, cfg, safety_score=safety_score, matchers=MATCHERS)
    want = reference(
        gt, aio, field_strategies, fuzzy_threshold, semantic_threshold, weights, safety_score
    )
    assert got.buckets == want["buckets"]
    for name in ("completeness", "hallucination", "accuracy", "rqs"):
        assert math.isclose(getattr(got, name), want[name], abs_tol=1e-12), name


@settings(max_examples=200, deadline=None)
@given(
    gt=OBJECTS,
    output=st.one_of(OBJECTS, VALUES, st.text(max_size=20)),
    weights=WEIGHTS,
    safety_score=UNIT,
    flatten=st.booleans(),
)
def test_every_score_in_unit_interval(
    gt: dict[str, Any], output: Any, weights: RqsWeights, safety_score: float, flatten: bool
) -> None:
    r = evaluate(
        output,
        gt,
        EvalConfig(weights=weights, flatten=flatten),
        safety_score=safety_score,
        matchers=MATCHERS,
    )
    for name in ("completeness", "hallucination", "accuracy", "safety_score", "rqs"):
        assert 0.0 <= getattr(r, name) <= 1.0, name
    for field in r.fields.values():
        assert field.score in (None, 0.0, 1.0)


NON_NULL = st.recursive(
    st.one_of(
        st.text(alphabet="abcAB xy", min_size=1).filter(str.strip),
        st.integers(),
        FLOATS,
        st.booleans(),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None)
@given(gt=st.dictionaries(KEYS, NON_NULL, max_size=6), flatten=st.booleans(), thresholds=UNIT)
def test_identical_output_is_perfect(gt: dict[str, Any], flatten: bool, thresholds: float) -> None:
    cfg = EvalConfig(flatten=flatten, fuzzy_threshold=thresholds, semantic_threshold=thresholds)
    r = evaluate(json.loads(json.dumps(gt)), gt, cfg, matchers=MATCHERS)
    assert (r.completeness, r.hallucination, r.accuracy) == (1.0, 0.0, 1.0)


# EXACT/IGNORE values a file may hold (no integral float: the reference's str() writes 1.0);
# few of them, so that records share outcomes and the kernel shares their results
KERNEL_VALUES = st.sampled_from(
    [None, "", " ", 1, 2, 1.5, True, False, [1], {"a": 1}, "x", "X", "y", "1.5"]
)
KERNEL_OBJECTS = st.dictionaries(KEYS, KERNEL_VALUES, max_size=6)
KERNEL_RECORDS = KERNEL_OBJECTS.flatmap(
    lambda gt: st.tuples(
        st.just(gt),
        st.one_of(st.just(dict(gt)), KERNEL_OBJECTS),  # a copy: the columnar kernel
        st.sampled_from([None, 0.0, 0.5]),
    )
)


@settings(max_examples=150, deadline=None)
@given(
    records=st.lists(KERNEL_RECORDS, min_size=1, max_size=40),
    configured=st.lists(st.sampled_from(["EXACT", "IGNORE"]), min_size=6, max_size=6),
)
def test_a_chunk_through_the_exact_ignore_kernel_agrees_with_the_literal_reference(
    records: list[tuple[dict[str, Any], dict[str, Any], float | None]], configured: list[str]
) -> None:
    # ``json batch``'s kernel scores the first record of each outcome and shares its result
    # with the others: every record still gets the reference's numbers and buckets
    from fieldcheck.jsoneval._stream import Item, Scorer

    field_strategies = dict(zip("abcdef", configured, strict=True))
    cfg = EvalConfig(strategies=field_strategies)
    scorer = Scorer(cfg, MATCHERS)
    items = [Item(i, i, i, gt, aio, s, True) for i, (gt, aio, s) in enumerate(records)]
    scored, failed, _, _ = scorer.score(items)
    assert failed == [] and [r.index for r in scored] == list(range(len(records)))
    for r, (gt, aio, s) in zip(scored, records, strict=True):
        safety = 1.0 if s is None else s
        want = reference(gt, aio, field_strategies, 0.85, 0.85, RqsWeights(), safety)
        assert r.buckets.as_dict() == want["buckets"]
        got = dict(
            zip(
                ("completeness", "hallucination", "accuracy", "safety_score", "rqs"),
                r.scores,
                strict=True,
            )
        )
        assert got["safety_score"] == safety
        for name in ("completeness", "hallucination", "accuracy", "rqs"):
            assert math.isclose(got[name], want[name], abs_tol=1e-12), name

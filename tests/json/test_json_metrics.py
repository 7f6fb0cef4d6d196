"""Pure JSON-evaluation metrics (json-evaluation.md phases 0-4): every formula and edge case."""

from __future__ import annotations

import math

import pytest

from fieldcheck.metrics import (
    RqsWeights,
    accuracy,
    auto_strategy,
    canonical_text,
    classify_keys,
    completeness,
    configured_strategy,
    detect_value_type,
    exact_match,
    flatten,
    flatten_pair,
    hallucination,
    is_date_text,
    is_email_text,
    is_null,
    resolve_strategy,
    rqs,
    wildcard_path,
)

WALK_GT = {
    "name": "John Smith",
    "email": "john@example.com",
    "bio": "Senior engineer with 10 years of experience...",
    "internal_id": None,
    "status": "active",
}
WALK_AIO = {
    "name": "John Smyth",
    "email": "john@example.com",
    "bio": "Experienced senior engineer, 10+ years...",
    "internal_id": "abc123",
    "extra_field": "surprise",
}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, True),
        ("", True),
        ("   ", True),
        ("\t\n", True),
        ("a", False),
        (" a ", False),
        (0, False),
        (False, False),
        ([], False),  # spec's is_null: only None and blank strings
        ({}, False),
    ],
)
def test_is_null(value: object, expected: bool) -> None:
    assert is_null(value) is expected


def test_walkthrough_buckets() -> None:
    b = classify_keys(WALK_AIO, WALK_GT)
    assert b.gt_non_null == ["bio", "email", "name", "status"]
    assert b.both_non_null == ["bio", "email", "name"]
    assert b.aio_missing_or_null == ["status"]
    assert b.extra_keys == ["extra_field"]
    assert b.gt_null_aio_has_value == ["internal_id"]
    assert b.total_distinct == 6
    assert b.hallucination_count == 2


def test_walkthrough_scores_from_counts() -> None:
    b = classify_keys(WALK_AIO, WALK_GT)
    comp = completeness(len(b.both_non_null), len(b.gt_non_null))
    hall = hallucination(b.hallucination_count, b.total_distinct)
    assert comp == 0.75  # 3 / 4
    assert math.isclose(hall, 2 / 6)
    # 0.45*1 + 0.25*0.75 + 0.15*1 - 0.15*(2/6) = 0.45 + 0.1875 + 0.15 - 0.05
    value = rqs(accuracy=1.0, completeness=comp, hallucination=hall, safety_score=1.0)
    assert value == 0.7375


# Each line of the spec's "Edge Cases Handled", as (gt, aio, expected non-empty buckets).
EDGE_CASES = [
    ("gt null, not in aio -> skipped", {"k": None}, {}, {}),
    ("gt null, aio null -> skipped", {"k": None}, {"k": None}, {}),
    ("gt blank, aio blank -> skipped", {"k": " "}, {"k": ""}, {}),
    (
        "gt null, aio value -> hallucination",
        {"k": None},
        {"k": "v"},
        {"gt_null_aio_has_value": ["k"]},
    ),
    ("not in gt, in aio -> extra_keys", {}, {"k": "v"}, {"extra_keys": ["k"]}),
    (
        "gt value, not in aio -> completeness loss",
        {"k": "v"},
        {},
        {"gt_non_null": ["k"], "aio_missing_or_null": ["k"]},
    ),
    (
        "gt value, aio null -> completeness loss",
        {"k": "v"},
        {"k": None},
        {"gt_non_null": ["k"], "aio_missing_or_null": ["k"]},
    ),
    (
        "gt value, aio blank -> completeness loss",
        {"k": "v"},
        {"k": "  "},
        {"gt_non_null": ["k"], "aio_missing_or_null": ["k"]},
    ),
]


@pytest.mark.parametrize(
    ("case", "gt", "aio", "expected"), EDGE_CASES, ids=[c[0] for c in EDGE_CASES]
)
def test_edge_cases(
    case: str, gt: dict[str, object], aio: dict[str, object], expected: dict[str, list[str]]
) -> None:
    buckets = classify_keys(aio, gt).as_dict()
    for name, keys in buckets.items():
        assert keys == expected.get(name, []), (case, name)


def test_skipped_keys_still_count_in_the_hallucination_denominator() -> None:
    # gt null & absent in aio is "skipped" but is still one of the distinct keys (spec Phase 2).
    b = classify_keys({"a": "x", "b": "y"}, {"a": "x", "c": None})
    assert b.total_distinct == 3
    assert hallucination(b.hallucination_count, b.total_distinct) == 1 / 3  # only "b" is extra


def test_extra_key_with_null_value_is_still_extra() -> None:
    # The spec's extra_keys condition has no null test: "Key in AIO but not in GT".
    assert classify_keys({"k": None}, {}).extra_keys == ["k"]


def test_empty_inputs() -> None:
    b = classify_keys({}, {})
    assert b.total_distinct == 0
    assert completeness(0, 0) == 1.0  # nothing expected -> fully complete
    assert hallucination(0, 0) == 0.0
    assert accuracy(0.0, 0) == 1.0  # nothing to score -> perfect


def test_formulas() -> None:
    assert completeness(49, 50) == 0.98  # the spec's example
    assert hallucination(1, 4) == 0.25
    assert accuracy(2.0, 3) == 2 / 3


def test_rqs_clamps_at_zero_and_one() -> None:
    heavy = RqsWeights(accuracy=1.0, completeness=1.0, hallucination=0.0, safety=1.0)
    # 1 + 1 + 1 = 3 -> clamped to 1
    assert rqs(accuracy=1, completeness=1, hallucination=0, safety_score=1, weights=heavy) == 1.0
    punishing = RqsWeights(accuracy=0.1, completeness=0.1, hallucination=2.0, safety=0.0)
    # 0.1 + 0.1 - 2 * 0.5 = -0.8 -> clamped to 0
    assert (
        rqs(accuracy=1, completeness=1, hallucination=0.5, safety_score=1, weights=punishing) == 0.0
    )
    # inside the range nothing is clamped: 0.45*0.5 + 0.25*0.5 + 0.15*0.5 - 0.15*0.5 = 0.35
    assert math.isclose(
        rqs(accuracy=0.5, completeness=0.5, hallucination=0.5, safety_score=0.5), 0.35
    )


def test_rqs_weights_must_be_non_negative() -> None:
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        RqsWeights(accuracy=-0.1)


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (True, "boolean"),
        (0, "number"),
        (2.5, "number"),
        ("42", "number"),
        ("-3.5", "number"),
        ("1,200.50", "number"),
        ("$99", "number"),
        ("12%", "number"),
        ("e5", "identifier"),  # one token with a digit (issue 9)
        ("2024-03-05", "date"),
        ("2024-03-05T14:30:00Z", "date"),
        ("2024-03-05 14:30", "date"),
        ("2024-03-05T14:30:00.123+01:00", "date"),
        ("2024/03/05", "date"),
        ("05/03/2024", "date"),
        ("12-31-2024", "date"),
        ("31.12.2024", "date"),
        ("5 March 2024", "date"),
        ("March 5, 2024", "date"),
        ("Sept 5 2024", "date"),
        ("March 2024", "date"),  # a month (a new user's finding: SEMANTIC gave April 0.89)
        ("Sept. 2024", "date"),
        ("Marching 2024", "text"),
        ("1.2 kg", "number"),  # a quantity: SEMANTIC gave 2.1 kg 0.97
        ("30 days", "number"),
        ("Net 30", "text"),
        ("1.2 kg each", "text"),
        ("2024-02-30", "identifier"),  # not in the calendar: not a date, an id-like token
        ("2024-13-01", "identifier"),
        ("13/13/2024", "identifier"),
        ("next 2024-02-30", "text"),  # two tokens: not an identifier
        ("next Tuesday", "text"),
        ("john@example.com", "email"),
        (" j.o+tag@mail.example.co.uk ", "email"),
        ("John <john@example.com>", "text"),
        ("john@localhost", "text"),
        ("john@@example.com", "text"),
        ([1], "array"),
        ({"a": 1}, "object"),
        ("John Smith", "text"),
        (None, "null"),
    ],
)
def test_detect_value_type(value: object, kind: str) -> None:
    assert detect_value_type(value) == kind


def test_date_and_email_helpers() -> None:
    assert is_date_text("2024-02-29") and not is_date_text("2023-02-29")
    assert is_email_text("a@b.io") and not is_email_text("a@b")


def test_auto_strategy_and_config_resolution() -> None:
    assert auto_strategy("john@example.com") == "EXACT"
    assert auto_strategy("Senior engineer") == "SEMANTIC"
    assert auto_strategy({"a": "text"}) == "EXACT"
    assert resolve_strategy("name", "John", strategies={"name": "FUZZY"}) == "FUZZY"
    assert resolve_strategy("email", "john@example.com", strategies={"name": "FUZZY"}) == "EXACT"
    # a path strategy with [*] covers every index; an exact path wins over it
    strategies = {"items[*].sku": "FUZZY", "items[1].sku": "IGNORE"}
    assert resolve_strategy("items[0].sku", "A-1", strategies=strategies) == "FUZZY"
    assert resolve_strategy("items[1].sku", "A-1", strategies=strategies) == "IGNORE"
    # the config's step alone: None when the config names neither the path nor its [*] form
    assert configured_strategy("items[0].sku", strategies) == "FUZZY"
    assert configured_strategy("items[0].name", strategies) is None
    assert wildcard_path("a[10].b[2]") == "a[*].b[*]"


@pytest.mark.parametrize(
    ("aio", "gt", "same"),
    [
        (1, 1.0, True),  # one JSON number: decision "1 vs 1.0"
        (1e20, 10**20, True),
        (1.5, 1.50, True),
        (1.5, 1.51, False),
        ("true", True, True),  # the spec's str(gt).lower() == str(aio).lower()
        ("True", True, True),
        ("1", 1, True),
        ("1.0", 1, True),  # a JSON number literal facing a number is that number (issue 26)
        ("1.0", "1", False),  # two strings are text
        (False, 0, False),
        ("ABC", "abc", True),
        (" abc", "abc", False),  # no trimming
        ({"b": 1, "a": [1.0, "X"]}, {"a": [1, "x"], "b": 1.0}, True),  # JSON-sorted, lower-cased
        ([1, 2], [2, 1], False),  # order of arrays matters
        ({"a": True}, {"a": "true"}, False),  # inside JSON, true and "true" differ
    ],
)
def test_exact_match(aio: object, gt: object, same: bool) -> None:
    assert exact_match(aio, gt) is same


def test_canonical_text() -> None:
    assert canonical_text(2.0) == "2"
    assert canonical_text(True) == "true"
    assert canonical_text({"b": "É", "a": None}) == '{"a":null,"b":"É"}'


def test_flatten_paths() -> None:
    value = {
        "id": 1,
        "address": {"city": "Lyon", "geo": {"lat": 45.7}},
        "items": [{"sku": "A"}, {"sku": "B", "tags": ["x"]}],
        "empty": {},
        "none": None,
    }
    assert flatten(value) == {
        "id": 1,
        "address.city": "Lyon",
        "address.geo.lat": 45.7,
        "items[0].sku": "A",
        "items[1].sku": "B",
        "items[1].tags[0]": "x",
        "empty": {},
        "none": None,
    }
    assert flatten({}) == {}


def test_flatten_collision_warns_and_keeps_first(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="fieldcheck"):
        flat = flatten({"a.b": 1, "a": {"b": 2}})
    assert flat == {"a.b": 1}
    assert "occurs twice" in caplog.text


def test_flatten_pair_drops_null_parents() -> None:
    gt = {"address": {"city": "Lyon", "zip": "69002"}, "po": None}
    aio = {"address": None, "po": {"number": "PO-1"}}
    flat_aio, flat_gt = flatten_pair(aio, gt)
    # AIO's null address stands for the missing subtree: completeness loss, not an extra key
    assert flat_aio == {"po.number": "PO-1"}
    # GT's null po is replaced by AIO's invented sub-keys (extra keys)
    assert flat_gt == {"address.city": "Lyon", "address.zip": "69002"}
    b = classify_keys(flat_aio, flat_gt)
    assert b.aio_missing_or_null == ["address.city", "address.zip"]
    assert b.extra_keys == ["po.number"]

"""Slot counts per session (``score_session``, the scorer's own): the spec's worked examples, the
decisions, and properties against a naive reference."""

from __future__ import annotations

import math
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from slots_helpers import counts, naive_counts

from fieldcheck.metrics import (
    SESSION_FIELDS,
    TopicTally,
    bleu1_score,
    f1_from_pr,
    pooled,
    score_session,
    slot_exact_match,
    tokenize_values,
)


def _score(
    pred: dict,  # type: ignore[type-arg]
    gold: dict,  # type: ignore[type-arg]
    topics: dict[str, TopicTally] | None = None,
    **options: Any,
) -> SimpleNamespace:
    """One session through ``score_session`` (into ``topics`` when given): its counts. The row
    it returns (the bootstrap's) is checked against the counts it added."""
    mine: dict[str, TopicTally] = {}
    row = score_session(pred, gold, mine, **options)
    total = pooled(mine.values(), sessions=1)
    assert row == tuple(total[name] for name in SESSION_FIELDS)
    if topics is not None:
        for topic, tally in mine.items():
            topics.setdefault(topic, TopicTally()).absorb(tally)
    return SimpleNamespace(**total)


def _slots(
    n: int, topic: str = "basic_info", prefix: str = "f"
) -> dict[tuple[str, str], list[str]]:
    return {(topic, f"{prefix}{i}"): [f"value {i}"] for i in range(n)}


def test_spec_precision_example() -> None:
    # 10 predicted slots, 7 correct (TP), 3 not in the gold (FP): 7 / (7 + 3) = 0.70
    gold = _slots(7)
    pred = {**_slots(7), **_slots(3, prefix="x")}
    c = _score(pred, gold)
    assert (c.tp, c.fp, c.fn) == (7, 3, 0)
    assert c.precision == 0.70


def test_spec_recall_and_f1_example() -> None:
    # 15 gold slots, 12 found, 3 missed: 12 / 15 = 0.80
    c = _score(_slots(12), _slots(15))
    assert (c.tp, c.fn) == (12, 3) and c.recall == 0.80
    # P 0.70, R 0.80: F1 = 2 * 0.56 / 1.5 = 0.74666...
    assert round(f1_from_pr(0.70, 0.80), 3) == 0.747
    # the same through counts: 28 / (28 + 12) = 0.70, 28 / (28 + 7) = 0.80
    both = counts(tp=28, fp=12, fn=7)
    assert math.isclose(both.precision, 0.70) and math.isclose(both.recall, 0.80)
    assert math.isclose(both.f1, 2 * 0.70 * 0.80 / 1.5) and round(both.f1, 3) == 0.747


@pytest.mark.parametrize(
    ("pred", "gold", "expected"),
    [
        (["Software Engineer"], ["software engineer"], True),  # spec slot 1: match
        (["reading, hiking"], ["reading, swimming"], False),  # spec slot 2: no match
        (["25 years old"], ["25"], False),  # spec slot 3: no match
        (["hiking", "Reading"], ["reading", "hiking"], True),  # values compared as sets
        ([], [], False),  # no prediction never matches
    ],
)
def test_spec_exact_match_examples(pred: list[str], gold: list[str], expected: bool) -> None:
    assert slot_exact_match(pred, gold) is expected


def test_exact_match_rate_of_the_three_spec_slots() -> None:
    gold = {
        ("t", "job"): ["software engineer"],
        ("t", "hobby"): ["reading, swimming"],
        ("t", "age"): ["25"],
    }
    pred = {
        ("t", "job"): ["Software Engineer"],
        ("t", "hobby"): ["reading, hiking"],
        ("t", "age"): ["25 years old"],
    }
    c = _score(pred, gold)
    assert c.exact_match == 1 and c.gold_slots == 3
    assert math.isclose(c.exact_match_rate, 1 / 3)
    assert c.tp == 3  # presence: all three are found


def test_spec_extra_slots_example() -> None:
    # gold [name, age, hobby]; prediction adds career_goal (2 values) and dream_job (1 value)
    gold = {
        ("basic_info", "name"): ["Ann"],
        ("basic_info", "age"): ["30"],
        ("interests", "hobby"): ["chess"],
    }
    pred = {
        **gold,
        ("interests", "career_goal"): ["become a doctor", "help people"],
        ("interests", "dream_job"): ["surgeon"],
    }
    topics: dict[str, TopicTally] = {}
    c = _score(pred, gold, topics)
    assert (c.extra_slots, c.extra_values) == (2, 3)
    assert c.fp == 2 and c.tp == 3
    assert topics["interests"].metrics()["extra_slots"] == 2


def test_spec_token_example_through_a_session() -> None:
    gold = {("basic_info", "job"): ["software engineer at Google"]}
    pred = {("basic_info", "job"): ["senior software engineer at Microsoft"]}
    c = _score(pred, gold)
    assert c.token_precision == 0.60 and c.token_recall == 0.75


def test_missed_slot_adds_gold_tokens_and_extras_add_none() -> None:
    gold = {("t", "a"): ["one two"], ("t", "b"): ["three"]}
    pred = {("t", "a"): ["one two"], ("t", "zzz"): ["lots of extra words"]}
    c = _score(pred, gold)
    # matched 2, predicted 2 (extras do not enter), gold 3 (the missed slot adds its token)
    assert (c.token_matched, c.token_predicted, c.token_gold) == (2, 2, 3)
    assert c.bleu1 == pytest.approx((1.0 + 0.0) / 2)


def test_empty_prediction_values_are_a_miss_and_not_an_extra() -> None:
    gold = {("t", "a"): ["x"]}
    pred = {("t", "a"): [], ("t", "b"): []}
    c = _score(pred, gold)
    assert (c.tp, c.fp, c.fn, c.extra_slots) == (0, 0, 1, 0)


def test_blank_values_are_no_value() -> None:
    # issue: a TP needs "any non-empty value"; "" and "  " say nothing, in gold or prediction
    gold = {("t", "a"): ["x"], ("t", "b"): ["  "]}
    c = _score({("t", "a"): ["", " "], ("t", "c"): ["", "y", "\t"]}, gold)
    assert (c.gold_slots, c.tp, c.fp, c.fn) == (1, 0, 1, 1)
    assert (c.extra_slots, c.extra_values) == (1, 1)  # c is extra with its one real value
    assert not slot_exact_match([""], ["李明"])  # both canonicalise to nothing, yet no match
    assert _score({("t", "b"): ["z"]}, gold).extra_slots == 1


def test_gold_slot_without_values_is_not_a_gold_slot() -> None:
    # decision: a gold line with values [] says "nothing to extract"; predicting a value there
    # is a hallucination (FP, extra slot), predicting nothing is not a miss.
    gold = {("t", "a"): ["x"], ("t", "none"): []}
    assert _score({("t", "a"): ["x"]}, gold).fn == 0
    c = _score({("t", "a"): ["x"], ("t", "none"): ["made up"]}, gold)
    assert (c.gold_slots, c.tp, c.fp, c.fn, c.extra_slots, c.extra_values) == (1, 1, 1, 0, 1, 1)


def test_value_check_makes_a_wrong_slot_an_fp_and_an_fn() -> None:
    gold = {("t", "a"): ["x"], ("t", "b"): ["y"]}
    pred = {("t", "a"): ["x"], ("t", "b"): ["wrong"]}
    presence = _score(pred, gold)
    checked = _score(pred, gold, value_matches={("t", "a"): True, ("t", "b"): False})
    assert (presence.tp, presence.fp, presence.fn) == (2, 0, 0)
    assert (checked.tp, checked.fp, checked.fn) == (1, 1, 1)
    assert checked.extra_slots == 0  # a wrong value is not an extra slot


def test_judge_missed_slot_is_zero_and_unscored_is_left_out() -> None:
    gold = {("t", "a"): ["x"], ("t", "b"): ["y"], ("t", "c"): ["z"]}
    pred = {("t", "a"): ["x"], ("t", "b"): ["y"]}
    c = _score(pred, gold, judge_scores={("t", "a"): 0.9})
    # a: 0.9, b: predicted but unscored (left out), c: missed = 0  -> 0.9 / 2
    assert c.judge_missing == 1 and c.judge_count == 2
    assert c.llm_judge == pytest.approx(0.45)
    assert _score(pred, gold).llm_judge is None  # no judge: absent, not 0


def test_empty_session() -> None:
    c = _score({}, {})
    assert c.sessions == 1 and c.precision == 0.0 and c.recall == 0.0 and c.f1 == 0.0
    assert c.exact_match_rate == 0.0 and c.bleu1 == 0.0 and c.llm_judge is None


# ------------------------------------------------------------------ properties

TOPICS = ["basic_info", "interests", "mental_state"]
WORDS = st.sampled_from(["Alice", "chess", "tired", "hiking", "x", "Hiking!", ""])
values = st.lists(WORDS, max_size=3)
slot_maps = st.dictionaries(
    st.tuples(st.sampled_from(TOPICS), st.sampled_from(["a", "b", "c", "d"])), values, max_size=8
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(slot_maps, slot_maps), min_size=1, max_size=5),
    st.floats(min_value=0.0, max_value=1.0),
)
def test_counts_agree_with_naive_reference_and_stay_in_bounds(sessions: list, score: float) -> None:  # type: ignore[type-arg]
    # every predicted slot gets the judge score ``score``; every metric, the judge's too, is in [0, 1]
    topics: dict[str, TopicTally] = {}
    for p, g in sessions:
        _score(p, g, topics, judge_scores=dict.fromkeys(p, score))
    t = SimpleNamespace(**pooled(topics.values(), sessions=len(sessions)))
    expected = [sum(x) for x in zip(*(naive_counts(p, g) for p, g in sessions), strict=True)]
    assert [t.tp, t.fp, t.fn, t.extra_slots, t.extra_values] == expected
    for name in (
        "precision",
        "recall",
        "f1",
        "exact_match_rate",
        "token_precision",
        "token_recall",
        "token_f1",
        "bleu1",
    ):
        assert 0.0 <= getattr(t, name) <= 1.0
    judge = t.llm_judge
    assert judge is None if t.gold_slots == 0 else judge is not None and 0 <= judge <= score + 1e-12
    assert min(t.precision, t.recall) - 1e-12 <= t.f1 <= max(t.precision, t.recall) + 1e-12
    # per-topic counts sum to the totals
    for name in (
        "tp",
        "fp",
        "fn",
        "gold_slots",
        "exact_match",
        "token_matched",
        "token_predicted",
        "token_gold",
        "extra_slots",
        "extra_values",
    ):
        assert sum(c.metrics()[name] for c in topics.values()) == getattr(t, name)
    assert math.isclose(sum(c.metrics()["bleu1_sum"] for c in topics.values()), t.bleu1_sum)
    assert t.sessions == len(sessions)


@settings(max_examples=200, deadline=None)
@given(slot_maps, slot_maps)
def test_token_counts_agree_with_naive_reference(pred: dict, gold: dict) -> None:  # type: ignore[type-arg]
    c = _score(pred, gold)
    matched = predicted = gold_n = 0
    bleu = 0.0
    for key, g in gold.items():
        if not any(v.strip() for v in g):  # no non-blank value: not a gold slot
            continue
        gt, pt = tokenize_values(g), tokenize_values(pred.get(key) or [])
        matched += sum((Counter(gt) & Counter(pt)).values())
        predicted += len(pt)
        gold_n += len(gt)
        bleu += bleu1_score(pt, gt)
    assert (c.token_matched, c.token_predicted, c.token_gold) == (matched, predicted, gold_n)
    assert math.isclose(c.bleu1_sum, bleu)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.tuples(st.sampled_from(TOPICS), st.sampled_from("abcd")),
        st.lists(st.sampled_from(["a b", "b c", "d"]), min_size=1, max_size=3),
        max_size=6,
    ),
    st.data(),
)
def test_swapping_gold_and_prediction_swaps_token_precision_and_recall(
    gold: dict, data: st.DataObject
) -> None:  # type: ignore[type-arg]
    pred = {
        k: data.draw(st.lists(st.sampled_from(["a b", "b c", "d", "e"]), min_size=1, max_size=3))
        for k in gold
    }
    fwd = _score(pred, gold)
    bwd = _score(gold, pred)
    assert math.isclose(fwd.token_precision, bwd.token_recall)
    assert math.isclose(fwd.token_recall, bwd.token_precision)
    assert math.isclose(fwd.token_f1, bwd.token_f1)

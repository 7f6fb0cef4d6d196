"""The session-6 shortcuts of ``numeric score``'s hot path give what the full definitions give
(issue 10): ``parse_answer``'s simple-answer shortcut and its faster number pattern; and the one
derived-format reader (``_from_derived``, plain data) gives only conversations the models
accept, as they read them. Each on generated inputs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fieldcheck._util.errors import InputError
from fieldcheck.metrics import _numbers
from fieldcheck.metrics._numbers import ParsedAnswer, parse_answer
from fieldcheck.numeric._loaders import _from_derived, conversation_model, plain_conversation
from fieldcheck.numeric._scoring import gold_operations

# ---------------------------------------------------------------------------------------------
# answers

_ANSWER_CHARS = "0123456789.,-+()$%  eEmkb\u2212\u2013\u00a3\u0663\u00b2yesnotha\t"
_LOOKAHEAD = "(?=[\\s(\\-+\\u2212\\u2013$\\u20ac\\u00a3\\d.])"


# answers near the shortcut's edges: words (yes/no and scale letters among them), currencies,
# signs, commas grouped right and wrong, 400 digits, a percent or scale word, a bracket
_NEAR_SHORTCUT = (
    r"(?:(?:[Tt]he answer is|[Yy]es|[Nn][Oo]|[Yy]esterday|m|N|\u00e9|it is  ) ?)?[$\u20ac]?"
    r"[-\u2212\u2013+]?(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]{1,400}|[0-9]{1,4}(?:,[0-9]{1,4})+|"
    r"\u0663)?(?:\.[0-9]{0,6})?(?:%| %| m| million|\)|e3|,)?"
)


@settings(max_examples=3000, deadline=None)
@given(
    st.one_of(
        st.from_regex(r"-?(?:[0-9]{1,400}(?:\.[0-9]{1,6})?|\.[0-9]{1,6})", fullmatch=True),
        st.from_regex(_NEAR_SHORTCUT, fullmatch=True),
        st.text(_ANSWER_CHARS, max_size=30),
    )
)
def test_the_simple_answer_shortcut_gives_the_full_rules(text: str) -> None:
    # a leading space: the shortcut is skipped, the rules see the same cleaned text (repr: a
    # -0.0 is not a 0.0)
    assert repr(parse_answer(text)) == repr(parse_answer(" " + text))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3967.00", (3967.0, 3967.0, False, 1.0, 2, None, "number")),
        ("-5069.00", (-5069.0, -5069.0, False, 1.0, 2, None, "number")),
        ("-.5", (-0.5, -0.5, False, 1.0, 1, None, "number")),
        ("-0", (-0.0, -0.0, False, 1.0, 0, None, "number")),
        ("the answer is -1102.000", (-1102.0, -1102.0, False, 1.0, 3, None, "number")),
        ("$-9,999.9", (-9999.9, -9999.9, False, 1.0, 1, None, "number")),
        ("$1,234,567", (1234567.0, 1234567.0, False, 1.0, 0, None, "number")),
        ("999999.9%", (9999.999, 999999.9, True, 1.0, 1, None, "number")),
        ("$-0.00%", (-0.0, -0.0, True, 1.0, 2, None, "number")),
        ("yesterday it was 5", (5.0, 5.0, False, 1.0, 0, None, "number")),
    ],
)
def test_simple_answers_take_the_shortcut(text: str, expected: tuple[object, ...]) -> None:
    assert _numbers._SIMPLE_ANSWER.fullmatch(text)
    assert repr(parse_answer(text)) == repr(ParsedAnswer(*expected))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "value", "rule"),
    [
        ("yes 5", None, "yes_no"),  # the first word says yes: not the shortcut's number
        ("NO 5", None, "yes_no"),
        ("1,23", 23.0, "last_number"),  # not grouped by three: two numbers
        ("is 5 m", 5e6, "number"),
        ("5e3", 5000.0, "number"),
        ("the answer is  5", 5.0, "number"),
        ("\u0663.5", 3.5, "number"),  # an Arabic-Indic 3
    ],
)
def test_answers_near_the_shortcut_take_the_rules(text: str, value: float, rule: str) -> None:
    assert not _numbers._SIMPLE_ANSWER.fullmatch(text)
    parsed = parse_answer(text)
    assert parsed is not None and (parsed.value, parsed.rule) == (value, rule)


def test_the_shortcut_refuses_what_is_not_finite() -> None:
    for text in ("1" * 400, "the answer is -" + "9" * 400 + "%", "$" + "9" * 309):
        assert _numbers._SIMPLE_ANSWER.fullmatch(text)
        assert parse_answer(text) is None  # inf: no answer, as the full rules say
        assert parse_answer(" " + text) is None


@settings(max_examples=3000, deadline=None)
@given(st.text(_ANSWER_CHARS, max_size=40))
def test_the_number_pattern_lookahead_changes_no_match(text: str) -> None:
    assert _LOOKAHEAD in _numbers._NUMBER_TOKEN.pattern
    slow = re.compile(
        _numbers._NUMBER_TOKEN.pattern.replace(_LOOKAHEAD, ""), _numbers._NUMBER_TOKEN.flags
    )
    fast = [(m.span(), m.groupdict()) for m in _numbers._NUMBER_TOKEN.finditer(text)]
    assert fast == [(m.span(), m.groupdict()) for m in slow.finditer(text)]


@settings(max_examples=2000, deadline=None)
@given(st.text(_ANSWER_CHARS + "\u0661\u00bd\u2155x", max_size=12))
def test_has_digit_is_any_isdigit(text: str) -> None:
    assert _numbers._has_digit(text) == any(ch.isdigit() for ch in text)


# ---------------------------------------------------------------------------------------------
# conversations re-read as plain data

_HOSTILE = ["=cmd|' /C calc'!A0", "-1+2", "+3", "@x", "", "plain", "-9.7%", "<img src=x>", "\tx"]
_TEXT = st.one_of(st.sampled_from(_HOSTILE), st.text(max_size=4))
_CELL = st.one_of(
    st.integers(-5, 5),
    st.floats(-1e3, 1e3),
    st.sampled_from(["nm", "$ 10", "14%", "( 45 )", ""]),
)
_BAD_CELL = st.one_of(st.none(), st.booleans(), st.lists(st.integers(), max_size=1))
_PROGRAMS = st.sampled_from(["subtract(5, 3), divide(#0, 3)", "60.94", "sum(1, 2)", "add(1"])
_LIST_ITEM = st.one_of(_PROGRAMS, st.floats(-5, 5), st.integers(0, 3), st.booleans(), st.none())


@st.composite
def _record(draw: st.DrawFn) -> Any:
    n = draw(st.integers(0, 4))

    def rarely() -> bool:
        return draw(st.integers(0, 29)) == 0

    def per_turn(item: st.SearchStrategy[Any]) -> Any:
        if rarely():
            return draw(st.one_of(st.none(), st.text(max_size=1)))
        length = n + 1 if rarely() else n
        return draw(st.lists(item, min_size=length, max_size=length))

    box: dict[str, Any] = {"conv_questions": [f"q{i}?" for i in range(n)]}
    if rarely():
        box["conv_questions"] = draw(st.lists(st.one_of(st.text(max_size=2), st.integers())))
    for key, item in (
        ("conv_answers", st.one_of(st.text(max_size=3), st.floats(-5, 5), st.none())),
        ("turn_program", st.one_of(_PROGRAMS, st.none())),
        (
            "executed_answers",
            _LIST_ITEM if rarely() else st.one_of(st.floats(-5, 5), st.integers(-5, 5), _TEXT),
        ),
        ("qa_split", st.one_of(st.booleans(), st.none(), st.integers(0, 1))),
    ):
        if draw(st.booleans()):
            box[key] = per_turn(item)
    columns = draw(
        st.sampled_from(["2019", "2018", "a (1)", "a (2)", "b (3)"]).flatmap(
            lambda _: st.lists(
                st.sampled_from(["2019", "2018", "a (1)", "a (2)", "b (3)"]),
                unique=True,
                max_size=4,
            )
        )
    )
    cell = _BAD_CELL if rarely() else _CELL
    table = {
        c: draw(st.dictionaries(st.sampled_from(["rev", "cost"]), cell, max_size=2))
        for c in columns
    }
    record: dict[str, Any] = {
        "id": "" if rarely() else draw(st.sampled_from(["c1", "Double_x"])),
        "doc": {
            "pre_text": draw(st.one_of(st.text(max_size=3), st.lists(st.integers(), max_size=2))),
            "table": table,
        },
        "dialogue": box,
    }
    if draw(st.booleans()):
        record["doc"]["post_text"] = draw(st.one_of(st.none(), st.text(max_size=3)))
    if draw(st.booleans()):
        record["features"] = draw(
            st.one_of(
                st.dictionaries(
                    st.sampled_from(
                        [
                            "num_dialogue_turns",
                            "has_type2_question",
                            "has_non_numeric_values",
                            "has_duplicate_columns",
                            "other",
                        ]
                    ),
                    st.sampled_from([-1, "true", 1.0])
                    if rarely()
                    else st.one_of(st.booleans(), st.integers(0, 5)),
                ),
                st.lists(st.integers(), max_size=1),
                st.none(),
            )
        )
    if rarely():
        record = draw(st.sampled_from([[record], "x", {"id": "c2"}]))
    return record


@settings(max_examples=2000, deadline=None)
@given(_record())
def test_a_record_read_is_one_the_models_accept_as_read(record: Any) -> None:
    try:
        plain, _ = _from_derived(record, index=0, file=Path("d.json"))
    except InputError:
        return
    full = plain_conversation(conversation_model(plain, "dev", "derived"))
    assert full.id == plain.id
    assert [(t.index, t.question, t.answer, t.program, t.executed_answer, t.qa_split) for t in full.turns] == [tuple(t) for t in plain.turns]  # fmt: skip
    assert list(full.features.items()) == list(plain.features.items())
    assert full.document == plain.document


def _read(record: Any) -> Any:
    return _from_derived(record, index=0, file=Path("d.json"))


def test_a_derived_record_read_as_plain_data() -> None:
    record = {
        "id": "c1",
        "doc": {"pre_text": "p", "table": {"2019": {"rev": 5, "note": "nm"}}},
        "dialogue": {
            "conv_questions": ["a?", "b?"],
            "turn_program": ["5", "subtract(5, 3)"],
            "executed_answers": [5, 2.0],
            "qa_split": [False, True],
        },
        "features": {"has_duplicate_columns": True, "other": 1},
    }
    plain, warnings = _read(record)
    assert warnings == []
    assert plain.turns[0].executed_answer == 5.0
    assert plain.features == {
        "num_dialogue_turns": 2,
        "has_type2_question": True,
        "has_duplicate_columns": True,
        "has_non_numeric_values": True,
    }
    assert plain.document == {
        "pre_text": "p",
        "post_text": "",
        "table": {"rev": {"2019": 5.0}, "note": {"2019": "nm"}},
    }
    assert [gold_operations(t.program) for t in plain.turns] == [[], ["subtract"]]
    # a feature of another type: the model reads it ("true" is true) or refuses it
    lax, _ = _read(record | {"features": {"has_type2_question": "true"}})
    assert lax.features["has_type2_question"] is True
    with pytest.raises(InputError, match=r"features\.num_dialogue_turns"):
        _read(record | {"features": {"num_dialogue_turns": -1}})
    said, warnings = _read(record | {"features": {"num_dialogue_turns": 3}})
    assert said.features["num_dialogue_turns"] == 3
    assert [w.one_line() for w in warnings] == [
        "d.json: record c1: field 'features.num_dialogue_turns': says 3 turns but the dialogue has 2"
    ]
    bad = record | {"dialogue": {"conv_questions": ["a?"], "executed_answers": [True]}}
    with pytest.raises(InputError, match="answer is not a number or text"):
        _read(bad)
    with pytest.raises(InputError, match="cell is not a number or text"):
        _read(record | {"doc": {"table": {"2019": {"rev": None}}}})

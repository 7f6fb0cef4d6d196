"""The shortcuts of ``numeric score``'s hot path (issue 10) give what the full definitions give:
``program_operations`` the operations of ``parse_program`` (or its error), ``plain_values`` the
values of a validated ``Prediction`` (or ``None``: the line goes through pydantic); and
``metrics.match_answer`` (the five match functions and ``failure_mode``) is the naive spec
reference of tests/numeric/oracles.py. Each on generated inputs."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from tests.numeric.oracles import match_answer_reference

from fieldcheck.metrics import ParsedAnswer, match_answer, parse_answer
from fieldcheck.metrics._programs import ProgramParseError, parse_program, program_operations
from fieldcheck.numeric._loaders import PlainTurn
from fieldcheck.numeric._predictions import (
    Prediction,
    PredictionValues,
    plain_values,
    prediction_values,
)
from fieldcheck.numeric._scoring import gold_operations, turn_values
from fieldcheck.numeric._stream import (
    TEXT_COLUMNS,
    TURN_COLUMNS,
    numeric_columns,
    stored_cell,
    stored_row,
    turn_cells,
)

# ---------------------------------------------------------------------------------------------
# programs

_OPS = ["add", "subtract", "multiply", "divide", "exp", "greater", "table_sum", "Add", "sum"]
_ARGS = ["5", "-3.5", "13.4%", ".5", "5.", "1e3", "+2", "const_100", "const_m1", "const_x", "#0"]
_ARGS += ["#1", "#2", "#12", "x", "", " 7 ", "1" * 25, "12345678901234567890.5", "(3)"]
_SEPS = [", ", ",", " , ", ",  ", "; ", " "]


@st.composite
def _programs(draw: st.DrawFn) -> str:
    if draw(st.booleans()) and draw(st.booleans()):
        return draw(st.sampled_from(_ARGS)) + draw(st.sampled_from(["", " ", "%"]))
    steps = []
    for _ in range(draw(st.integers(1, 4))):
        args = draw(st.lists(st.sampled_from(_ARGS), min_size=1, max_size=3))
        sep = draw(st.sampled_from(_SEPS))
        steps.append(f"{draw(st.sampled_from(_OPS))}({sep.join(args)})")
    text = draw(st.sampled_from(_SEPS)).join(steps)
    return text + draw(st.sampled_from(["", "", " ", ")", ", "]))


def _full(text: str) -> tuple[str, ...] | str:
    try:
        return tuple(parse_program(text).operations)
    except ProgramParseError as exc:
        return str(exc)


def _fast(text: str) -> tuple[str, ...] | str:
    try:
        return program_operations(text)
    except ProgramParseError as exc:
        return str(exc)


@settings(max_examples=1500, deadline=None)
@given(_programs())
def test_program_operations_are_the_parsers(text: str) -> None:
    assert _fast(text) == _full(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("206588", ()),
        ("-3.5%", ()),
        ("const_1000", ()),
        ("subtract(206588, 181001), divide(#0, 181001)", ("subtract", "divide")),
        ("add(1,2),multiply(#0,const_100)", ("add", "multiply")),
        ("greater(5, 13.4%)", ("greater",)),
    ],
)
def test_program_operations_of_plain_programs(text: str, expected: tuple[str, ...]) -> None:
    assert program_operations(text) == expected


def test_program_operations_refuse_what_the_parser_refuses() -> None:
    with pytest.raises(ProgramParseError, match="#1 refers to step 1 but this is step 1"):
        program_operations("add(1, 2), add(#1, 3)")
    with pytest.raises(ProgramParseError, match="unknown operation 'sum'"):
        program_operations("sum(1, 2)")


# ---------------------------------------------------------------------------------------------
# the five match types

_TEXTS = ["14.1%", "0.141", "14.1", "-0.141", "$1,234.5", "(45)", "1.2 million", "yes", "No.", "5"]
_TEXTS += ["0.14", "14%", "the answer is 3.33", "2016 to 2017", "", "n/a", "1e309", "-.5"]


@st.composite
def _parsed(draw: st.DrawFn) -> ParsedAnswer | None:
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return parse_answer(draw(st.sampled_from(_TEXTS)))
    if kind == 1:
        return parse_answer(draw(st.floats(-1e6, 1e6)))
    if kind == 2:
        return None
    finite = st.floats(-1e4, 1e4)
    return ParsedAnswer(
        value=draw(st.one_of(st.none(), finite)),
        written=draw(st.one_of(st.none(), finite)),
        percent=draw(st.booleans()),
        scale=draw(st.sampled_from([1.0, 1e3, 1e6])),
        decimals=draw(st.integers(0, 4)),
        boolean=draw(st.one_of(st.none(), st.booleans())),
    )


_GOLDS = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(-1e4, 1e4),
    st.sampled_from([0.0, 0.141, 14.1, -0.141, 1234.5, 1.2e6, 45.0, float("inf")]),
    st.sampled_from(["yes", "no", "14.1%", "x", " True "]),
)


@settings(max_examples=2000, deadline=None)
@given(_parsed(), _GOLDS, st.booleans())
def test_match_answer_is_the_naive_spec_reference(
    parsed: ParsedAnswer | None, gold: Any, error: bool
) -> None:
    assert match_answer(parsed, gold, error=error) == match_answer_reference(
        parsed, gold, error=error
    )


def test_match_answer_of_hand_checked_answers() -> None:
    # 14.1 for 0.141: not numerical (|14.1 - 0.141| > 1%), x0.01 is (unit), percentage points
    # (general); failure mode scale
    assert match_answer(parse_answer("14.1"), 0.141) == (False, False, True, False, True, "scale")
    # -0.141: only |p| matches (sign)
    assert match_answer(parse_answer("-0.141"), 0.141) == (False, False, False, True, False, "sign")
    # 0.14 for 0.141: 0.71% off, so within 1%: numerical and soft
    assert match_answer(parse_answer("0.14"), 0.141) == (True, True, True, True, True, None)
    # 14.1% for 0.00141: x0.01 is unit-agnostic; a percent sign is never percentage points again
    scale_only = (False, False, True, False, False, "scale")
    assert match_answer(parse_answer("14.1%"), 0.00141) == scale_only
    assert match_answer(parse_answer("yes"), "no") == (False,) * 5 + ("wrong",)
    assert match_answer(None, 1.0) == (False,) * 5 + ("no_answer",)
    assert match_answer(parse_answer("1"), 1.0, error=True) == (False,) * 5 + ("error",)


# ---------------------------------------------------------------------------------------------
# prediction lines

_ANY = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2.0, 2.0), st.text(max_size=3)
)
_STEP = st.dictionaries(
    st.sampled_from(["tool", "operation", "args", "note"]),
    st.one_of(
        st.sampled_from(["extract", "compute", "lookup", "subtract"]),
        st.none(),
        st.lists(_ANY, max_size=2),
        _ANY,
    ),
)
_ENTRY = st.dictionaries(
    st.sampled_from(["check", "passed", "message", "detail"]),
    st.one_of(st.booleans(), st.text(max_size=3), st.none(), st.integers(0, 1)),
)


@st.composite
def _lines(draw: st.DrawFn) -> dict[str, Any]:
    line: dict[str, Any] = {
        "conversation_id": draw(st.sampled_from(["c1", "", 5, None])),
        "turn": draw(st.sampled_from([0, 3, -1, 1.0, True, "1"])),
    }
    optional: dict[str, st.SearchStrategy[Any]] = {
        "answer": st.one_of(_ANY, st.sampled_from(["14.1%", "yes"])),
        "plan": st.one_of(
            st.none(),
            st.fixed_dictionaries({"steps": st.lists(_STEP, max_size=3)}),
            st.fixed_dictionaries({"steps": _ANY, "why": _ANY}),
            _ANY,
        ),
        "input_tokens": st.one_of(st.integers(-1, 2_000_000_000), st.floats(0, 5), _ANY),
        "output_tokens": st.integers(0, 10),
        "tokens_estimated": st.one_of(st.booleans(), st.sampled_from([0, 1, "true"]), _ANY),
        "latency_s": st.one_of(st.floats(-1.0, 2e6), st.integers(0, 3), _ANY),
        "error": st.one_of(
            st.none(),
            st.fixed_dictionaries({"type": _ANY}, optional={"message": _ANY, "x": _ANY}),
            _ANY,
        ),
        "validation": st.one_of(st.lists(_ENTRY, max_size=2), _ANY),
        "extra": _ANY,
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            line[key] = draw(strategy)
    return line


@settings(max_examples=3000, deadline=None)
@given(_lines())
def test_plain_values_are_the_validated_predictions(line: dict[str, Any]) -> None:
    plain = plain_values(line)
    try:
        expected = prediction_values(Prediction.model_validate(line))
    except ValidationError:
        assert plain is None
        return
    if plain is not None:
        assert plain == expected
        # the same JSON, keys in the model's order (traces sort them anyway)
        assert [list(s) for s in (plain.plan or {}).get("steps", [])] == [
            list(s) for s in (expected.plan or {}).get("steps", [])
        ]


def test_a_plain_line_skips_pydantic_with_the_models_values() -> None:
    line = {
        "conversation_id": "c1",
        "turn": 2,
        "answer": "14.1%",
        "plan": {"steps": [{"tool": "compute", "operation": "divide", "args": [1, 2], "n": 1}]},
        "input_tokens": 812,
        "latency_s": 1.9,
        "error": {"type": "timeout"},
        "validation": [{"check": "units", "passed": False}],
    }
    expected = PredictionValues(
        answer="14.1%",
        plan={"steps": [{"tool": "compute", "operation": "divide", "args": [1, 2], "n": 1}]},
        input_tokens=812,
        output_tokens=0,
        latency_s=1.9,
        error_type="timeout",
        error_message="",
        validation=[{"check": "units", "passed": False, "message": ""}],
    )
    assert plain_values(line) == expected
    assert prediction_values(Prediction.model_validate(line)) == expected
    # an integer latency, a boolean answer: pydantic decides (2 -> 2.0, True -> "yes")
    assert plain_values(line | {"latency_s": 2}) is None
    assert plain_values(line | {"answer": True}) is None


# ---------------------------------------------------------------------------------------------
# stored cells


def _read_back(value: str) -> object:
    """A CSV cell read back, the long way: every text through float()."""
    if value == "":
        return None
    if value in ("True", "False"):
        return value == "True"
    try:
        number = float(value)
    except ValueError:
        return value
    return int(number) if number.is_integer() and "." not in value and "e" not in value else number


_CELLS = [chr(i) + tail for i in range(1, 128) for tail in ("", "5", "5.5", "nf", "an", "e3")]
_CELLS += ["True", "False", "true", "Yes", "\u0661\u0662", "\u20035", "-1e3", "1_000", " 7 "]


@pytest.mark.parametrize("cell", _CELLS)
def test_stored_cell_skips_float_only_for_text_it_refuses(cell: str) -> None:
    got, expected = stored_cell(cell), _read_back(cell)
    assert (type(got), got) == (type(expected), expected) or got != got  # NaN


_HOSTILE_TEXT = st.one_of(
    st.sampled_from(["", "0012", "1e5", "inf", "'=x", "=1+2", "-3", "\x1b[31m", "True", "no"]),
    st.text(max_size=4),
)


@settings(max_examples=1500, deadline=None)
@given(
    st.tuples(_HOSTILE_TEXT, _HOSTILE_TEXT),  # conversation id (not empty), question
    st.one_of(st.none(), st.floats(allow_nan=False), _HOSTILE_TEXT),  # gold
    st.one_of(st.none(), st.floats(-1e3, 1e3), _HOSTILE_TEXT),  # answer
    st.one_of(st.none(), _HOSTILE_TEXT, st.sampled_from(["timeout", "http_error"])),  # error
    st.one_of(st.none(), st.sampled_from(["subtract(5, 3)", "=add(1, 2)", "add(1"])),
    st.one_of(st.none(), st.booleans()),  # qa_split
    st.booleans(),
)
def test_a_store_item_is_its_turns_csv_row_read_back(
    texts: tuple[str, str],
    gold: float | str | None,
    answer: float | str | None,
    error: str | None,
    program: str | None,
    qa_split: bool | None,
    flag: bool,
) -> None:
    """``stored_row`` reads back only the cells that may be text: the item is still every cell
    of the turns.csv row read back (``stored_cell``), as ``runs import`` of the row stores it."""
    cid, question = "c" + texts[0], texts[1]
    turn = PlainTurn(1, question, None, program, gold, qa_split)
    plan = {"steps": [{"tool": "compute", "operation": "add", "args": [1, 2]}]}
    values = PredictionValues(answer, plan, 3, 4, 0.5, error, "m" if error else None, [])
    t = turn_values(cid, 1, turn, values, gold_operations(program))
    features = {"has_type2_question": flag, "has_non_numeric_values": not flag}
    cells = turn_cells(features, t)
    story = {"plan": t["plan"], "validation": []}
    item = {k: stored_cell(c, k in TEXT_COLUMNS) for k, c in zip(TURN_COLUMNS, cells, strict=True)}
    expected = numeric_columns(item), orjson.dumps(item | story, option=orjson.OPT_SORT_KEYS)
    assert stored_row(t, cells, story) == expected

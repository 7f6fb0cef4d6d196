"""Program parser, executor, operation normalisation and the logic scores."""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.numeric.programs import run_program

from fieldcheck.metrics import (
    ProgramExecutionError,
    ProgramParseError,
    execute_program,
    logic_order_score,
    logic_precision,
    logic_recall,
    longest_common_subsequence,
    normalise_operation,
    parse_program,
    plan_operations,
    table_entry,
)
from fieldcheck.metrics._programs import (
    OPERATION_ALIASES,
    ConstArg,
    NumberArg,
    RefArg,
    RowArg,
    cell_number,
    program_from_plan,
)

TABLE = {
    "net income": {"2009": 103102.0, "2008": "$ 104222", "2007": "-2913 ( 2913 )"},
    "revenue, net ( loss )": {"2009": 10.0, "2008": 20.0, "2007": "nm"},
}


def test_parse_typed_steps() -> None:
    program = parse_program("subtract(206588, 181001), divide(#0, 181001)")
    assert program.operations == ["subtract", "divide"]
    first, second = program.steps
    assert first.args == (
        NumberArg(value=206588.0, text="206588"),
        NumberArg(value=181001.0, text="181001"),
    )
    assert second.args[0] == RefArg(index=0)


def test_parse_argument_kinds() -> None:
    program = parse_program("divide(932, 13.4%), subtract(const_m1, .3), multiply(#1, const_1000)")
    pct = program.steps[0].args[1]
    assert isinstance(pct, NumberArg) and pct.percent and math.isclose(pct.value, 0.134)
    assert program.steps[1].args == (
        ConstArg(value=-1.0, text="const_m1"),
        NumberArg(value=0.3, text=".3"),
    )
    assert program.steps[2].args[1] == ConstArg(value=1000.0, text="const_1000")


def test_parse_extract_only() -> None:
    assert parse_program("60.94").value == NumberArg(value=60.94, text="60.94")
    assert parse_program("-3363").steps == ()
    assert math.isclose(run_program("13.4%"), 0.134)


def test_parse_table_operations_with_awkward_row_names() -> None:
    program = parse_program("table_sum(revenue, net ( loss ), none), divide(#0, const_2)")
    assert program.steps[0].args == (RowArg(name="revenue, net ( loss )"),)
    assert program.operations == ["table_sum", "divide"]
    # the row is found by its awkward name; its "nm" cell fails the operation, as upstream
    # (issue 9: a skipped text cell silently changed sums and averages)
    with pytest.raises(
        ProgramExecutionError,
        match=r"table row 'revenue, net \( loss \)' has a cell that is not a number: 'nm' "
        r"\(column '2007'\)",
    ):
        run_program("table_sum(revenue, net ( loss ), none), divide(#0, const_2)", table=TABLE)
    numbers_only = {"revenue, net ( loss )": {"2009": 10.0, "2008": 20.0}}
    text = "table_sum(revenue, net ( loss ), none), divide(#0, const_2)"
    assert run_program(text, table=numbers_only) == 15.0


@pytest.mark.parametrize(
    ("program", "expected"),
    [
        ("add(1, 2)", 3.0),
        ("subtract(5, 7.5)", -2.5),
        ("multiply(1.5, const_4)", 6.0),
        ("divide(1, 8)", 0.125),
        ("exp(2, 10)", 1024.0),
        ("greater(3, 2)", True),
        ("greater(2, 3)", False),
        ("table_max(net income, none)", 104222.0),
        ("table_min(net income, none)", -2913.0),
        ("table_sum(net income, none)", 204411.0),
        ("table_average(net income, none)", 68137.0),
        ("table_average(NET  Income, none)", 68137.0),
        ("add(1, 2), add(#0, 3), divide(#1, const_2)", 3.0),
    ],
)
def test_execute(program: str, expected: float | bool) -> None:
    result = run_program(program, table=TABLE)
    assert (
        result == expected if isinstance(expected, bool) else math.isclose(float(result), expected)
    )


@pytest.mark.parametrize(
    ("program", "reason"),
    [
        ("", "empty program"),
        ("subtract(1, 2", "missing ')'"),
        ("sqrt(4, 2)", "unknown operation 'sqrt'"),
        ("add(1)", "add takes 2 arguments, got 1"),
        ("add(1, 2, 3)", "add takes 2 arguments, got 3"),
        ("add(1, revenue)", "argument of add is not a number"),
        ("add(#0, 1)", "#0 refers to step 0 but this is step 0"),
        ("add(1, 2) divide(#0, 3)", "expected ',' between steps"),
        ("hello", "not a number or a step"),
        ("import os", "not a number or a step"),
        ("table_sum(, none)", "table_sum needs a table row name"),
        ("add(1, ), add(2, 3)", "empty argument of add"),
    ],
)
def test_parse_errors_are_typed(program: str, reason: str) -> None:
    with pytest.raises(ProgramParseError) as info:
        parse_program(program)
    assert reason in str(info.value)
    assert info.value.program == program


def test_table_entry_is_how_the_executor_finds_a_row() -> None:
    assert table_entry(TABLE, "Net  Income ") is TABLE["net income"]  # case and spacing
    assert table_entry(TABLE["net income"], "2008") == "$ 104222"
    assert table_entry(TABLE, "net incomes") is None
    assert run_program("table_max(NET income, none)", table=TABLE) == 104222.0


def test_execution_errors() -> None:
    with pytest.raises(ProgramExecutionError, match="division by zero"):
        run_program("divide(1, 0)")
    with pytest.raises(ProgramExecutionError, match="no table row named 'cash'"):
        run_program("table_max(cash, none)", table=TABLE)
    with pytest.raises(ProgramExecutionError, match="yes/no"):
        run_program("greater(2, 1), add(#0, 1)")
    with pytest.raises(ProgramExecutionError, match="no real value"):
        run_program("exp(-8, 0.5)")


def test_executor_never_evaluates_code() -> None:
    with pytest.raises(ProgramParseError):
        parse_program("__import__('os').system('true')")


@pytest.mark.parametrize(
    ("cell", "value"),
    [
        ("$ 103102", 103102.0),
        ("-2913 ( 2913 )", -2913.0),
        ("( 45 )", -45.0),
        ("14%", 14.0),
        ("nm", None),
        (2.5, 2.5),
        ("", None),
    ],
)
def test_cell_number(cell: str | float, value: float | None) -> None:
    assert cell_number(cell) == value


# --- logic recall and friends ----------------------------------------------------------------

GOLD = parse_program("subtract(8181, 20454), divide(#0, 20454)").operations


def test_spec_logic_recall_examples() -> None:
    assert GOLD == ["subtract", "divide"]
    assert logic_recall(["subtract", "divide"], GOLD) == 1.0  # 2/2
    assert logic_recall(["subtract"], GOLD) == 0.5  # 1/2


def test_extract_only_gold_follows_the_prose() -> None:
    assert logic_recall([], []) == 1.0
    assert logic_recall(["add"], []) == 0.0


def test_precision_and_order() -> None:
    assert logic_precision(["subtract", "divide", "multiply"], GOLD) == pytest.approx(2 / 3)
    assert logic_precision([], GOLD) == 0.0
    assert logic_precision([], []) == 1.0
    assert logic_order_score(["divide", "subtract"], GOLD) == 0.5  # LCS 1 / 2
    assert logic_order_score(["subtract", "divide"], GOLD) == 1.0
    assert logic_order_score(["subtract", "add", "divide"], GOLD) == pytest.approx(2 / 3)
    assert logic_recall(["divide", "subtract"], GOLD) == 1.0  # recall ignores order


@pytest.mark.parametrize(
    ("name", "normalised"),
    [
        ("Percentage Change", "divide"),
        ("percentage", "divide"),
        ("minus", "subtract"),
        ("difference", "subtract"),
        ("SUM", "add"),
        ("times", "multiply"),
        ("ratio", "divide"),
        ("power", "exp"),
        ("compare", "greater"),
        ("average", "table_average"),
        ("frobnicate", "frobnicate"),
    ],
)
def test_normalise_operation(name: str, normalised: str) -> None:
    assert normalise_operation(name) == normalised


@pytest.mark.parametrize("name", sorted(OPERATION_ALIASES))
def test_every_name_normalises_as_written_and_respelled(name: str) -> None:
    # a vocabulary name as written is looked up at once; respelled, through the spelling rules
    operation = OPERATION_ALIASES[name]
    assert normalise_operation(name) == operation
    assert normalise_operation(f" {name.upper().replace('_', ' - ')} ") == operation


def test_plan_operations() -> None:
    plan = {
        "steps": [
            {"tool": "extract", "value": 1},
            {"tool": "compute", "operation": "Minus", "args": []},
            {"tool": "compute", "operation": "percentage", "args": []},
            MappingProxyType({"tool": "compute", "operation": "pct_change"}),  # not a dict
            {"tool": "compute", "operation": 5},
        ]
    }
    assert plan_operations(plan) == ["subtract", "divide", "divide", ""]
    assert plan_operations(None) is None
    assert plan_operations({"steps": []}) == []


ops = st.lists(st.sampled_from(["add", "subtract", "multiply", "divide"]), max_size=6)


def _naive_lcs(a: list[str], b: list[str]) -> int:
    best = 0
    for k in range(min(len(a), len(b)), 0, -1):
        subsequences = set(itertools.combinations(b, k))
        if any(c in subsequences for c in itertools.combinations(a, k)):
            return k
    return best


@settings(max_examples=200, deadline=None)
@given(ops, ops)
def test_logic_scores_bounds_and_reference(plan: list[str], gold: list[str]) -> None:
    for score in (
        logic_recall(plan, gold),
        logic_precision(plan, gold),
        logic_order_score(plan, gold),
    ):
        assert 0.0 <= score <= 1.0
    shared = sum(min(Counter(plan)[o], Counter(gold)[o]) for o in set(gold))
    if gold:
        assert logic_recall(plan, gold) == shared / len(gold)
    assert longest_common_subsequence(plan, gold) == _naive_lcs(plan, gold)
    assert (logic_order_score(plan, gold) == 1.0) == (plan == gold)
    assert (
        logic_order_score(plan, gold) <= min(logic_recall(plan, gold), logic_precision(plan, gold))
        or not gold
    )
    assert logic_recall(plan, gold) == logic_precision(gold, plan) or not (plan and gold)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["add", "subtract", "multiply"]), st.integers(-999, 999)),
        min_size=1,
        max_size=5,
    )
)
def test_executor_agrees_with_naive_fold(steps: list[tuple[str, int]]) -> None:
    text = f"add(0, {steps[0][1]})"
    expected = float(steps[0][1])
    for i, (op, n) in enumerate(steps[1:]):
        text += f", {op}(#{i}, {n})"
        expected = {"add": expected + n, "subtract": expected - n, "multiply": expected * n}[op]
    assert execute_program(parse_program(text)) == expected


# --- plans run on the same engine ------------------------------------------------------------

DOC_PLAN = {
    "steps": [
        {"tool": "extract", "value": 6135.4},
        {"tool": "compute", "operation": "subtract", "args": [6135.4, 5105.6]},
        {"tool": "compute", "operation": "Percentage", "args": ["#0", 5105.6]},
    ]
}


def test_plans_run_on_the_program_engine() -> None:
    program = program_from_plan(DOC_PLAN)
    assert program.operations == ["subtract", "divide"]
    assert math.isclose(float(execute_program(program)), (6135.4 - 5105.6) / 5105.6)
    extract_only = program_from_plan({"steps": [{"tool": "extract", "value": 60.94}]})
    assert extract_only.steps == () and execute_program(extract_only) == 60.94
    table = program_from_plan(
        {"steps": [{"tool": "compute", "operation": "mean", "args": ["revenue, net ( loss )"]}]}
    )
    assert execute_program(table, table={"revenue, net ( loss )": {"a": 10.0, "b": 20.0}}) == 15.0
    with pytest.raises(ProgramExecutionError, match="division by zero"):
        execute_program(
            program_from_plan({"steps": [{"tool": "compute", "operation": "div", "args": [1, 0]}]})
        )


@pytest.mark.parametrize(
    ("steps", "reason"),
    [
        ([{"tool": "compute", "operation": "eval", "args": [1, 2]}], "unknown operation 'eval'"),
        ([{"tool": "compute", "operation": "add", "args": ["#0", 2]}], "#0 refers to step 0"),
        ([{"tool": "compute", "operation": "add", "args": ["1), add(2", 3]}], "holds ','"),
        ([{"tool": "compute", "operation": "add", "args": [1]}], "add takes 2 arguments"),
        ([{"tool": "compute", "operation": "add", "args": "1, 2"}], "needs a list of args"),
        ([{"tool": "compute", "operation": "table_max", "args": [3]}], "takes a row name"),
        ([{"tool": "extract", "value": "x"}], "no compute step and no extracted number"),
        (["add(1, 2)"], "plan step is not an object"),
    ],
)
def test_bad_plans_are_parse_errors(steps: list[object], reason: str) -> None:
    with pytest.raises(ProgramParseError, match=re.escape(reason)):
        program_from_plan({"steps": steps})

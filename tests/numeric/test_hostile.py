"""Hostile input: every odd program, answer, id and predictions line gives a typed error or a
documented result, never a crash, a hang or a file outside the output folder."""

from __future__ import annotations

import csv
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from tests.numeric.programs import run_program
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck.metrics import (
    ProgramExecutionError,
    ProgramParseError,
    failure_mode,
    parse_answer,
    parse_program,
)
from fieldcheck.metrics._programs import MAX_PROGRAM_CHARS, cell_number
from fieldcheck.numeric import SUMMARY_COLUMNS, TURN_COLUMNS, load_predictions
from fieldcheck.numeric._report import turn_positions, write_accuracy_plot

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "numeric"

HUGE_DIGITS = "9" * 400  # float() of this is inf, not an error

# --- programs --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("program", "reason"),
    [
        ("__import__('os')", "unknown operation '__import__'"),
        ("add(__import__('os'), 1)", "add takes 2 arguments, got 1"),
        ("add(add(1, 2), 3)", "argument of add is not a number"),  # no nesting
        ("add(#3, 1)", "#3 refers to step 3 but this is step 0"),  # forward reference
        ("add(1, 2), add(#1, 1)", "#1 refers to step 1 but this is step 1"),  # itself
        ("#0", "not a number or a step"),
        ("1e309", "number out of range"),
        (f"add({HUGE_DIGITS}, 1)", "number out of range"),
        (f"add(const_{HUGE_DIGITS}, 1)", "constant out of range"),
        ("add(" * 10_000, "program longer than"),
        ("table_max((((, none)", "missing ')'"),
    ],
)
def test_hostile_programs_are_parse_errors(program: str, reason: str) -> None:
    with pytest.raises(ProgramParseError, match=re.escape(reason)):
        parse_program(program)


TABLE = {"big": {"a": 1e308, "b": 1e308}, "text": {"a": "nm"}}


@pytest.mark.parametrize(
    ("program", "reason"),
    [
        ("divide(1, 0)", "division by zero"),
        ("divide(5, const_0)", "division by zero"),
        ("subtract(3, 3), divide(1, #0)", "division by zero"),
        ("exp(10, 1000000)", "no real value"),
        ("exp(0, -1)", "no real value"),
        ("multiply(1e200, 1e200)", "step 0 \\(multiply\\) overflows"),
        ("add(1e308, 1e308)", "step 0 \\(add\\) overflows"),
        ("divide(1e300, 1e-300)", "step 0 \\(divide\\) overflows"),
        ("add(1, 2), multiply(1e300, 1e300), subtract(#1, #1)", "step 1 \\(multiply\\) overflows"),
        ("table_sum(big, none)", "table_sum\\(big\\) overflows"),
        ("table_average(big, none)", "table_average\\(big\\) overflows"),
        ("table_max(missing row, none)", "no table row named 'missing row'"),
        ("table_max(text, none)", "has a cell that is not a number: 'nm'"),
    ],
)
def test_division_by_zero_and_overflow_are_typed_errors(program: str, reason: str) -> None:
    with pytest.raises(ProgramExecutionError, match=reason):
        run_program(program, table=TABLE)


def test_table_operation_without_table() -> None:
    with pytest.raises(ProgramExecutionError, match="there is no table"):
        run_program("table_max(revenue, none)")


def test_huge_cell_is_not_a_number() -> None:
    assert cell_number(HUGE_DIGITS) is None
    assert cell_number("$ " + HUGE_DIGITS) is None


def test_long_programs_parse_in_linear_time() -> None:
    step = ", add(#0, 1)"
    count = (MAX_PROGRAM_CHARS - len("add(1, 2)")) // len(step)
    text = "add(1, 2)" + step * count
    started = time.perf_counter()
    assert run_program(text) == 4.0
    # a row name made of many unbalanced ')' (each one once looked at the rest of the text)
    rows = "table_sum(" + "x)" * (MAX_PROGRAM_CHARS // 2 - 10) + ", none)"
    with pytest.raises(ProgramExecutionError, match="no table row"):
        run_program(rows, table=TABLE)
    assert time.perf_counter() - started < 5.0
    with pytest.raises(ProgramParseError, match=f"longer than {MAX_PROGRAM_CHARS}"):
        parse_program(text + step * 10)


# --- answers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value", "mode"),
    [
        ("1e309", None, "no_answer"),  # not finite: no answer
        ("-1e309", None, "no_answer"),
        ("1e300 trillion", None, "no_answer"),
        ("nan", None, "no_answer"),
        ("inf", None, "no_answer"),
        ("-Infinity", None, "no_answer"),
        ("--5", -5.0, "sign"),  # repeated signs count as one minus (documented)
        ("+-5", -5.0, "sign"),
        ("1,2,3", 3.0, "wrong"),  # the last number
        ("5 yes", 5.0, None),  # digits: a number, not yes/no
        ("=1+5", 5.0, None),  # formula text: its last number
        ("x" * 1_000_000, None, "no_answer"),
        ("(" + " " * 100_000 + "x", None, "no_answer"),  # took minutes before spaces collapsed
        ("(-$ " * 100_000, None, "no_answer"),
        ("1 " * 100_000, 1.0, "wrong"),
    ],
)
def test_hostile_answers(text: str, value: float | None, mode: str | None) -> None:
    # this process's CPU time, not the clock: a machine shared with other work stretched the
    # wall time of a 0.1 s parse past the bound (the quadratic cases took minutes)
    started = time.process_time()
    parsed = parse_answer(text)
    assert (parsed.value if parsed is not None else None) == value
    assert failure_mode(parsed, 5.0) == mode
    assert time.process_time() - started < 2.0


# --- predictions lines -----------------------------------------------------------------------


def test_predictions_lines_that_are_not_objects(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    lines = ["[1, 2]", "null", '"text"', "5", '{"conversation_id": "c", "turn": 0}']
    lines += ['{"conversation_id": "c", "turn": true}', '{"conversation_id": "c", "turn": "1"}']
    path.write_text("\n".join(lines) + "\n")
    loaded = load_predictions(path)
    assert list(loaded.predictions) == [("c", 0)]
    messages = [e.one_line() for e in loaded.errors]
    assert messages[:4] == [
        f"{path}:1: a predictions line must be a JSON object (got [1, 2])",
        f"{path}:2: a predictions line must be a JSON object (got None)",
        f"{path}:3: a predictions line must be a JSON object (got 'text')",
        f"{path}:4: a predictions line must be a JSON object (got 5)",
    ]
    assert messages[4] == f"{path}:6: record c: field 'turn': must be a valid integer (got True)"
    assert messages[5] == f"{path}:7: record c: field 'turn': must be a valid integer (got '1')"


# --- the command end to end ------------------------------------------------------------------


def _record(rid: str, question: str, program: str, gold: Any) -> dict[str, Any]:
    return {
        "id": rid,
        "doc": {"pre_text": "", "post_text": "", "table": {"2020": {"sales": 10.0}}},
        "dialogue": {
            "conv_questions": [question],
            "conv_answers": [str(gold)],
            "turn_program": [program],
            "executed_answers": [gold],
            "qa_split": [False],
        },
    }


HOSTILE_IDS = ["../../escape", "a/b/c", "..", "/abs", "A/B", "a_b", "=cmd|' /C calc'!A0"]


def test_hostile_ids_and_cells_end_to_end(tmp_path: Path) -> None:
    records = [
        _record(HOSTILE_IDS[0], '=HYPERLINK("http://x")', "add(1, 2)", 3.0),
        _record(HOSTILE_IDS[1], "+1", "divide(1, 0)", "=cmd|' /C calc'!A0"),
        _record(HOSTILE_IDS[2], "q", "__import__('os')", 1.0),
        _record(HOSTILE_IDS[3], "q", "exp(10, 1000000)", 1.0),
        _record(HOSTILE_IDS[4], "q", "add(1, 2)", 3.0),
        _record(HOSTILE_IDS[5], "q", "add(1, 2)", 3.0),
        _record(HOSTILE_IDS[6], "@q", "add(1, 2)", 3.0),
    ]
    data = tmp_path / "data.json"
    data.write_text(json.dumps({"dev": records}))
    plan = {"steps": [{"tool": "compute", "operation": "=evil()", "args": ["=x"]}]}
    preds = [
        {"conversation_id": HOSTILE_IDS[0], "turn": 0, "answer": "=1+2", "plan": plan},
        {
            "conversation_id": HOSTILE_IDS[1],
            "turn": 0,
            "answer": "1e309",
            "error": {"type": "=bad", "message": "+oops"},
            "validation": [{"check": "@x", "passed": False, "message": "-2+3"}],
        },
        {"conversation_id": HOSTILE_IDS[2], "turn": 0, "answer": "--5"},
        {"conversation_id": HOSTILE_IDS[3], "turn": 0, "answer": "nan " + "x" * 100_000},
        {"conversation_id": HOSTILE_IDS[4], "turn": 0, "answer": "3"},
        {"conversation_id": HOSTILE_IDS[5], "turn": 0, "answer": "3"},
    ]
    lines = [json.dumps(p) for p in preds] + ["[1, 2]"]
    predictions = tmp_path / "p.jsonl"
    predictions.write_text("\n".join(lines) + "\n")
    out = tmp_path / "deep" / "out"
    result = CliRunner().invoke(
        app,
        [
            "numeric",
            "score",
            "--data",
            str(data),
            "--predictions",
            str(predictions),
            "--out",
            str(out),
            "--bootstrap",
            "20",
        ],
    )
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.exit_code == 3, result.output  # some input failed, the rest scored

    # every trace lands inside out/traces, one per conversation, names unique
    written = sorted(p for p in tmp_path.rglob("*.json") if p.name != "data.json")
    traces = out / "traces"
    assert all(p.parent == traces for p in written if p.name not in ("statistics.json", "run.json"))
    names = sorted(p.name for p in traces.iterdir())
    assert names == sorted(
        [
            "escape.json",
            "a_b_c.json",
            "unnamed.json",
            "abs.json",
            "A_B.json",
            "a_b-2.json",
            "cmd_C_calc_A0.json",
        ]
    )
    ids = {json.loads((traces / n).read_text())["conversation_id"] for n in names}
    assert ids == set(HOSTILE_IDS)
    # a trace holds the conversation, its features and every turn with all it is scored on
    trace = json.loads((traces / "escape.json").read_text())
    assert trace["document"]["table"] == {"sales": {"2020": 10.0}}
    assert set(trace["features"]) == {
        "num_dialogue_turns",
        "has_type2_question",
        "has_duplicate_columns",
        "has_non_numeric_values",
    }
    turn = trace["turns"][0]
    assert turn["plan"] == plan and turn["predicted_answer"] == "=1+2"
    assert turn["numerical_match"] is False and turn["failure_mode"] == "wrong"
    for key in ("soft_match", "unit_agnostic_match", "sign_agnostic_match", "general_match"):
        assert turn[key] is False, key
    assert (turn["input_tokens"], turn["output_tokens"], turn["latency_s"]) == (0, 0, None)
    assert turn["logic_recall"] == 0.0 and turn["plan_operations"] == ["=evil()"]
    errored = json.loads((traces / "a_b_c.json").read_text())["turns"][0]
    assert (errored["error_type"], errored["error_message"]) == ("=bad", "+oops")
    assert errored["validation"] == [{"check": "@x", "passed": False, "message": "-2+3"}]

    # no cell a spreadsheet would run as a formula
    for name in ("summary.csv", "turns.csv", "errors.csv", "validation.csv", "input_errors.csv"):
        with (out / name).open() as handle:
            for row in csv.reader(handle):
                for cell in row:
                    assert not cell.startswith(("=", "@")), (name, cell)
                    # a plain number ("+1", "-3") is data, not a formula
                    assert not cell.startswith(("+", "-")) or _is_number(cell), (name, cell)
    with (out / "errors.csv").open() as handle:
        errors = {row["conversation_id"]: row for row in csv.DictReader(handle)}
    assert errors["../../escape"]["question"] == '\'=HYPERLINK("http://x")'
    assert errors["a/b/c"]["error_type"] == "'=bad"
    assert errors["a/b/c"]["expected_answer"] == "'=cmd|' /C calc'!A0"
    assert errors["/abs"]["error_type"] == "no_answer"  # "nan" is no answer
    assert errors["/abs"]["error_message"] == "expected 1.0, got 'nan " + "x" * 72 + "..."
    assert errors[".."]["error_type"] == "wrong"  # "--5" is -5
    assert errors["'=cmd|' /C calc'!A0"]["error_type"] == "missing_prediction"
    stats = json.loads((out / "statistics.json").read_text())
    assert stats["numerical_match_accuracy"] == pytest.approx(2 / 7)  # A/B and a_b


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def test_outputs_have_every_column_the_issue_lists() -> None:
    summary = {
        "soft_match_accuracy",
        "unit_agnostic_accuracy",
        "sign_agnostic_accuracy",
        "avg_logic_recall",
        "avg_operations_per_turn",
        "has_non_numeric_values",
        "numerical_match_accuracy",
        "general_match_accuracy",
        "num_dialogue_turns",
        "has_type2_question",
        "has_duplicate_columns",
        "input_tokens",
        "output_tokens",
        "total_latency_s",
    }
    turns = {
        "soft_match",
        "unit_agnostic_match",
        "sign_agnostic_match",
        "logic_recall",
        "operations_per_turn",
        "ground_truth_program",
        "conversation_id",
        "turn_idx",
        "question",
        "expected_answer",
        "predicted_answer",
        "numerical_match",
        "general_match",
        "failure_mode",
        "input_tokens",
        "output_tokens",
        "latency_s",
    }
    assert summary <= set(SUMMARY_COLUMNS)
    assert turns <= set(TURN_COLUMNS)


def test_help_explains_every_option_and_the_exit_statuses() -> None:
    result = CliRunner().invoke(app, ["numeric", "score", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for option, words in (
        ("--data", "derived"),
        ("--predictions", "JSONL"),
        ("--out", "Directory"),
        ("--split", "default 'dev'"),
        ("--sample-size", "at random with --seed"),
        ("--seed", "the bootstrap resamples and, with --sample-size, which items are drawn"),
        ("--json", "on stdout"),
        ("--fail-under", "Exit 4 when a metric is below its floor"),
        ("--price-in", "USD per 1M input tokens"),
        ("--price-out", "USD per 1M output tokens"),
        ("--bootstrap", "95% intervals"),
    ):
        assert option in text and words in text, option
    assert "0 every turn scored; 3 some input failed" in text
    assert "2 usage error" in text and "4 a --fail-under floor not met" in text


def test_numeric_help_lists_run_as_the_same_as_evaluate() -> None:
    """`numeric run` (docs/numeric.md: also `numeric run`) was hidden from `numeric --help`, so
    the name the docs give was nowhere in the help (a newcomer's finding)."""
    result = CliRunner().invoke(app, ["numeric", "--help"], env={"COLUMNS": "200"})
    commands = re.findall(r"^│ (\w+) +(.*?) *│$", result.output, re.M)
    assert ("run", "The same as 'evaluate' (as json and slots name theirs).") in commands
    assert [name for name, _ in commands] == ["score", "evaluate", "run"]


def test_unwritable_out_is_a_usage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = CliRunner().invoke(
        app,
        [
            "numeric",
            "score",
            "--data",
            str(EXAMPLES / "data.json"),
            "--predictions",
            str(EXAMPLES / "predictions_model_a.jsonl"),
            "--out",
            str(blocker / "sub"),
        ],
    )
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
    assert "cannot create" in " ".join(result.output.split())


def test_sample_size_and_seed_through_the_command(tmp_path: Path) -> None:
    args = ["numeric", "score", "--data", str(EXAMPLES / "data.json")]
    args += ["--predictions", str(EXAMPLES / "predictions_model_a.jsonl")]
    args += ["--out", str(tmp_path), "--bootstrap", "0", "--sample-size", "2", "--seed", "1"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    stats = json.loads((tmp_path / "statistics.json").read_text())
    assert stats["num_conversations"] == 2
    assert stats["signature_settings"]["settings"]["sample_size"] == 2
    assert stats["signature_settings"]["settings"]["sample_seed"] == 1
    assert len(list((tmp_path / "traces").iterdir())) == 2


def test_plot_orders_turns_as_numbers(tmp_path: Path) -> None:
    stats = {
        "accuracy_by_turn_number": {"0": 0.5, "10": 0.2, "2": 0.9},
        "avg_operations_by_turn": {"0": None, "10": 3.0, "2": 1.0},
        "turns_by_turn_number": {"0": 3, "10": 1, "2": 2},
    }
    assert [(p.turn, p.accuracy, p.operations, p.scored) for p in turn_positions(stats)] == [
        (0, 0.5, None, 3),
        (2, 0.9, 1.0, 2),
        (10, 0.2, 3.0, 1),
    ]
    write_accuracy_plot(stats, tmp_path / "plot.png")
    empty = {"accuracy_by_turn_number": {}, "avg_operations_by_turn": {}}
    write_accuracy_plot(empty, tmp_path / "empty.png")
    for name in ("plot.png", "empty.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

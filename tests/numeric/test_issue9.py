"""Issue 9 (hardening), the numeric system: each test uses the exact input quoted in the issue."""

from __future__ import annotations

import csv
import json
import logging
import math
from pathlib import Path
from typing import Any

import orjson
import pytest
from tests.numeric.programs import run_program
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck._cli.numeric_cmd import CONVFINQA_DEV
from fieldcheck.metrics._numbers import parse_answer
from fieldcheck.metrics._programs import (
    ProgramExecutionError,
    cell_number,
    table_cell_value,
)
from fieldcheck.numeric import load_convfinqa, load_predictions, score_to_folder


def _data(tmp_path: Path) -> Path:
    """One conversation ``c`` of three turns, gold 1, 2, 3."""
    dialogue = {
        "conv_questions": ["a?", "b?", "c?"],
        "turn_program": ["1", "2", "3"],
        "executed_answers": [1.0, 2.0, 3.0],
    }
    record = {"id": "c", "doc": {"table": {"2020": {"sales": 10.0}}}, "dialogue": dialogue}
    path = tmp_path / "data.json"
    path.write_text(json.dumps({"dev": [record]}))
    return path


def _lines(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _score(data: Path, preds: Path, out: Path) -> tuple[int, str]:
    args = ["numeric", "score", "--data", str(data), "--predictions", str(preds)]
    result = CliRunner().invoke(app, [*args, "--out", str(out), "--bootstrap", "0"])
    return result.exit_code, result.output


# --- 1. sums that could overflow: refused at load time with file:line --------------------------


def test_two_latencies_of_1e308_are_refused_on_their_lines(tmp_path: Path) -> None:
    rows = [
        {"conversation_id": "c", "turn": i, "answer": str(i + 1), "latency_s": 1e308}
        for i in (0, 1)
    ]
    rows.append({"conversation_id": "c", "turn": 2, "answer": "3"})  # one valid line: exit 3
    preds = _lines(tmp_path / "p.jsonl", rows)
    loaded = load_predictions(preds)
    assert list(loaded.predictions) == [("c", 2)]
    assert [e.one_line() for e in loaded.errors] == [
        f"{preds}:{n}: record c: field 'latency_s': must be less than or equal to "
        "1000000 (got 1e+308)"
        for n in (1, 2)
    ]
    code, output = _score(_data(tmp_path), preds, tmp_path / "out")
    assert code == 3, output
    stats = orjson.loads((tmp_path / "out" / "statistics.json").read_bytes())
    assert stats["latency_s"] is None
    assert stats["num_input_errors"] == 2 + 2  # two refused lines, two turns without a prediction


def test_three_turns_of_9e18_input_tokens_leave_statistics_writable(tmp_path: Path) -> None:
    rows = [
        {
            "conversation_id": "c",
            "turn": i,
            "answer": str(i + 1),
            "input_tokens": 9000000000000000000,
        }
        for i in range(3)
    ]
    rows[2] = {"conversation_id": "c", "turn": 2, "answer": "3"}  # one valid line: exit 3
    preds = _lines(tmp_path / "p.jsonl", rows)
    code, output = _score(_data(tmp_path), preds, tmp_path / "out")
    assert code == 3, output
    stats = orjson.loads((tmp_path / "out" / "statistics.json").read_bytes())
    assert stats["total_input_tokens"] == 0
    assert stats["num_missing_predictions"] == 2
    with (tmp_path / "out" / "input_errors.csv").open() as handle:
        refused = [r for r in csv.DictReader(handle) if r["field"] == "input_tokens"]
    assert [(r["line"], r["value"]) for r in refused] == [
        ("1", "9000000000000000000"),
        ("2", "9000000000000000000"),
    ]


def test_counts_at_the_bounds_are_accepted_and_summed_exactly(tmp_path: Path) -> None:
    rows = [
        {
            "conversation_id": "c",
            "turn": i,
            "answer": str(i + 1),
            "input_tokens": 1_000_000_000,
            "latency_s": 1_000_000.0,
        }
        for i in range(3)
    ]
    preds = _lines(tmp_path / "p.jsonl", rows)
    score_to_folder(
        load_convfinqa(_data(tmp_path)), load_predictions(preds), tmp_path / "out", bootstrap=0
    )
    stats = orjson.loads((tmp_path / "out" / "statistics.json").read_bytes())
    assert stats["total_input_tokens"] == 3_000_000_000
    assert stats["latency_s"]["total"] == 3_000_000.0


# --- 2. unknown keys warn once per key; a file without any answer fails ----------------------


def test_prediction_instead_of_answer_warns_once_and_exits_3(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rows = [{"conversation_id": "c", "turn": i, "prediction": str(i + 1)} for i in range(3)]
    preds = _lines(tmp_path / "p.jsonl", rows)
    with caplog.at_level(logging.WARNING, logger="fieldcheck"):
        loaded = load_predictions(preds)
    assert [r.getMessage() for r in caplog.records] == [
        f"{preds}:1: unknown key 'prediction' ignored (on 3 lines)"
    ]
    assert loaded.unknown_keys == {"prediction": (1, 3)}
    assert [e.one_line() for e in loaded.errors] == [
        f"{preds}: field 'answer': no line has an answer (3 lines read; unknown keys: 'prediction')"
    ]
    code, output = _score(_data(tmp_path), preds, tmp_path / "out")
    assert code == 3
    assert "no line has an answer (3 lines read; unknown keys: 'prediction')" in output


def test_unknown_keys_name_their_first_line_and_count(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rows = [
        {"conversation_id": "c", "turn": 0, "answer": "1", "note": "x"},
        {"conversation_id": "c", "turn": 1, "answer": "2", "model": "m", "note": "y"},
        {"conversation_id": "c", "turn": 2, "answer": "3", "note": "z"},
    ]
    preds = _lines(tmp_path / "p.jsonl", rows)
    with caplog.at_level(logging.WARNING, logger="fieldcheck"):
        loaded = load_predictions(preds)
    assert [r.getMessage() for r in caplog.records] == [
        f"{preds}:1: unknown key 'note' ignored (on 3 lines)",
        f"{preds}:2: unknown key 'model' ignored (on 1 line)",
    ]
    assert loaded.errors == []  # an answer is there: the keys are only warnings
    code, _ = _score(_data(tmp_path), preds, tmp_path / "out")
    assert code == 0


def test_lines_that_report_errors_need_no_answer(tmp_path: Path) -> None:
    rows = [
        {"conversation_id": "c", "turn": i, "answer": None, "error": {"type": "timeout"}}
        for i in range(3)
    ]
    loaded = load_predictions(_lines(tmp_path / "p.jsonl", rows))
    assert loaded.errors == []
    assert len(loaded.predictions) == 3


# --- 3. the last number in prose: years give way, a parenthesised year is not negative ---------


@pytest.mark.parametrize(
    ("text", "value", "rule"),
    [
        ("It fell by 21.1% from 2016 to 2017", 0.211, "preferred_over_year"),
        ("35.8 (2009)", 35.8, "preferred_over_year"),
        ("from 100 in 2016 to 120 in 2017", 120.0, "preferred_over_year"),
        ("(2009)", 2009.0, "number"),  # only a year: it is the answer, and not negative
        ("2017", 2017.0, "number"),
        ("(45)", -45.0, "number"),  # an accounting negative is still one
        ("$ 2017", 2017.0, "number"),
        ("in 2016 it was 1950", 1950.0, "last_number"),  # all year-like: the last
        ("up 2,017 from 2016", 2017.0, "preferred_over_year"),  # a comma: not a year
        # a dash between two numbers is a range, not a minus: the years still give way
        ("The percentage change was 12.5% (2018-2019)", 0.125, "preferred_over_year"),
        ("12.5% (2018 to 2019)", 0.125, "preferred_over_year"),
        ("the change was -5 from 2019-2020", -5.0, "preferred_over_year"),
        ("10-20", 20.0, "last_number"),
        ("in 2018 (-5)", -5.0, "last_number"),
        ("FY2019 -5.2%", -0.052, "last_number"),  # set on the number after a space: a minus
        ("12.5% (2018 - 2019)", 0.125, "preferred_over_year"),  # spaced both sides: a range
        # an en dash set right before a number is a minus sign; one with a space is punctuation
        ("\u20135", -5.0, "number"),
        ("\u2013$1,200", -1200.0, "number"),
        ("the change \u2013 5%", 0.05, "number"),
        ("2019\u20132020", 2020.0, "last_number"),
        ("so the change is 14.1%", 0.141, "number"),
        ("1,2,3", 3.0, "last_number"),
        ("Yes, 5 > 3", None, "yes_no"),
        (12.5, 12.5, "number"),
    ],
)
def test_answer_rules(text: str | float, value: float | None, rule: str) -> None:
    parsed = parse_answer(text)
    assert parsed is not None
    assert parsed.rule == rule
    if value is None:
        assert parsed.value is None
    else:
        assert parsed.value is not None and math.isclose(parsed.value, value)


def test_turns_csv_says_which_rule_read_the_answer(tmp_path: Path) -> None:
    answers = ["It fell by 21.1% from 2016 to 2017", "35.8 (2009)", None]
    rows = [{"conversation_id": "c", "turn": i, "answer": a} for i, a in enumerate(answers)]
    preds = _lines(tmp_path / "p.jsonl", rows)
    code, _ = _score(_data(tmp_path), preds, tmp_path / "out")
    assert code == 0
    with (tmp_path / "out" / "turns.csv").open() as handle:
        turns = list(csv.DictReader(handle))
    assert [(t["parsed_answer"], t["answer_rule"]) for t in turns] == [
        ("0.21100000000000002", "preferred_over_year"),
        ("35.8", "preferred_over_year"),
        ("", ""),
    ]


# --- 4. table cells as the upstream executor reads them -------------------------------------


def _original(tmp_path: Path, rows: list[list[str]], programs: list[str]) -> Path:
    """One record in the original czyssrs format with this table (first row = header)."""
    record = {
        "id": "Single_T/2011/page_1.pdf-1",
        "pre_text": [],
        "post_text": [],
        "table": rows,
        "annotation": {
            "dialogue_break": [f"q{i}?" for i in range(len(programs))],
            "turn_program": programs,
            "exe_ans_list": [0.0] * len(programs),
        },
    }
    path = tmp_path / "original.json"
    path.write_text(json.dumps([record]))
    return path


def test_percentage_and_footnote_cells() -> None:
    assert table_cell_value("19.3% ( 19.3 % )") == 0.193
    assert cell_number("19.3% ( 19.3 % )") == 19.3  # display and validator keep the table's unit
    assert table_cell_value("135696 ( a )") == 135696.0
    assert cell_number("135696 ( a )") == 135696.0
    assert table_cell_value("-2913 ( 2913 )") == -2913.0
    assert table_cell_value("( 45 )") == -45.0  # decision: an accounting negative
    assert table_cell_value("( a )") is None


def test_table_max_over_a_percentage_row_is_a_fraction(tmp_path: Path) -> None:
    rows = [
        ["", "2011", "2010", "2009"],
        ["operating margin", "19.3% ( 19.3 % )", "18.6% ( 18.6 % )", "14.3% ( 14.3 % )"],
    ]
    conversation = load_convfinqa(_original(tmp_path, rows, ["1"])).conversations[0]
    table = conversation.doc.table
    assert table["operating margin"]["2011"] == "19.3% ( 19.3 % )"  # the text is kept
    assert run_program("table_max(operating margin, none)", table=table) == 0.193
    assert math.isclose(
        float(run_program("table_average(operating margin, none)", table=table)), 0.174
    )
    assert conversation.features.has_non_numeric_values is False


def test_a_footnote_mark_does_not_drop_the_cell(tmp_path: Path) -> None:
    rows = [["", "2012", "2011"], ["total", "135696 ( a )", "100"]]
    conversation = load_convfinqa(_original(tmp_path, rows, ["1"])).conversations[0]
    assert conversation.doc.table["total"] == {"2012": 135696.0, "2011": 100.0}
    assert run_program("table_sum(total, none)", table=conversation.doc.table) == 135796.0
    assert conversation.features.has_non_numeric_values is False


def test_a_repeated_row_name_means_its_last_row(tmp_path: Path) -> None:
    rows = [["", "2012", "2011"], ["total", "1", "2"], ["other", "5", "6"], ["total", "30", "40"]]
    conversation = load_convfinqa(_original(tmp_path, rows, ["1"])).conversations[0]
    table = conversation.doc.table
    assert list(table) == ["total (1)", "other", "total"]
    assert run_program("table_sum(total, none)", table=table) == 70.0  # upstream: the last row
    assert run_program("table_sum(total (1), none)", table=table) == 3.0


def test_a_row_with_a_text_cell_fails_as_upstream(tmp_path: Path) -> None:
    rows = [["", "2012", "2011", "2010"], ["growth", "24.5% ( 24.5 % )", "nm", ""]]
    conversation = load_convfinqa(_original(tmp_path, rows, ["1"])).conversations[0]
    with pytest.raises(
        ProgramExecutionError,
        match=r"table row 'growth' has a cell that is not a number: 'nm' \(column '2011'\)",
    ):
        run_program("table_average(growth, none)", table=conversation.doc.table)


def test_every_dev_gold_program_reproduces_its_executed_answer() -> None:
    """examples/convfinqa/dev.json: 1,490 turns, all reproduced within 1e-5 (before and after
    the upstream cell rules: it has no table_* step, its tables are already numbers)."""
    loaded = load_convfinqa(CONVFINQA_DEV)
    checked = reproduced = 0
    for conversation in loaded.conversations:
        for turn in conversation.turns:
            assert turn.program is not None
            result = run_program(turn.program, table=conversation.doc.table)
            gold = turn.executed_answer
            checked += 1
            if isinstance(result, bool):
                reproduced += gold == ("yes" if result else "no")
            else:
                assert isinstance(gold, float)
                reproduced += math.isclose(result, gold, rel_tol=0, abs_tol=1e-5)
    assert (checked, reproduced) == (1490, 1490)


# --- 5. the private test split with partial predictions: unscored turns are not errors -------


def test_private_split_with_partial_predictions_lists_no_errors(
    shared_dir: Path, tmp_path: Path
) -> None:
    data = shared_dir / "data" / "convfinqa" / "sample_test_private_original.json"
    loaded = load_convfinqa(data, split="test")
    turns = [(c.id, t.index) for c in loaded.conversations for t in c.turns]
    assert len(turns) == 42
    rows = [{"conversation_id": cid, "turn": i, "answer": "1"} for cid, i in turns[:21]]
    code, output = _score(data, _lines(tmp_path / "p.jsonl", rows), tmp_path / "out")
    assert code == 0, output
    with (tmp_path / "out" / "errors.csv").open() as handle:
        assert list(csv.DictReader(handle)) == []
    with (tmp_path / "out" / "turns.csv").open() as handle:
        listed = list(csv.DictReader(handle))
    assert len(listed) == 42
    assert {(t["not_scored"], t["error_type"]) for t in listed[21:]} == {
        ("no_gold", "missing_prediction")
    }
    assert {(t["not_scored"], t["error_type"]) for t in listed[:21]} == {("no_gold", "")}

"""Issue 26, item 8 follow-up: a predictions line's ``tokens_estimated`` (the runner's characters
/ 4 estimate, written by ``numeric evaluate`` when the endpoint sent no usable ``usage``) is read
by ``numeric score``, counted in statistics.json (``num_turns_tokens_estimated``) by both
scoring paths, and said beside the tokens and the costs in the terminal and the report. It was
ignored as an unknown key: the totals and the cost per correct answer read as measured."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from tests.numeric.scoring import score
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck.numeric import load_convfinqa, load_predictions


def _record(rid: str, answers: list[float]) -> dict[str, Any]:
    return {
        "id": rid,
        "doc": {"pre_text": "pre", "post_text": "post", "table": {"2020": {"sales": 100.0}}},
        "dialogue": {
            "conv_questions": [f"q{i}?" for i in range(len(answers))],
            "conv_answers": [str(a) for a in answers],
            "turn_program": [str(a) for a in answers],
            "executed_answers": answers,
            "qa_split": [False for _ in answers],
        },
    }


DATA = {"dev": [_record("A", [100.0, 20.0]), _record("B", [3.0, 6.0])]}


def _pred(
    cid: str, turn: int, answer: str | None, tin: int, tout: int, **extra: Any
) -> dict[str, Any]:
    return {
        "conversation_id": cid,
        "turn": turn,
        "answer": answer,
        "input_tokens": tin,
        "output_tokens": tout,
        "latency_s": 1.0,
        **extra,
    }


PREDICTIONS = [
    _pred("A", 0, "100", 100, 10, tokens_estimated=True),
    _pred("A", 1, "20", 100, 10, tokens_estimated=False),
    _pred("B", 0, "3", 50, 5, tokens_estimated=True),
    # a call error whose first round's tokens were estimated: in the totals, so counted
    _pred("B", 1, None, 40, 0, tokens_estimated=True, error={"type": "server_error"}),
]
# 290 input / 25 output tokens; the cost leaves B#1 out: 275 tokens, 2 successful conversations,
# 3 correct turns. Prices 1 and 2 USD per 1M: (250 * 1 + 25 * 2) / 1e6 = 0.0003 counted.


def _inputs(tmp_path: Path, lines: list[dict[str, Any]]) -> tuple[Path, Path]:
    data = tmp_path / "data.json"
    data.write_text(json.dumps(DATA))
    preds = tmp_path / "predictions.jsonl"
    preds.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return data, preds


def _score(data: Path, preds: Path, out: Path) -> Any:
    return CliRunner().invoke(
        app,
        ["numeric", "score", "--data", str(data), "--predictions", str(preds), "--out", str(out),
         "--bootstrap", "0", "--no-store", "--price-in", "1", "--price-out", "2"],
        env={"COLUMNS": "300"},
    )  # fmt: skip


def _rows(output: str) -> dict[str, str]:
    """The printed table's rows: label -> value."""
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if len(cells) > 1:
            rows[cells[0]] = cells[1]
    return rows


NOTE = " (3 turns estimated: characters / 4)"


def test_estimated_turns_are_counted_and_said_by_numeric_score(tmp_path: Path) -> None:
    data, preds = _inputs(tmp_path, PREDICTIONS)
    out = tmp_path / "out"
    result = _score(data, preds, out)
    assert result.exit_code == 3, result.output  # the server_error turn, no refused line
    assert "unknown key" not in result.output
    stats = json.loads((out / "statistics.json").read_text())
    assert stats["num_turns_tokens_estimated"] == 3
    assert (stats["total_input_tokens"], stats["total_output_tokens"]) == (290, 25)
    assert stats["cost_per_correct_answer"] == 315 / 2  # every token spent, the failed call's too
    assert stats["tokens_per_correct_turn"] == 315 / 3
    rows = _rows(result.stdout)
    assert rows["tokens (in / out)" + NOTE] == "290 / 25"
    assert rows["cost per correct answer: tokens per successful conversation" + NOTE] == "158"
    assert rows["tokens per correct turn" + NOTE] == "105"
    assert rows["cost per correct answer: USD per successful conversation" + NOTE] == "0.00017"
    report = (out / "report.md").read_text()
    assert f"| Tokens (input / output / total){NOTE} | 290 / 25 / 315 |  |" in report
    assert (
        f"| Cost per correct answer: tokens per successful conversation{NOTE} | 157.5 |" in report
    )
    assert f"| Tokens per correct turn{NOTE} | 105.0 |" in report
    assert f"| Total cost (USD){NOTE} | 0.000340 |" in report  # 290 * 1 + 25 * 2 per 1M
    assert f"Tokens (input / output / total){NOTE}" in (out / "report.html").read_text()
    # each turn's trace says whether its tokens are estimated
    (trace_a,) = (out / "traces").glob("A*.json")
    turns = json.loads(trace_a.read_text())["turns"]
    assert [t["tokens_estimated"] for t in turns] == [True, False]


def test_the_estimated_turns_are_the_flagged_ones(tmp_path: Path) -> None:
    data_path, preds_path = _inputs(tmp_path, PREDICTIONS)
    data, preds = load_convfinqa(data_path), load_predictions(preds_path)
    result, traces = score(data, preds, tmp_path / "out", bootstrap=0)
    assert result.statistics["num_turns_tokens_estimated"] == 3
    turns = [t for trace in traces for t in trace["turns"]]
    estimated = [(t["conversation_id"], t["turn_idx"]) for t in turns if t["tokens_estimated"]]
    assert estimated == [("A", 0), ("B", 0), ("B", 1)]
    report = (tmp_path / "out" / "report.md").read_text()
    assert f"| Tokens per correct turn{NOTE} | 105.0 |" in report


def test_one_estimated_turn_is_said_in_the_singular(tmp_path: Path) -> None:
    lines = [{**line, "tokens_estimated": line["turn"] == 0 and line["conversation_id"] == "A"} for line in PREDICTIONS]  # fmt: skip
    data, preds = _inputs(tmp_path, lines)
    result = _score(data, preds, tmp_path / "out")
    assert (
        _rows(result.stdout)["tokens (in / out) (1 turn estimated: characters / 4)"] == "290 / 25"
    )


def test_no_estimated_turn_says_nothing(tmp_path: Path) -> None:
    lines = [{k: v for k, v in line.items() if k != "tokens_estimated"} for line in PREDICTIONS]
    data, preds = _inputs(tmp_path, lines)
    out = tmp_path / "out"
    result = _score(data, preds, out)
    stats = json.loads((out / "statistics.json").read_text())
    assert stats["num_turns_tokens_estimated"] == 0
    assert _rows(result.stdout)["tokens (in / out)"] == "290 / 25"
    assert "characters / 4" not in result.stdout
    assert "characters / 4" not in (out / "report.md").read_text()


def test_the_token_totals_are_grouped_as_the_costs_are(tmp_path: Path) -> None:
    """The tokens row groups thousands as the cost rows do (``12,000 / 1,250``, not ``12000``)."""
    lines = [{**line, "input_tokens": line["input_tokens"] * 1000} for line in PREDICTIONS]
    lines = [{**line, "output_tokens": line["output_tokens"] * 50} for line in lines]
    data, preds = _inputs(
        tmp_path, [{k: v for k, v in x.items() if k != "tokens_estimated"} for x in lines]
    )
    rows = _rows(_score(data, preds, tmp_path / "out").stdout)
    assert rows["tokens (in / out)"] == "290,000 / 1,250"


@pytest.mark.parametrize("value", ["true", "yes", 1, 0, None, 1.0, [], {}])
def test_a_flag_that_is_not_a_json_boolean_is_a_bad_line(tmp_path: Path, value: object) -> None:
    """Only true or false: text, numbers and null make the line bad (file:line, field), as for
    the token counts, never read as a flag."""
    lines = [{**PREDICTIONS[0], "tokens_estimated": value}, *PREDICTIONS[1:]]
    data, preds = _inputs(tmp_path, lines)
    loaded = load_predictions(preds)
    assert ("A", 0) not in loaded.predictions and len(loaded.predictions) == 3
    (error,) = loaded.errors
    assert (error.line, error.field, error.value) == (1, "tokens_estimated", value)
    out = tmp_path / "out"
    result = _score(data, preds, out)
    assert result.exit_code == 3, result.output
    with (out / "input_errors.csv").open(newline="") as handle:
        (row,) = [r for r in csv.DictReader(handle) if r["field"] == "tokens_estimated"]
    assert row["line"] == "1" and row["file"].endswith("predictions.jsonl")
    stats = json.loads((out / "statistics.json").read_text())
    assert stats["num_turns_tokens_estimated"] == 2  # A#0 refused: missing, not estimated

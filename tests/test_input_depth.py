"""Issue 9: one depth limit (jsonio.MAX_DEPTH = 200) on every input line of every system. A line
nested deeper is refused on its own line (file:line, "nested deeper than 200") and the run goes
on; never a RecursionError or an orjson serialisation error after some files were written."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck._util.errors import InputError
from fieldcheck._util.jsonio import MAX_DEPTH, TOO_DEEP, iter_jsonl, read_json
from fieldcheck.jsoneval import MAX_DEPTH as JSON_MAX_DEPTH

NUMERIC_EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "numeric"

WIDE = {"COLUMNS": "400"}


def nested(depth: int) -> Any:
    """``{"k": {"k": ... 1}}`` with ``depth`` objects."""
    value: Any = 1
    for _ in range(depth):
        value = {"k": value}
    return value


def test_one_limit_shared_with_the_json_evaluation() -> None:
    assert MAX_DEPTH == JSON_MAX_DEPTH == 200
    assert TOO_DEEP == "nested deeper than 200 arrays/objects; too deep to score"


def test_iter_jsonl_refuses_the_deep_line_and_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    lines = [
        {"id": 1, "x": nested(MAX_DEPTH)},  # exactly the limit inside the line: accepted
        {"id": 2, "x": nested(MAX_DEPTH + 1)},
        {"id": 3},
    ]
    path.write_text("".join(json.dumps(v) + "\n" for v in lines), encoding="utf-8")
    got = list(iter_jsonl(path, record_key="id"))
    assert [n for n, _ in got] == [1, 2, 3]
    assert got[0][1]["id"] == 1 and got[2][1] == {"id": 3}
    assert str(got[1][1]) == f"{path}:2: record 2: field 'x': {TOO_DEEP}"


def test_read_json_refuses_a_deep_document(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text(json.dumps([{"a": 1}, {"x": nested(MAX_DEPTH + 1)}]), encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_json(path)
    assert str(info.value) == f"{path}: {TOO_DEEP}"


def test_json_batch_deep_ground_truth_line(tmp_path: Path) -> None:
    lines = [
        {"id": "deep", "ground_truth": {"a": 1, "extra": nested(260)}, "output": {"a": 1}},
        {"id": "ok", "ground_truth": {"a": 1}, "output": {"a": 1}},
    ]
    data = tmp_path / "b.jsonl"
    data.write_text("".join(json.dumps(v) + "\n" for v in lines), encoding="utf-8")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["json", "batch", str(data), "--out", str(out)], env=WIDE)
    assert result.exit_code == 3, result.output
    assert f"{data}:1: record deep: field 'ground_truth': {TOO_DEEP}" in result.stderr
    records = [json.loads(x) for x in (out / "records.jsonl").read_text("utf-8").splitlines()]
    assert [(r["id"], r["accuracy"]) for r in records] == [("ok", 1.0)]


def test_slots_score_deep_prediction_line(tmp_path: Path) -> None:
    gold = {"user": "u1", "session": 1, "topic": "t", "field": "f", "values": ["x"]}
    deep = {**gold, "note": nested(300)}
    (tmp_path / "gold.jsonl").write_text(json.dumps(gold) + "\n", encoding="utf-8")
    pred = tmp_path / "pred.jsonl"
    pred.write_text(json.dumps(deep) + "\n" + json.dumps(gold) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    args = ["slots", "score", "--gold", str(tmp_path / "gold.jsonl"), "--pred", f"a={pred}"]
    result = CliRunner().invoke(app, [*args, "--bootstrap", "0", "--out", str(out)], env=WIDE)
    assert result.exit_code == 3, result.output
    assert f"{pred}:1: field 'note': {TOO_DEEP}" in result.output
    errors = [json.loads(x) for x in (out / "errors.jsonl").read_text().splitlines()]
    assert [(e["line"], e["field"], e["reason"]) for e in errors] == [(1, "note", TOO_DEEP)]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["models"]["a"]["counts"]["tp"] == 1  # line 2 is scored


@pytest.mark.parametrize("depth", [251, 300])
def test_numeric_score_deep_plan_step(tmp_path: Path, depth: int) -> None:
    source = NUMERIC_EXAMPLES / "predictions_model_a.jsonl"
    lines = [json.loads(x) for x in source.read_text("utf-8").splitlines()]
    lines[0]["plan"]["steps"][0]["extra"] = nested(depth)
    pred = tmp_path / "pred.jsonl"
    pred.write_text("".join(json.dumps(v) + "\n" for v in lines), encoding="utf-8")
    out = tmp_path / "out"
    args = ["numeric", "score", "--data", str(NUMERIC_EXAMPLES / "data.json")]
    args += ["--predictions", str(pred), "--out", str(out), "--bootstrap", "0"]
    result = CliRunner().invoke(app, args, env=WIDE)
    assert result.exit_code == 3, result.output
    assert not isinstance(result.exception, RecursionError)
    assert f"{pred}:1: field 'plan': {TOO_DEEP}" in " ".join(result.output.split())
    with (out / "input_errors.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["line"], r["field"]) for r in rows] == [("1", "plan"), ("", "turn")]
    assert rows[1]["reason"].startswith("missing turn")  # the refused line's turn: no prediction
    stats = json.loads((out / "statistics.json").read_text())
    assert (stats["num_turns"], stats["num_missing_predictions"]) == (51, 1)
    assert stats["total_input_tokens"] == 38946  # every other line was read and scored

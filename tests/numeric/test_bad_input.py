"""Bad input: unparsable program, missing turn, unknown conversation id, bad lines and records."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from tests.numeric.scoring import score
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck._util.errors import InputError
from fieldcheck.numeric import load_convfinqa, load_predictions, score_to_folder
from fieldcheck.numeric._predictions import PlanStep


def _record(rid: str, programs: list[str], answers: list[Any]) -> dict[str, Any]:
    return {
        "id": rid,
        "doc": {"pre_text": "", "post_text": "", "table": {"2020": {"sales": 10.0}}},
        "dialogue": {
            "conv_questions": [f"q{i}?" for i in range(len(programs))],
            "conv_answers": [str(a) for a in answers],
            "turn_program": programs,
            "executed_answers": answers,
            "qa_split": [False] * len(programs),
        },
        "features": {
            "num_dialogue_turns": len(programs),
            "has_type2_question": False,
            "has_duplicate_columns": False,
            "has_non_numeric_values": False,
        },
    }


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "data.json"
    records = [
        _record("conv-1", ["add(1, 2)", "add(1, 2) multiply(#0, 2)"], [3.0, 6.0]),  # 2nd unparsable
        _record("conv-2", ["10", "subtract(10, 4)"], [10.0, 6.0]),
        {**_record("conv-3", ["1", "2"], [1.0, 2.0])},
    ]
    records[2]["dialogue"]["executed_answers"] = [1.0]  # wrong length: record skipped
    path.write_text(json.dumps({"dev": records}))
    return path


def _write_predictions(path: Path, lines: list[Any]) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


def test_loader_names_file_record_and_field(data_file: Path) -> None:
    loaded = load_convfinqa(data_file)
    assert [c.id for c in loaded.conversations] == ["conv-1", "conv-2"]
    messages = [e.one_line() for e in loaded.errors]
    assert messages[0].startswith(
        f"{data_file}: record conv-1: field 'dialogue.turn_program[1]': cannot parse program at character 9:"
    )
    assert "expected ',' between steps" in messages[0]
    assert messages[1] == (
        f"{data_file}: record conv-3: field 'dialogue.executed_answers': has 1 entries but the dialogue has 2 questions"
    )


def test_unparsable_gold_program_has_no_logic_scores(data_file: Path, tmp_path: Path) -> None:
    preds = _write_predictions(
        tmp_path / "p.jsonl",
        [
            {
                "conversation_id": "conv-1",
                "turn": 0,
                "answer": "3",
                "plan": {"steps": [{"tool": "compute", "operation": "add"}]},
            },
            {
                "conversation_id": "conv-1",
                "turn": 1,
                "answer": "6",
                "plan": {"steps": [{"tool": "compute", "operation": "add"}]},
            },
            {"conversation_id": "conv-2", "turn": 0, "answer": "10"},
            {"conversation_id": "conv-2", "turn": 1, "answer": "6"},
        ],
    )
    result, traces = score(
        load_convfinqa(data_file), load_predictions(preds), tmp_path / "out", bootstrap=0
    )
    turn = traces[0]["turns"][1]
    assert turn["numerical_match"] is True  # the answer is still scored
    assert turn["ground_truth_operations"] is None and turn["logic_recall"] is None
    assert traces[0]["turns"][0]["logic_recall"] == 1.0
    assert result.statistics["avg_logic_recall"] == 1.0  # only conv-1 turn 0 has both
    assert result.statistics["bootstrap_95_ci"] is None


def test_missing_turn_and_unknown_conversation(data_file: Path, tmp_path: Path) -> None:
    preds = _write_predictions(
        tmp_path / "p.jsonl",
        [
            {"conversation_id": "conv-1", "turn": 0, "answer": "3"},
            {"conversation_id": "conv-1", "turn": 1, "answer": "6"},
            {"conversation_id": "conv-2", "turn": 0, "answer": "10"},
            {"conversation_id": "conv-9", "turn": 0, "answer": "1"},
            {"conversation_id": "conv-2", "turn": 5, "answer": "1"},
            {"conversation_id": "conv-3", "turn": 0, "answer": "1"},  # in the file, skipped record
        ],
    )
    result, traces = score(
        load_convfinqa(data_file), load_predictions(preds), tmp_path / "out", bootstrap=0
    )
    messages = [e.one_line() for e in result.input_errors[2:]]
    assert messages == [
        f"{preds}:5: record conv-2: field 'turn': turn out of range: the conversation has 2 turns (got 5)",
        f"{preds}:4: record conv-9: field 'conversation_id': unknown conversation id "
        f"(not in split 'dev' of data.json) (got 'conv-9')",
        f"{preds}: record conv-2: field 'turn': missing turn: no prediction for this turn "
        "(counted as a failure) (got 1)",
    ]
    missing = traces[1]["turns"][1]
    assert missing["error_type"] == "missing_prediction" and missing["failure_mode"] == "error"
    assert missing["numerical_match"] is False
    assert result.statistics["numerical_match_accuracy"] == pytest.approx(3 / 4)
    assert result.statistics["num_missing_predictions"] == 1


def test_bad_prediction_lines(tmp_path: Path) -> None:
    preds = _write_predictions(
        tmp_path / "p.jsonl",
        [
            {"conversation_id": "c", "turn": 0, "answer": "1"},
            "{not json",
            {"turn": 1, "answer": "1"},
            {"conversation_id": "c", "turn": 1, "input_tokens": -5},
            {"conversation_id": "c", "turn": 0, "answer": "2"},
            {"conversation_id": "c", "turn": 2, "plan": {"steps": [{"tool": "guess"}]}},
        ],
    )
    loaded = load_predictions(preds)
    assert list(loaded.predictions) == [("c", 0)]
    messages = [e.one_line() for e in loaded.errors]
    assert messages[0].startswith(f"{preds}:2: invalid JSON")
    assert messages[1] == f"{preds}:3: field 'conversation_id': missing"
    assert (
        messages[2]
        == f"{preds}:4: record c: field 'input_tokens': must be greater than or equal to 0 (got -5)"
    )
    assert (
        messages[3]
        == f"{preds}:5: record c: field 'turn': duplicate prediction for turn 0 (first on line 1); ignored (got 0)"
    )
    assert messages[4].startswith(
        f"{preds}:6: record c: field 'plan.steps.0.tool': must be 'extract' or 'compute'"
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("input_tokens", "10"),
        ("input_tokens", True),
        ("input_tokens", 1e3),
        ("output_tokens", "1_000"),
        ("output_tokens", 5.0),
        ("latency_s", "1.5"),
        ("latency_s", True),
    ],
)
def test_counts_and_latency_of_another_type_are_refused(
    tmp_path: Path, field: str, value: object
) -> None:
    """A token count or a latency given as text, a boolean or (a count) a float is a bad line,
    never read as a number (a tester's finding: "10", true and "1_000" became 10, 1 and 1000
    tokens, "1.5" and true 1.5 and 1.0 s, in the totals and the cost), as ``turn`` already
    was; an integer latency is a number of seconds."""
    line = {"conversation_id": "c", "turn": 0, "answer": "1", field: value}
    preds = _write_predictions(tmp_path / "p.jsonl", [line, {**line, "turn": 1, field: 2}])
    loaded = load_predictions(preds)
    assert list(loaded.predictions) == [("c", 1)]
    (error,) = loaded.errors
    assert error.line == 1 and error.field == field and error.value == value
    kept = loaded.predictions[("c", 1)]
    assert getattr(kept, field) == 2


def test_unreadable_data_files(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"dev": [')
    with pytest.raises(InputError, match="invalid JSON"):
        load_convfinqa(broken)
    scalar = tmp_path / "scalar.json"
    scalar.write_text("3")
    with pytest.raises(InputError, match="expected"):
        load_convfinqa(scalar)
    two = tmp_path / "two.json"
    two.write_text('{"a": [], "b": []}')
    with pytest.raises(InputError, match="several splits"):
        load_convfinqa(two)


@pytest.mark.parametrize("early", [False, True])
def test_cli_usage_errors_exit_2(
    data_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, early: bool
) -> None:
    """Usage problems exit 2, before any output; the same with the scoring pool started before
    the inputs are read (it reads the predictions while the data is read)."""
    from fieldcheck.numeric import _system

    monkeypatch.setattr(_system, "EARLY_POOL_BYTES", 0 if early else 10**18)
    preds = _write_predictions(
        tmp_path / "p.jsonl", [{"conversation_id": "conv-1", "turn": 0, "answer": "3"}]
    )
    runner = CliRunner()
    base = [
        "numeric",
        "score",
        "--data",
        str(data_file),
        "--predictions",
        str(preds),
        "--out",
        str(tmp_path / "o"),
    ]
    assert runner.invoke(app, [*base, "--price-in", "1"]).exit_code == 2
    assert runner.invoke(app, [*base, "--seed", "x"]).exit_code == 2  # not an integer
    assert runner.invoke(app, [*base, "--sample-size", "0"]).exit_code == 2  # would score nothing
    assert runner.invoke(app, [*base, "--split", "train"]).exit_code == 2
    missing = [
        "numeric",
        "score",
        "--data",
        str(tmp_path / "nope.json"),
        "--predictions",
        str(preds),
        "--out",
        "o",
    ]
    assert runner.invoke(app, missing).exit_code == 2
    # the data file holds bad records: the rest is scored, outputs are written, the status is 3
    partial = runner.invoke(app, base)
    assert partial.exit_code == 3, partial.output
    assert "missing turn" in partial.output
    assert (tmp_path / "o" / "statistics.json").is_file()


def test_turns_without_gold_are_not_scored_nor_listed_as_errors(tmp_path: Path) -> None:
    record = _record("conv-x", ["1", "2"], [1.0, 2.0])
    del record["dialogue"]["executed_answers"]
    record["features"]["num_dialogue_turns"] = 3  # disagrees with the dialogue: a warning
    data = tmp_path / "d.json"
    data.write_text(json.dumps({"test": [record]}))
    preds = _write_predictions(
        tmp_path / "p.jsonl",
        [
            {"conversation_id": "conv-x", "turn": 0, "answer": "1"},
            {
                "conversation_id": "conv-x",
                "turn": 1,
                "error": {"type": "RateLimit", "message": "429"},
            },
        ],
    )
    loaded = load_convfinqa(data)
    assert loaded.split == "test"  # the only key
    assert [e.one_line() for e in loaded.errors] == [
        f"{data}: record conv-x: field 'features.num_dialogue_turns': says 3 turns but the dialogue has 2"
    ]
    out = tmp_path / "out"
    s = score_to_folder(loaded, load_predictions(preds), out, bootstrap=10).statistics
    assert s["num_scored_turns"] == 0 and s["numerical_match_accuracy"] is None
    assert s["conversation_success_rate"] is None and s["cost_per_correct_answer"] is None
    assert s["accuracy_by_turn_number"] == {}
    assert s["num_prediction_errors"] == 1
    with (out / "errors.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert rows == []  # turn 1's RateLimit has no gold to be wrong against: not an error
    with (out / "turns.csv").open() as handle:
        turns = list(csv.DictReader(handle))
    assert [(t["turn_idx"], t["not_scored"], t["error_type"]) for t in turns] == [
        ("0", "no_gold", ""),
        ("1", "no_gold", "RateLimit"),
    ]
    # nothing scored: no plot of zeros; the report says so
    assert not list(out.glob("*.png"))
    assert "NOTHING SCORED: nothing was scored:" in (out / "report.md").read_text()


def test_derived_record_without_features_gets_derived_ones(tmp_path: Path) -> None:
    record = _record("Double_X", ["1", "2"], [1.0, 2.0])
    del record["features"]
    record["dialogue"]["qa_split"] = [False, True]
    record["doc"]["table"] = {"2020 (1)": {"sales": 1.0}, "2020 (2)": {"sales": "n/a"}}
    data = tmp_path / "d.json"
    data.write_text(json.dumps({"dev": [record]}))
    features = load_convfinqa(data).conversations[0].features
    assert features.model_dump() == {
        "num_dialogue_turns": 2,
        "has_type2_question": True,
        "has_duplicate_columns": True,
        "has_non_numeric_values": True,
    }


def test_unpredicted_turns_without_gold_are_not_input_errors(tmp_path: Path) -> None:
    # the private test set has no answers: predicting only some of its turns is not a failure
    record = _record("conv-p", ["1", "2"], [1.0, 2.0])
    del record["dialogue"]["executed_answers"]
    data = tmp_path / "d.json"
    data.write_text(json.dumps({"test": [record]}))
    preds = _write_predictions(
        tmp_path / "p.jsonl", [{"conversation_id": "conv-p", "turn": 0, "answer": "1"}]
    )
    result = score_to_folder(
        load_convfinqa(data), load_predictions(preds), tmp_path / "out", bootstrap=0
    )
    assert result.input_errors == []
    assert result.statistics["num_input_errors"] == 0


def _score_one_answer(data: Path, conversation: str, out: Path) -> Any:
    """``numeric score`` of ``data`` with one prediction, turn 0 of ``conversation``."""
    preds = _write_predictions(
        data.with_name("p.jsonl"), [{"conversation_id": conversation, "turn": 0, "answer": "2"}]
    )
    return CliRunner().invoke(
        app,
        ["numeric", "score", "--data", str(data), "--predictions", str(preds), "--out", str(out)],
        env={"COLUMNS": "400", "FIELDCHECK_DATABASE_URL": f"sqlite:///{data.parent}/s.db"},
    )


def test_a_record_with_an_empty_id_is_an_input_error(tmp_path: Path) -> None:
    """A prediction names its conversation by a non-empty id, so a record with id "" could
    never be matched: it is skipped as a bad record (file, record, field), not scored as a
    conversation whose every turn is unpredicted; in the streamed path too."""
    path = tmp_path / "data.json"
    records = [_record("", ["1"], [1.0]), _record("c", ["2"], [2.0])]
    path.write_text(json.dumps({"dev": records}))
    loaded = load_convfinqa(path)
    assert [c.id for c in loaded.conversations] == ["c"]
    assert [e.one_line() for e in loaded.errors] == [
        f"{path}: record #0: field 'id': empty id (got '')"
    ]
    out = tmp_path / "out"
    result = _score_one_answer(path, "c", out)
    assert result.exit_code == 3, result.output
    rows = list(csv.DictReader((out / "input_errors.csv").open(encoding="utf-8")))
    assert [(r["record"], r["field"]) for r in rows] == [("#0", "id")]
    assert json.loads((out / "statistics.json").read_text())["num_conversations"] == 1


def test_a_data_file_of_only_bad_records_is_a_usage_error(tmp_path: Path) -> None:
    """The rule of every input file: no usable record is exit 2 naming the first problem,
    with nothing written (it was exit 3 with an empty "nothing scored" report)."""
    path = tmp_path / "data.json"
    records = [_record("", ["1"], [1.0]), {**_record("x", ["2"], [2.0]), "id": 7}]
    path.write_text(json.dumps({"dev": records}))
    out = tmp_path / "out"
    result = _score_one_answer(path, "x", out)
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.replace("│", " ").split())
    assert (
        f"--data: {path}: no valid record (2 problems; first: {path}: record #0: field 'id': empty id"
        in text
    )
    assert not out.exists()


def test_bad_records_are_shown_once_and_at_most_five(tmp_path: Path) -> None:
    """Each bad record is one ``error:`` line on stderr, the first five of them and how many
    more: they were also logged as ``warning:`` lines when loaded, every one of them (a
    tester's finding: each twice, and thousands for a large file)."""
    path = tmp_path / "data.json"
    records = [_record("c", ["2"], [2.0]), *(_record("", ["1"], [1.0]) for _ in range(8))]
    path.write_text(json.dumps({"dev": records}))
    result = _score_one_answer(path, "c", tmp_path / "out")
    assert result.exit_code == 3, result.output
    text = result.output
    assert text.count("field 'id': empty id") == 5
    assert "warning:" not in text
    assert "... and 3 more (8 problems in all" in " ".join(text.split())


def test_predictions_of_conversations_not_drawn_name_the_sample(tmp_path: Path) -> None:
    """Predictions of one conversation, scored with a --sample-size that drew another: the
    usage line says the draw missed them and how to draw alike (a tester's finding: it asked
    whether the files were of the same dataset, which they were)."""
    path = tmp_path / "data.json"
    ids = [f"conv-{i}" for i in range(4)]
    path.write_text(json.dumps({"dev": [_record(i, ["1"], [1.0]) for i in ids]}))
    preds = _write_predictions(
        tmp_path / "p.jsonl", [{"conversation_id": "conv-0", "turn": 0, "answer": "1"}]
    )
    base = ["numeric", "score", "--data", str(path), "--predictions", str(preds), "--no-store"]
    seen = {}
    for seed in range(12):
        args = [*base, "--out", str(tmp_path / f"o{seed}"), "--sample-size", "1"]
        result = CliRunner().invoke(app, [*args, "--seed", str(seed)], env={"COLUMNS": "400"})
        seen[seed] = (result.exit_code, " ".join(result.stderr.split()))
    drawn_elsewhere = [(s, text) for s, (code, text) in seen.items() if code == 2]
    assert drawn_elsewhere and any(code == 0 for code, _ in seen.values())
    seed, text = drawn_elsewhere[0]
    assert text.startswith(
        f"error: --predictions: {preds}: no prediction matches the 1 conversation(s) "
        f"--sample-size 1 --seed {seed} drew from {path} (first prediction: 'conv-0'; first "
        "drawn: 'conv-"
    ), text
    assert "give the --sample-size and --seed the predictions were made with, or neither" in text


def test_predictions_of_few_conversations_warn_that_the_rest_count_as_failures(
    tmp_path: Path,
) -> None:
    """Predictions of one of four conversations, scored against all four: one warning line
    says most turns have no prediction and count as failures, and how to score a sample (a
    tester's finding: only a near-zero accuracy and a list of missing turns said so). With
    most turns predicted there is no such line."""
    path = tmp_path / "data.json"
    path.write_text(json.dumps({"dev": [_record(f"conv-{i}", ["1"], [1.0]) for i in range(4)]}))
    lines = [{"conversation_id": f"conv-{i}", "turn": 0, "answer": "1"} for i in range(4)]
    for kept, warned in ((1, True), (3, False)):
        preds = _write_predictions(tmp_path / f"p{kept}.jsonl", lines[:kept])
        args = ["numeric", "score", "--data", str(path), "--predictions", str(preds)]
        args += ["--out", str(tmp_path / f"o{kept}"), "--no-store", "--bootstrap", "0"]
        result = CliRunner().invoke(app, args, env={"COLUMNS": "60"})
        assert result.exit_code == 3, result.output
        line = (
            f"warning: {4 - kept} of 4 turns have no prediction and count as failures; to score "
            "predictions of some conversations only, give the --sample-size and --seed they "
            "were made with"
        )
        assert (line in result.stderr.splitlines()) is warned, result.stderr


def test_turns_without_gold_are_not_said_to_count_as_failures(
    shared_dir: Path, tmp_path: Path
) -> None:
    """Turns without a gold answer are never scored, predicted or not: the warning about
    unpredicted turns counts only turns with gold (a tester's finding: the private test file with
    predictions of 3 of its 10 records warned "31 of 42 turns have no prediction and count as
    failures" beside NOTHING SCORED)."""
    private = shared_dir / "data" / "convfinqa" / "sample_test_private_original.json"
    records = json.loads(private.read_text())
    lines = [
        {"conversation_id": r["id"], "turn": i, "answer": "1"}
        for r in records[:3]
        for i in range(len(r["annotation"]["dialogue_break"]))
    ]
    assert len(lines) == 11
    no_gold = _record("conv-x", ["1", "2"], [1.0, 2.0])
    no_gold["dialogue"]["executed_answers"] = [None, None]
    mixed = tmp_path / "mixed.json"  # 4 turns with gold, 2 without
    mixed.write_text(
        json.dumps({"dev": [_record(f"conv-{i}", ["1"], [1.0]) for i in range(4)] + [no_gold]})
    )
    one = [{"conversation_id": "conv-0", "turn": 0, "answer": "1"}]
    for data, rows, status, warned in (
        (private, lines, 0, None),
        (mixed, one, 3, "3 of 4 turns with a gold answer have no prediction"),
    ):
        preds = _write_predictions(tmp_path / f"p-{data.stem}.jsonl", rows)
        args = ["numeric", "score", "--data", str(data), "--predictions", str(preds)]
        args += ["--out", str(tmp_path / f"o-{data.stem}"), "--no-store", "--bootstrap", "0"]
        result = CliRunner().invoke(app, args, env={"COLUMNS": "60"})
        assert result.exit_code == status, result.output
        said = [
            w for w in result.stderr.splitlines() if w.startswith("warning: ") and "no pred" in w
        ]
        if warned is None:
            assert said == [], result.stderr
        else:
            assert said == [
                f"warning: {warned} and count as failures; to score predictions of some "
                "conversations only, give the --sample-size and --seed they were made with"
            ], result.stderr


def test_an_integer_beyond_64_bits_in_a_plan_or_its_checks_is_written_exactly(
    tmp_path: Path,
) -> None:
    """A predictions line's ``plan`` and ``validation`` are the model's own JSON: an integer
    beyond 64 bits in them (read exactly since issue 26, item 3) is written exactly to the
    trace and the store; orjson could not write it and ``numeric score`` ended in a traceback
    with an empty folder (a tester's finding)."""
    examples = Path(__file__).resolve().parents[2] / "examples" / "numeric"
    lines = (examples / "predictions_model_a.jsonl").read_text("utf-8").splitlines()
    first = json.loads(lines[0])
    big = 2**64 + 1
    first["validation"] = [{"check": "x", "message": "", "passed": True, "n": big}]
    first["plan"] = {"steps": [{"tool": "extract", "value": big}]}
    preds = tmp_path / "p.jsonl"
    preds.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", "utf-8")
    out = tmp_path / "out"
    args = ["numeric", "score", "--data", str(examples / "data.json")]
    args += ["--predictions", str(preds), "--out", str(out), "--bootstrap", "0"]
    result = CliRunner().invoke(
        app, args, env={"COLUMNS": "400", "FIELDCHECK_DATABASE_URL": f"sqlite:///{tmp_path}/s.db"}
    )
    assert result.exit_code == 0, result.output
    traces = "".join(p.read_text("utf-8") for p in sorted((out / "traces").glob("*.json")))
    assert str(big) in traces and "1.8446744073709552e+19" not in traces


def test_a_plan_steps_tool_ignores_case_as_operation_names_do(tmp_path: Path) -> None:
    steps = [{"tool": "Extract", "value": 5}, {"tool": " COMPUTE", "operation": "add", "args": [1]}]
    preds = _write_predictions(
        tmp_path / "p.jsonl",
        [
            {"conversation_id": "c", "turn": 0, "answer": "1", "plan": {"steps": steps}},
            {"conversation_id": "c", "turn": 1, "answer": "2", "plan": {"steps": steps[1:]}},
        ],
    )
    loaded = load_predictions(preds)
    assert [e.one_line() for e in loaded.errors] == []
    tools = [[s.tool for s in p.plan.steps] for p in loaded.predictions.values()]
    assert tools == [["extract", "compute"], ["compute"]]
    assert PlanStep.model_validate(steps[1]).tool == "compute"

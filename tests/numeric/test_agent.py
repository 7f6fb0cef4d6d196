"""`fieldcheck numeric evaluate` against the scripted chat server: every error type, the repair
round, the exact rows of predictions.jsonl / validation.csv / errors.csv, the scores, resume."""

from __future__ import annotations

import asyncio
import csv
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from chat_server import ChatServer, Reply, Script
from fieldcheck._cli.main import app
from fieldcheck.numeric._agent import PROMPT_ID, REPAIR_INTRO
from fieldcheck.runner import RunHandle

Server = Callable[[Script], ChatServer]

DATA = {
    "dev": [
        {
            "id": "conv-A",
            "doc": {
                "pre_text": "revenue grew to $ 1,200 million in 2019 .",
                "post_text": "costs are in millions .",
                "table": {
                    "2019": {"revenue": 1200, "costs": 700},
                    "2018": {"revenue": 1000, "costs": 650},
                },
            },
            "dialogue": {
                "conv_questions": [
                    "what was revenue in 2019?",
                    "and in 2018?",
                    "what was the change?",
                    "what is that as a ratio to 2018?",
                ],
                "conv_answers": ["1200", "1000", "200", "20%"],
                "turn_program": [
                    "1200",
                    "1000",
                    "subtract(1200, 1000)",
                    "subtract(1200, 1000), divide(#0, 1000)",
                ],
                "executed_answers": [1200, 1000, 200, 0.2],
                "qa_split": [False, False, False, False],
            },
        },
        {
            "id": "conv-B",
            "doc": {
                "pre_text": "costs fell .",
                "post_text": "",
                "table": {"2019": {"costs": 700}, "2018": {"costs": 650}},
            },
            "dialogue": {
                "conv_questions": [
                    "what were costs in 2019?",
                    "and in 2018?",
                    "what was the ratio of 2019 to 2018 costs?",
                    "what was the change from 2018 to 2019?",
                ],
                "conv_answers": ["700", "650", "1.077", "50"],
                "turn_program": [
                    "700",
                    "650",
                    "divide(700, 650)",
                    "subtract(700, 650)",
                ],
                "executed_answers": [700, 650, 1.07692, 50],
                "qa_split": [False, False, False, False],
            },
        },
    ]
}


def ext(value: float, row: str, column: str) -> dict[str, Any]:
    return {"tool": "extract", "value": value, "source": "table", "row": row, "column": column}


def comp(operation: str, *args: Any) -> dict[str, Any]:
    return {"tool": "compute", "operation": operation, "args": list(args)}


def plan(*steps: dict[str, Any]) -> str:
    return json.dumps({"steps": list(steps)})


GOOD = {
    ("A", "what was revenue in 2019?"): plan(ext(1200, "revenue", "2019")),
    ("A", "and in 2018?"): plan(ext(1000, "revenue", "2018")),
    ("A", "what was the change?"): plan(
        ext(1200, "revenue", "2019"), ext(1000, "revenue", "2018"), comp("subtract", 1200, 1000)
    ),
    ("A", "what is that as a ratio to 2018?"): plan(
        comp("subtract", 1200, 1000), comp("divide", "#0", 1000)
    ),
    ("B", "what were costs in 2019?"): plan(ext(700, "costs", "2019")),
    ("B", "and in 2018?"): plan(ext(650, "costs", "2018")),
    ("B", "what was the ratio of 2019 to 2018 costs?"): plan(comp("divide", 700, 650)),
    ("B", "what was the change from 2018 to 2019?"): plan(comp("subtract", 700, 650)),
}


def question_of(request: dict[str, Any]) -> tuple[str, str, int]:
    """(conversation marker, question, round) of a request: round 2 is the repair round."""
    users = [m["content"] for m in request["messages"] if m["role"] == "user"]
    first = users[0]
    question = next(line for line in first.splitlines() if line.startswith("Question: "))
    conversation = "B" if "costs fell" in first else "A"
    return conversation, question.removeprefix("Question: "), len(users)


def scripted(request: dict[str, Any], counts: dict[tuple[str, str], int]) -> str | Reply:
    """The error scenarios, one per turn (see the test's docstring)."""
    conv, question, round_ = question_of(request)
    key = (conv, question)
    counts[key] = counts.get(key, 0) + 1
    if conv == "A":
        if question == "and in 2018?":
            return "I think it was 1000."  # not JSON: invalid_reply, no repair
        if question == "what was the change?":
            if round_ == 1:  # a value not in the document (and not in the cell it names)
                return plan(
                    ext(1300, "revenue", "2019"),
                    ext(1000, "revenue", "2018"),
                    comp("subtract", 1300, 1000),
                )
            return GOOD[key]
        if question == "what is that as a ratio to 2018?":  # an unknown operation, twice
            return plan(comp("subtract", 1200, 1000), comp("modulo", "#0", 1000))
        return GOOD[key]
    if question == "what were costs in 2019?" and counts[key] == 1:
        return Reply(status=500)
    if question == "and in 2018?":
        return Reply(
            status=400, error_body={"error": {"message": "context too long", "type": "bad"}}
        )
    if question == "what was the ratio of 2019 to 2018 costs?" and round_ == 1:
        return plan(comp("divide", "#1", 650))  # #1 before any compute step
    if question == "what was the change from 2018 to 2019?":
        return plan(comp("subtract", 650, 700))  # valid plan, wrong sign
    return GOOD[key]


def write_data(tmp_path: Path) -> Path:
    path = tmp_path / "data.json"
    path.write_text(json.dumps(DATA))
    return path


def evaluate(
    server: ChatServer, data: Path, out: Path, *extra: str, command: str = "evaluate"
) -> Any:
    return CliRunner().invoke(
        app,
        [
            "numeric",
            command,
            "--data",
            str(data),
            "--model",
            "m=scripted-model",
            "--base-url",
            server.base_url,
            "--out",
            str(out),
            "--max-retries",
            "1",
            "--bootstrap",
            "0",
            "--no-progress",
            *extra,
        ],
        env={"COLUMNS": "400"},
    )


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def error_run(chat_server: Server, tmp_path: Path) -> tuple[ChatServer, Path, Any]:
    counts: dict[tuple[str, str], int] = {}
    server = chat_server(lambda request: scripted(request, counts))
    out = tmp_path / "out"
    result = evaluate(server, write_data(tmp_path), out, "--concurrency", "1")
    return server, out, result


def test_every_error_type_lands_in_predictions(error_run: tuple[ChatServer, Path, Any]) -> None:
    """A: ok, not JSON, value not in document then repaired, unknown operation twice;
    B: 500 then ok, 400, bad #k then repaired, valid plan with the wrong sign."""
    server, out, result = error_run
    assert result.exit_code == 3, result.output  # the 400 is a call error: the run is incomplete
    lines = read_jsonl(out / "predictions.jsonl")
    got = [
        (
            p["conversation_id"],
            p["turn"],
            p["answer"],
            p["error"]["type"] if p["error"] else None,
            p["input_tokens"],
            p["output_tokens"],
        )
        for p in lines
    ]
    assert got == [
        ("conv-A", 0, 1200, None, 10, 5),
        ("conv-A", 1, None, "invalid_reply", 10, 5),
        ("conv-A", 2, 200, None, 20, 10),
        ("conv-A", 3, None, "invalid_plan", 20, 10),
        ("conv-B", 0, 700, None, 10, 5),
        ("conv-B", 1, None, "bad_request", 0, 0),
        ("conv-B", 2, pytest.approx(700 / 650), None, 20, 10),
        ("conv-B", 3, -50, None, 10, 5),
    ]
    by_turn = {(p["conversation_id"], p["turn"]): p for p in lines}
    assert by_turn["conv-A", 3]["error"]["message"] == (
        "operations: step 1: unknown operation 'modulo'"
    )
    assert by_turn["conv-A", 1]["error"]["message"].startswith("not JSON: ")
    assert by_turn["conv-A", 1]["plan"] is None
    assert "context too long" in by_turn["conv-B", 1]["error"]["message"]
    assert by_turn["conv-A", 2]["plan"] == json.loads(GOOD["A", "what was the change?"])
    assert all(p["latency_s"] >= 0 for p in lines)
    # 8 turns: 8 first calls, 3 repair calls, one retried 500
    assert len(server.chat_requests) == 12


def test_history_holds_the_models_own_answers(error_run: tuple[ChatServer, Path, Any]) -> None:
    server, _, _ = error_run
    firsts = [
        r for r in server.chat_requests if sum(m["role"] == "user" for m in r["messages"]) == 1
    ]
    last_a = next(r for r in firsts if "ratio to 2018" in r["messages"][1]["content"])
    text = last_a["messages"][1]["content"]
    assert PROMPT_ID in last_a["messages"][0]["content"]
    assert text.endswith(
        "Earlier questions and your answers:\n"
        "Q0: what was revenue in 2019?\n"
        "A0: 1200\n"
        "Q1: and in 2018?\n"
        "A1: (no answer)\n"
        "Q2: what was the change?\n"
        "A2: 200\n\n"
        "Question: what is that as a ratio to 2018?\n"
        "Reply with the plan: one JSON object."
    )
    assert "| revenue | 1200 | 1000 |" in text


def test_a_call_error_is_no_answer_in_the_later_turns_history(
    error_run: tuple[ChatServer, Path, Any],
) -> None:
    """conv-B's turn 1 ends in a call error (a 400): turn 2 is asked with `(no answer)` for it,
    as after the model's own failure (the model never gave that answer, so a later turn that
    would reuse it can end otherwise than in a healthy run; docs/numeric.md says which turns
    compare)."""
    server, _, _ = error_run
    [turn2] = [
        r["messages"][1]["content"]
        for r in server.chat_requests
        if sum(m["role"] == "user" for m in r["messages"]) == 1
        and "Question: what was the ratio of 2019 to 2018 costs?" in r["messages"][1]["content"]
    ]
    assert "Q0: what were costs in 2019?\nA0: 700\nQ1: and in 2018?\nA1: (no answer)\n" in turn2


def test_repair_round_sends_the_validator_messages(
    error_run: tuple[ChatServer, Path, Any],
) -> None:
    server, _, _ = error_run
    repairs = [
        r for r in server.chat_requests if sum(m["role"] == "user" for m in r["messages"]) == 2
    ]
    assert len(repairs) == 3
    change = next(
        r for r in repairs if "Question: what was the change?" in r["messages"][1]["content"]
    )
    assert [m["role"] for m in change["messages"]] == ["system", "user", "assistant", "user"]
    assert change["messages"][3]["content"] == (
        f"{REPAIR_INTRO}\n"
        "- values_in_document: step 0: extracted value 1300 is not in the document; "
        "step 2: argument 1300 is not in the document\n"
        "- table_cells: step 0: the cell (revenue, 2019) holds 1200.0, not 1300\n"
        "Reply with a corrected plan: one JSON object."
    )


def test_validation_csv_rows(error_run: tuple[ChatServer, Path, Any]) -> None:
    _, out, _ = error_run
    rows = read_csv(out / "validation.csv")
    checks = ["json", "schema", "operations", "arguments", "references"]
    checks += ["values_in_document", "table_cells", "executes"]

    def turn(conversation: str, index: int) -> list[tuple[str, str, str]]:
        return [
            (r["check"], r["passed"], r["message"])
            for r in rows
            if r["conversation_id"] == conversation and r["turn_idx"] == str(index)
        ]

    assert turn("conv-A", 0) == [(c, "True", "") for c in checks]
    [(check, passed, message)] = turn("conv-A", 1)
    assert (check, passed) == ("json", "False")
    assert message.startswith("not JSON: ")
    a2 = turn("conv-A", 2)
    assert [(c, p) for c, p, _ in a2] == [
        *((c, "False" if c in ("values_in_document", "table_cells") else "True") for c in checks),
        *((c, "True") for c in checks),
    ]
    assert all(m.startswith("repair round") for _, _, m in a2[8:])
    assert a2[8] == ("json", "True", "repair round")
    a3 = turn("conv-A", 3)  # the unknown operation: 'executes' cannot run, twice
    assert a3 == [
        ("json", "True", ""),
        ("schema", "True", ""),
        ("operations", "False", "step 1: unknown operation 'modulo'"),
        ("arguments", "True", ""),
        ("references", "True", ""),
        ("values_in_document", "True", ""),
        ("table_cells", "True", ""),
        ("json", "True", "repair round"),
        ("schema", "True", "repair round"),
        ("operations", "False", "repair round: step 1: unknown operation 'modulo'"),
        ("arguments", "True", "repair round"),
        ("references", "True", "repair round"),
        ("values_in_document", "True", "repair round"),
        ("table_cells", "True", "repair round"),
    ]
    assert turn("conv-B", 0) == [(c, "True", "") for c in checks]
    assert turn("conv-B", 1) == []  # the call failed: nothing to validate
    b2 = turn("conv-B", 2)
    assert b2[4] == (
        "references",
        "False",
        "step 0: #1 refers to compute step 1, but no compute steps come before it",
    )
    assert len(b2) == 7 + 8  # no 'executes' in the first round


def test_errors_csv_and_scores(error_run: tuple[ChatServer, Path, Any]) -> None:
    _, out, result = error_run
    errors = read_csv(out / "errors.csv")
    assert [(e["conversation_id"], e["turn_idx"], e["error_type"]) for e in errors] == [
        ("conv-A", "1", "invalid_reply"),
        ("conv-A", "3", "invalid_plan"),
        ("conv-B", "3", "sign"),
    ]  # B1's bad_request is a failed call: not scored, so not an error row (turns.csv has it)
    stats = json.loads((out / "statistics.json").read_text())
    # B1's call failed (bad_request): not scored, so 7 scored turns; right: A0, A2, B0, B2
    assert stats["num_scored_turns"] == 7
    assert stats["turns_not_scored_call_errors"] == {"bad_request": 1}
    assert stats["numerical_match_accuracy"] == 4 / 7
    assert stats["sign_agnostic_accuracy"] == 5 / 7  # + B3
    assert stats["conversation_success_rate"] == 0.0
    assert stats["total_input_tokens"] == 100
    assert stats["total_output_tokens"] == 50
    assert stats["num_prediction_errors"] == 3
    assert "numerical match" in result.output
    assert "m: run " in result.output
    assert "turn errors: bad_request=1 invalid_plan=1 invalid_reply=1" in result.output
    assert "store: sqlite:///" in result.output


def clean_script(request: dict[str, Any]) -> str:
    conversation, question, _ = question_of(request)
    return GOOD[conversation, question]


def test_second_run_makes_no_calls_and_writes_the_same_files(
    chat_server: Server, tmp_path: Path
) -> None:
    server = chat_server(clean_script)
    data = write_data(tmp_path)
    first = evaluate(server, data, tmp_path / "one")
    assert first.exit_code == 0, first.output
    calls = len(server.chat_requests)
    assert calls == 8
    second = evaluate(server, data, tmp_path / "two")
    assert second.exit_code == 0, second.output
    assert len(server.chat_requests) == calls  # every reply came from the cache
    for name in ("predictions.jsonl", "turns.csv", "validation.csv", "errors.csv", "summary.csv"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    one = json.loads((tmp_path / "one" / "statistics.json").read_text())
    two = json.loads((tmp_path / "two" / "statistics.json").read_text())
    assert one == two
    assert one["numerical_match_accuracy"] == 1.0


def test_interrupted_run_resumes_from_stored_turns(
    chat_server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = chat_server(clean_script)
    data = write_data(tmp_path)
    original = RunHandle.save
    saved: list[str] = []

    def save_then_stop(self: RunHandle, key: str, *args: Any, **kwargs: Any) -> None:
        original(self, key, *args, **kwargs)
        saved.append(key)
        if len(saved) == 3:
            raise asyncio.CancelledError  # as Ctrl-C would, after three stored turns

    monkeypatch.setattr(RunHandle, "save", save_then_stop)
    first = evaluate(server, data, tmp_path / "out", "--concurrency", "1", "--no-cache")
    assert first.exit_code == 130, first.output
    assert "interrupted: 3 of 8 items finished and stored" in first.output
    assert len(server.chat_requests) == 3
    monkeypatch.setattr(RunHandle, "save", original)
    second = evaluate(server, data, tmp_path / "out", "--concurrency", "1", "--no-cache")
    assert second.exit_code == 0, second.output
    assert "resuming run" in second.output
    assert len(server.chat_requests) == 8  # only the 5 unfinished turns were called
    asked = [question_of(r)[:2] for r in server.chat_requests]
    assert sorted(asked) == sorted(GOOD)  # every turn called exactly once over both runs
    last_a = next(
        r["messages"][1]["content"]
        for r in server.chat_requests[3:]
        if question_of(r)[:2] == ("A", "what is that as a ratio to 2018?")
    )
    # the history of a resumed conversation comes from the stored turns
    assert "A0: 1200\nQ1: and in 2018?\nA1: 1000\nQ2: what was the change?\nA2: 200\n" in last_a
    lines = read_jsonl(tmp_path / "out" / "predictions.jsonl")
    assert [(p["conversation_id"], p["turn"]) for p in lines] == [
        (c, t) for c in ("conv-A", "conv-B") for t in range(4)
    ]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--seed", "x"], "--seed: Input should be a valid integer"),
        (["--split", "train"], "no split 'train' in file"),
        (["--price-in", "1"], "give --price-in and --price-out together"),
    ],
)
def test_usage_errors_exit_2(
    chat_server: Server, tmp_path: Path, extra: list[str], message: str
) -> None:
    server = chat_server(clean_script)
    result = evaluate(server, write_data(tmp_path), tmp_path / "out", *extra)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert server.chat_requests == []


def test_no_model_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["numeric", "evaluate", "--data", str(write_data(tmp_path)), "--out", str(tmp_path / "o")],
        env={"COLUMNS": "400"},
    )
    assert result.exit_code == 2
    assert "give --model MODEL (with --base-url) or --models FILE" in " ".join(
        result.output.split()
    )


def test_json_of_one_model_is_its_statistics_file(chat_server: Server, tmp_path: Path) -> None:
    """`--json` prints the summary file as written; {"models": ...} only for several models."""
    server = chat_server(clean_script)
    result = evaluate(server, write_data(tmp_path), tmp_path / "out", "--json", "--bootstrap", "0")
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert printed == json.loads((tmp_path / "out" / "statistics.json").read_text())
    assert printed["numerical_match_accuracy"] == 1.0


def test_numeric_run_is_evaluate(chat_server: Server, tmp_path: Path) -> None:
    """``numeric run`` (as ``json run`` and ``slots run`` are named; a tester typed it) is
    ``numeric evaluate``: the same statistics from the same replies."""
    counts: dict[tuple[str, str], int] = {}
    server = chat_server(lambda request: scripted(request, counts))
    data = write_data(tmp_path)
    first = evaluate(server, data, tmp_path / "a", "--concurrency", "1", "--no-cache")
    counts.clear()
    again = evaluate(
        server, data, tmp_path / "b", "--concurrency", "1", "--no-cache", command="run"
    )
    assert again.exit_code == first.exit_code, again.output
    stats = [json.loads((tmp_path / d / "statistics.json").read_text()) for d in "ab"]
    assert stats[0]["numerical_match_accuracy"] == stats[1]["numerical_match_accuracy"]
    assert stats[0]["num_turns"] == stats[1]["num_turns"] > 0


def test_an_out_holding_files_is_refused_before_any_call(
    chat_server: Server, tmp_path: Path
) -> None:
    """A folder of the user's as --out is refused before any model call (a tester's finding:
    every call was made, then the run stopped, exit 2); nothing in it is changed or added."""
    server = chat_server(clean_script)
    data, out = write_data(tmp_path), tmp_path / "out"
    (out / "traces").mkdir(parents=True)
    (out / "traces" / "mine.txt").write_text("mine")
    result = evaluate(server, data, out)
    assert result.exit_code == 2
    assert f"{out} holds files (traces); give a new or empty folder" in " ".join(
        result.output.split()
    )
    assert server.chat_requests == []
    assert (out / "traces" / "mine.txt").read_text() == "mine"
    assert [p.name for p in out.iterdir()] == ["traces"]


def test_scoring_an_evaluate_folders_predictions_into_that_folder_is_refused(
    chat_server: Server, tmp_path: Path
) -> None:
    """``numeric score --out F`` of the predictions.jsonl ``numeric evaluate`` wrote in F is
    refused (exit 2, one line) with F unchanged (a tester's finding: it was deleted, and with
    --no-store lost for good); into another folder it is scored, with one run.json for the
    evaluation naming the model."""
    server = chat_server(clean_script)
    data, out = write_data(tmp_path), tmp_path / "out"
    assert evaluate(server, data, out).exit_code == 0
    info = json.loads((out / "run.json").read_text())
    assert (info["system"], info["command"], info["complete"]) == (
        "numeric",
        "numeric evaluate",
        True,
    )
    assert info["signature"]["system"] == "numeric"
    predictions = out / "predictions.jsonl"
    tree = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    args = ["numeric", "score", "--data", str(data), "--predictions", str(predictions)]
    refused = CliRunner().invoke(app, [*args, "--out", str(out), "--bootstrap", "0"])
    assert refused.exit_code == 2, refused.output
    assert f"{out} holds files" in " ".join(refused.output.split())
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == tree
    scored = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "s"), "--bootstrap", "0"])
    assert scored.exit_code == 0, scored.output


@pytest.mark.parametrize("bad", ["empty", "unknown split"])
def test_a_bad_data_file_is_refused_before_out_is_changed(
    chat_server: Server, tmp_path: Path, bad: str
) -> None:
    """``numeric evaluate`` with a --data that gives no conversation (empty, or a split it does
    not have) is the usage line, exit 2, before --out is prepared: the earlier run's files,
    predictions.jsonl among them, are kept (a tester's finding: they were deleted first)."""
    server = chat_server(clean_script)
    data, out = write_data(tmp_path), tmp_path / "out"
    assert evaluate(server, data, out).exit_code == 0
    tree = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    calls = len(server.chat_requests)
    extra = ["--split", "nosuch"] if bad == "unknown split" else []
    if bad == "empty":
        data.write_text("")
    again = evaluate(server, data, out, *extra)
    assert again.exit_code == 2, again.output
    assert " ".join(again.output.split()).startswith(f"error: --data: {data}")
    assert len(server.chat_requests) == calls
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == tree


@pytest.mark.parametrize(
    ("data", "extra", "message"),
    [
        ([], [], "no conversations (the dataset is empty)"),
        ({"dev": DATA["dev"], "train": []}, ["--split", "train"], "no conversations"),
        (
            {"dev": [{"id": "x"}, {"id": "y", "doc": 3}]},
            [],
            "no valid record (2 problems; first:",
        ),
    ],
    ids=["empty list", "empty split", "every record bad"],
)
def test_data_with_no_conversation_to_run_writes_no_folder_and_stores_no_run(
    chat_server: Server, tmp_path: Path, data: Any, extra: list[str], message: str
) -> None:
    """A model run of data with nothing to run is the usage line of ``numeric score``, exit 2,
    before the run is opened: no --out and no partial folder, no call, no stored run; the same
    command with the file fixed then runs (a tester's finding: a "finished" run of 0 items was
    stored, DIR.fieldcheck-partial left, and the fixed rerun refused as on other inputs)."""
    from fieldcheck.store import Store

    server = chat_server(clean_script)
    path, out = tmp_path / "data.json", tmp_path / "out"
    path.write_text(json.dumps(data))
    result = evaluate(server, path, out, *extra, command="run")
    assert result.exit_code == 2, result.output
    assert " ".join(result.output.split()).startswith(f"error: --data: {path}: {message}")
    assert "finished" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.json"]
    assert server.chat_requests == []
    assert Store(os.environ["FIELDCHECK_DATABASE_URL"]).list_runs() == []
    path.write_text(json.dumps(DATA))
    fixed = evaluate(server, path, out, command="run")
    assert fixed.exit_code == 0, fixed.output
    assert json.loads((out / "statistics.json").read_text())["num_turns"] == 8


def test_a_run_with_other_settings_names_the_interrupted_run_it_does_not_resume(
    chat_server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rerunning an interrupted run with other settings (prices) starts a new run, and one line
    names the interrupted one and what differs (a tester's finding: nothing said it was not
    resumed); the same settings resume it with no such line."""
    server = chat_server(clean_script)
    data = write_data(tmp_path)
    original = RunHandle.save
    saved: list[str] = []

    def save_then_stop(self: RunHandle, key: str, *args: Any, **kwargs: Any) -> None:
        original(self, key, *args, **kwargs)
        saved.append(key)
        if len(saved) == 3:
            raise asyncio.CancelledError  # as Ctrl-C would, after three stored turns

    monkeypatch.setattr(RunHandle, "save", save_then_stop)
    first = evaluate(server, data, tmp_path / "out", "--concurrency", "1")
    assert first.exit_code == 130, first.output
    monkeypatch.setattr(RunHandle, "save", original)
    from fieldcheck.store import Store

    [old] = Store(os.environ["FIELDCHECK_DATABASE_URL"]).list_runs()
    prices = ["--price-in", "1", "--price-out", "2"]
    other = evaluate(server, data, tmp_path / "other", "--concurrency", "1", *prices)
    assert other.exit_code == 0, other.output
    line = next(x for x in other.stderr.splitlines() if x.startswith("not resuming"))
    new = next(r.id for r in Store(os.environ["FIELDCHECK_DATABASE_URL"]).list_runs() if r != old)
    assert line == (
        f"not resuming run {old.id} (m, interrupted, 3 of 8 items done): it ran with other "
        f"price_in, price_out; this is a new run {new} (the old one is resumed by the command "
        "with its settings)"
    )
    same = evaluate(server, data, tmp_path / "out", "--concurrency", "1")
    assert same.exit_code == 0, same.output
    assert f"resuming run {old.id}: 3 of 8 items" in same.stderr
    assert "not resuming" not in same.stderr

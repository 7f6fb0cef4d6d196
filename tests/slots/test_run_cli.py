"""`fieldcheck slots run` against the scripted chat server: predictions, latencies, memory carried
between sessions, every error type, several models, exact scores, the judge, resume."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from chat_server import ChatServer, Reply, Script
from cli_child import start_cli
from fieldcheck._cli.main import app
from fieldcheck._util.paths import unique_filenames
from fieldcheck.runner import ModelSpec, RunInterrupted, Runner, RunnerSettings
from fieldcheck.slots import load_conversations, run_extraction
from fieldcheck.store import Store

StartServer = Callable[[Script], ChatServer]

CONVERSATIONS = [
    {"user": "a", "session": 1, "turns": [{"role": "user", "content": "I am Ann, 30."}]},
    {"user": "a", "session": 2, "turns": [{"role": "user", "content": "I moved to Oslo."}]},
    {"user": "b", "session": 1, "turns": [{"role": "user", "content": "I like chess."}]},
]
REPLIES = {
    "I am Ann, 30.": {"basic_info": {"name": ["Ann"], "age": ["30"]}},
    "I moved to Oslo.": {"basic_info": {"location": ["Oslo"], "age": []}},
    "I like chess.": {"interests": {"hobbies": ["chess"], "travel": ["Rome"]}},
}
GOLD = [
    {"user": "a", "session": 1, "topic": "basic_info", "field": "name", "values": ["Ann"]},
    {"user": "a", "session": 1, "topic": "basic_info", "field": "age", "values": ["30"]},
    {"user": "a", "session": 2, "topic": "basic_info", "field": "location", "values": ["Oslo"]},
    {"user": "a", "session": 2, "topic": "mental_state", "field": "mood", "values": ["calm"]},
    {"user": "b", "session": 1, "topic": "interests", "field": "hobbies", "values": ["chess"]},
]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def flat(output: str, sep: str = " ") -> str:
    """Console output without box lines and line breaks (Rich wraps long messages)."""
    return sep.join(output.replace("│", " ").split())


def is_memory_request(body: dict[str, Any]) -> bool:
    return "(prompt slot-memory-v1)" in body["messages"][0]["content"]


def transcript(body: dict[str, Any]) -> str:
    """The user turn of the (one-turn) session in a request."""
    text = body["messages"][1]["content"]
    return text.split("<session>\nuser: ", 1)[1].split("\n</session>", 1)[0]


def memory_in(body: dict[str, Any]) -> Any:
    text = body["messages"][1]["content"]
    return json.loads(text.split("<memory>\n", 1)[1].split("\n</memory>", 1)[0])


def scripted(body: dict[str, Any]) -> str | Reply:
    return Reply(content=json.dumps(REPLIES[transcript(body)]), delay_s=0.05)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    return {
        "conv": write_jsonl(tmp_path / "conv.jsonl", CONVERSATIONS),
        "gold": write_jsonl(tmp_path / "gold.jsonl", GOLD),
        "out": tmp_path / "out",
    }


def invoke(files: dict[str, Path], url: str, *extra: str, out: Path | None = None) -> Any:
    args = [
        "slots", "run", "--conversations", str(files["conv"]), "--gold", str(files["gold"]),
        "--base-url", url, "--out", str(out or files["out"]), "--bootstrap", "0", "--no-progress",
        *extra,
    ]  # fmt: skip
    return CliRunner().invoke(app, args)


def test_a_runs_conversations_are_its_dataset_in_runs_compare(
    chat_server: StartServer, files: dict[str, Path], tmp_path: Path
) -> None:
    """A `slots run` records its conversations with its gold, so `runs compare` warns when two
    runs read other conversations (it said nothing: only the gold was recorded; a tester's
    finding), and not when the same bytes lie elsewhere."""
    server = chat_server(scripted)
    other = [dict(c, note="edited") if c["user"] == "b" else c for c in CONVERSATIONS]
    runs = {}
    for name, conversations in (
        ("first", CONVERSATIONS),
        ("copy", CONVERSATIONS),
        ("other", other),
    ):
        given = {**files, "conv": write_jsonl(tmp_path / f"{name}.jsonl", conversations)}
        result = invoke(given, server.base_url, "--model", "m=model-x", out=tmp_path / name)
        assert result.exit_code == 0, result.output
        runs[name] = Store().list_runs(system="slots", newest_first=True)[0].id
    shown = json.loads(CliRunner().invoke(app, ["runs", "show", runs["first"], "--json"]).stdout)
    assert [i["name"] for i in shown["inputs"]][:2] == ["gold", "conversations"]

    def warnings(a: str, b: str) -> list[str]:
        result = CliRunner().invoke(app, ["runs", "compare", runs[a], runs[b], "--json"])
        assert result.exit_code == 0, result.output
        return [w["message"] for w in json.loads(result.stdout)["warnings"]]

    assert not [w for w in warnings("first", "copy") if "dataset" in w]
    [warning] = [w for w in warnings("first", "other") if "dataset" in w]
    assert "conversations other.jsonl" in warning and "conversations first.jsonl" in warning


def test_predictions_latencies_memory_and_exact_scores(
    chat_server: StartServer, files: dict[str, Path]
) -> None:
    server = chat_server(scripted)
    result = invoke(files, server.base_url, "--model", "m=model-x", "--concurrency", "2")
    assert result.exit_code == 0, result.output
    out = files["out"]
    assert sorted(read_jsonl(out / "pred_m.jsonl"), key=lambda r: (r["user"], r["session"])) == [
        {"user": "a", "session": 1, "topic": "basic_info", "field": "name", "values": ["Ann"]},
        {"user": "a", "session": 1, "topic": "basic_info", "field": "age", "values": ["30"]},
        {"user": "a", "session": 2, "topic": "basic_info", "field": "location", "values": ["Oslo"]},
        {"user": "b", "session": 1, "topic": "interests", "field": "hobbies", "values": ["chess"]},
        {"user": "b", "session": 1, "topic": "interests", "field": "travel", "values": ["Rome"]},
    ]
    latencies = read_jsonl(out / "latency_m.jsonl")
    assert [(r["user"], r["session"]) for r in latencies] == [("a", 1), ("a", 2), ("b", 1)]
    assert all(0.05 <= r["seconds"] < 5 for r in latencies)
    # the memory after each session: a/2 set location and removed age ([])
    assert read_jsonl(out / "memory_m.jsonl") == [
        {"user": "a", "session": 1, "memory": {"basic_info": {"name": ["Ann"], "age": ["30"]}}},
        {"user": "a", "session": 2, "memory": {"basic_info": {"name": ["Ann"], "location": ["Oslo"]}}},
        {"user": "b", "session": 1, "memory": {"interests": {"hobbies": ["chess"], "travel": ["Rome"]}}},
    ]  # fmt: skip
    # each request saw the memory left by the user's previous session
    seen = {transcript(b): memory_in(b) for b in server.chat_requests}
    assert seen == {
        "I am Ann, 30.": {},
        "I moved to Oslo.": {"basic_info": {"age": ["30"], "name": ["Ann"]}},
        "I like chess.": {},
    }
    assert all(b["model"] == "model-x" and b["temperature"] == 0.0 for b in server.chat_requests)
    # TP 4 (name, age, location, hobbies), FN 1 (mood), FP 1 (travel, an extra slot)
    m = json.loads((out / "metrics.json").read_text())["models"]["m"]
    assert m["counts"] == {"tp": 4, "fp": 1, "fn": 1, "gold_slots": 5, "sessions": 3}
    assert (m["precision"], m["recall"], m["exact_match_rate"]) == (0.8, 0.8, 0.8)
    assert m["f1"] == pytest.approx(0.8, abs=1e-12)
    assert (m["extra_slots"], m["extra_values"], m["llm_judge"]) == (1, 1, None)
    assert m["token_precision"] == 1.0 and m["token_recall"] == 0.8
    assert m["latency"]["total"] == pytest.approx(sum(r["seconds"] for r in latencies))
    assert read_jsonl(out / "session_errors.jsonl") == []
    runs = json.loads((out / "runs.json").read_text())
    assert runs["prompt"] == "slot-memory-v1" and runs["memory"] == "update-merge"
    assert runs["runs"]["m"]["sessions"] == 3 and runs["runs"]["m"]["session_errors"] == 0
    assert runs["runs"]["m"]["input_tokens"] == 30 and runs["runs"]["m"]["output_tokens"] == 15
    assert "Model runs" in result.output and (out / "report.html").exists()


def test_every_failure_is_typed_listed_and_leaves_the_memory_unchanged(
    chat_server: StartServer, tmp_path: Path
) -> None:
    texts = ["name Eve", "bad json", "bad schema", "flaky", "bad request", "down", "age 40"]
    conv = write_jsonl(
        tmp_path / "conv.jsonl",
        [
            {"user": "e", "session": i + 1, "turns": [{"role": "user", "content": t}]}
            for i, t in enumerate(texts)
        ],
    )
    gold = write_jsonl(
        tmp_path / "gold.jsonl",
        [{"user": "e", "session": 1, "topic": "basic_info", "field": "name", "values": ["Eve"]}],
    )
    attempts: Counter[str] = Counter()

    def script(body: dict[str, Any]) -> str | Reply:
        text = transcript(body)
        attempts[text] += 1
        if text == "name Eve":
            return '{"basic_info": {"name": ["Eve"]}}'
        if text == "bad json":
            return '{"basic_info": {"name": ["Mallory"]'
        if text == "bad schema":
            return '{"basic_info": {"age": 30}}'
        if text == "flaky":
            if attempts[text] == 1:
                return Reply(status=500, headers={"retry-after": "0"})
            return '{"interests": {"music": ["jazz"]}}'
        if text == "bad request":
            return Reply(status=400)
        if text == "down":
            return Reply(status=503, headers={"retry-after": "0"})
        return '{"basic_info": {"age": ["40"]}}'

    server = chat_server(script)
    out = tmp_path / "out"
    args = (
        f"--conversations {conv} --gold {gold} --model m --base-url {server.base_url} --out {out}"
    )
    args += " --max-retries 1 --bootstrap 0 --no-progress"
    result = CliRunner().invoke(app, ["slots", "run", *args.split()])
    assert result.exit_code == 3, result.output
    errors = read_jsonl(out / "session_errors.jsonl")
    assert [(e["session"], e["error_type"]) for e in errors] == [
        (2, "invalid_reply"),
        (3, "invalid_reply"),
        (5, "bad_request"),
        (6, "server_error"),
    ]
    assert all(e["model"] == "m" and e["user"] == "e" for e in errors)
    assert errors[0]["error_message"].startswith("the reply is not JSON")
    assert errors[1]["error_message"] == "basic_info.age: Input should be a valid list"
    assert "400" in errors[2]["error_message"] and "503" in errors[3]["error_message"]
    assert attempts == {
        "name Eve": 1, "bad json": 1, "bad schema": 1, "flaky": 2, "bad request": 1, "down": 2,
        "age 40": 1,
    }  # fmt: skip
    eve = {"basic_info": {"name": ["Eve"]}}
    with_music = {"basic_info": {"name": ["Eve"]}, "interests": {"music": ["jazz"]}}
    assert [r["memory"] for r in read_jsonl(out / "memory_m.jsonl")] == [
        eve, eve, eve, with_music, with_music, with_music,
        {"basic_info": {"name": ["Eve"], "age": ["40"]}, "interests": {"music": ["jazz"]}},
    ]  # fmt: skip
    # the sessions with an error predicted nothing; only call errors have no latency line
    assert [(r["session"], r["field"]) for r in read_jsonl(out / "pred_m.jsonl")] == [
        (1, "name"), (4, "music"), (7, "age"),
    ]  # fmt: skip
    assert [r["session"] for r in read_jsonl(out / "latency_m.jsonl")] == [1, 2, 3, 4, 7]
    runs = json.loads((out / "runs.json").read_text())["runs"]["m"]
    assert runs["session_errors"] == 4 and "failed" not in runs
    assert runs["errors"] == {"invalid_reply": 2, "bad_request": 1, "server_error": 1}
    table = result.output.split("Model runs")[1]
    assert all(f" {t} " in table for t in ("bad_request=1", "invalid_reply=2", "server_error=1"))
    assert re.search(r"│ m\s+│\s+7 │\s+4 │ bad_request=1", table)
    assert "4 session error(s); listed in" in flat(result.output)
    # the report says the invalid replies too (scored misses), beside the failed calls
    report = flat((out / "report.md").read_text(encoding="utf-8"))
    assert (
        "warning: model 'm': 2 session(s) got an invalid reply (session\\_errors.jsonl): scored, "
        "their gold slots count as missed" in report
    )


def test_several_models_and_a_second_run_makes_no_calls(
    chat_server: StartServer, files: dict[str, Path]
) -> None:
    def script(body: dict[str, Any]) -> str:
        if body["model"] == "y":  # y misses every hobby
            update = {k: v for k, v in REPLIES[transcript(body)].items() if k != "interests"}
            return json.dumps(update)
        return json.dumps(REPLIES[transcript(body)])

    server = chat_server(script)
    models = ("--model", "A=x", "--model", "B/1=y")
    result = invoke(files, server.base_url, *models)
    assert result.exit_code == 0, result.output
    out = files["out"]
    metrics = json.loads((out / "metrics.json").read_text())["models"]
    assert list(metrics) == ["A", "B/1"]
    assert metrics["A"]["counts"]["tp"] == 4 and metrics["B/1"]["counts"]["tp"] == 3
    assert (metrics["B/1"]["precision"], metrics["B/1"]["recall"]) == (1.0, 0.6)
    assert {b["model"] for b in server.chat_requests} == {"x", "y"}
    assert len(server.chat_requests) == 6
    first = {p.name: p.read_bytes() for p in sorted(out.glob("*_*.jsonl"))}
    assert sorted(first) == [
        "latency_A.jsonl", "latency_B_1.jsonl", "memory_A.jsonl", "memory_B_1.jsonl",
        "pred_A.jsonl", "pred_B_1.jsonl", "session_errors.jsonl",
    ]  # fmt: skip
    again = invoke(files, server.base_url, *models, out=out.parent / "again")  # a new folder
    assert again.exit_code == 0, again.output
    assert len(server.chat_requests) == 6  # every reply came from the store
    assert {p.name: p.read_bytes() for p in sorted((out.parent / "again").glob("*_*.jsonl"))} == (
        first
    )


def test_the_judge_scores_predicted_gold_slots_through_the_same_endpoint(
    chat_server: StartServer, files: dict[str, Path]
) -> None:
    def script(body: dict[str, Any]) -> str | Reply:
        return scripted(body) if is_memory_request(body) else "0.5"

    server = chat_server(script)
    result = invoke(files, server.base_url, "--model", "m=x", "--judge-model", "judge-x")
    assert result.exit_code == 0, result.output
    m = json.loads((files["out"] / "metrics.json").read_text())["models"]["m"]
    # 4 predicted gold slots scored 0.5 each, the missed one 0: 2.0 / 5
    assert m["llm_judge"] == 0.4
    judged = [b for b in server.chat_requests if not is_memory_request(b)]
    assert len(judged) == 4 and {b["model"] for b in judged} == {"judge-x"}


def test_no_cache_and_no_store_hold_for_the_judge_too(
    chat_server: StartServer,
    files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--no-cache`` asks the judge again and ``--no-store`` opens no store for it: the judge
    cached its replies and read them back whatever the options (a new-user trial)."""

    def script(body: dict[str, Any]) -> str | Reply:
        return scripted(body) if is_memory_request(body) else "0.5"

    server = chat_server(script)

    def judged() -> int:
        return sum(1 for b in server.chat_requests if not is_memory_request(b))

    models = ("--model", "m=x", "--judge-model", "judge-x")
    for n, extra in enumerate(((), ("--no-cache",)), start=1):
        out = tmp_path / f"cached{n}"
        result = invoke(files, server.base_url, *models, *extra, out=out)
        assert result.exit_code == 0, result.output
        assert json.loads((out / "metrics.json").read_text())["models"]["m"]["llm_judge"] == 0.4
        assert judged() == 4 * n  # --no-cache: the 4 predicted gold slots judged again
    database = tmp_path / "fresh" / "store.sqlite3"
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{database}")
    result = invoke(files, server.base_url, *models, "--no-store", out=tmp_path / "nostore")
    assert result.exit_code == 0, result.output
    assert judged() == 12 and not database.exists()


@pytest.mark.parametrize("command", ["run", "score"])
def test_timeout_and_concurrency_reach_the_judge(
    chat_server: StartServer,
    files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: str,
) -> None:
    """``--timeout`` and ``--concurrency`` of ``slots run`` hold for its judge, and ``slots
    score`` takes them too: a judge that stalls failed each call after a fixed 60 s, 4 at once
    (a new-user trial: 35 slots took 4.5 minutes). The judge here stalls until the test ends."""
    import fieldcheck.matchers

    release, made = threading.Event(), []

    class Judge(fieldcheck.matchers.LLMJudge):
        def __init__(self, **given: Any) -> None:
            made.append((given.get("timeout"), given.get("max_concurrency")))
            super().__init__(**given)

    monkeypatch.setattr(fieldcheck.matchers, "LLMJudge", Judge)

    def stalled(body: dict[str, Any]) -> str | Reply:
        release.wait(120)  # past the judge's deadline: until the test ends
        return "0.5"

    model, judge = chat_server(scripted), chat_server(stalled)
    url = ("--judge-model", "j", "--judge-base-url", judge.base_url)
    limits = ("--timeout", "1", "--concurrency", "2")
    try:
        result = invoke(files, model.base_url, "--model", "m", *url, *limits)
        if command == "score":
            out = files["out"]
            args = [
                "slots",
                "score",
                "--gold",
                str(files["gold"]),
                "--pred",
                f"m={out}/pred_m.jsonl",
            ]
            args += [*url, *limits, "--bootstrap", "0", "--out", str(tmp_path / "s")]
            result = CliRunner().invoke(app, args)
            files["out"] = tmp_path / "s"
    finally:
        release.set()
    assert result.exit_code == 3, result.output
    assert made[-1] == (1.0, 2)
    errors = read_jsonl(files["out"] / "errors.jsonl")
    assert len(errors) == 4 and all(
        e["message"].endswith("no complete reply within 1 s") for e in errors
    ), errors


def test_errors_and_warnings_name_the_files_where_the_finished_folder_holds_them(
    chat_server: StartServer, files: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """A judge that cannot be reached and a session not in the gold: the warnings name
    pred_m.jsonl and latency_m.jsonl in DIR, where they are once the run is complete, not in
    DIR.fieldcheck-partial, which is gone (a new user's finding); the judge's errors name their
    slot, never a file's line (the judge failed, not the predictions)."""
    extra = {"user": "c", "session": 1, "turns": [{"role": "user", "content": "I like chess."}]}
    write_jsonl(files["conv"], [*CONVERSATIONS, extra])
    server = chat_server(scripted)
    with caplog.at_level(logging.WARNING, logger="fieldcheck"):
        result = invoke(
            files, server.base_url, "--model", "m", "--judge-model", "j",
            "--judge-base-url", "http://127.0.0.1:1/v1",
        )  # fmt: skip
    assert result.exit_code == 3, result.output
    out = files["out"]
    pred, latency = f"{out}/pred_m.jsonl", f"{out}/latency_m.jsonl"
    errors = read_jsonl(out / "errors.jsonl")
    assert [(e["file"], e["line"]) for e in errors] == [(None, None)] * 4
    assert all(e["message"].startswith("record ") for e in errors)
    assert "error: record a/1 basic_info/name: the judge failed on model 'm'" in flat(result.output)
    warned = [f"{pred}:6: model 'm': 1 session(s) not in the gold file (c/1)"]
    warned.append(f"{latency}: 1 latency line(s) for sessions not in the gold file are ignored")
    assert all(w in caplog.text for w in warned)
    report = (out / "report.md").read_text(encoding="utf-8")
    problems = [
        line for line in report.splitlines() if line.startswith(("- warning: ", "- error: "))
    ]
    assert [line.replace("\\", "") for line in problems if "_m.jsonl" in line] == [
        f"- warning: {warned[0]}; their 2 slot line(s) are not scored",
        f"- warning: {warned[1]}",
    ]
    assert [p.replace("\\", "") for p in problems if p.startswith("- error: ")] == [
        f"- error: {e['message']}" for e in errors
    ]
    for text in (caplog.text, result.output, report, (out / "report.html").read_text()):
        assert ".fieldcheck-partial" not in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--judge-base-url", "http://127.0.0.1:9/v1"], "--judge-base-url needs --judge-model"),
        (["--model", "m=x", "--model", "m=y"], "model names must be unique"),
        (["--price-in", "1"], "give --price-in and --price-out together"),
    ],
)
def test_usage_errors_exit_2_before_any_call(
    chat_server: StartServer, files: dict[str, Path], args: list[str], message: str
) -> None:
    server = chat_server(scripted)
    extra = args if "--model" in args else ["--model", "m", *args]
    result = invoke(files, server.base_url, *extra)
    assert result.exit_code == 2 and message in flat(result.output)
    assert server.chat_requests == []


def test_a_bad_conversations_line_is_a_usage_error_naming_file_and_line(
    chat_server: StartServer, files: dict[str, Path]
) -> None:
    files["conv"].write_text(
        json.dumps(CONVERSATIONS[0]) + '\n{"user": "a", "session": 2, "turns": "hi"}\n'
    )
    server = chat_server(scripted)
    result = invoke(files, server.base_url, "--model", "m")
    assert result.exit_code == 2
    assert "conv.jsonl:2:field'turns':mustbeavalidlist" in flat(result.output, "")
    assert server.chat_requests == []


def test_conversations_of_no_gold_session_are_a_usage_error_and_missing_ones_are_said(
    chat_server: StartServer, files: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """Conversations none of which is a gold session: a usage error naming both files and the
    first session of each, before any call (a new user's finding: recall 0 on 3 sessions the
    model was never asked about, exit 0). Some gold sessions without a conversation: a warning
    before the calls says how many, and that their gold slots count as missed."""
    server = chat_server(scripted)
    write_jsonl(files["conv"], [{"user": "x", "session": 1, "turns": []}])
    result = invoke(files, server.base_url, "--model", "m")
    assert result.exit_code == 2, result.output
    assert flat(result.stderr).startswith(
        f"error: --conversations: {files['conv']}: no conversation is a session of "
        f"{files['gold']} (first conversation: x/1; first gold session: a/1): are "
        "--conversations and --gold for the same users and sessions?"
    ), result.stderr
    assert server.chat_requests == [] and not files["out"].exists()
    write_jsonl(files["conv"], CONVERSATIONS[:2])  # b/1 has none
    result = invoke(files, server.base_url, "--model", "m")
    assert result.exit_code == 0, result.output
    assert (
        f"{files['gold']}: 1 of 3 gold session(s) have no conversation in {files['conv']}: no "
        "model is asked about them, and their gold slots count as missed"
    ) in caplog.messages
    recall = json.loads((files["out"] / "metrics.json").read_text())["models"]["m"]["recall"]
    assert recall == 0.6  # a/1 name and age, a/2 location of 5 gold slots: b/1's hobby missed
    assert len(server.chat_requests) == 2


def test_file_stems_are_safe_and_distinct() -> None:
    assert unique_filenames(["a/b", "a_b", "A_B", "..", "ok-1.2", "a-2", "a", "A"]) == {
        "a/b": "a_b", "a_b": "a_b-2", "A_B": "A_B-3", "..": "unnamed", "ok-1.2": "ok-1.2",
        "a-2": "a-2", "a": "a", "A": "A-3",  # a made-up "-2" never takes a real name
    }  # fmt: skip


def test_an_interrupted_run_resumes_with_each_users_memory_from_the_store(
    chat_server: StartServer, files: dict[str, Path]
) -> None:
    """Session a/1 finishes, the run is cancelled while a/2 and b/1 wait; the second run calls
    only a/2 and b/1, and a/2 still sees a/1's memory (rebuilt from the stored item)."""
    release = threading.Event()

    def blocking(body: dict[str, Any]) -> str:
        if transcript(body) != "I am Ann, 30.":
            release.wait(10)
        return json.dumps(REPLIES[transcript(body)])

    server = chat_server(blocking)
    spec = ModelSpec(name="m", model="x", base_url=server.base_url)
    convs = load_conversations(files["conv"])
    settings = RunnerSettings(concurrency=4, max_retries=0, use_cache=False)

    async def interrupted() -> None:
        runner = Runner(settings, store=Store())
        task = asyncio.create_task(
            run_extraction(runner, spec, files["conv"], convs, show_progress=False)
        )
        while len(server.chat_requests) < 3:  # a/1 answered, a/2 and b/1 waiting
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(RunInterrupted):
            await task
        await runner.aclose()

    asyncio.run(interrupted())
    release.set()
    first_calls = len(server.chat_requests)
    assert first_calls == 3

    async def resumed() -> Any:
        runner = Runner(settings, store=Store())
        try:
            return await run_extraction(runner, spec, files["conv"], convs, show_progress=False)
        finally:
            await runner.aclose()

    ex = asyncio.run(resumed())
    again = server.chat_requests[first_calls:]
    assert sorted(transcript(b) for b in again) == ["I like chess.", "I moved to Oslo."]
    assert [memory_in(b) for b in again if transcript(b) == "I moved to Oslo."] == [
        {"basic_info": {"age": ["30"], "name": ["Ann"]}}
    ]
    assert ex.resumed_items == 1 and not ex.failed
    assert [s.memory for s in ex.sessions][1] == {
        "basic_info": {"name": ["Ann"], "location": ["Oslo"]}
    }
    assert len(server.chat_requests) == 5


def test_model_demo_against_serve_model(tmp_path: Path) -> None:
    """``make demo``'s slots part: the three synthetic models through serve-model; their replies
    are seeded per (model, request), so the counts are fixed."""
    from rich.console import Console

    from fieldcheck._cli.slots_cmd import run_model_demo
    from fieldcheck.serve_model import SYNTHETIC_MODELS, BackgroundServer, create_app

    console = Console(record=True, width=80)
    with BackgroundServer(create_app()) as server:
        status = run_model_demo(server.base_url, tmp_path, list(SYNTHETIC_MODELS), console=console)
    assert status == 0
    metrics = json.loads((tmp_path / "metrics.json").read_text())["models"]
    counts = {
        name: (m["counts"]["tp"], m["counts"]["fp"], m["counts"]["fn"])
        for name, m in metrics.items()
    }
    assert counts == {
        "synthetic-careful": (67, 0, 2),
        "synthetic-eager": (64, 10, 5),
        "synthetic-fast": (55, 1, 14),
    }
    # fast's documented invalid JSON: counted, not a demo failure (status 0)
    assert [
        (e["model"], e["user"], e["session"], e["error_type"])
        for e in read_jsonl(tmp_path / "session_errors.jsonl")
    ] == [("synthetic-fast", "u2", 2, "invalid_reply")]
    text = console.export_text()
    assert re.search(r"^synthetic-careful +1.000 +0.971 .* [\d.]+ ms$", text, re.M)
    assert re.search(r"^synthetic-fast .* invalid_reply=1 +[\d.]+ ms$", text, re.M)
    assert (tmp_path / "report.html").exists() and (tmp_path / "pred_synthetic-fast.jsonl").exists()


def test_help_lists_the_shared_runner_options_and_the_store() -> None:
    result = CliRunner().invoke(app, ["slots", "run", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for option in (
        "--conversations", "--gold", "--out", "--model", "--models", "--base-url",
        "--concurrency", "--timeout", "--max-retries", "--max-reply-bytes", "--temperature",
        "--max-tokens",
        "--model-seed", "--json-mode", "--no-cache", "--cache-nonzero-temperature", "--price-in",
        "--price-out", "--no-progress", "--judge-base-url", "--judge-model", "--tp",
        "--threshold", "--bootstrap", "--seed",
    ):  # fmt: skip
        assert option in result.output, option
    assert "FIELDCHECK_DATABASE_URL" in flat(result.output)
    # a failed judge call exits 3 too (test_timeout_and_concurrency_reach_the_judge): said
    assert "some judge call failed (listed in DIR/errors.jsonl)" in flat(result.output)
    docs = flat((Path(__file__).parents[2] / "docs" / "slots.md").read_text(encoding="utf-8"))
    assert "3 on a call error, when a judge call failed" in docs


def test_models_file_names_each_model(
    chat_server: StartServer, files: dict[str, Path], tmp_path: Path
) -> None:
    server = chat_server(scripted)
    models = tmp_path / "models.yaml"
    models.write_text(
        f"- {{name: first, model: x, base_url: '{server.base_url}'}}\n"
        f"- {{name: second, model: y, base_url: '{server.base_url}', temperature: 0.5}}\n"
    )
    args = [
        "slots", "run", "--conversations", str(files["conv"]), "--gold", str(files["gold"]),
        "--models", str(models), "--out", str(files["out"]), "--bootstrap", "0", "--no-progress",
    ]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert sorted(json.loads((files["out"] / "runs.json").read_text())["runs"]) == [
        "first",
        "second",
    ]
    temps = sorted((b["model"], b["temperature"]) for b in server.chat_requests)
    assert temps == [("x", 0.0)] * 3 + [("y", 0.5)] * 3


def test_context_errors_and_cut_replies_are_typed_counted_and_said(
    chat_server: StartServer, tmp_path: Path
) -> None:
    """Issue 26, items 7, 13, 14 through `slots run`: llama.cpp's context error is a
    `context_length` call error (asked once, the session not scored), a text/plain 200 a
    bad response (not scored); replies cut by max_tokens are counted in the run's summary line."""
    texts = ["name Eve", "too long", "cut", "cut but whole", "plain"]
    conv = write_jsonl(
        tmp_path / "conv.jsonl",
        [
            {"user": "e", "session": i + 1, "turns": [{"role": "user", "content": t}]}
            for i, t in enumerate(texts)
        ],
    )
    gold = write_jsonl(
        tmp_path / "gold.jsonl",
        [{"user": "e", "session": 1, "topic": "basic_info", "field": "name", "values": ["Eve"]}],
    )
    llama = {
        "error": {
            "code": 400,
            "message": "request (5012 tokens) exceeds the available context size (4096 tokens), "
            "try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 5012,
            "n_ctx": 4096,
        }
    }
    attempts: Counter[str] = Counter()

    def script(body: dict[str, Any]) -> str | Reply:
        text = transcript(body)
        attempts[text] += 1
        return {
            "name Eve": Reply(content='{"basic_info": {"name": ["Eve"]}}'),
            "too long": Reply(status=400, error_body=llama),
            "cut": Reply(content='{"basic_info": {"na', finish_reason="length"),
            "cut but whole": Reply(content="{}", finish_reason="length"),
            "plain": Reply(body=b"Bad gateway", content_type="text/plain"),
        }[text]

    server = chat_server(script)
    out = tmp_path / "out"
    args = f"--conversations {conv} --gold {gold} --model m --base-url {server.base_url}"
    args += f" --out {out} --max-retries 2 --bootstrap 0 --no-progress --max-tokens 16"
    result = CliRunner().invoke(app, ["slots", "run", *args.split()])
    assert result.exit_code == 3, result.output
    errors = read_jsonl(out / "session_errors.jsonl")
    assert [(e["session"], e["error_type"]) for e in errors] == [
        (2, "context_length"),
        (3, "invalid_reply"),
        (5, "bad_response"),
    ]
    assert errors[2]["error_message"].endswith("the reply is not JSON (text/plain): 'Bad gateway'")
    assert attempts["too long"] == 1
    runs = json.loads((out / "runs.json").read_text())["runs"]["m"]
    assert runs["errors"] == {"bad_response": 1, "context_length": 1, "invalid_reply": 1}
    said = flat(result.output)
    assert "2 of 5 items had a reply cut by the token limit (finish_reason length): raise --max-tokens" in said  # fmt: skip


def test_a_reply_that_is_not_a_chat_completion_is_not_scored(
    chat_server: StartServer, tmp_path: Path
) -> None:
    """A text/plain 200 and a string `choices` are the endpoint's `bad_response`: those sessions
    are not scored (their gold slots are not missed), as a 500 would be; only the model's own
    invalid reply (JSON cut short) misses its gold slot. They were `invalid_reply` and "slots
    missed", where `json run` left them unscored (a tester's finding, issue 26)."""
    texts = ["name Eve", "plain", "choices", "bad json"]
    conv = write_jsonl(
        tmp_path / "conv.jsonl",
        [
            {"user": "e", "session": i + 1, "turns": [{"role": "user", "content": t}]}
            for i, t in enumerate(texts)
        ],
    )
    gold = write_jsonl(
        tmp_path / "gold.jsonl",
        [
            {"user": "e", "session": 1, "topic": "basic_info", "field": "name", "values": ["Eve"]},
            {"user": "e", "session": 2, "topic": "basic_info", "field": "age", "values": ["40"]},
            {"user": "e", "session": 3, "topic": "interests", "field": "music", "values": ["jazz"]},
            {"user": "e", "session": 4, "topic": "basic_info", "field": "location", "values": ["Oslo"]},
        ],
    )  # fmt: skip

    def script(body: dict[str, Any]) -> str | Reply:
        return {
            "name Eve": Reply(content='{"basic_info": {"name": ["Eve"]}}'),
            "plain": Reply(body=b"Bad gateway", content_type="text/plain"),
            "choices": Reply(content="x", fields={"choices": "a string"}),
            "bad json": Reply(content='{"basic_info": {"location": ["Os'),
        }[transcript(body)]

    server = chat_server(script)
    out = tmp_path / "out"
    args = f"--conversations {conv} --gold {gold} --model m --base-url {server.base_url}"
    args += f" --out {out} --max-retries 2 --bootstrap 0 --no-progress"
    result = CliRunner().invoke(app, ["slots", "run", *args.split()])
    assert result.exit_code == 3, result.output
    errors = read_jsonl(out / "session_errors.jsonl")
    assert [(e["session"], e["error_type"]) for e in errors] == [
        (2, "bad_response"),
        (3, "bad_response"),
        (4, "invalid_reply"),
    ]
    assert len(server.chat_requests) == 4  # none retried
    # the not-scored sessions have no latency line; the model's invalid reply does
    assert [r["session"] for r in read_jsonl(out / "latency_m.jsonl")] == [1, 4]
    runs = json.loads((out / "runs.json").read_text())["runs"]["m"]
    assert runs["errors"] == {"bad_response": 2, "invalid_reply": 1}
    said = flat(result.output)
    assert "1 invalid repl(ies), slots missed; 2 call error(s), not scored" in said, said
    m = json.loads((out / "metrics.json").read_text())["models"]["m"]
    # scored: session 1 (TP name) and 4 (FN location); sessions 2 and 3 left out
    assert m["counts"] == {"tp": 1, "fp": 0, "fn": 1, "gold_slots": 2, "sessions": 2}
    assert m["sessions_not_scored"] == {"bad_response": 2}


def test_estimated_tokens_are_marked_in_runs_json_and_the_table(
    chat_server: StartServer, files: dict[str, Path]
) -> None:
    """A session whose reply has no usable usage: runs.json counts the sessions with estimated
    tokens and the runs table marks the tokens (they were shown unmarked; a tester's finding)."""

    def script(body: dict[str, Any]) -> str | Reply:
        text = json.dumps(REPLIES[transcript(body)])
        return Reply(content=text, usage=transcript(body) != "I like chess.")

    server = chat_server(script)
    result = invoke(files, server.base_url, "--model", "m")
    assert result.exit_code == 0, result.output
    runs = json.loads((files["out"] / "runs.json").read_text())["runs"]["m"]
    assert runs["tokens_estimated_sessions"] == 1
    table = result.output.split("Model runs")[1]
    assert "(1 est.)" in table


def test_an_invalid_reply_alone_is_a_scored_miss_and_exits_0(
    chat_server: StartServer, files: dict[str, Path]
) -> None:
    """The model's invalid reply is its wrong answer (scored, its gold slots missed), as an
    output that is no object in json and an invalid plan in numeric: exit 0 there, 3 here (a
    tester's finding); only a failed call leaves the run incomplete (exit 3)."""
    server = chat_server(
        lambda body: (
            "not json"
            if transcript(body) == "I like chess."
            else json.dumps(REPLIES[transcript(body)])
        )
    )
    result = invoke(files, server.base_url, "--model", "m", "--max-retries", "0")
    assert result.exit_code == 0, result.output
    errors = read_jsonl(files["out"] / "session_errors.jsonl")
    assert [e["error_type"] for e in errors] == ["invalid_reply"]
    runs = json.loads((files["out"] / "runs.json").read_text())["runs"]["m"]
    assert runs["session_errors"] == 1 and runs["errors"] == {"invalid_reply": 1}


def test_an_invalid_reply_is_said_once_not_again_as_a_session_without_prediction(
    chat_server: StartServer, files: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    """b/1's invalid reply leaves no prediction line: it is named once, as an invalid reply, not
    counted again among the sessions without a prediction (the demo printed both lines for one
    session, which read as two; a newcomer's finding); a/2's valid empty reply is still one."""
    replies = {"I like chess.": "not json", "I moved to Oslo.": "{}"}
    server = chat_server(
        lambda body: replies.get(transcript(body)) or json.dumps(REPLIES[transcript(body)])
    )
    with caplog.at_level(logging.WARNING, logger="fieldcheck"):
        result = invoke(files, server.base_url, "--model", "m", "--max-retries", "0")
    assert result.exit_code == 0, result.output
    assert [m for m in caplog.messages if m.startswith("model 'm'")] == [
        "model 'm': 1 session(s) got an invalid reply (session_errors.jsonl): scored, their gold "
        "slots count as missed",
        "model 'm' has no prediction for 1 of 3 gold session(s); their gold slots count as missed",
    ]


def _interrupted_with(
    chat_server: StartServer, files: dict[str, Path], failing: dict[str, Reply]
) -> tuple[ChatServer, str]:
    """A run of model ``m`` whose sessions in ``failing`` got those replies (no retry), left
    ``interrupted`` as Ctrl-C leaves it; the server answers every session well from then on."""
    server = chat_server(
        lambda body: failing.get(transcript(body)) or json.dumps(REPLIES[transcript(body)])
    )
    result = invoke(files, server.base_url, "--model", "m", "--max-retries", "0")
    assert result.exit_code == 3, result.output
    run_id = json.loads((files["out"] / "runs.json").read_text())["runs"]["m"]["run_id"]
    store = Store()
    store.set_status(run_id, "interrupted")
    store.close()
    failing.clear()
    return server, run_id


def test_a_resume_asks_again_a_session_whose_call_failed_not_an_invalid_reply(
    chat_server: StartServer, files: dict[str, Path]
) -> None:
    """An interrupted run where a/2 got a 500 and b/1 an invalid reply: the resume asks a/2 again
    (a call error is not finished), not b/1 (the model's invalid reply is final for its run).
    docs/slots.md said every stored session error is final (a tester's finding, issue 26)."""
    failing = {"I moved to Oslo.": Reply(status=500), "I like chess.": Reply(content="not json")}
    server, run_id = _interrupted_with(chat_server, files, failing)
    asked = len(server.chat_requests)
    again = invoke(
        files, server.base_url, "--model", "m", "--max-retries", "0", out=files["out"].parent / "b"
    )
    # the first run went to out/, so the resume names it (docs/running.md)
    assert f"resuming run {run_id} (begun for " in again.output
    assert "): 2 of 3 items already finished" in again.output
    assert [transcript(b) for b in server.chat_requests[asked:]] == ["I moved to Oslo."]
    doc = " ".join((Path(__file__).resolve().parents[2] / "docs" / "slots.md").read_text().split())
    assert "a resume asks a session whose call failed again" in doc
    assert "A stored session error is final for its run" not in doc


def test_the_resume_line_counts_the_later_sessions_it_asks_again(
    chat_server: StartServer, files: dict[str, Path]
) -> None:
    """a/1 got a 500, a/2 ran on its unchanged memory: a resume asks both again (a/2 is built
    on a/1), so it says 1 of 3 items finished, not 2 ("not called again" was false for a/2:
    a hostile-endpoint trial's finding)."""
    server, run_id = _interrupted_with(chat_server, files, {"I am Ann, 30.": Reply(status=500)})
    asked = len(server.chat_requests)
    again = invoke(files, server.base_url, "--model", "m", out=files["out"].parent / "b")
    assert again.exit_code == 0, again.output
    said = flat(again.output)
    assert "): 1 of 3 items already finished are not called again" in said
    assert f"m: run {run_id} finished: 3 items (1 resumed); 2 calls" in said
    assert [transcript(b) for b in server.chat_requests[asked:]] == [
        "I am Ann, 30.",
        "I moved to Oslo.",
    ]


def test_a_reply_with_no_content_is_final_cached_and_never_asked_again(
    chat_server: StartServer, files: dict[str, Path], tmp_path: Path
) -> None:
    """A 200 with `choices: []` is the model's invalid_reply, final: the same command again
    makes no call and gives the same scores, and a resume does not ask it again. It was not
    cached and counted as a call error on resume, so reruns called it again and the same command
    gave other scores (a hostile-endpoint trial's finding)."""
    empty = {"I like chess."}
    server = chat_server(
        lambda body: (
            Reply(no_choices=True)
            if transcript(body) in empty
            else json.dumps(REPLIES[transcript(body)])
        )
    )
    first = invoke(files, server.base_url, "--model", "m")
    assert first.exit_code == 0, first.output
    errors = read_jsonl(files["out"] / "session_errors.jsonl")
    assert [(e["user"], e["error_type"]) for e in errors] == [("b", "invalid_reply")]
    run_id = json.loads((files["out"] / "runs.json").read_text())["runs"]["m"]["run_id"]
    asked = len(server.chat_requests)
    empty.clear()  # asked again, the model would now answer
    again = invoke(files, server.base_url, "--model", "m", out=tmp_path / "again")
    assert "3 calls, all answered from the cache; errors: invalid_reply 1" in flat(again.output)
    assert len(server.chat_requests) == asked
    assert read_jsonl(tmp_path / "again" / "session_errors.jsonl") == errors
    store = Store()
    store.set_status(run_id, "interrupted")  # as Ctrl-C leaves it
    store.close()
    resumed = invoke(files, server.base_url, "--model", "m", out=tmp_path / "resumed")
    assert "3 of 3 items already finished are not called again" in flat(resumed.output)
    assert len(server.chat_requests) == asked
    assert read_jsonl(tmp_path / "resumed" / "session_errors.jsonl") == errors


def test_a_ctrl_c_while_scoring_says_what_is_left_and_the_same_command_finishes_it(
    chat_server: StartServer, files: dict[str, Path]
) -> None:
    """Ctrl-C once every model ran, while the scores are written: one line names the files
    written and how to go on (exit 130), the run is stored interrupted, and the same command
    resumes it from the store with no model call and completes the folder."""
    from fieldcheck.slots import _system

    server = chat_server(scripted)

    def ctrl_c(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    out = files["out"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_system, "write_outputs", ctrl_c)
        result = invoke(files, server.base_url, "--model", "m")
    assert result.exit_code == 130, result.output
    assert (
        f"interrupted: 6 files (latency_m.jsonl, memory_m.jsonl, pred_m.jsonl, run.json, "
        f"runs.json, session_errors.jsonl) in {out}.fieldcheck-partial (run.json says complete: "
        f"false); the same command with --out {out} continues it" in flat(result.output)
    )
    run_id = json.loads((Path(f"{out}.fieldcheck-partial") / "runs.json").read_text())
    run_id = run_id["runs"]["m"]["run_id"]
    store = Store()
    assert store.get_run(run_id).status == "interrupted"  # type: ignore[union-attr]
    store.close()
    asked = len(server.chat_requests)
    again = invoke(files, server.base_url, "--model", "m")
    assert again.exit_code == 0, again.output
    assert f"resuming run {run_id}: 3 of 3 items already finished" in again.output
    assert len(server.chat_requests) == asked
    assert json.loads((out / "run.json").read_text())["complete"] is True
    metrics = json.loads((out / "metrics.json").read_text())["models"]["m"]
    assert metrics["counts"] == {"tp": 4, "fp": 1, "fn": 1, "gold_slots": 5, "sessions": 3}
    store = Store()
    run = store.get_run(run_id)
    assert run is not None and run.status == "finished"
    assert run.metrics["models"]["m"]["counts"]["tp"] == 4
    store.close()


def test_a_ctrl_c_while_scoring_under_no_cache_says_the_models_are_called_again(
    chat_server: StartServer, files: dict[str, Path]
) -> None:
    from fieldcheck.slots import _system

    def ctrl_c(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_system, "write_outputs", ctrl_c)
        result = invoke(files, chat_server(scripted).base_url, "--model", "m", "--no-cache")
    assert result.exit_code == 130, result.output
    assert flat(result.output).endswith(
        f"the same command with --out {files['out']} continues it, which calls every model "
        "again: --no-cache kept no reply"
    )


def test_a_ctrl_c_while_scoring_under_no_store_says_the_models_are_called_again(
    chat_server: StartServer, files: dict[str, Path]
) -> None:
    """Without the store no reply is kept: the same command continues the folder by calling
    every model again, and the line says so (it said only "continues it")."""
    from fieldcheck.slots import _system

    def ctrl_c(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    server = chat_server(scripted)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_system, "write_outputs", ctrl_c)
        result = invoke(files, server.base_url, "--model", "m", "--no-store")
    assert result.exit_code == 130, result.output
    assert flat(result.output).endswith(
        f"the same command with --out {files['out']} continues it, which calls every model "
        "again: without the store no reply was kept"
    )
    again = invoke(files, server.base_url, "--model", "m", "--no-store")
    assert again.exit_code == 0, again.output
    assert len(server.chat_requests) == 2 * len(CONVERSATIONS)  # every session asked again


def test_a_slots_run_folder_of_two_models_is_imported_with_their_sessions(
    chat_server: StartServer,
    files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``runs import`` of a ``slots run`` folder, into another store, stores each model's
    sessions from the prediction files its runs.json names (a tester's finding: a KeyError
    traceback, and a failed run of 0 items left at each try)."""
    server = chat_server(scripted)
    models = ("--model", "eager=model-x", "--model", "fast=model-y")
    assert invoke(files, server.base_url, *models).exit_code == 0
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{tmp_path / 'other.sqlite3'}")
    result = CliRunner().invoke(app, ["runs", "import", str(files["out"]), "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    [run] = Store().list_runs()
    assert (shown["id"], run.model, run.n_items, run.status) == (
        run.id,
        "eager, fast",
        6,
        "finished",
    )


def test_a_several_model_run_stays_running_with_its_items_in_flight_until_scored(
    chat_server: StartServer, files: dict[str, Path], tmp_path: Path
) -> None:
    """The real command, stopped at the second model's first call and at the judge's first
    (scoring): one run listed, ``running``, never ``finished`` after the first model's calls,
    counting every model's calls and never falling back (15 of 15 finished, then 0 of 0, then
    45, the second model a run of its own: a tester's trial), its items in flight in the API
    (a 410 blaming FIELDCHECK_ARTIFACTS before)."""
    import os

    from fastapi.testclient import TestClient

    from fieldcheck.api import ApiSettings, create_app

    reached = {"y": threading.Event(), "judge": threading.Event()}
    release = {"y": threading.Event(), "judge": threading.Event()}

    def script(body: dict[str, Any]) -> str | Reply:
        name = body["model"] if is_memory_request(body) else "judge"
        if name in reached and not reached[name].is_set():
            reached[name].set()
            release[name].wait(60)
        return scripted(body) if is_memory_request(body) else "0.5"

    server = chat_server(script)
    args = ["slots", "run", "--conversations", str(files["conv"]), "--gold", str(files["gold"])]
    args += ["--base-url", server.base_url, "--model", "A=x", "--model", "B=y"]
    args += ["--judge-model", "j", "--out", str(files["out"]), "--bootstrap", "0", "--no-progress"]
    proc = start_cli(*args)
    api = TestClient(
        create_app(ApiSettings(database_url=os.environ["FIELDCHECK_DATABASE_URL"])),
        base_url="http://127.0.0.1",
    )
    seen = []
    for phase in ("y", "judge"):
        assert reached[phase].wait(60), proc.stderr.read() if proc.stderr else ""
        [run] = Store().list_runs()  # one evaluation: the second model's run is its calls
        items = api.get(f"/api/runs/{run.id}/items")
        shown = api.get(f"/api/runs/{run.id}").json()
        seen.append((run.status, run.n_done, run.n_items, items.status_code, shown["items_text"]))
        keys = sorted(i["key"] for i in items.json()["items"])  # every model's called so far
        assert keys == sorted(['["a", 1]', '["a", 2]', '["b", 1]'] * (1 + (phase == "judge")))
        release[phase].set()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    final = Store().get_run(run.id)
    assert final is not None and (final.status, final.n_done, final.n_items) == ("finished", 6, 6)
    in_flight = "items (in flight: called, not yet scored)"
    assert seen == [
        ("running", 3, 6, 200, f"3 of 6 {in_flight}"),
        ("running", 6, 6, 200, f"6 {in_flight}"),
    ]


def test_a_run_killed_while_scored_counts_the_items_it_called(
    chat_server: StartServer, files: dict[str, Path]
) -> None:
    """SIGKILL at the judge's first call (the run scoring): the run showed ``0`` items, its
    counts zeroed when its scoring began (a tester's trial); they are its 3 called sessions,
    never scored."""
    import os
    import signal
    import subprocess
    import sys

    reached, release = threading.Event(), threading.Event()

    def script(body: dict[str, Any]) -> str | Reply:
        if not is_memory_request(body):
            reached.set()
            release.wait(30)
            return "0.5"
        return scripted(body)

    server = chat_server(script)
    args = ["slots", "run", "--conversations", str(files["conv"]), "--gold", str(files["gold"])]
    args += ["--base-url", server.base_url, "--model", "A=x", "--judge-model", "j"]
    args += ["--out", str(files["out"]), "--bootstrap", "0", "--no-progress"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "fieldcheck._cli.main", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=os.environ.copy(),
    )
    assert reached.wait(60)
    proc.send_signal(signal.SIGKILL)
    proc.wait(60)
    release.set()
    [run] = Store().list_runs()
    assert (run.status, run.n_done, run.n_items) == ("interrupted", 3, 3)
    shown = CliRunner().invoke(app, ["runs", "show", run.id]).stdout
    assert "items: 3 (called, never scored: the run was interrupted)" in shown

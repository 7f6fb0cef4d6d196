"""`fieldcheck json run` against the scripted chat server: exact batch lines, call errors kept apart
from wrong answers, exact scores, --json-mode, --schema in the prompt, resume, several models.

Text fields are FUZZY here so no test in this file loads the sentence-transformers model."""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import statistics
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from chat_server import ChatServer, Reply, Script
from fieldcheck._cli.main import app
from fieldcheck._util.paths import unique_filenames
from fieldcheck.jsoneval import document_from_prompt
from fieldcheck.jsoneval._extract import NO_SCHEMA_NOTE, SCHEMA_INTRO, SYSTEM_PROMPT, USER_INTRO
from fieldcheck.store import Store

StartServer = Callable[[Script], ChatServer]
STRATEGIES = {"name": "FUZZY", "city": "FUZZY"}
GT = {
    "r1": {"name": "Ann Lee", "age": 30, "city": "Oslo", "note": None},
    "r2": {"name": "Bo Chen", "age": 41, "city": "Rome"},
    "r3": {"name": "Cy Dahl", "age": 22},
    "r4": {"name": "Di Eck", "age": 50},
    "r5": {"name": "Ed Fox", "age": 5, "city": "Paris"},
    "r6": {"name": "Flo Gil", "age": 61},
    "r7": {"name": "Gus Hu", "age": 70},
}
OK_REPLIES = {
    "doc r1": '{"name": "Ann Lee", "age": 30, "city": "Oslo", "note": null}',
    "doc r2": '```json\n{"name": "Bo Chen", "age": 41}\n```',
    "doc r3": "Sure! The name is Cy Dahl.",
    "doc r4": '{"name": "Di Eck"',
    "doc r5": '{"name": "Ed Fox", "age": 5, "city": "Paris", "extra": 1}',
}
RQS = {
    "r1": 0.45 + 0.25 + 0.15,
    "r2": 0.45 + 0.25 * 2 / 3 + 0.15,
    "r3": 0.0,
    "r4": 0.0,
    "r5": 0.45 + 0.25 + 0.15 - 0.15 * 1 / 4,
}


def write_jsonl(path: Path, lines: list[Any]) -> Path:
    path.write_text(
        "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines),
        encoding="utf-8",
    )
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def document(body: dict[str, Any]) -> str:
    text = document_from_prompt(body["messages"][1]["content"])
    assert text is not None
    return text


class Scripted:
    """Replies by document: r5 fails with 500 once, r6 is a 400, r7 never answers in time."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> str | Reply:
        doc = document(body)
        with self.lock:
            self.seen[doc] += 1
            n = self.seen[doc]
        if doc == "doc r5" and n == 1:
            return Reply(status=500)
        if doc == "doc r6":
            return Reply(status=400, error_body={"error": {"message": "bad", "type": "invalid"}})
        if doc == "doc r7":
            return Reply(content="{}", delay_s=1.5)
        return Reply(content=OK_REPLIES[doc])


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    lines: list[Any] = [{"id": k, "document": f"doc {k}", "ground_truth": v} for k, v in GT.items()]
    lines.insert(2, "not json")
    lines.insert(4, {"id": "r0", "ground_truth": {"a": 1}})
    strategies = tmp_path / "strategies.json"
    strategies.write_text(json.dumps(STRATEGIES))
    return {
        "data": write_jsonl(tmp_path / "docs.jsonl", lines),
        "strategies": strategies,
        "out": tmp_path / "out",
    }


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["json", "run", *args], env={"COLUMNS": "400"})


def common(files: dict[str, Path], server: ChatServer, *extra: str) -> list[str]:
    return [
        str(files["data"]),
        "--base-url",
        server.base_url,
        "--strategies",
        str(files["strategies"]),
        "--out",
        str(files["out"]),
        "--no-progress",
        *extra,
    ]


def test_every_kind_of_reply_and_error(files: dict[str, Path], chat_server: StartServer) -> None:
    server = chat_server(Scripted())
    result = run(*common(files, server, "--model", "m", "--timeout", "0.5", "--max-retries", "1"))
    assert result.exit_code == 3, result.output
    folder = files["out"] / "m"
    data = str(files["data"])
    # the batch file: records with an output, in input order, exactly as json batch reads it
    assert read_jsonl(folder / "outputs.jsonl") == [
        {"id": "r1", "ground_truth": GT["r1"], "output": json.loads(OK_REPLIES["doc r1"])},
        {"id": "r2", "ground_truth": GT["r2"], "output": OK_REPLIES["doc r2"]},
        {"id": "r3", "ground_truth": GT["r3"], "output": OK_REPLIES["doc r3"]},
        {"id": "r4", "ground_truth": GT["r4"], "output": OK_REPLIES["doc r4"]},
        {"id": "r5", "ground_truth": GT["r5"], "output": json.loads(OK_REPLIES["doc r5"])},
    ]
    # failed calls: no output, never scored, their type kept
    call_errors = read_jsonl(folder / "call_errors.jsonl")
    assert [(e["id"], e["line"], e["error_type"], e["attempts"]) for e in call_errors] == [
        ("r6", 8, "bad_request", 1),
        ("r7", 9, "timeout", 2),
    ]
    assert "400" in call_errors[0]["error_message"]
    records = {r["id"]: r for r in read_jsonl(folder / "records.jsonl")}
    assert sorted(records) == ["r1", "r2", "r3", "r4", "r5"]
    for rid, rqs in RQS.items():
        assert records[rid]["rqs"] == pytest.approx(rqs, abs=1e-12), rid
    assert (records["r2"]["output_kind"], records["r2"]["flags"]) == (
        "object",
        ["parsed_from_text"],
    )
    assert (records["r3"]["output_kind"], records["r3"]["flags"]) == ("text", ["not_an_object"])
    assert (records["r4"]["output_kind"], records["r4"]["flags"]) == (
        "invalid_json",
        ["not_an_object"],
    )
    assert records["r5"]["buckets"]["extra_keys"] == ["extra"]
    summary = json.loads((folder / "summary.json").read_text())
    assert (summary["records"], summary["scored"], summary["not_scored"]) == (7, 5, 2)
    assert summary["failed"] == 4  # r2 (city missing), r3, r4 (not objects), r5 (extra key)
    assert summary["not_an_object"] == 2
    assert summary["means"]["rqs"] == pytest.approx(sum(RQS.values()) / 5, abs=1e-12)
    assert summary["means"]["completeness"] == pytest.approx((1 + 2 / 3 + 0 + 0 + 1) / 5)
    # the bad DATA lines are in errors.jsonl, located in DATA
    errors = read_jsonl(folder / "errors.jsonl")
    assert [(e["file"], e["line"], e["field"]) for e in errors] == [
        (data, 3, None),
        (data, 5, "document"),
    ]
    assert errors[1]["message"] == f"{data}:5: record r0: field 'document': missing"
    info = json.loads((folder / "run.json").read_text())
    assert (info["records"], info["with_output"], info["unparsed_replies"]) == (7, 5, 3)
    assert info["call_errors"] == {"bad_request": 1, "timeout": 1}
    assert (info["calls"], info["cached_calls"], info["prompt"]) == (7, 0, "json-extract-v1")
    assert (info["input_tokens"], info["output_tokens"]) == (50, 25)  # 10 + 5 per answered call
    asked = Counter(document(b) for b in server.chat_requests)
    # r5 is asked again after its 500; r7's two timed-out attempts are counted by the client
    # (attempts 2 above): on a loaded machine one may time out before the server reads it
    assert asked - Counter({"doc r7": asked["doc r7"]}) == Counter(
        {"doc r1": 1, "doc r2": 1, "doc r3": 1, "doc r4": 1, "doc r5": 2, "doc r6": 1}
    )
    assert asked["doc r7"] in (1, 2)
    text = result.stdout
    assert "JSON evaluation: 5 of 7 records scored" in text
    assert "no output (call errors, not scored): 2 (bad_request 1, timeout 1;" in text
    assert f"run {info['run_id']}; 7 calls, 0 from the cache; store: sqlite:///" in text
    assert f"error: {data}:3: invalid JSON" in result.stderr
    assert (files["out"] / "comparison.csv").is_file()
    # latency: means over the records with an output (r7's 1 s of timeouts left out), everywhere
    store = Store()
    journal = {i.key: i.latency_s for i in store.journal(info["run_id"])}
    answered = [journal[k] for k in ("r1", "r2", "r3", "r4", "r5")]
    assert info["latency_s_mean"] == math.fsum(answered) / 5
    assert info["latency_s_median"] == statistics.median(answered)
    with (files["out"] / "comparison.csv").open() as handle:
        assert float(next(csv.DictReader(handle))["latency_s_mean"]) == info["latency_s_mean"]
    stored = store.get_run(info["run_id"])
    assert stored is not None and stored.latency_mean_s == pytest.approx(math.fsum(answered) / 5)
    store.close()


def test_a_run_with_no_output_has_no_latency(tmp_path: Path, chat_server: StartServer) -> None:
    """Every call failed: no mean latency in run.json, comparison.csv or the runs list (they
    counted the failed calls' seconds: a robustness trial's finding)."""
    server = chat_server(lambda body: Reply(status=500))
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": "a", "document": "d", "ground_truth": {}}])
    args = [str(data), "--model", "m", "--base-url", server.base_url, "--no-progress"]
    assert run(*args, "--max-retries", "0", "--out", str(tmp_path / "o")).exit_code == 3
    info = json.loads((tmp_path / "o" / "m" / "run.json").read_text())
    assert info["with_output"] == 0
    assert (info["latency_s_mean"], info["latency_s_median"]) == (None, None)
    with (tmp_path / "o" / "comparison.csv").open() as handle:
        assert next(csv.DictReader(handle))["latency_s_mean"] == ""
    store = Store()
    stored = store.get_run(info["run_id"])
    assert stored is not None and (stored.n_call_errors, stored.latency_mean_s) == (1, None)
    store.close()


def test_json_mode_and_schema_reach_the_model(
    files: dict[str, Path], chat_server: StartServer, tmp_path: Path
) -> None:
    server = chat_server(lambda body: OK_REPLIES["doc r1"])
    schema = tmp_path / "schema.json"
    schema.write_text('{"type": "object",\n "properties": {"name": {"type": "string"}}}')
    result = run(*common(files, server, "--model", "m", "--json-mode", "--schema", str(schema)))
    assert result.exit_code == 3, result.output  # the two bad DATA lines
    bodies = server.chat_requests
    assert len(bodies) == 7
    assert all(b["response_format"] == {"type": "json_object"} for b in bodies)
    system, user = bodies[0]["messages"]
    assert system == {
        "role": "system",
        "content": SYSTEM_PROMPT
        + f"\n{SCHEMA_INTRO}\n"
        + '{"properties":{"name":{"type":"string"}},"type":"object"}',
    }
    assert "(prompt json-extract-v1)" in system["content"]
    assert user["content"] in {f"{USER_INTRO}\n<document>\ndoc {k}\n</document>" for k in GT}


def test_a_large_schema_is_sent_whole_and_stored_once_not_per_item(
    files: dict[str, Path], chat_server: StartServer, tmp_path: Path
) -> None:
    """The store grows per record by the document, not by the schema: a schema over 4,096
    characters is named by its sha256 in each item's stored prompt; one over 100,000 is warned."""
    server = chat_server(lambda body: OK_REPLIES.get(document(body), "{}"))
    schema = tmp_path / "schema.json"
    value = {"type": "object", "description": "z" * 200_000}
    schema.write_text(json.dumps(value))
    result = run(*common(files, server, "--model", "m", "--schema", str(schema)))
    assert result.exit_code == 3, result.output  # the two bad DATA lines
    assert all("z" * 200_000 in b["messages"][0]["content"] for b in server.chat_requests)
    assert "warning: the schema is 200,034 characters (about 50,009 tokens)" in result.stderr
    info = json.loads((files["out"] / "m" / "run.json").read_text())
    store = Store()
    items = store.journal(info["run_id"])
    store.close()
    assert len(items) == 7
    compact = json.dumps(value, separators=(",", ":"), sort_keys=True)
    digest = hashlib.sha256(compact.encode()).hexdigest()
    for item in items:
        system, user = item.call_log[0]["messages"]
        assert system["content"] == (
            f"{SYSTEM_PROMPT}\n{SCHEMA_INTRO}\n"
            f"<the schema: 200,034 characters, sha256:{digest}; not stored per item>"
        )
        assert user["content"] == f"{USER_INTRO}\n<document>\ndoc {item.key}\n</document>"
        assert len(json.dumps(item.call_log)) < 2_000


def test_without_json_mode_or_schema(files: dict[str, Path], chat_server: StartServer) -> None:
    server = chat_server(lambda body: "{}")
    result = run(*common(files, server, "--model", "m"))
    assert result.exit_code == 3, result.output  # the two bad DATA lines
    body = server.chat_requests[0]
    assert "response_format" not in body
    assert body["messages"][0]["content"] == f"{SYSTEM_PROMPT}\n{NO_SCHEMA_NOTE}"
    assert (body["model"], body["temperature"]) == ("m", 0.0)


SCORED_FILES = (
    "outputs.jsonl",
    "records.jsonl",
    "summary.json",
    "fields.csv",
    "errors.jsonl",
    "call_errors.jsonl",
)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in SCORED_FILES}


def test_second_run_makes_no_calls_and_writes_the_same_files(
    files: dict[str, Path], chat_server: StartServer
) -> None:
    server = chat_server(lambda body: OK_REPLIES.get(document(body), '{"name": "x"}'))
    first = run(*common(files, server, "--model", "m"))
    assert first.exit_code == 3, first.output
    before = snapshot(files["out"] / "m")
    assert len(server.chat_requests) == 7
    files["out"] = files["out"].with_name("out2")  # a folder is never written again
    second = run(*common(files, server, "--model", "m"))
    assert second.exit_code == 3, second.output
    assert len(server.chat_requests) == 7  # every reply from the cache
    assert snapshot(files["out"] / "m") == before
    assert "7 calls, 7 from the cache" in second.stdout


def test_a_large_run_is_scored_in_a_pool_warmed_during_the_calls_to_the_same_files(
    files: dict[str, Path], chat_server: StartServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fieldcheck.core import _run

    server = chat_server(lambda body: OK_REPLIES.get(document(body), '{"name": "x"}'))
    here = run(*common(files, server, "--model", "m"))
    assert here.exit_code == 3, here.output
    tasks: list[Any] = []

    class Pool(_run.LocalPool):
        def submit(self, fn: Any, chunk: Any) -> list[Any]:
            tasks.append(chunk)
            return super().submit(fn, chunk)

    monkeypatch.setattr(_run, "POOL_INPUT_BYTES", 0)  # every run is large
    monkeypatch.setattr(_run, "LocalPool", Pool)
    first = files["out"]
    files["out"] = first.with_name("pooled")
    pooled = run(*common(files, server, "--model", "m"))
    assert pooled.exit_code == 3, pooled.output
    assert sum(len(t) for t in tasks) == 7 + 2  # every record and bad line, scored there
    assert snapshot(files["out"] / "m") == snapshot(first / "m")


@pytest.mark.parametrize("pooled", [False, True])
def test_a_too_deep_reply_is_named_in_the_folder_it_ends_up_in(
    files: dict[str, Path], chat_server: StartServer, monkeypatch: pytest.MonkeyPatch, pooled: bool
) -> None:
    """A reply nested 300 levels deep is not scored: its error names DIR/m/outputs.jsonl, where
    the file is once the run is complete, not DIR.fieldcheck-partial/m/outputs.jsonl (gone),
    on the terminal, in errors.jsonl, summary.json and the reports; scored in a pool too."""
    from fieldcheck.core import _run

    if pooled:
        monkeypatch.setattr(_run, "POOL_INPUT_BYTES", 0)
    deep = '{"a": ' + "[" * 300 + "]" * 300 + "}"
    server = chat_server(lambda body: deep)
    result = run(*common(files, server, "--model", "m"))
    assert result.exit_code == 3, result.output
    folder = files["out"] / "m"
    outputs = str(folder / "outputs.jsonl")
    errors = [e for e in read_jsonl(folder / "errors.jsonl") if e["file"] != str(files["data"])]
    assert [(e["file"], e["line"], e["record"]) for e in errors] == [
        (outputs, n, f"r{n}") for n in range(1, 8)
    ]
    reason = "field 'output': nested deeper than 200 arrays/objects; too deep to score"
    assert errors[0]["message"] == f"{outputs}:1: record r1: {reason}"
    assert f"error: {outputs}:1: record r1: {reason}" in result.stderr
    summary = (folder / "summary.json").read_text(encoding="utf-8")
    assert f"{outputs}:7: record r7: {reason}" in json.loads(summary)["errors"]
    reports = [(folder / name).read_text() for name in ("report.md", "report.html")]
    assert all(".fieldcheck-partial" not in text for text in (result.output, summary, *reports))


def test_an_interrupted_run_resumes_without_calling_again(
    files: dict[str, Path], chat_server: StartServer
) -> None:
    server = chat_server(lambda body: OK_REPLIES.get(document(body), '{"name": "x"}'))
    assert run(*common(files, server, "--model", "m")).exit_code == 3
    before = snapshot(files["out"] / "m")
    run_id = json.loads((files["out"] / "m" / "run.json").read_text())["run_id"]
    store = Store()
    store.set_status(run_id, "interrupted")  # as Ctrl-C leaves it
    store.close()
    partial = files["out"].with_name("out.fieldcheck-partial")  # and the folder, unfinished
    files["out"].rename(partial)
    info = json.loads((partial / "run.json").read_text())
    (partial / "run.json").write_text(json.dumps({**info, "complete": False}))
    again = run(*common(files, server, "--model", "m", "--no-cache"))
    assert again.exit_code == 3, again.output
    assert not partial.exists()  # continued, and put in place
    assert json.loads((files["out"] / "run.json").read_text())["complete"] is True
    assert len(server.chat_requests) == 7  # --no-cache, yet nothing is asked again
    assert f"resuming run {run_id}: 7 of 7 items already finished" in again.stderr
    assert f"run {run_id}, 7 items resumed;" in again.stdout
    assert snapshot(files["out"] / "m") == before


def test_a_resume_asks_again_the_records_whose_call_failed(
    tmp_path: Path, chat_server: StartServer
) -> None:
    """An interrupted run whose record d1 got a 500: the resume asks d1 again and not d0, and
    says "1 of 2 items already finished" and "1 item resumed" (it said "1 items"); docs/json.md
    said records whose call failed are not asked again (a tester's finding, issue 26)."""
    failing = {"d1"}
    server = chat_server(
        lambda body: Reply(status=500) if document(body) in failing else '{"a": "b"}'
    )
    data = write_jsonl(
        tmp_path / "d.jsonl",
        [{"id": i, "document": f"d{i}", "ground_truth": {"a": "b"}} for i in range(2)],
    )
    args = [str(data), "--model", "m", "--base-url", server.base_url, "--no-progress"]
    args += ["--max-retries", "0", "--out", str(tmp_path / "o")]
    assert run(*args).exit_code == 3
    run_id = json.loads((tmp_path / "o" / "m" / "run.json").read_text())["run_id"]
    store = Store()
    store.set_status(run_id, "interrupted")  # as Ctrl-C leaves it
    store.close()
    failing.clear()
    asked = len(server.chat_requests)
    again = run(*args[:-1], str(tmp_path / "o2"))  # a new folder: the run resumes from the store
    assert again.exit_code == 0, again.output
    assert [document(b) for b in server.chat_requests[asked:]] == ["d1"]
    # begun for o/m, so the resume names that folder (docs/running.md)
    assert f"resuming run {run_id} (begun for " in again.stderr
    assert "): 1 of 2 items already finished" in again.stderr
    assert f"run {run_id}, 1 item resumed;" in again.stdout
    doc = (Path(__file__).resolve().parents[2] / "docs" / "json.md").read_text()
    resume = " ".join(doc.split("**Resume.**", 1)[1].split("**", 1)[0].split())
    assert "records whose call failed (every call error, listed in `call_errors.jsonl`) are asked again" in resume  # fmt: skip
    assert "are not asked again" not in resume.replace("with an output are not asked again", "")


def test_several_models_get_a_folder_each_and_a_comparison(
    files: dict[str, Path], chat_server: StartServer
) -> None:
    def script(body: dict[str, Any]) -> str:
        doc = document(body)
        if body["model"] == "good-model":
            return json.dumps(GT[doc.removeprefix("doc ")])
        return "I cannot help with that."

    server = chat_server(script)
    result = run(*common(files, server, "--model", "good=good-model", "--model", "org/bad"))
    assert result.exit_code == 3, result.output  # the bad DATA lines
    assert sorted(p.name for p in files["out"].iterdir()) == [
        "comparison.csv",
        "good",
        "org_bad",
        "run.json",  # what wrote the folder, listing the models (issue 27)
    ]
    info = json.loads((files["out"] / "run.json").read_text())
    assert (info["system"], info["models"], info["complete"]) == ("json", ["good", "org/bad"], True)
    assert sorted(info["signatures"]) == ["good", "org_bad"] and len(info["runs"]) == 2
    with (files["out"] / "comparison.csv").open() as handle:
        rows = {r["model"]: r for r in csv.DictReader(handle)}
    assert list(rows) == ["good", "org/bad"]
    assert (rows["good"]["with_output"], rows["good"]["rqs"], rows["good"]["accuracy"]) == (
        "7",
        "0.85",
        "1.0",
    )
    assert (rows["org/bad"]["not_an_object"], rows["org/bad"]["rqs"]) == ("7", "0.0")
    # the 2 bad DATA lines are not scored; the good model's 7 outputs are right, the bad one's
    # are not objects: all 7 failed
    assert (rows["good"]["not_scored"], rows["good"]["failed"]) == ("2", "0")
    assert (rows["org/bad"]["not_scored"], rows["org/bad"]["failed"]) == ("2", "7")
    assert "Models (means over the records with an output)" in result.stdout
    assert Counter(b["model"] for b in server.chat_requests) == {"good-model": 7, "org/bad": 7}
    # which folder holds which model, said when a name was changed (good's was not)
    said = '\nmodel folders (a name made file-safe): "org/bad" in org_bad/\n'
    assert said in "\n" + result.stderr


def test_model_folders_are_named_only_when_a_name_is_changed(
    files: dict[str, Path], chat_server: StartServer
) -> None:
    server = chat_server(lambda body: "{}")
    result = run(*common(files, server, "--model", "m", "--model", "..", "--model", "M"))
    assert sorted(p.name for p in files["out"].iterdir() if p.is_dir()) == ["M-2", "m", "unnamed"]
    assert result.stderr.count("model folders") == 1
    assert '(a name made file-safe): ".." in unnamed/; "M" in M-2/\n' in result.stderr
    plain = run(*common(files, server, "--model", "m", "--out", str(files["out"].parent / "o2")))
    assert plain.exit_code == 3 and "model folders" not in plain.stderr


def test_model_folder_names() -> None:
    # one rule in every system (_util/paths.py unique_filenames)
    assert unique_filenames(["gpt-4o", "org/model:v1", "..", ".hidden"]) == {
        "gpt-4o": "gpt-4o",
        "org/model:v1": "org_model_v1",
        "..": "unnamed",
        ".hidden": "hidden",
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "m", "--schema", "SCHEMA"], "a JSON Schema must be a JSON object"),
        ([], "give --model MODEL"),
        (["--model", "m", "--weights", "bogus=1"], "bogus"),
    ],
)
def test_usage_errors_exit_2(
    files: dict[str, Path],
    chat_server: StartServer,
    tmp_path: Path,
    args: list[str],
    message: str,
) -> None:
    server = chat_server(lambda body: "{}")
    schema = tmp_path / "schema.json"
    schema.write_text("[1, 2]")
    args = [str(schema) if a == "SCHEMA" else a for a in args]
    result = run(*common(files, server, *args))
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.replace("│", " ").split())
    assert server.chat_requests == []


def test_an_empty_data_file_is_a_usage_error(tmp_path: Path, chat_server: StartServer) -> None:
    server = chat_server(lambda body: "{}")
    data = tmp_path / "empty.jsonl"
    data.write_text("\n")
    out = str(tmp_path / "out")  # not tmp_path: it holds the data, not fieldcheck's (issue 9)
    result = run(str(data), "--model", "m", "--base-url", server.base_url, "--out", out)
    assert result.exit_code == 2, result.output
    assert "no records" in result.output


def test_hostile_replies_are_stored_and_scored_never_a_crash(
    tmp_path: Path, chat_server: StartServer
) -> None:
    deep_object = '{"a":' * 250 + "1" + "}" * 250
    deep_array = "[" * 300 + "]" * 300
    replies = {
        "d0": '{"a": "\\ud800"}',  # strict JSON has no lone surrogates: kept as text
        "d1": '{"a": "x\udfff"}',  # a lone surrogate in the reply itself
        "d2": deep_array,
        "d3": deep_object,
    }
    server = chat_server(lambda body: replies[document(body)])
    data = write_jsonl(
        tmp_path / "d.jsonl",
        [{"id": i, "document": f"d{i}", "ground_truth": {"a": "b"}} for i in range(4)],
    )
    result = run(
        str(data),
        "--model",
        "m",
        "--base-url",
        server.base_url,
        "--no-progress",
        "--strategies",
        write_jsonl(tmp_path / "s.json", [{"a": "FUZZY"}]).as_posix(),
        "--out",
        str(tmp_path / "o"),
    )
    assert result.exit_code == 3, result.output
    rows = read_jsonl(tmp_path / "o" / "m" / "outputs.jsonl")
    assert [r["output"] for r in rows] == [
        '{"a": "\\ud800"}',
        {"a": "x\ufffd"},  # the runner made the lone surrogate one U+FFFD
        deep_array,  # too deep to keep parsed: kept as text
        deep_object,
    ]
    records = {r["id"]: r for r in read_jsonl(tmp_path / "o" / "m" / "records.jsonl")}
    assert [records[i]["output_kind"] for i in range(3)] == ["invalid_json", "object", "array"]
    (error,) = read_jsonl(tmp_path / "o" / "m" / "errors.jsonl")
    assert (error["record"], error["line"], error["reason"]) == (
        "3",
        4,
        "nested deeper than 200 arrays/objects; too deep to score",
    )


def test_json_of_one_model_is_its_summary_and_of_two_is_keyed_by_model(
    files: dict[str, Path], chat_server: StartServer
) -> None:
    server = chat_server(lambda body: OK_REPLIES.get(document(body), '{"name": "x"}'))
    one = run(*common(files, server, "--model", "m", "--json", "--bootstrap", "0"))
    printed = json.loads(one.stdout)
    assert printed == json.loads((files["out"] / "m" / "summary.json").read_text())
    files["out"] = files["out"].with_name("out2")  # a new folder for the second run
    two = run(*common(files, server, "--model", "a=m", "--model", "b=m", "--json"))
    printed = json.loads(two.stdout)
    assert sorted(printed["models"]) == ["a", "b"]
    assert printed["models"]["a"] == json.loads((files["out"] / "a" / "summary.json").read_text())


@pytest.mark.parametrize("store", ["--no-store", "read-only", "not a URL"])
def test_a_model_run_without_a_usable_store_writes_its_files_and_stores_nothing(
    files: dict[str, Path], chat_server: StartServer, monkeypatch: pytest.MonkeyPatch, store: str
) -> None:
    """``--no-store`` runs without the store: no reply cached or read, nothing resumed or
    recorded. A store that cannot be opened or written is one warning and the same run, with
    the same files and exit status (a tester's finding: ``--no-store`` recorded the run, and a
    read-only store was a traceback, ``--no-store`` or not)."""
    server = chat_server(lambda body: OK_REPLIES.get(document(body), '{"name": "x"}'))
    db = Path(os.environ["FIELDCHECK_DATABASE_URL"].removeprefix("sqlite:///"))
    extra = ["--model", "m"]
    if store == "--no-store":
        extra.append("--no-store")
    elif store == "read-only":
        monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///file:{db}?mode=ro&uri=true")
    else:
        monkeypatch.setenv("FIELDCHECK_DATABASE_URL", str(db))  # a path, not a URL
    for calls in (7, 14):  # nothing cached: the second run (into a new folder) asks again
        files["out"] = files["out"].with_name(f"out{calls}")
        result = run(*common(files, server, *extra))
        assert result.exit_code == 3, result.output  # r3 and r4 fail, as with the store
        assert len(server.chat_requests) == calls
        summary = json.loads((files["out"] / "m" / "summary.json").read_text())
        assert summary["complete"] is True and summary["scored"] == 7
        assert result.stderr.count("warning: the store cannot be used") == (store != "--no-store")
        assert "Traceback" not in result.output and "cannot open the store" not in result.stderr
    kept = Store(f"sqlite:///{db}")
    assert kept.list_runs() == [] and kept.cache_count() == 0
    kept.close()


def test_a_model_folder_of_an_earlier_run_is_refused_as_out(
    files: dict[str, Path], chat_server: StartServer, tmp_path: Path
) -> None:
    """``json batch --out OUT/m`` where m is a model's folder of an earlier ``json run --out
    OUT``: it holds files, so it is refused with one line and nothing changed (issue 27: a
    run's folder is never written into again)."""
    server = chat_server(lambda body: OK_REPLIES.get(document(body), '{"name": "x"}'))
    assert run(*common(files, server, "--model", "m")).exit_code == 3
    batch = write_jsonl(
        tmp_path / "batch.jsonl", [{"id": "a", "ground_truth": {"x": 1}, "output": {"x": 1}}]
    )
    out = files["out"]
    tree = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.rglob("*") if p.is_file()}
    result = CliRunner().invoke(
        app,
        ["json", "batch", str(batch), "--out", str(out / "m"), "--no-store"],
        env={"COLUMNS": "400"},
    )
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: --out: {out / 'm'} holds files (call_errors.jsonl, "), line
    assert {
        p: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.rglob("*") if p.is_file()
    } == tree
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["batch.jsonl", "docs.jsonl", "out", "strategies.json"]
    )


def test_a_store_that_stops_taking_writes_mid_run_is_one_warning(
    files: dict[str, Path], chat_server: StartServer
) -> None:
    """A store that refuses writes once the run has begun (a full disk, a file made read-only;
    here a trigger of the database itself) is one warning: the run goes on without it and its
    files are the same as with a working store (a tester's finding: a traceback, exit 1, an
    empty folder, and the same again on every re-run)."""
    import sqlite3

    server = chat_server(lambda body: OK_REPLIES.get(document(body), '{"name": "x"}'))
    assert run(*common(files, server, "--model", "m", "--no-store")).exit_code == 3
    expected = snapshot(files["out"] / "m")
    db = os.environ["FIELDCHECK_DATABASE_URL"].removeprefix("sqlite:///")
    with sqlite3.connect(db) as connection:
        connection.execute(
            "CREATE TRIGGER full BEFORE INSERT ON run_journal WHEN "
            "(SELECT count(*) FROM run_journal) >= 3 BEGIN SELECT RAISE(ABORT, 'disk full'); END"
        )
    files["out"] = files["out"].with_name("out2")
    result = run(*common(files, server, "--model", "m"))
    assert result.exit_code == 3, result.output
    assert result.stderr.count("warning: the store stopped working") == 1
    assert "Traceback" not in result.output and "disk full" in result.stderr
    assert snapshot(files["out"] / "m") == expected


@pytest.mark.parametrize("bad", ["empty", "wrong format"])
def test_a_bad_data_file_is_refused_before_out_is_changed(
    files: dict[str, Path], chat_server: StartServer, bad: str
) -> None:
    """A DATA.jsonl without a usable document (empty, or a JSON batch) is the usage line, exit 2,
    before --out is prepared: the earlier run's files, the paid-for outputs.jsonl among them,
    are kept (a tester's finding: they were deleted first)."""
    server = chat_server(lambda body: OK_REPLIES.get(document(body), '{"name": "x"}'))
    assert run(*common(files, server, "--model", "m", "--model", "n")).exit_code == 3
    tree = {p: p.read_bytes() for p in files["out"].rglob("*") if p.is_file()}
    assert files["out"] / "m" / "outputs.jsonl" in tree
    calls = len(server.chat_requests)
    files["data"].write_text(
        "" if bad == "empty" else '{"id": 1, "ground_truth": {}, "output": {}}\n'
    )
    again = run(*common(files, server, "--model", "m", "--model", "n"))
    assert again.exit_code == 2, again.output
    assert again.stderr.startswith(f"error: DATA.jsonl: {files['data']}: no")
    assert len(server.chat_requests) == calls
    assert {p: p.read_bytes() for p in files["out"].rglob("*") if p.is_file()} == tree


def test_cut_replies_context_errors_and_big_replies_are_told_apart(
    tmp_path: Path, chat_server: StartServer
) -> None:
    """Issue 26, items 10, 13, 14 through `json run`: a reply cut by --max-tokens is scored as it
    came (not an object) but counted and said, with what to do; vLLM's context error is a
    `context_length` call error asked once; a reply over --max-reply-bytes is a bad response."""
    vllm = {
        "object": "error",
        "message": "This model's maximum context length is 4096 tokens. However, you requested "
        "5000 tokens (4984 in the messages, 16 in the completion). Please reduce the length of "
        "the messages or completion.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
    replies = {
        "d0": Reply(content='{"a": "b"}'),
        "d1": Reply(content='{"a": "a long value th', finish_reason="length"),
        "d2": Reply(status=400, error_body=vllm),
        "d3": Reply(content='{"a": "' + "x" * 4000 + '"}'),
    }
    server = chat_server(lambda body: replies[document(body)])
    data = write_jsonl(
        tmp_path / "d.jsonl",
        [{"id": i, "document": f"d{i}", "ground_truth": {"a": "b"}} for i in range(4)],
    )
    result = run(
        str(data), "--model", "m", "--base-url", server.base_url, "--no-progress",
        "--max-tokens", "16", "--max-reply-bytes", "2048", "--max-retries", "2",
        "--out", str(tmp_path / "o"),
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    folder = tmp_path / "o" / "m"
    call_errors = read_jsonl(folder / "call_errors.jsonl")
    assert [(e["id"], e["error_type"], e["attempts"]) for e in call_errors] == [
        (2, "context_length", 1),
        (3, "bad_response", 1),
    ]
    assert "over --max-reply-bytes (2,048 bytes)" in call_errors[1]["error_message"]
    assert sum(document(b) == "d2" for b in server.chat_requests) == 1
    records = {r["id"]: r for r in read_jsonl(folder / "records.jsonl")}
    assert records[1]["flags"] == ["not_an_object"]
    info = json.loads((folder / "run.json").read_text())
    assert (info["truncated_replies"], info["call_errors"]) == (
        1,
        {"bad_response": 1, "context_length": 1},
    )
    said = " ".join(result.output.split())
    assert "1 of 4 items had a reply cut by the token limit (finish_reason length): raise --max-tokens" in said  # fmt: skip


def test_a_reply_that_is_not_a_chat_completion_is_not_scored(
    tmp_path: Path, chat_server: StartServer
) -> None:
    """A text/plain 200 and a string `choices` are the endpoint's `bad_response`, a chat
    completion without content the model's `invalid_reply`: all three are call errors `json run`
    does not score, and the run exits 3, as the two other systems do for `bad_response` (the
    same fault was an `invalid_reply` there, scored as a wrong answer; a tester's finding)."""
    replies = {
        "d0": Reply(content='{"a": "b"}'),
        "d1": Reply(body=b"upstream said no", content_type="text/plain"),
        "d2": Reply(content="x", fields={"choices": "a string"}),
        "d3": Reply(content="x", fields={"choices": [{"message": {"content": None}}]}),
    }
    server = chat_server(lambda body: replies[document(body)])
    data = write_jsonl(
        tmp_path / "d.jsonl",
        [{"id": i, "document": f"d{i}", "ground_truth": {"a": "b"}} for i in range(4)],
    )
    result = run(
        str(data), "--model", "m", "--base-url", server.base_url, "--no-progress",
        "--out", str(tmp_path / "o"),
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    folder = tmp_path / "o" / "m"
    call_errors = read_jsonl(folder / "call_errors.jsonl")
    assert [(e["id"], e["error_type"]) for e in call_errors] == [
        (1, "bad_response"),
        (2, "bad_response"),
        (3, "invalid_reply"),
    ]
    assert [r["id"] for r in read_jsonl(folder / "records.jsonl")] == [0]
    info = json.loads((folder / "run.json").read_text())
    assert info["call_errors"] == {"bad_response": 2, "invalid_reply": 1}


def test_a_duplicate_document_id_keeps_the_scored_record_its_id_as_json_batch_does(
    tmp_path: Path, chat_server: StartServer
) -> None:
    from fieldcheck.runs import compare

    # documents a, a again (a load error: never sent), b; a is answered right, b wrong
    docs = [{"id": k, "document": f"doc {k}", "ground_truth": {"x": 1}} for k in ("a", "a", "b")]
    data = write_jsonl(tmp_path / "docs.jsonl", docs)
    server = chat_server(lambda body: '{"x": 2}' if document(body) == "doc b" else '{"x": 1}')
    out = tmp_path / "out"
    result = run(str(data), "--base-url", server.base_url, "--model", "m", "--out", str(out))
    assert result.exit_code == 3, result.output
    assert len(server.chat_requests) == 2
    run_id = json.loads((out / "m" / "run.json").read_text())["run_id"]
    batch = CliRunner().invoke(
        app, ["json", "batch", str(out / "m" / "outputs.jsonl"), "--out", str(tmp_path / "b")]
    )
    assert batch.exit_code == 0, batch.output
    (batch_id,) = {r.id for r in Store().list_runs()} - {run_id}
    store = Store()
    items = {i.key: i for i in store.items(run_id)}
    # the scored record keeps its id and its model call; the duplicate's error is a~seq, no call
    assert [(k, i.failed, i.error_type) for k, i in items.items()] == [
        ("a", False, None),
        ("b", True, None),
        ("a~2", None, "duplicate id (first on line 1)"),
    ]
    assert items["a"].result["output"] == {"x": 1} and "call" in items["a"].result
    assert "call" not in items["a~2"].result
    assert [i.key for i in store.items(batch_id)] == ["a", "b"]
    # the two runs scored a and b alike: only the duplicate's error, not scored, is unpaired
    table = compare(store, [store.get_run(run_id), store.get_run(batch_id)], differ=True)
    assert (table["matrix"]["items"], table["matrix"]["differing"]) == (3, 1)
    assert [row["key"] for row in table["matrix"]["rows"]] == ["a~2"]
    # re-scored, the run's stored errors come again after its records: the same keys
    rescored = CliRunner().invoke(app, ["runs", "rescore", run_id])
    assert rescored.exit_code == 0, rescored.output
    (child,) = {r.id for r in store.list_runs()} - {run_id, batch_id}
    assert [i.key for i in store.items(child)] == ["a", "b", "a~2"]


def test_a_duplicate_of_a_record_whose_call_failed_is_stored_after_the_call_error(
    tmp_path: Path, chat_server: StartServer
) -> None:
    docs = [{"id": k, "document": f"doc {k}", "ground_truth": {"x": 1}} for k in ("a", "b", "a")]
    data = write_jsonl(tmp_path / "docs.jsonl", docs)
    server = chat_server(
        lambda body: Reply(status=400) if document(body) == "doc a" else '{"x": 1}'
    )
    out = tmp_path / "out"
    result = run(str(data), "--base-url", server.base_url, "--model", "m", "--out", str(out))
    assert result.exit_code == 3, result.output
    run_id = json.loads((out / "m" / "run.json").read_text())["run_id"]
    items = [(i.key, i.failed, i.error_type) for i in Store().items(run_id)]
    # b scored; a's failed call under its id; the duplicate's error after it, with no call
    assert items == [
        ("b", False, None),
        ("a", None, "bad_request"),
        ("a~2", None, "duplicate id (first on line 1)"),
    ]

"""``--matcher llm``: the spec's literal "LLM fuzzy/semantic similarity" against a real HTTP server
on 127.0.0.1 speaking the chat-completions protocol (tests/chat_server.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from chat_server import ChatServer, Script, user_text
from fieldcheck._cli.main import app
from fieldcheck.jsoneval import BatchRecord, EvalConfig, MatcherError, evaluate, evaluate_batch

Walk = tuple[dict[str, Any], dict[str, Any], dict[str, str]]
StartServer = Callable[[Script], ChatServer]


def walkthrough_judge(request: dict[str, Any]) -> str:
    """0.92 for name, 0.88 for bio (the spec's walkthrough numbers)."""
    text = user_text(request)
    if "John Smyth" in text:
        return "0.92"
    if "Experienced senior engineer" in text:
        return '{"score": 0.88}'
    return "0"


def llm_config(server: ChatServer, strategies: dict[str, str]) -> EvalConfig:
    return EvalConfig(
        strategies=strategies, matcher="llm", judge_base_url=server.base_url, judge_model="judge-1"
    )


def test_walkthrough_with_llm_judge(walkthrough: Walk, chat_server: StartServer) -> None:
    aio, gt, strategies = walkthrough
    server = chat_server(walkthrough_judge)
    r = evaluate(aio, gt, llm_config(server, strategies))
    assert r.completeness == 0.75
    assert abs(r.hallucination - 2 / 6) < 1e-12
    assert r.accuracy == 1.0
    assert r.rqs == 0.7375
    assert r.fields["name"].similarity == 0.92 and r.fields["bio"].similarity == 0.88
    assert r.fields["email"].strategy == "EXACT"  # never sent to the judge
    assert len(server.requests) == 2
    prompts = {
        user_text(q).split("Candidate value:\n<<<")[1].split(">>>")[0]: q for q in server.requests
    }
    assert "surface similarity" in prompts["John Smyth"]["messages"][0]["content"]  # fuzzy prompt
    assert (
        "for meaning"
        in prompts["Experienced senior engineer, 10+ years..."]["messages"][0]["content"]
    )
    assert {q["model"] for q in server.requests} == {"judge-1"}
    assert r.signature.settings["fuzzy"] == {
        "matcher": "llm",
        "judge_model": "judge-1",
        "prompt_version": "fuzzy-v2",
    }


def test_walkthrough_cli_json_with_llm(
    walkthrough: Walk, chat_server: StartServer, tmp_path: Path
) -> None:
    aio, gt, strategies = walkthrough
    server = chat_server(walkthrough_judge)
    for name, value in (("gt.json", gt), ("out.json", aio), ("s.json", strategies)):
        (tmp_path / name).write_text(json.dumps(value))
    result = CliRunner().invoke(
        app,
        [
            "json", "score", str(tmp_path / "gt.json"), str(tmp_path / "out.json"),
            "--strategies", str(tmp_path / "s.json"), "--matcher", "llm",
            "--judge-base-url", server.base_url, "--judge-model", "judge-1", "--json",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert list(data) == [
        "accuracy", "buckets", "completeness", "fields", "hallucination", "rqs", "safety_score", "signature",
    ]  # fmt: skip
    assert data["rqs"] == 0.7375 and data["completeness"] == 0.75 and data["accuracy"] == 1.0
    assert data["buckets"]["extra_keys"] == ["extra_field"]
    assert data["fields"]["name"] == {"score": 1.0, "similarity": 0.92, "strategy": "FUZZY"}
    assert data["fields"]["bio"] == {"score": 1.0, "similarity": 0.88, "strategy": "SEMANTIC"}
    settings = data["signature"]["settings"]
    assert settings["matcher"] == "llm" and settings["semantic"]["judge_model"] == "judge-1"
    assert settings["fuzzy_threshold"] == 0.85 and settings["weights"]["accuracy"] == 0.45
    assert data["signature"]["fieldcheck_version"]


def test_judge_error_fails_the_record_never_zero(
    walkthrough: Walk, chat_server: StartServer, tmp_path: Path
) -> None:
    aio, gt, strategies = walkthrough

    def judge(request: dict[str, Any]) -> str:
        return "They look quite similar to me." if "John Smyth" in user_text(request) else "0.88"

    server = chat_server(judge)
    cfg = llm_config(server, strategies)
    try:
        evaluate(aio, gt, cfg)
    except MatcherError as exc:
        assert str(exc).startswith(
            "field 'name': FUZZY matcher failed: judge_error: judge reply is not a score"
        )
    else:  # pragma: no cover - the assertion below documents the failure
        raise AssertionError("a judge error must not be scored")
    records = [
        BatchRecord(id="walk", ground_truth=gt, output=aio, line=1),
        BatchRecord(id="ok", ground_truth={"bio": gt["bio"]}, output={"bio": aio["bio"]}, line=2),
    ]
    batch = evaluate_batch(records, cfg)
    assert [r.id for r in batch.results] == ["ok"] and batch.results[0].result.accuracy == 1.0
    assert [(e.line, e.record) for e in batch.errors] == [(1, "walk")]
    assert "judge_error" in batch.errors[0].reason
    assert batch.summary.not_scored == 1 and batch.summary.scored == 1
    assert batch.summary.failed == 0  # "ok" is right; "walk" is not scored, so not failed
    # through the CLI: the failure goes to errors.jsonl and the exit status is 3
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(json.dumps(r.model_dump(exclude={"line"})) for r in records) + "\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        [
            "json", "batch", str(data), "--out", str(out), "--strategies", _write(tmp_path, strategies),
            "--matcher", "llm", "--judge-base-url", server.base_url, "--judge-model", "judge-1",
        ],
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    assert (
        f"{data}:1: record walk: field 'name': FUZZY matcher failed: judge_error" in result.stderr
    )
    errors = [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]
    assert [(e["file"], e["line"], e["record"]) for e in errors] == [(str(data), 1, "walk")]
    assert errors[0]["message"].startswith(
        f"{data}:1: record walk: field 'name': FUZZY matcher failed"
    )
    assert [
        json.loads(line)["id"] for line in (out / "records.jsonl").read_text().splitlines()
    ] == ["ok"]


def _write(folder: Path, strategies: dict[str, str]) -> str:
    path = folder / "strategies.json"
    path.write_text(json.dumps(strategies))
    return str(path)


def test_judge_batch_asks_each_distinct_pair_once_and_caches(chat_server: StartServer) -> None:
    server = chat_server(lambda request: "0.9")
    gt = {"name": "Acme Ltd", "note": "Paid in full"}
    outputs = [
        {"name": "ACME Ltd.", "note": "Fully paid"},
        {"name": "ACME Ltd.", "note": "Fully paid"},
        {"name": "Acme Limited", "note": "Fully paid"},
        {"name": "Acme Ltd", "note": "Paid in full"},  # identical: no request
    ]
    records = [BatchRecord(id=i, ground_truth=gt, output=o) for i, o in enumerate(outputs)]
    cfg = llm_config(server, {"name": "FUZZY"})
    first = evaluate_batch(records, cfg)
    assert (
        len(server.requests) == 3
    )  # (ACME Ltd., Acme Ltd), (Acme Limited, Acme Ltd), (Fully paid, Paid in full)
    assert first.summary.matcher_pairs == {"FUZZY": 2, "SEMANTIC": 1}
    assert all(r.result.accuracy == 1.0 for r in first.results)
    second = evaluate_batch(records, cfg)
    assert len(server.requests) == 3  # every reply came from the on-disk cache
    assert [r.result.rqs for r in second.results] == [r.result.rqs for r in first.results]


def test_score_judge_failure_exits_3(
    walkthrough: Walk, chat_server: StartServer, tmp_path: Path
) -> None:
    aio, gt, strategies = walkthrough
    server = chat_server(lambda request: "1.5")  # out of range: a judge error, not a score
    for name, value in (("gt.json", gt), ("out.json", aio)):
        (tmp_path / name).write_text(json.dumps(value))
    result = CliRunner().invoke(
        app,
        [
            "json", "score", str(tmp_path / "gt.json"), str(tmp_path / "out.json"),
            "--strategies", _write(tmp_path, strategies), "--matcher", "llm",
            "--judge-base-url", server.base_url, "--judge-model", "judge-1", "--json",
        ],
    )  # fmt: skip
    assert result.exit_code == 3
    assert result.stdout == ""
    assert (
        "field 'bio': SEMANTIC matcher failed: judge_error: judge score 1.5 is outside [0, 1]"
        in result.stderr
    )


def test_batch_with_a_judge_and_no_store_opens_no_store(
    chat_server: StartServer, tmp_path: Path, monkeypatch: Any
) -> None:
    """``json batch --matcher llm --no-store`` neither reads nor writes a cache for the judge,
    and creates no database (it cached the judge's replies in the store all the same)."""
    server = chat_server(lambda request: "0.9")
    database = tmp_path / "fresh" / "store.sqlite3"
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{database}")
    data = tmp_path / "data.jsonl"
    record = {"id": "r", "ground_truth": {"name": "Acme Ltd"}, "output": {"name": "ACME Ltd."}}
    data.write_text(json.dumps(record) + "\n")
    for n in (1, 2):
        result = CliRunner().invoke(
            app,
            [
                "json", "batch", str(data), "--out", str(tmp_path / f"out{n}"),
                "--strategies", _write(tmp_path, {"name": "FUZZY"}), "--matcher", "llm",
                "--judge-base-url", server.base_url, "--judge-model", "judge-1", "--no-store",
            ],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        assert len(server.requests) == n  # asked each time: nothing cached
    assert not database.exists()


def test_rescore_names_its_judge_errors_and_exits_3_as_batch_does(
    chat_server: StartServer, tmp_path: Path
) -> None:
    """`runs rescore` of a `--matcher llm` run asks its judge for the pairs its cache lacks; a
    judge error left the record not scored with no line and exit 0 (a new-user trial's finding):
    each is named on stderr and the exit status is 3, as `json batch`'s. The parent's own
    unscored lines (carried again) are not new: a re-score without a judge error exits 0."""
    from fieldcheck.store import Store

    replies = {"note": "0.9"}

    def judge(request: dict[str, Any]) -> str:
        return replies["note"] if "Paid in full" in user_text(request) else "0.9"

    server = chat_server(judge)
    rows = [
        {"id": "a", "ground_truth": {"name": "Acme Ltd", "note": "Paid in full"},
         "output": {"name": "ACME Ltd.", "note": "Fully paid"}},
        {"id": "b", "ground_truth": {"name": "Acme Ltd"}, "output": {"name": "Acme Limited"}},
    ]  # fmt: skip
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{not json\n")
    batch = CliRunner().invoke(
        app,
        [
            "json", "batch", str(data), "--out", str(tmp_path / "out"), "--bootstrap", "0",
            "--strategies", _write(tmp_path, {"name": "FUZZY", "note": "EXACT"}),
            "--matcher", "llm", "--judge-base-url", server.base_url, "--judge-model", "judge-1",
        ],
    )  # fmt: skip
    assert batch.exit_code == 3 and f"{data}:3" in batch.stderr  # the bad line
    run_id = Store().list_runs(system="json")[0].id
    same = CliRunner().invoke(app, ["runs", "rescore", run_id, "--fuzzy-threshold", "0.5"])
    assert same.exit_code == 0, same.output
    assert "error:" not in same.stderr  # the bad line was the parent's, reported by its batch
    replies["note"] = "They mean the same thing."  # not a score: a judge error
    semantic = _write(tmp_path, {"name": "FUZZY", "note": "SEMANTIC"})
    for args in ((), ("--json",)):
        again = CliRunner().invoke(
            app, ["runs", "rescore", run_id, "--strategies", semantic, *args]
        )
        assert again.exit_code == 3, again.output
        assert again.stderr.splitlines() == [
            "error: record a: field 'note': SEMANTIC matcher failed: judge_error: "
            "judge reply is not a score: 'They mean the same thing.'"
        ]
    child = json.loads(again.stdout)  # --json: the new run, its record a not scored
    assert (child["parent_id"], child["metrics"]["not_scored"], child["metrics"]["scored"]) == (
        run_id,
        2,
        1,
    )


def test_score_takes_the_judges_timeout_and_concurrency(
    chat_server: StartServer, tmp_path: Path, monkeypatch: Any
) -> None:
    """``json score --timeout --concurrency`` limit its judge's calls as ``json batch``'s do:
    the one-record command used a fixed 60 s and 4 in flight. The judge stalls until the end."""
    import threading

    from fieldcheck.jsoneval import _evaluate

    release, made = threading.Event(), []

    class Judge(_evaluate.LLMJudge):
        def __init__(self, **given: Any) -> None:
            made.append((given.get("timeout"), given.get("max_concurrency")))
            super().__init__(**given)

    monkeypatch.setattr(_evaluate, "LLMJudge", Judge)
    server = chat_server(lambda request: "0.9" if release.wait(120) else "0")
    (tmp_path / "gt.json").write_text(json.dumps({"name": "Acme Ltd"}))
    (tmp_path / "out.json").write_text(json.dumps({"name": "ACME Ltd."}))
    try:
        result = CliRunner().invoke(
            app,
            [
                "json", "score", str(tmp_path / "gt.json"), str(tmp_path / "out.json"),
                "--strategies", _write(tmp_path, {"name": "FUZZY"}), "--matcher", "llm",
                "--judge-base-url", server.base_url, "--judge-model", "judge-1", "--no-store",
                "--timeout", "1", "--concurrency", "2",
            ],
        )  # fmt: skip
    finally:
        release.set()
    assert result.exit_code == 3, result.output
    assert made and set(made) == {(1.0, 2)}
    assert "no complete reply within 1 s" in result.stderr

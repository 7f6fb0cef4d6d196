"""Sessions whose model call failed (an infrastructure error) are not scored for that model: not
misses, listed and counted in every output; a model with nothing scored has no metrics (exit 3).
``invalid_reply`` stays the model's failure: its gold slots are misses."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from slots_helpers import slot
from test_run_cli import CONVERSATIONS, GOLD, REPLIES, flat, read_jsonl, transcript, write_jsonl
from typer.testing import CliRunner

from chat_server import ChatServer, Reply, Script
from fieldcheck._cli.main import app
from fieldcheck.slots import ModelInput, load_slots, score_models

StartServer = Callable[[Script], ChatServer]
Jsonl = Callable[[str, list[Any]], Path]

# 12 sessions of 3 slots; "good" misses some, "bad" others
GOLD_12 = [slot("u", s, "t", f"f{i}", "x") for s in range(12) for i in range(3)]
GOOD_12 = [slot("u", s, "t", f"f{i}", "x") for s in range(12) for i in range(3) if (s + i) % 5]
BAD_12 = [slot("u", s, "t", f"f{i}", "x") for s in range(12) for i in range(3) if (s + i) % 2]


def _model(jsonl: Jsonl, name: str, rows: list[Any], **kw: Any) -> ModelInput:
    return ModelInput(name, load_slots(jsonl(f"{name}.jsonl", rows)), **kw)


def test_sessions_not_scored_are_left_out_and_pairs_compare_common_sessions(jsonl: Jsonl) -> None:
    """Leaving sessions out equals scoring against a gold file without them; the paired test of
    two models runs on the sessions both were scored on."""
    gold = load_slots(jsonl("gold.jsonl", GOLD_12))
    good_out = {("u", 0): "server_error", ("u", 1): "timeout", ("u", 2): "server_error"}
    bad_out = {("u", 2): "connection", ("u", 3): "connection"}
    run = score_models(
        gold,
        [
            _model(jsonl, "good", GOOD_12, not_scored=good_out),
            _model(jsonl, "bad", BAD_12, not_scored=bad_out),
        ],
        bootstrap=300,
        seed=1,
    )
    good, bad = run.models
    assert good.result.sessions_not_scored == {"server_error": 2, "timeout": 1}
    assert bad.result.sessions_not_scored == {"connection": 2}
    # good on sessions 3..11: 27 gold slots; missed where (s + i) % 5 == 0: 6 of them
    assert good.result.counts.model_dump() == {
        "tp": 21, "fp": 0, "fn": 6, "gold_slots": 27, "sessions": 9,
    }  # fmt: skip
    assert good.result.recall == 21 / 27
    assert bad.result.counts.sessions == 10
    assert any(
        "model 'good': 3 of 12 gold session(s) not scored, the call failed "
        "(server_error=2, timeout=1); their gold slots are not counted" in w
        for w in run.warnings
    )

    # the same numbers as scoring against the gold without the left-out sessions
    alone = score_models(
        load_slots(jsonl("gold9.jsonl", [r for r in GOLD_12 if r["session"] >= 3])),
        [_model(jsonl, "good", GOOD_12)],
        bootstrap=300,
        seed=1,
    )
    assert alone.models[0].result.ci == good.result.ci
    assert alone.models[0].result.counts == good.result.counts

    # the pair: sessions 4..11 (both scored), F1s and p-value as a run on exactly those
    common = score_models(
        load_slots(jsonl("gold8.jsonl", [r for r in GOLD_12 if r["session"] >= 4])),
        [_model(jsonl, "good", GOOD_12), _model(jsonl, "bad", BAD_12)],
        bootstrap=300,
        seed=1,
    )
    (pair,) = run.paired_f1
    (expected,) = common.paired_f1
    assert pair.sessions == 8 and expected.sessions == 8
    assert pair.model_dump() == expected.model_dump()
    assert pair.f1_a == common.models[0].result.f1 != good.result.f1
    assert pair.p_value is not None and 0 < pair.p_value <= 1


def test_a_model_with_nothing_scored_has_no_metrics(jsonl: Jsonl) -> None:
    gold = load_slots(jsonl("gold.jsonl", GOLD_12[:6]))  # sessions 0 and 1
    run = score_models(
        gold,
        [
            _model(jsonl, "ok", GOOD_12),
            _model(jsonl, "dead", [], not_scored={("u", 0): "connection", ("u", 1): "connection"}),
        ],
        bootstrap=100,
    )
    assert [m.name for m in run.models] == ["ok"] and run.paired_f1 == []
    assert [(u.name, u.sessions_not_scored) for u in run.unscored] == [("dead", {"connection": 2})]
    dead = run.metrics_json()["models"]["dead"]
    assert set(dead) == set(run.metrics_json()["models"]["ok"])  # the same keys
    assert dead["f1"] is None and dead["precision"] is None and dead["latency"] is None
    assert dead["counts"] == {"tp": 0, "fp": 0, "fn": 0, "gold_slots": 0, "sessions": 0}
    assert dead["sessions_not_scored"] == {"connection": 2}
    assert dead["ci"] == dict.fromkeys(
        ("precision", "recall", "f1", "exact_match_rate", "token_f1")
    )
    assert list(run.metrics_json()["models"]) == ["ok", "dead"]  # the order given


def _invoke(files: dict[str, Path], url: str, *extra: str) -> Any:
    args = [
        "slots", "run", "--conversations", str(files["conv"]), "--gold", str(files["gold"]),
        "--base-url", url, "--out", str(files["out"]), "--no-progress", "--max-retries", "0",
        *extra,
    ]  # fmt: skip
    return CliRunner().invoke(app, args, env={"COLUMNS": "200"})  # a row label never wraps


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    return {
        "conv": write_jsonl(tmp_path / "conv.jsonl", CONVERSATIONS),
        "gold": write_jsonl(tmp_path / "gold.jsonl", GOLD),
        "out": tmp_path / "out",
    }


def test_a_session_with_a_500_is_not_scored_but_an_invalid_reply_is_missed(
    chat_server: StartServer, files: dict[str, Path]
) -> None:
    """Model "bad" gets a 500 for session a/2 and "junk" an invalid reply there; "good" answers
    every session. Gold: a/1 name, age; a/2 location, mood; b/1 hobbies (5 slots)."""

    def script(body: dict[str, Any]) -> str | Reply:
        if transcript(body) == "I moved to Oslo.":
            if body["model"] == "bad":
                return Reply(status=500)
            if body["model"] == "junk":
                return '{"basic_info": '
        return json.dumps(REPLIES[transcript(body)])

    server = chat_server(script)
    models = ("--model", "good", "--model", "bad", "--model", "junk")
    result = _invoke(files, server.base_url, *models, "--bootstrap", "200")
    assert result.exit_code == 3, result.output
    out = files["out"]
    metrics = json.loads((out / "metrics.json").read_text())
    m = metrics["models"]
    # good: TP name, age, location, hobbies; FN mood; FP travel (an extra slot)
    assert m["good"]["counts"] == {"tp": 4, "fp": 1, "fn": 1, "gold_slots": 5, "sessions": 3}
    assert m["good"]["sessions_not_scored"] == {}
    # bad without a/2: gold name, age, hobbies all found, travel extra: P 3/4, R 1, F1 6/7
    assert m["bad"]["counts"] == {"tp": 3, "fp": 1, "fn": 0, "gold_slots": 3, "sessions": 2}
    assert (m["bad"]["precision"], m["bad"]["recall"]) == (0.75, 1.0)
    assert m["bad"]["f1"] == pytest.approx(6 / 7, abs=1e-12)
    assert m["bad"]["sessions_not_scored"] == {"server_error": 1}
    # junk's invalid reply is its own failure: a/2's location and mood are misses
    assert m["junk"]["counts"] == {"tp": 3, "fp": 1, "fn": 2, "gold_slots": 5, "sessions": 3}
    assert m["junk"]["sessions_not_scored"] == {}
    assert len(server.chat_requests) == 9  # --max-retries 0: one call per session and model

    # good vs bad on a/1 and b/1, where both are right: difference 0, p-value 1
    pair = next(p for p in metrics["paired_f1"] if (p["model_a"], p["model_b"]) == ("good", "bad"))
    assert pair["sessions"] == 2 and pair["difference"] == 0.0 and pair["p_value"] == 1.0
    assert pair["f1_a"] == pytest.approx(6 / 7, abs=1e-12)
    pair = next(p for p in metrics["paired_f1"] if p["model_b"] == "junk")
    assert pair["sessions"] == 3 and pair["f1_a"] == m["good"]["f1"]

    errors = read_jsonl(out / "session_errors.jsonl")
    assert [(e["model"], e["session"], e["error_type"]) for e in errors] == [
        ("bad", 2, "server_error"),
        ("junk", 2, "invalid_reply"),
    ]
    rows = {r["model"]: r for r in csv.DictReader((out / "metrics.csv").open())}
    assert [rows[n]["sessions_not_scored"] for n in ("good", "bad", "junk")] == ["0", "1", "0"]
    report = (out / "report.md").read_text()
    assert (
        "- bad: 1 session(s) not scored, the call failed (server\\_error=1); its metrics cover "
        "the other 2 session(s)" in report
    )
    assert "good - bad: +0.000 on the 2 session(s) both were scored on" in report
    html = (out / "report.html").read_text()
    assert "<li>bad: 1 session(s) not scored, the call failed (server_error=1)" in html

    text = flat(result.output)
    assert "sessions not scored (call errors) 1 (server_error=1)" in text
    assert "F1 good - bad: +0.000 on the 2 session(s) both were scored on" in text
    assert (
        "2 session error(s); listed in" in text
        and "1 invalid repl(ies), slots missed; 1 call error(s), not scored" in text
    )
    runs = result.output.split("Model runs")[1]
    assert max(len(line) for line in runs.splitlines() if line[:1] in "┏┃┡│└") <= 80
    cells = {
        line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:6]]
        for line in runs.splitlines()
        if line.startswith("│") and line.split("│")[1].strip() in ("good", "bad", "junk")
    }
    # sessions, session errors, errors, not scored (call errors)
    assert cells == {
        "good": ["3", "0", "-", "0"],
        "bad": ["3", "1", "server_error=1", "1"],
        "junk": ["3", "1", "invalid_reply=1", "0"],
    }


def test_a_dead_endpoint_scores_nothing_and_says_so(
    chat_server: StartServer, files: dict[str, Path]
) -> None:
    """Every call of model "down" is a 500: nothing scored, no metric, no "F1 0.000", exit 3;
    the model that answered is scored as if alone."""

    def script(body: dict[str, Any]) -> str | Reply:
        if body["model"] == "down":
            return Reply(status=500)
        return json.dumps(REPLIES[transcript(body)])

    server = chat_server(script)
    result = _invoke(files, server.base_url, "--model", "up", "--model", "down")
    assert result.exit_code == 3, result.output
    out = files["out"]
    metrics = json.loads((out / "metrics.json").read_text())
    down = metrics["models"]["down"]
    assert down["f1"] is None and down["recall"] is None and down["per_topic"] == {}
    assert down["counts"]["sessions"] == 0 and down["sessions_not_scored"] == {"server_error": 3}
    assert metrics["models"]["up"]["counts"]["tp"] == 4 and metrics["paired_f1"] == []
    report = (out / "report.md").read_text()
    assert "| down | not scored | n/a | - | nothing scored: the call failed for all 3" in report
    assert "Nothing scored for down: the call failed for all 3 session(s) (server\\_error=3)" in (
        report
    )
    assert "- down: nothing scored, the call failed for all 3 session(s)" in report
    assert "up: F1 0.800 (the only model)" in report
    rows = {r["model"]: r for r in csv.DictReader((out / "metrics.csv").open())}
    assert (rows["down"]["f1"], rows["down"]["sessions"], rows["down"]["sessions_not_scored"]) == (
        "",
        "0",
        "3",
    )
    text = flat(result.output)
    assert "down: nothing scored: the call failed for all 3 session(s) (server_error=3)" in text
    assert "down: nothing scored: every gold session's call failed; check --base-url" in text
    for where in (text, report, (out / "report.html").read_text()):
        assert "F1 0.000" not in where and "down: F1" not in where


def test_only_a_dead_model(chat_server: StartServer, files: dict[str, Path]) -> None:
    server = chat_server(lambda body: Reply(status=503))
    result = _invoke(files, server.base_url, "--model", "down", "--bootstrap", "100")
    assert result.exit_code == 3, result.output
    metrics = json.loads((files["out"] / "metrics.json").read_text())
    assert metrics["models"]["down"]["sessions_not_scored"] == {"server_error": 3}
    assert metrics["models"]["down"]["f1"] is None
    report = (files["out"] / "report.md").read_text()
    assert "1. **Nothing scored for down: the call failed for all 3 session(s)" in report
    assert "F1 0.000" not in report and "F1 0.000" not in flat(result.output)


def test_slots_score_on_plain_files_has_nothing_left_out(jsonl: Jsonl, tmp_path: Path) -> None:
    gold = jsonl("gold.jsonl", GOLD_12)
    args = [
        "slots", "score", "--gold", str(gold), "--pred", f"good={jsonl('g.jsonl', GOOD_12)}",
        "--pred", f"bad={jsonl('b.jsonl', BAD_12)}", "--out", str(tmp_path / "out"),
        "--bootstrap", "100",
    ]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert [m["sessions_not_scored"] for m in metrics["models"].values()] == [{}, {}]
    assert [m["counts"]["sessions"] for m in metrics["models"].values()] == [12, 12]
    (pair,) = metrics["paired_f1"]
    assert pair["sessions"] == 12
    assert pair["f1_a"] == metrics["models"]["good"]["f1"]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "Sessions not scored" not in report and "both were scored on" not in report

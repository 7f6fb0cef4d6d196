"""An item's whole story (issue 28, "An item"): ``GET /api/runs/{id}/items/{key}`` for real runs
of each system against serve-model holds the item's actual values (the field verdicts, the
slots, the plan steps and checks, the prompt and raw reply); keys with ``/``, ``?``, ``#`` and
spaces; 404 with the usual error body; ``runs show RUN --item KEY`` prints the same story and
its ``--json`` is the route's JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from live_server import LiveServer
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck.metrics import flatten, wildcard_path
from fieldcheck.store import RunInfo, Store
from item_runs import EXAMPLES, HOSTILE_KEY, make_runs


@pytest.fixture
def stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, serve: Any
) -> tuple[dict[str, RunInfo], Store, httpx.Client]:
    """The three runs in the API server's store, the store, and a client of the server."""
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{tmp_path / 'api.sqlite3'}")
    runs = make_runs(tmp_path)
    live: LiveServer = serve()
    store = Store()
    with httpx.Client(base_url=live.base_url, timeout=30) as http:
        yield runs, store, http  # type: ignore[misc]
    store.close()


def story_of(http: httpx.Client, run: RunInfo, key: str, **params: str) -> dict[str, Any]:
    found = http.get(f"/api/runs/{run.id}/items/{quote(key, safe='')}", params=params)
    assert found.status_code == 200, found.text
    story: dict[str, Any] = found.json()
    return story


def section(story: dict[str, Any], name: str) -> list[dict[str, Any]]:
    [found] = [s for s in story["sections"] if s["id"] == name]
    blocks: list[dict[str, Any]] = found["blocks"]
    return blocks


def table(story: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """A section's table as rows keyed by its columns, each with its ``tone``."""
    [block] = [b for b in section(story, name) if b["kind"] == "table"]
    return [
        {**dict(zip(block["columns"], row, strict=True)), "tone": tone}
        for row, tone in zip(block["rows"], block["tones"], strict=True)
    ]


def values(story: dict[str, Any], name: str) -> dict[str, Any]:
    return {k: v for b in section(story, name) if b["kind"] == "values" for k, v in b["rows"]}


def assert_call_told(story: dict[str, Any], result: dict[str, Any]) -> None:
    """Each call of the item as the store keeps it: prompt messages, raw reply, tokens."""
    calls = result["call"]["calls"]
    assert values(story, "call")["calls"] == len(calls)
    for n, call in enumerate(calls, 1):
        blocks = section(story, f"call-{n}")
        texts = [(b["label"], b["text"]) for b in blocks if b["kind"] in ("text", "code")]
        sent = [(f"prompt: {m['role']}", m["content"]) for m in call["messages"]]
        assert texts == [*sent, ("raw reply", call["text"])]
        told = values(story, f"call-{n}")
        assert (told["input tokens"], told["output tokens"]) == (
            call["input_tokens"],
            call["output_tokens"],
        )
        assert (told["attempts"], told["latency (s)"]) == (call["attempts"], call["latency_s"])


def test_a_json_records_fields_and_call(stored: Any) -> None:
    runs, store, http = stored
    run = runs["json"]
    [item] = store.find_items(run.id, [HOSTILE_KEY])
    story = story_of(http, run, HOSTILE_KEY)
    assert (story["key"], story["verdict"], story["failed"]) == (HOSTILE_KEY, "failed", True)
    assert story["url"] == f"/runs/{run.id}/items/inv%200001%2Fa%20b%3Fc%23d"
    result = item.result
    gold, output = flatten(result["ground_truth"]), flatten(result["output"])
    rows = {r["field"]: r for r in table(story, "fields")}
    assert set(result["fields"]) <= set(rows)
    for name, scored in result["fields"].items():
        row = rows[name]
        assert (row["strategy"], row["similarity"]) == (scored["strategy"], scored["similarity"])
        want = "match" if scored["score"] == 1 else "no match"
        assert (row["verdict"], row["tone"]) == (want, "pass" if want == "match" else "fail")
        if isinstance(gold.get(name), str) and gold[name]:
            assert row["ground truth"] == gold[name]
        if isinstance(output.get(name), str) and output[name]:
            assert row["output"] == output[name]
    # a field the run's strategies name is not auto-detected; its threshold is its strategy's
    config = run.settings["config"]
    for name, row in rows.items():
        if row["strategy"] is None:
            continue
        named = name in config["strategies"] or wildcard_path(name) in config["strategies"]
        assert row["auto-detected"] is (not named), name
        want = {"FUZZY": config["fuzzy_threshold"], "SEMANTIC": config["semantic_threshold"]}
        assert row["threshold"] == want.get(row["strategy"]), name
    assert {r["auto-detected"] for r in rows.values()} >= {True, False}
    failed = sorted(n for n, r in rows.items() if r["tone"] == "fail")
    assert failed
    wrong = {n for n, s in result["fields"].items() if s["score"] is not None and s["score"] < 1}
    missing = set(result["buckets"]["aio_missing_or_null"])
    extra = set(result["buckets"]["extra_keys"]) | set(result["buckets"]["gt_null_aio_has_value"])
    assert set(failed) == wrong | missing | extra
    assert values(story, "fields")["failed"] == ", ".join(failed)
    assert values(story, "scores")["rqs"] == result["rqs"]
    assert_call_told(story, result)


def test_a_slot_sessions_slots_side_by_side(stored: Any) -> None:
    runs, store, http = stored
    run = runs["slots"]
    key = "synthetic-fast/u2/3"  # a missed slot and an extra one
    [item] = store.find_items(run.id, [key])
    story = story_of(http, run, key)
    assert story["model"] == "synthetic-fast" and story["verdict"] == "failed"
    result, counts = item.result, item.result["counts"]
    rows = table(story, "slots")
    gold = {(t, f): v for t, f, v in result["gold"]}
    pred = {(t, f): v for t, f, v in result["pred"]}
    assert [(r["topic"], r["field"]) for r in rows] == sorted(gold.keys() | pred.keys())
    for row in rows:
        slot = (row["topic"], row["field"])
        assert (row["gold"], row["predicted"]) == (gold.get(slot), pred.get(slot))
    verdicts = [r["verdict"] for r in rows]
    assert verdicts.count("TP") == counts["tp"]
    assert verdicts.count("FN (missed)") == counts["fn"]
    assert verdicts.count("FP (extra slot)") == counts["fp"]
    assert sum(r["BLEU-1"] for r in rows if r["BLEU-1"] is not None) > 0
    said = values(story, "counts")
    assert (said["tp"], said["fn"]) == (counts["tp"], counts["fn"])
    assert said["token R"] == counts["token_matched"] / counts["token_gold"]
    canonical = [r for r in rows if r["gold"] and r["gold canonical"] != r["gold"]]
    assert all(r["gold canonical"] == sorted({v.lower() for v in r["gold"]}) for r in canonical)
    assert_call_told(story, result)
    # one key per model: the model's item by ?model=, another model's is a 404
    assert story_of(http, run, key, model="synthetic-fast")["key"] == key
    other = http.get(f"/api/runs/{run.id}/items/{quote(key, safe='')}?model=synthetic-careful")
    assert other.status_code == 404 and other.json()["field"] == "key"


def test_a_numeric_turns_plan_checks_repair_and_matches(stored: Any) -> None:
    runs, store, http = stored
    run = runs["numeric"]
    key = "Single_ETR/2004/page_213.pdf-4#1"  # turn 1, repaired: its plan passed the 2nd time
    [item] = store.find_items(run.id, [key])
    result = item.result
    assert len(result["call"]["calls"]) == 2
    story = story_of(http, run, key)
    assert story["turn"] == 1
    assert [t["text"] for t in section(story, "turn") if t["kind"] == "text"] == [
        result["question"]
    ]
    [first] = store.find_items(run.id, ["Single_ETR/2004/page_213.pdf-4#0"])
    [earlier] = table(story, "earlier")
    assert (earlier["turn"], earlier["question"]) == (0, first.result["question"])
    assert earlier["gold answer"] == first.result["expected_answer"]
    assert (
        story["related"][0]["url"] == f"/runs/{run.id}/items/Single_ETR%2F2004%2Fpage_213.pdf-4%230"
    )
    dev = json.loads((EXAMPLES / "convfinqa" / "dev.json").read_text())["dev"]
    [record] = [r for r in dev if r["id"] == "Single_ETR/2004/page_213.pdf-4"]
    [(column, cells)] = record["doc"]["table"].items()  # ConvFinQA's: column -> row -> value
    shown = table(story, "document-table")  # a row per line, as the prompt shows it, sorted
    assert [(c[""], c[column]) for c in shown] == sorted(cells.items())
    steps = table(story, "plan")
    assert [(s["tool"], s["arguments or value"]) for s in steps] == [
        (s["tool"], s["args"] if s["tool"] == "compute" else s["value"])
        for s in result["plan"]["steps"]
    ]
    checks = table(story, "checks")
    assert len(checks) == len(result["validation"]) == 16
    assert [c["round"] for c in checks] == ["first"] * 8 + ["repair round"] * 8
    for row, entry in zip(checks, result["validation"], strict=True):
        assert (row["check"], row["passed"]) == (entry["check"], entry["passed"])
        assert (row["message"] or "") in entry["message"]
    assert not all(c["passed"] for c in checks[:8]) and all(c["passed"] for c in checks[8:])
    assert [c["tone"] for c in checks] == [("pass" if c["passed"] else "fail") for c in checks]
    assert values(story, "checks")["repair round"].startswith("yes")
    told = values(story, "matches")
    for name in ("numerical match", "soft match", "unit-agnostic match", "sign-agnostic match"):
        assert told[name] == result[name.replace("-", "_").replace(" ", "_")]
    assert told["general match"] == result["general_match"]
    assert told["failure mode"] == result["failure_mode"]
    assert values(story, "answer")["predicted answer"] == result["predicted_answer"]
    assert_call_told(story, result)


def test_unknown_keys_are_404s_and_the_cli_tells_the_same_story(stored: Any) -> None:
    runs, _, http = stored
    run = runs["json"]
    missing = http.get(f"/api/runs/{run.id}/items/{quote('no/such key', safe='')}")
    assert missing.status_code == 404
    assert missing.json() == {"detail": f"no item 'no/such key' in run {run.id}", "field": "key"}
    assert http.get("/api/runs/nope/items/x").json()["field"] == "id"
    story = story_of(http, run, HOSTILE_KEY)
    shown = CliRunner().invoke(app, ["runs", "show", run.id, "--item", HOSTILE_KEY, "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout) == story
    text = CliRunner().invoke(
        app, ["runs", "show", run.id, "--item", HOSTILE_KEY], env={"COLUMNS": "240"}
    )
    assert text.exit_code == 0, text.output
    assert f"record {HOSTILE_KEY}: failed" in text.stdout
    for title in ("Scores", "Fields", "Model call", "The call"):
        assert title in text.stdout
    wrong = [r for r in table(story, "fields") if r["verdict"] == "no match"]
    assert wrong and all(r["field"] in text.stdout for r in wrong)
    reply = story["result"]["call"]["calls"][0]["text"]
    assert reply[:60] in text.stdout
    unknown = CliRunner().invoke(app, ["runs", "show", run.id, "--item", "nope"])
    assert unknown.exit_code == 2 and "no item 'nope'" in unknown.output


DOT_KEYS = ("..", ".", "a/../b", "%2E%2E", "./x")


def dot_run(tmp_path: Path, url: str) -> RunInfo:
    """A ``json batch`` (stored in ``url``) whose records' keys are path segments a browser
    resolves or decodes (``DOT_KEYS``), each record's city its key."""
    batch = tmp_path / "dots.jsonl"
    rows = [{"id": k, "ground_truth": {"city": k}, "output": {"city": k}} for k in DOT_KEYS]
    batch.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["json", "batch", str(batch), "--out", str(tmp_path / "dots"), "--bootstrap", "0"]
    result = CliRunner().invoke(app, args, env={"FIELDCHECK_DATABASE_URL": url})
    assert result.exit_code == 0, result.output
    store = Store(url)
    [run] = [r for r in store.list_runs() if r.inputs[0]["path"].endswith("dots.jsonl")]
    store.close()
    return run


def test_keys_a_browser_resolves_are_reachable_by_page_and_route(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, serve: Any
) -> None:
    """Keys ``..``, ``.``, ``a/../b``, ``%2E%2E``: each item's link in the items list (and the
    story's own URLs) open that item's story, page and route, through httpx, which resolves
    dot segments as a browser does; ``..`` and ``.`` go as ``/runs/{id}/item?key=``."""
    from fieldcheck.runs import item_url

    url = f"sqlite:///{tmp_path / 'api.sqlite3'}"
    run = dot_run(tmp_path, url)
    live: LiveServer = serve()
    with httpx.Client(base_url=live.base_url, timeout=30) as http:
        listed = http.get(f"/api/runs/{run.id}/items").json()["items"]
        assert sorted(i["key"] for i in listed) == sorted(DOT_KEYS)
        for item in listed:
            key = item["key"]
            assert item["href"] == item_url(run.id, key)
            assert ("/item?key=" in item["href"]) == (key in (".", ".."))
            story = http.get("/api" + item["href"])
            assert story.status_code == 200, (key, story.text)
            assert story.json()["key"] == key
            assert story.json()["result"]["output"] == {"city": key}
            again = http.get(story.json()["api_url"]).json()
            assert again["key"] == key
            page = http.get(item["href"])
            assert page.status_code == 200, (key, page.text)
            assert f'id="item-key">{html_escape(key)}<' in page.text
        # the parameter form takes any key, and the model narrows it as the path form does
        found = http.get(f"/api/runs/{run.id}/item", params={"key": "a/../b"})
        assert found.json()["key"] == "a/../b"
        missing = http.get(f"/api/runs/{run.id}/item", params={"key": "..", "model": "zz"})
        assert missing.status_code == 404
        assert missing.json() == {
            "detail": f"no item '..' of model 'zz' in run {run.id}",
            "field": "key",
        }


def html_escape(text: str) -> str:
    import html

    return html.escape(text)


def _errored_slots_run(tmp_path: Path, chat_server: Any) -> tuple[RunInfo, dict[Any, Any]]:
    """``slots run`` where a/2's call gets a 500 (not scored) and b/1's reply is no JSON
    (``invalid_reply``, scored as misses): the run, and session_errors.jsonl by session."""
    from chat_server import Reply

    conversations = {
        ("a", 1): "I am Ann.",
        ("a", 2): "I moved to Oslo.",
        ("b", 1): "I like chess.",
    }

    def reply(body: dict[str, Any]) -> str | Reply:
        text = body["messages"][1]["content"]
        if "I moved to Oslo." in text:
            return Reply(status=500, error_body={"error": {"message": "the GPU caught fire"}})
        if "I like chess." in text:
            return '{"interests": '
        return json.dumps({"basic_info": {"name": ["Ann"]}})

    server = chat_server(reply)
    conv, gold = tmp_path / "conv.jsonl", tmp_path / "gold.jsonl"
    conv.write_text(
        "".join(
            json.dumps({"user": u, "session": s, "turns": [{"role": "user", "content": t}]}) + "\n"
            for (u, s), t in conversations.items()
        )
    )
    gold.write_text(
        "".join(
            json.dumps({"user": u, "session": s, "topic": "t", "field": "f", "values": ["x"]})
            + "\n"
            for u, s in conversations
        )
    )
    url = f"sqlite:///{tmp_path / 'api.sqlite3'}"
    args = ["slots", "run", "--conversations", str(conv), "--gold", str(gold), "--model", "m"]
    args += ["--base-url", server.base_url, "--out", str(tmp_path / "out"), "--max-retries", "0"]
    result = CliRunner().invoke(app, [*args, "--no-progress"], env={"FIELDCHECK_DATABASE_URL": url})
    assert result.exit_code == 3, result.output
    errors = {
        (e["user"], e["session"]): e
        for e in map(
            json.loads, (tmp_path / "out" / "session_errors.jsonl").read_text().splitlines()
        )
    }
    assert sorted(errors) == [("a", 2), ("b", 1)]
    store = Store(url)
    [run] = [r for r in store.list_runs() if r.system == "slots"]
    store.close()
    return run, errors


def test_a_slot_sessions_error_message_is_told(
    tmp_path: Path, serve: Any, chat_server: Any
) -> None:
    """``slots run`` where a/2's call gets a 500 (not scored) and b/1's reply is no JSON
    (``invalid_reply``, scored as misses): each session's story names its error with the
    message the run wrote to session_errors.jsonl."""
    run, errors = _errored_slots_run(tmp_path, chat_server)
    live: LiveServer = serve()
    with httpx.Client(base_url=live.base_url, timeout=30) as http:
        for (user, session), error in errors.items():
            story = story_of(http, run, f"m/{user}/{session}")
            told = values(story, "session")["session error"]
            assert told == f"{error['error_type']}: {error['error_message']}"
            assert error["error_message"]  # a message, not only its type
        assert "session error" not in values(story_of(http, run, "m/a/1"), "session")


def test_the_slots_of_a_session_not_scored_have_no_verdict(
    tmp_path: Path, serve: Any, chat_server: Any
) -> None:
    """A session whose call failed is not scored: its gold slots are "not scored", no tone, no
    token P/R or BLEU-1, as the run's metrics do not count them (a tester's finding: each was
    "FN (missed)", tone fail, its scores 0), on the page, the route and ``runs show --item``;
    an invalid reply's session is scored, its gold slots missed."""
    run, _ = _errored_slots_run(tmp_path, chat_server)
    live: LiveServer = serve()
    with httpx.Client(base_url=live.base_url, timeout=30) as http:
        unscored, missed = (story_of(http, run, f"m/{k}") for k in ("a/2", "b/1"))
        page = http.get(f"/runs/{run.id}/items/{quote('m/a/2', safe='')}").text
    assert [(r["gold"], r["verdict"], r["tone"]) for r in table(unscored, "slots")] == [
        (["x"], "not scored", None)
    ]
    [row] = table(unscored, "slots")
    assert (row["token P"], row["token R"], row["BLEU-1"]) == (None, None, None)
    assert values(unscored, "session")["not scored"] == "server_error"
    assert [(r["verdict"], r["tone"]) for r in table(missed, "slots")] == [("FN (missed)", "fail")]
    assert "not scored" in page and "FN (missed)" not in page
    url = f"sqlite:///{tmp_path / 'api.sqlite3'}"
    shown = CliRunner().invoke(
        app, ["runs", "show", run.id, "--item", "m/a/2"], env={"FIELDCHECK_DATABASE_URL": url}
    )
    assert shown.exit_code == 0 and "FN (missed)" not in shown.stdout, shown.output

"""``/api/runs`` against uvicorn: list (paged, filtered), one run, its items (keyset pages,
filters), compare, rescore, streamed export; plots served only from inside a run's folder."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import httpx
import orjson
import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from live_server import LiveServer, Serve
from runs_data import EXACT, HOSTILE, json_folder, slots_folder

from chat_server import ChatServer, Script
from fieldcheck._cli.main import app
from fieldcheck.runs import record_folder
from fieldcheck.store import RunInfo, Store


def _stored(tmp_path: Path) -> tuple[RunInfo, RunInfo, RunInfo]:
    store = Store(f"sqlite:///{tmp_path / 'api.sqlite3'}")
    out, batch = json_folder(tmp_path, "a")
    a = record_folder(store, out, inputs=[("batch", batch)], model="alpha")
    b = record_folder(store, json_folder(tmp_path, "b")[0], model="beta")
    slots_out, inputs = slots_folder(tmp_path)
    s = record_folder(store, slots_out, inputs=inputs)
    store.close()
    return a, b, s


def test_list_get_and_items(serve: object, tmp_path: Path) -> None:
    a, b, s = _stored(tmp_path)
    live: LiveServer = serve()  # type: ignore[operator]
    with httpx.Client(base_url=live.base_url, timeout=30) as http:
        listed = http.get("/api/runs", params={"limit": 2}).json()
        assert listed["total"] == 3 and [r["id"] for r in listed["runs"]] == [s.id, b.id]
        assert [r["id"] for r in http.get("/api/runs?system=json&model=alpha").json()["runs"]] == [
            a.id
        ]
        assert http.get("/api/runs?since=2999-01-01T00:00:00Z").json()["total"] == 0
        # an instant in another zone, compared as that instant (SQLite compared the text)
        ago = (datetime.now(UTC) - timedelta(minutes=1)).astimezone(timezone(timedelta(hours=5)))
        assert http.get("/api/runs", params={"since": ago.isoformat()}).json()["total"] == 3
        run = http.get(f"/api/runs/{a.id}").json()
        assert (run["system"], run["n_items"], run["failed_items"]) == ("json", 3, 2)
        page = http.get(f"/api/runs/{a.id}/items", params={"limit": 2}).json()
        assert [i["key"] for i in page["items"]] == ["r1", "r2"] and page["next_after"] == 1
        rest = http.get(f"/api/runs/{a.id}/items", params={"after": 1}).json()
        assert [i["key"] for i in rest["items"]] == ["r3"] and rest["next_after"] is None
        failed = http.get(
            f"/api/runs/{a.id}/items", params={"failed": "true", "field": HOSTILE}
        ).json()
        assert (failed["total"], failed["items"][0]["key"]) == (1, "r3")
        topic = http.get(f"/api/runs/{s.id}/items", params={"topic": "work", "model": "b"})
        assert [i["key"] for i in topic.json()["items"]] == ["b/u1/1"]
        missing = http.get("/api/runs/nope")
        assert missing.status_code == 404 and missing.json()["field"] == "id"
        too_many = http.get(f"/api/runs/{a.id}/items", params={"limit": 501})
        assert too_many.status_code == 422 and too_many.json()["field"] == "limit"


def test_compare_rescore_and_export(serve: object, tmp_path: Path) -> None:
    a, b, s = _stored(tmp_path)
    live: LiveServer = serve()  # type: ignore[operator]
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        table = http.get("/api/runs/compare", params={"ids": f"{a.id},{b.id}"}).json()
        rates = {r["name"]: r["values"] for r in table["tables"][0]["rows"]}
        assert table["system"] == "json" and rates["city"] == [0.5, 0.5]
        mixed = http.get("/api/runs/compare", params=[("ids", a.id), ("ids", s.id)])
        assert mixed.status_code == 422 and "different systems" in mixed.json()["detail"]
        child = http.post(
            f"/api/runs/{a.id}/rescore", json={"field_strategies": {**EXACT, "city": "IGNORE"}}
        ).json()
        assert child["parent_id"] == a.id and child["metrics"]["means"]["accuracy"] == 1.0
        bad = http.post(f"/api/runs/{a.id}/rescore", json={"field_strategies": {"city": "NEAR"}})
        assert bad.status_code == 422 and "strategy must be one of" in bad.json()["detail"]
        wrong = http.post(f"/api/runs/{a.id}/rescore", json={"tp": "exact"})
        assert wrong.status_code == 422
        exact = http.post(f"/api/runs/{s.id}/rescore", json={"tp": "exact"}).json()
        assert round(exact["metrics"]["models"]["a"]["f1"], 4) == 0.6667
        with http.stream("GET", f"/api/runs/{a.id}/export", params={"format": "jsonl"}) as r:
            assert r.headers["content-type"] == "application/x-ndjson"
            lines = [orjson.loads(line) for line in r.iter_lines() if line]
        assert [line["key"] for line in lines] == ["r1", "r2", "r3"]
        csv_text = http.get(f"/api/runs/{a.id}/export?format=csv").text
        assert csv_text.splitlines()[0].startswith("key,seq,failed,model,turn,error_type")


def test_plots_only_from_inside_the_output_folder(serve: object, tmp_path: Path) -> None:
    a, _, _ = _stored(tmp_path)
    (tmp_path / "secret.png").write_bytes(b"\x89PNG secret")
    live: LiveServer = serve()  # type: ignore[operator]
    with httpx.Client(base_url=live.base_url, timeout=30) as http:
        plots = sorted(p.name for p in (tmp_path / "a").glob("*.png"))
        assert plots, "json batch draws plots"
        ok = http.get(f"/runs/{a.id}/files/{plots[0]}")
        assert ok.status_code == 200 and ok.content.startswith(b"\x89PNG")
        for name in ("..%2Fsecret.png", "%2E%2E%2Fsecret.png", "summary.json"):
            assert http.get(f"/runs/{a.id}/files/{name}").status_code == 404


GONE = (
    "it was stored with another FIELDCHECK_ARTIFACTS (or none: on its machine alone) or its "
    "items were removed"
)  # the reader's own setting may be right: a writer without one (a new-user trial's finding)


def test_a_run_whose_items_file_is_gone_is_shown_and_its_items_are_410_naming_the_setting(
    serve: object, tmp_path: Path
) -> None:
    a, b, _ = _stored(tmp_path)
    (tmp_path / "artifacts" / "runs" / a.id / "items.parquet").unlink()  # the root moved
    live: LiveServer = serve()  # type: ignore[operator]
    with httpx.Client(base_url=live.base_url, timeout=30) as http:
        # the run itself is its row: shown, saying its items are not where they were expected
        run = http.get(f"/api/runs/{a.id}")
        assert run.status_code == 200
        expected = f"runs/{a.id}/items.parquet under the artifacts root (FIELDCHECK_ARTIFACTS)"
        assert run.json()["items_missing"] == {
            "message": f"the items of run {a.id} are not under the server's artifacts root: {GONE}",
            "expected": expected,
        }
        assert run.json()["failed_items"] == a.n_failed == 2  # r2 (city) and r3 (a field missed)
        # the not scored are counted in the items file: unknown, not "0 not scored" (a finding)
        assert run.json()["not_scored_items"] is None
        assert run.json()["items_text"] == "3 items (2 failed)"
        assert run.json()["table"]["metrics"] and run.json()["metrics"] == a.metrics
        assert http.get(f"/api/runs/{b.id}").json()["items_missing"] is None
        for path, params in (
            (f"/api/runs/{a.id}/items", {}),
            (f"/api/runs/{a.id}/export", {"format": "csv"}),
            ("/api/runs/compare", {"ids": f"{b.id},{a.id}"}),
        ):
            r = http.get(path, params=params)
            assert r.status_code == 410, path
            assert r.json() == {
                "detail": f"the items of run {a.id} are not under the server's artifacts root: "
                f"{GONE}",
                "field": "id",
            }
        r = http.post(f"/api/runs/{a.id}/rescore", json={"field_strategies": EXACT})
        assert r.status_code == 410 and "FIELDCHECK_ARTIFACTS" in r.json()["detail"]
        assert http.get(f"/api/runs/{b.id}/items").status_code == 200  # the other run is whole
        # the pages: the run's metrics, and the message where its items would be
        page = http.get(f"/runs/{a.id}")
        assert page.status_code == 200 and "Metrics (95% intervals)" in page.text
        assert "Items unavailable: the items of run" in page.text
        assert GONE in page.text
        assert f"(expected at {expected})" in page.text
        assert 'id="items"' not in page.text and "internal error" not in page.text
        compared = http.get(
            "/runs/compare", params={"ids": f"{a.id},{b.id}"}, follow_redirects=True
        )
        assert compared.status_code == 410 and "FIELDCHECK_ARTIFACTS" in compared.text


def _cli_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, judge_url: str, *args: str) -> str:
    """A `json batch` run of one record (name `Gamma Delta` / `Gamma Delt`) stored in the store
    the ``serve`` fixture serves, scored with ``args``; its id."""
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{tmp_path / 'api.sqlite3'}")
    line = {"id": "k1", "ground_truth": {"name": "Gamma Delta"}, "output": {"name": "Gamma Delt"}}
    batch = tmp_path / "jb.jsonl"
    batch.write_bytes(orjson.dumps(line) + b"\n")
    exact = tmp_path / "exact.json"
    exact.write_bytes(orjson.dumps({"name": "EXACT"}))
    result = CliRunner().invoke(
        app,
        ["json", "batch", str(batch), "--strategies", str(exact), "--matcher", "llm",
         "--judge-base-url", judge_url, "--judge-model", "j1", "--bootstrap", "0",
         "--out", str(tmp_path / "jbo"), *args],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    runs = Store(f"sqlite:///{tmp_path / 'api.sqlite3'}").list_runs(system="json")
    return runs[0].id


def test_a_rescore_uses_the_servers_matcher_never_the_judge_a_stored_run_names(
    serve: Serve,
    judge: ChatServer,
    chat_server: Callable[[Script], ChatServer],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run scored by `json batch --matcher llm` names its judge's URL; `POST .../rescore` on a
    server started with the local matcher called that URL with the server's judge key (a
    tester's finding, a security hole): the server's own matcher scores it, and the server's
    judge where it has one; the run's URL is never called."""
    other = chat_server(lambda body: "0.99")
    run_id = _cli_run(tmp_path, monkeypatch, other.base_url)
    monkeypatch.setenv("FIELDCHECK_JUDGE_API_KEY", "sk-SERVERSECRET")
    body = {"field_strategies": {"name": "FUZZY"}, "bootstrap": 0}
    local = serve(matcher="local", judge_base_url=None, judge_model=None)
    with httpx.Client(base_url=local.base_url, timeout=60) as http:
        child = http.post(f"/api/runs/{run_id}/rescore", json=body)
    assert child.status_code == 200, child.text
    config = child.json()["settings"]["config"]
    assert (config["matcher"], config["judge_base_url"], config["judge_model"]) == (
        "local",
        None,
        None,
    )
    assert '"matcher":"local"' in child.json()["signature"]
    # rapidfuzz: `Gamma Delta` / `Gamma Delt` 0.95, a match; the other judge's 0.99 unasked
    assert child.json()["metrics"]["means"]["accuracy"] == 1.0
    local.stop()
    judged = serve()  # the walkthrough judge: 0 for these names
    with httpx.Client(base_url=judged.base_url, timeout=60) as http:
        child = http.post(f"/api/runs/{run_id}/rescore", json=body)
    assert child.status_code == 200, child.text
    assert child.json()["settings"]["config"]["judge_base_url"] == judge.base_url
    assert child.json()["metrics"]["means"]["accuracy"] == 0.0
    assert len(judge.chat_requests) == 1
    assert other.requests == [] and other.headers == []


def test_a_rescore_answers_the_warnings_runs_rescore_prints(serve: Serve, tmp_path: Path) -> None:
    """A strategy for a field no ground truth has (`nmae`): `runs rescore` warns, and the
    route's answer said nothing (a new-user trial's finding); it holds the CLI's line, with
    `flatten` named as a request names it (docs/api.md)."""
    a, _, _ = _stored(tmp_path)
    live = serve()
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        given = {"field_strategies": {**EXACT, "nmae": "FUZZY"}, "bootstrap": 0}
        child = http.post(f"/api/runs/{a.id}/rescore", json=given)
        plain = http.post(f"/api/runs/{a.id}/rescore", json={"bootstrap": 0})
    assert child.status_code == 200, child.text
    assert child.json()["warnings"] == [
        "the strategy config names fields that no ground truth has: 'nmae' "
        f"(run {a.id} was scored without flatten: its nested paths are not fields)"
    ]
    assert plain.status_code == 200 and "warnings" not in plain.json()


def test_a_run_the_cli_made_is_answered_with_no_server_path(
    serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `json batch` run's dataset, inputs and output folder, and the errors naming its file,
    were answered as the server's absolute paths (a new-user trial's finding; docs/api.md: no
    answer holds a server path the client did not send): each is named by its name alone, as
    `runs compare` names a dataset, in the run, the list, its items, an item, a re-score and
    the run's page."""
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{tmp_path / 'api.sqlite3'}")
    mine = tmp_path / "mine"
    mine.mkdir()
    line = {"id": "k1", "ground_truth": {"name": "Ann"}, "output": {"name": "Ann"}}
    batch = mine / "b.jsonl"
    batch.write_bytes(orjson.dumps(line) + b"\n{not json\n")
    exact = mine / "exact.json"
    exact.write_bytes(orjson.dumps({"name": "EXACT"}))
    result = CliRunner().invoke(
        app,
        ["json", "batch", str(batch), "--strategies", str(exact), "--bootstrap", "0",
         "--out", str(mine / "out")],
    )  # fmt: skip
    assert result.exit_code == 3, result.output  # the bad line
    run_id = Store(f"sqlite:///{tmp_path / 'api.sqlite3'}").list_runs(system="json")[0].id
    live = serve()
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        run = http.get(f"/api/runs/{run_id}")
        answers = [
            run,
            http.get("/api/runs"),
            http.get(f"/api/runs/{run_id}/items"),
            http.get(f"/api/runs/{run_id}/items/k1"),
            http.post(f"/api/runs/{run_id}/rescore", json={"bootstrap": 0}),
            http.get(f"/runs/{run_id}"),
        ]
    assert [a.status_code for a in answers] == [200] * 6
    shown = run.json()
    assert (shown["dataset"], shown["out_dir"], shown["inputs"][0]["path"]) == (
        "b.jsonl",
        "out",
        "b.jsonl",
    )
    assert shown["metrics"]["errors"][0].startswith("b.jsonl:2: invalid JSON")
    for answer in answers:
        assert str(mine) not in answer.text, answer.url

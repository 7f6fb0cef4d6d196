"""One run per evaluation (issue 27 item 4): a model run and its scores are one run, its items
keep the call and the verdicts; Ctrl-C and resume stay in that run; a re-score is its child; a
store written before (revision 0005) has its pairs merged, nothing dropped."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runs_data import upgrade_to
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from chat_server import ChatServer, Reply, Script
from cli_child import interrupt, start_cli
from fieldcheck._cli.main import app
from fieldcheck.store import Store

StartServer = Callable[[Script], ChatServer]
GT = {f"r{i}": {"name": f"N{i}", "city": "Oslo"} for i in range(6)}


def _data(tmp_path: Path) -> Path:
    path = tmp_path / "docs.jsonl"
    lines = [{"id": k, "document": f"doc {k}", "ground_truth": v} for k, v in GT.items()]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _slots_data(tmp_path: Path) -> list[str]:
    """One session in which user u says "I am Ann", and its gold slot: ``slots run``'s inputs."""
    convs, gold = tmp_path / "c.jsonl", tmp_path / "g.jsonl"
    turns = [{"role": "user", "content": "I am Ann"}]
    convs.write_text(json.dumps({"user": "u", "session": 1, "turns": turns}) + "\n")
    row = {"user": "u", "session": 1, "topic": "basic_info", "field": "name", "values": ["Ann"]}
    gold.write_text(json.dumps(row) + "\n")
    return ["slots", "run", "--conversations", str(convs), "--gold", str(gold)]


def _doc(body: dict[str, Any]) -> str:
    return str(re.findall(r"doc r\d", body["messages"][-1]["content"])[0])


def _reply(body: dict[str, Any]) -> str:
    key = _doc(body).removeprefix("doc ")
    city = "Rome" if key == "r1" else "Oslo"  # r1 fails on city
    return json.dumps({"name": GT[key]["name"], "city": city})


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})
    return result.exit_code, result.stdout, result.stderr


def ids(*texts: str) -> set[str]:
    return {m for t in texts for m in re.findall(r"\b([0-9a-f]{12})\b", t)}


def _interrupted(
    tmp_path: Path, chat_server: StartServer
) -> tuple[list[str], dict[str, int], ChatServer]:
    """A ``json run`` Ctrl-C'ed while r3 is in flight (r0-r2 in its journal): its arguments,
    the phase of the server's script (set it to 2 to answer every call) and the server."""
    reached, release = threading.Event(), threading.Event()
    phase = {"n": 1}

    def script(body: dict[str, Any]) -> str:
        if phase["n"] == 1 and _doc(body) == "doc r3":
            reached.set()
            release.wait(30)
        return _reply(body)

    server = chat_server(script)
    data, out = _data(tmp_path), tmp_path / "out"
    args = ["json", "run", str(data), "--base-url", server.base_url, "--model", "m"]
    args += ["--out", str(out), "--concurrency", "1", "--no-progress", "--bootstrap", "20"]
    interrupt(start_cli(*args), reached, release)
    return args, phase, server


def test_a_json_run_interrupted_and_resumed_is_one_run_with_calls_and_verdicts(
    tmp_path: Path, chat_server: StartServer
) -> None:
    """Ctrl-C while r3 is in flight, then the same command: it resumes into the run it began,
    which is then the only run, its id the only one printed, with the scores of summary.json
    and items holding the prompt, the raw reply and the verdicts; a re-score is its child."""
    args, phase, _ = _interrupted(tmp_path, chat_server)
    out = tmp_path / "out"
    store = Store()
    [first] = store.list_runs()
    assert (first.status, first.kind, len(store.journal(first.id))) == ("interrupted", "run", 3)

    phase["n"] = 2
    code, stdout, stderr = cli(*args)
    assert code == 0, stderr
    assert f"resuming run {first.id}: 3 of 6 items already finished" in stderr
    assert ids(stdout, stderr) == {first.id}
    [run] = store.list_runs()
    summary = json.loads((out / "m" / "summary.json").read_text())
    assert (run.id, run.status, run.n_items) == (first.id, "finished", 6)
    assert run.metrics is not None and run.metrics["means"] == summary["means"]
    code, shown, _ = cli("runs", "show", run.id, "--items", "6", "--json")
    assert code == 0
    items = {i["key"]: i["result"] for i in json.loads(shown)["items"]}
    assert sorted(items) == sorted(GT)
    r1 = items["r1"]
    assert r1["fields"]["city"]["score"] == 0 and r1["output"]["city"] == "Rome"  # verdict
    [call] = r1["call"]["calls"]
    assert json.loads(call["text"]) == {"name": "N1", "city": "Rome"}  # the raw reply
    assert "doc r1" in call["messages"][-1]["content"] and call["attempts"] == 1  # the prompt

    code, stdout, _ = cli("runs", "rescore", run.id, "--bootstrap", "20", "--json")
    assert code == 0
    child = json.loads(stdout)
    assert (child["parent_id"], child["kind"]) == (run.id, "score")
    code, shown, _ = cli("runs", "show", child["id"])
    assert f"parent_id: {run.id}" in shown
    [kept] = [i for i in store.items(child["id"]) if i.key == "r1"]
    assert kept.result["call"] == r1["call"]  # the child's items keep the calls
    assert [r.id for r in store.list_runs()] == [run.id, child["id"]]


def test_a_json_run_keeps_its_failed_calls_as_items_not_scored(
    tmp_path: Path, chat_server: StartServer
) -> None:
    """A failed call gives json no record (its output is missing), yet the run's items keep it:
    not scored, with its error and its call, beside the scored records."""

    def script(body: dict[str, Any]) -> str | Reply:
        if _doc(body) in ("doc r2", "doc r4"):
            return Reply(status=400, error_body={"error": {"message": "bad request"}})
        return _reply(body)

    server = chat_server(script)
    args = ["json", "run", str(_data(tmp_path)), "--base-url", server.base_url, "--model", "m"]
    args += ["--out", str(tmp_path / "out"), "--no-progress", "--bootstrap", "20"]
    code, _, stderr = cli(*args)
    assert code != 2, stderr
    [run] = Store().list_runs()
    items = {i.key: i for i in Store().items(run.id)}
    assert sorted(items) == sorted(GT)
    for key in ("r2", "r4"):
        item = items[key]
        assert (item.failed, item.error_type) == (None, item.result["call"]["error_type"])
        assert item.error_type is not None and "fields" not in item.result
        assert "doc " + key in item.result["call"]["calls"][0]["messages"][-1]["content"]
    assert items["r1"].failed is True and items["r0"].failed is False
    # the replies file was written in the partial folder: stored where it is once in place
    assert [i["name"] for i in run.inputs if not Path(i["path"]).is_file()] == []
    assert any(".fieldcheck-partial" not in i["path"] and "out" in i["path"] for i in run.inputs)


RUN_SQL = (
    "INSERT INTO runs (id, run_key, system, task, dataset, dataset_sha256, model, endpoint, "
    "settings, signature, status, started_at, finished_at, n_items, n_done, n_errors, kind, "
    "inputs, metrics) VALUES (:id, :id, :system, :task, 'd', :sha, :model, 'e', :settings, "
    "'sig', :status, :started, :finished, :n, :n, 0, :kind, :inputs, :metrics)"
)
ITEM_SQL = (
    "INSERT INTO run_items (run_id, item_key, seq, calls, cached_calls, latency_s, result, "
    "call_log, finished_at, failed) VALUES (:run, :key, :seq, :calls, 0, :latency, :result, :log, "
    "'2026-11-01 00:00:00', :failed)"
)


def _run(c: Any, id: str, kind: str, model: str, started: str, **more: Any) -> None:
    values = {"system": "json", "task": "json-extract", "sha": "aa", "settings": "{}"}
    values |= {"status": "finished", "finished": started, "n": 2, "inputs": None}
    values |= {"metrics": None, "id": id, "kind": kind, "model": model, "started": started}
    c.execute(text(RUN_SQL), {**values, **more})


def _item(c: Any, run: str, key: str, seq: int, result: Any, log: Any = None) -> None:
    values = {"run": run, "key": key, "seq": seq, "result": json.dumps(result)}
    values |= {"calls": 1 if log else 0, "log": json.dumps(log) if log else None}
    values |= {"latency": 0.5 if log else 0.0}  # a scored item made no call
    c.execute(text(ITEM_SQL), {**values, "failed": None if log else key == "b"})


def test_migration_0006_merges_each_pair_and_drops_nothing(tmp_path: Path) -> None:
    """A store at 0005 as the old code wrote it: a json model run and its scored run (its
    dataset among the inputs, started after), a slot run of two models and its scored run, an
    interrupted model run and a scored batch with no model run. Upgraded: each pair is one run
    under the model run's id (found by the scored id too), its items the scored ones with the
    calls; the other slot model a ``calls`` run under it; the journal holds every model run's
    items; the unpaired runs stay."""
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    upgrade_to(url, "0005")
    engine = create_engine(url)
    scored_inputs = json.dumps([{"name": "documents", "path": "d", "sha256": "aa"}])
    with engine.begin() as c:
        _run(c, "m1", "model-run", "m", "2026-11-01 10:00:00")
        _run(c, "s1", "scored", "m", "2026-11-01 10:00:05", task="run", inputs=scored_inputs)
        c.execute(text("UPDATE runs SET metrics = '{\"means\": {\"rqs\": 0.5}}' WHERE id = 's1'"))
        for seq, key in enumerate("ab"):
            _item(c, "m1", key, seq, {"output": key}, [{"text": f"reply {key}", "attempts": 1}])
            _item(c, "s1", key, seq, {"id": key, "fields": {"x": {"score": seq}}})
        c.execute(text("INSERT INTO run_item_tags VALUES ('s1', 'x', 1, 1)"))
        _run(c, "m2", "model-run", "m", "2026-11-01 11:00:00", status="interrupted")
        _item(c, "m2", "a", 0, {"output": "a"}, [{"text": "reply a", "attempts": 1}])
        _run(c, "s2", "scored", "batch", "2026-11-01 12:00:00", task="score")
        slot = {"system": "slots", "task": "slot-memory"}
        _run(c, "ma", "model-run", "A", "2026-11-01 13:00:00", **slot)
        _run(c, "mb", "model-run", "B", "2026-11-01 13:00:01", **slot)
        _run(c, "s3", "scored", "A, B", "2026-11-01 13:00:02", **{**slot, "task": "run"})
        for m in "AB":
            run = f"m{m.lower()}"
            _item(c, run, '["u", 1]', 0, {"memory": {}}, [{"text": m, "attempts": 1}])
            _item(c, "s3", f"{m}/u/1", 0, {"model": m, "counts": {"tp": 1}})
    engine.dispose()

    store = Store(url)
    runs = {r.id: r for r in store.list_runs()}
    assert sorted(runs) == ["m1", "m2", "ma", "s2"]
    assert [r.id for r in store.list_runs(kind="calls")] == ["mb"]
    m1 = runs["m1"]
    assert (m1.kind, m1.task, m1.status, m1.n_items) == ("run", "json-extract", "finished", 2)
    assert m1.metrics == {"means": {"rqs": 0.5}} and m1.inputs[0]["sha256"] == "aa"
    assert store.get_run("s1") == m1  # the id the old command printed still finds it
    items = store.items("m1")
    assert [i.result["fields"]["x"]["score"] for i in items] == [0, 1]
    assert [i.result["call"]["calls"][0]["text"] for i in items] == ["reply a", "reply b"]
    assert [i.key for i in store.page_items("m1", tag="x")] == ["b"]
    assert [i.key for i in store.journal("m1")] == ["a", "b"]
    # unpaired: the interrupted model run keeps its items (and resumes from the journal)
    assert (runs["m2"].kind, [i.key for i in store.journal("m2")]) == ("model-run", ["a"])
    assert [i.result for i in store.items("m2")] == [{"output": "a"}]
    assert (runs["s2"].kind, runs["s2"].task) == ("score", "score")
    # slots: one run of both models, each session with its model's call
    slots = {i.key: i.result["call"]["calls"][0]["text"] for i in store.items("ma")}
    assert slots == {"A/u/1": "A", "B/u/1": "B"}
    assert store.get_run("mb").parent_id == "ma"  # type: ignore[union-attr]
    # named after both models, as the scored run was (0006 named it "A": a new-user trial)
    assert runs["ma"].model == "A, B" and runs["m1"].model == "m"
    assert [r.id for r in store.list_runs(model="B")] == ["ma"]
    assert [i.result for i in store.journal("mb")] == [{"memory": {}}]
    with store.engine.connect() as c:
        assert c.execute(text("SELECT count(*) FROM runs")).scalar() == 5  # s1, s3 merged
        assert c.execute(text("SELECT count(*) FROM run_journal")).scalar() == 5
    assert sum(store.count_items(r) for r in ("m1", "m2", "ma")) == 5  # 0007: in Parquet


def test_migration_0009_names_a_merged_slots_run_after_every_model(tmp_path: Path) -> None:
    """A store that an earlier 0006 took to 0008 named a merged slots run after its first model
    only: 0009 names it after every model, from its metrics (in their order) or, with none, its
    model runs; other runs keep their names, nothing is dropped, and a second pass changes
    nothing."""
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    upgrade_to(url, "0005")
    engine = create_engine(url)
    slot = {"system": "slots", "task": "slot-memory"}
    three = json.dumps({"models": {"careful": {}, "eager": {}, "fast": {}}})
    with engine.begin() as c:
        for i, m in enumerate(("careful", "eager", "fast")):
            _run(c, f"m{i}", "model-run", m, f"2026-11-01 13:00:0{i}", **slot)
        _run(c, "s0", "scored", "careful, eager, fast", "2026-11-01 13:00:05", **slot | {
            "task": "run", "metrics": three})  # fmt: skip
        for i, m in enumerate(("D", "E")):  # an interrupted scoring: no metrics
            _run(c, f"n{i}", "model-run", m, f"2026-11-01 14:00:0{i}", **slot)
        _run(c, "s1", "scored", "D, E", "2026-11-01 14:00:05", **slot | {"task": "run"})
        _run(c, "lone", "model-run", "careful", "2026-11-01 15:00:00", **slot)
    upgrade_to(url, "0008")
    with engine.begin() as c:
        named = dict(c.execute(text("SELECT id, model FROM runs WHERE kind = 'run'")).all())
        assert named == {"m0": "careful, eager, fast", "n0": "D, E"}  # the fixed 0006
        c.execute(text("UPDATE runs SET model = 'careful' WHERE id = 'm0'"))  # as 0006 left it
        c.execute(text("UPDATE runs SET model = 'D' WHERE id = 'n0'"))
        before = c.execute(text("SELECT * FROM runs ORDER BY id")).all()
    engine.dispose()

    store = Store(url)  # upgraded to 0009 on open
    runs = {r.id: r.model for r in store.list_runs()}
    assert runs == {"m0": "careful, eager, fast", "n0": "D, E", "lone": "careful"}
    assert [r.id for r in store.list_runs(model="eager")] == ["m0"]
    assert [r.id for r in store.list_runs(model="E")] == ["n0"]
    with store.engine.begin() as c:
        after = c.execute(text("SELECT * FROM runs ORDER BY id")).all()
        assert [r.id for r in after] == [r.id for r in before] and len(after) == 6  # none dropped
        changed = {b.id for b, a in zip(before, after, strict=True) if b != a}
        assert changed == {"m0", "n0"}
        pairs = zip(before, after, strict=True)
        assert all({**a._asdict(), "model": b.model} == b._asdict() for b, a in pairs)
        c.execute(text("UPDATE alembic_version SET version_num = '0008'"))
    store.engine.dispose()
    store = Store(url)  # 0009 again: nothing to do
    with store.engine.connect() as c:
        assert c.execute(text("SELECT * FROM runs ORDER BY id")).all() == after
        assert c.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0009"


def test_a_slots_run_of_two_models_is_one_run(tmp_path: Path, chat_server: StartServer) -> None:
    """Two models, one report, one run: named after both, the other model's calls a ``calls``
    run under it (not listed), each session with its own model's call; deleting the run
    deletes both."""
    memory = {"basic_info": {"name": ["Ann"]}}
    server = chat_server(lambda body: json.dumps(memory))
    convs = tmp_path / "c.jsonl"
    convs.write_text(
        json.dumps({"user": "u", "session": 1, "turns": [{"role": "user", "content": "Ann"}]})
        + "\n"
    )
    gold = tmp_path / "g.jsonl"
    row = {"user": "u", "session": 1, "topic": "basic_info", "field": "name", "values": ["Ann"]}
    gold.write_text(json.dumps(row) + "\n")
    code, stdout, stderr = cli(
        "slots", "run", "--conversations", str(convs), "--gold", str(gold),
        "--base-url", server.base_url, "--model", "A=m1", "--model", "B=m2",
        "--out", str(tmp_path / "out"), "--bootstrap", "20", "--no-progress",
    )  # fmt: skip
    assert code == 0, stderr
    store = Store()
    [run] = store.list_runs()
    [part] = store.list_runs(kind="calls")
    assert (run.kind, run.model, run.status, part.parent_id) == ("run", "A, B", "finished", run.id)
    assert f"stored as run {run.id}" in stdout + stderr
    calls = {i.key: i.result["call"]["calls"][0] for i in store.items(run.id)}
    assert sorted(calls) == ["A/u/1", "B/u/1"]
    assert {c["text"] for c in calls.values()} == {json.dumps(memory)}
    assert run.metrics is not None and run.metrics["models"]["B"]["f1"] == 1.0
    assert [i.key for i in store.journal(part.id)] == ['["u", 1]']
    assert store.delete_run(run.id) and store.get_run(part.id) is None


def test_an_interrupted_runs_items_are_its_journals_in_flight(
    tmp_path: Path, chat_server: StartServer
) -> None:
    """Its count said 3 of 6 while ``runs show --items``, the API and its page showed none (a
    tester's finding): the items called and not yet scored are shown, each with its call."""
    import httpx

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))
    from live_server import start_server

    from fieldcheck.api import ApiSettings, create_app

    _, _, server = _interrupted(tmp_path, chat_server)
    [run] = Store().list_runs()
    code, shown, _ = cli("runs", "show", run.id, "--items", "10", "--json")
    data = json.loads(shown)
    # interrupted: the items were called and will not be scored unless the run is resumed
    assert (code, run.status, data["items_in_flight"]) == (0, "interrupted", False)
    assert (data["failed_items"], data["not_scored_items"]) == (0, 3)
    data_keys = [(f"r{n}", None) for n in range(3)]
    assert [(i["key"], i["failed"]) for i in data["items"]] == data_keys
    [call] = data["items"][1]["result"]["call"]["calls"]
    assert json.loads(call["text"]) == {"name": "N1", "city": "Rome"}  # r1's raw reply
    code, shown, _ = cli("runs", "show", run.id, "--items", "2")
    assert "items: 3 of 6 (called, never scored: the run was interrupted)" in shown
    assert sum(line.startswith("{") for line in shown.splitlines()) == 2  # the first 2 items
    out = tmp_path / "in-flight.parquet"
    code, _, _ = cli("runs", "export", run.id, "--format", "parquet", "--out", str(out))
    import pyarrow.parquet as pq

    exported = pq.read_table(out).to_pylist()
    assert code == 0 and [(i["key"], i["failed"]) for i in exported] == data_keys
    assert json.loads(exported[1]["result"])["call"]["calls"] == [call]
    settings = ApiSettings(matcher="llm", judge_base_url=server.base_url, judge_model="j")
    live = start_server(create_app(settings))
    with httpx.Client(base_url=live.base_url, timeout=30) as http:
        page = http.get(f"/api/runs/{run.id}/items").json()
        assert page["total"] == 3 and [i["key"] for i in page["items"]] == ["r0", "r1", "r2"]
        assert http.get(f"/api/runs/{run.id}/items", params={"failed": "true"}).json()["total"] == 0
        assert http.get(f"/api/runs/{run.id}").json()["items_in_flight"] is False
        html = http.get(f"/runs/{run.id}").text
        assert "3 of 6 items (called, never scored: the run was interrupted)" in html
        assert html.count('<tr data-key="r') == 3
    live.stop()


def test_a_ctrl_c_while_the_first_model_is_scored_resumes_every_model_run_once(
    tmp_path: Path, chat_server: StartServer, monkeypatch: Any
) -> None:
    """Ctrl-C once both models' calls finished, while the first is scored: each model run is
    left interrupted, and the same command resumes both with no call into the same runs (the
    second model's run, left finished, was stored again beside the first: a duplicate)."""
    from fieldcheck import core

    server = chat_server(_reply)
    system = type(core.get("json"))
    scored = system.score

    def ctrl_c(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    args = ["json", "run", str(_data(tmp_path)), "--base-url", server.base_url]
    args += ["--model", "m1", "--model", "m2", "--out", str(tmp_path / "out")]
    args += ["--no-progress", "--bootstrap", "20"]
    monkeypatch.setattr(system, "score", ctrl_c)
    code, _, stderr = cli(*args)
    assert code == 130, stderr
    store = Store()
    first = {r.model: (r.id, r.status) for r in store.list_runs()}
    assert sorted(first) == ["m1", "m2"]
    assert [status for _, status in first.values()] == ["interrupted", "interrupted"]
    asked = len(server.chat_requests)
    monkeypatch.setattr(system, "score", scored)
    code, stdout, stderr = cli(*args)
    assert code == 0, stderr
    assert len(server.chat_requests) == asked == 12  # 6 records x 2 models, none asked again
    for model in ("m1", "m2"):
        assert f"resuming run {first[model][0]}: 6 of 6 items already finished" in stderr
    assert ids(stdout, stderr) == {i for i, _ in first.values()}  # the only ids printed
    runs = store.list_runs()
    assert {r.model: r.id for r in runs} == {m: i for m, (i, _) in first.items()}
    assert len(runs) == 2 and all(r.status == "finished" and r.metrics for r in runs)
    info = json.loads((tmp_path / "out" / "run.json").read_text())
    assert sorted(info["runs"]) == sorted(i for i, _ in first.values())


def test_a_ctrl_c_while_two_slot_models_are_scored_resumes_their_runs_once(
    tmp_path: Path, chat_server: StartServer, monkeypatch: Any
) -> None:
    """The same for models scored together: the resume scores into the run begun, the other
    model's calls its ``calls`` run still, no third run."""
    from fieldcheck import core

    server = chat_server(lambda body: json.dumps({"basic_info": {"name": ["Ann"]}}))
    args = _slots_data(tmp_path)
    args += ["--base-url", server.base_url, "--model", "A=m1", "--model", "B=m2"]
    args += ["--out", str(tmp_path / "out"), "--bootstrap", "20", "--no-progress"]
    system = type(core.get("slots"))
    scored = system.score

    def ctrl_c(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(system, "score", ctrl_c)
    assert cli(*args)[0] == 130
    store = Store()
    began = {r.model: r.id for r in [*store.list_runs(), *store.list_runs(kind="calls")]}
    assert sorted(began) == ["A, B", "B"]  # scoring began: the run named after both
    monkeypatch.setattr(system, "score", scored)
    code, _, stderr = cli(*args)
    assert code == 0, stderr
    assert len(server.chat_requests) == 2  # one session, two models, none asked again
    [run] = store.list_runs()
    [part] = store.list_runs(kind="calls")
    assert (run.id, part.id, part.parent_id) == (began["A, B"], began["B"], run.id)
    assert run.status == "finished" and run.metrics["models"]["B"]["f1"] == 1.0


def test_a_ctrl_c_after_the_first_model_is_scored_resumes_it_into_the_same_run(
    tmp_path: Path, chat_server: StartServer, monkeypatch: Any
) -> None:
    """Ctrl-C while the second model is scored, the first model's run already finished but its
    folder not yet in place: both runs are left interrupted and the same command finishes the
    same two runs with no call (the first was stored again beside its finished run: a
    tester's finding)."""
    from fieldcheck import core

    server = chat_server(_reply)
    system = type(core.get("json"))
    scored = system.score
    seen: list[int] = []

    def second_ctrl_c(*args: Any, **kwargs: Any) -> Any:
        seen.append(1)
        if len(seen) == 2:
            raise KeyboardInterrupt
        return scored(*args, **kwargs)

    args = ["json", "run", str(_data(tmp_path)), "--base-url", server.base_url]
    args += ["--model", "m1", "--model", "m2", "--out", str(tmp_path / "out")]
    args += ["--no-progress", "--bootstrap", "20"]
    monkeypatch.setattr(system, "score", second_ctrl_c)
    code, _, stderr = cli(*args)
    assert code == 130 and len(seen) == 2, stderr
    store = Store()
    first = {r.model: (r.id, r.status) for r in store.list_runs()}
    assert first["m1"][1] == first["m2"][1] == "interrupted"
    asked = len(server.chat_requests)
    monkeypatch.setattr(system, "score", scored)
    code, _, stderr = cli(*args)
    assert code == 0, stderr
    assert len(server.chat_requests) == asked == 12
    runs = store.list_runs()
    assert {r.model: r.id for r in runs} == {m: i for m, (i, _) in first.items()}
    assert all(r.status == "finished" and r.metrics for r in runs)


def test_a_ctrl_c_while_the_folder_is_put_in_place_leaves_the_run_finished(
    tmp_path: Path, chat_server: StartServer, monkeypatch: Any
) -> None:
    """Ctrl-C while a one-model run's folder is renamed into place takes effect once the run is
    finished: the folder is complete and its run stays finished (it was marked interrupted, and
    a later command with another --out resumed it there: a tester's finding)."""
    from fieldcheck.reports import RunFolder

    server = chat_server(_reply)
    finish = RunFolder.finish

    def interrupted_finish(self: RunFolder) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        finish(self)

    monkeypatch.setattr(RunFolder, "finish", interrupted_finish)
    out = tmp_path / "out"
    args = ["json", "run", str(_data(tmp_path)), "--base-url", server.base_url]
    code, _, stderr = cli(*args, "--model", "m1", "--out", str(out), "--no-progress")
    assert code == 130, stderr
    assert "(complete)" in stderr
    assert json.loads((out / "run.json").read_text())["complete"] is True
    (run,) = Store().list_runs()
    assert run.status == "finished" and run.metrics


def test_the_calls_part_of_a_slots_run_compares_as_not_scored(
    tmp_path: Path, chat_server: StartServer
) -> None:
    """A slots run's model calls alone (its ``calls`` part) have no scores: compared, with each
    other or with the run, and bundled, they are said not scored (an IndexError before)."""
    server = chat_server(lambda body: json.dumps({"basic_info": {"name": ["Ann"]}}))
    args = _slots_data(tmp_path)
    args += ["--base-url", server.base_url, "--model", "A=m1", "--model", "B=m2", "--model", "C=m3"]
    assert cli(*args, "--out", str(tmp_path / "out"), "--bootstrap", "20", "--no-progress")[0] == 0
    store = Store()
    [run] = store.list_runs()
    part, other = store.list_runs(kind="calls")
    for ids in ([part.id], [part.id, run.id], [part.id, other.id]):
        code, stdout, stderr = cli("runs", "compare", *ids, "--json")
        assert code == 0, stderr
        shown = json.loads(stdout)
        parts = [i for i in ids if i != run.id]
        assert shown["not_scored"] == parts and shown["matrix"] is None
        listed = ", ".join(f"{i} (finished)" for i in parts)
        assert shown["note"] == f"no session comparison: run {listed} is not scored"
    code, stdout, stderr = cli("view", "--bundle", str(tmp_path / "b"), run.id, part.id, other.id)
    assert code == 0, stderr
    assert "3 runs" in stdout and (tmp_path / "b" / "index.html").is_file()


def test_a_ctrl_c_while_a_runs_items_are_written_leaves_its_journal_and_no_part_file(
    tmp_path: Path, chat_server: StartServer, monkeypatch: Any
) -> None:
    """Ctrl-C while the scored items' part file was being written (a tester's finding): ``runs
    show`` said 0 items where ``--json`` counted 6 not scored, and the ``.part.tmp`` stayed in
    the artifacts root. The items called are the run's, never scored, in both views; no file
    is left; the same command scores them with no call."""
    from fieldcheck.store import _parquet

    server = chat_server(_reply)
    write = _parquet.ItemsWriter.write

    def ctrl_c(self: Any, *args: Any) -> None:
        write(self, *args)  # the part file made, then the Ctrl-C
        raise KeyboardInterrupt

    args = ["json", "run", str(_data(tmp_path)), "--base-url", server.base_url, "--model", "m"]
    args += ["--out", str(tmp_path / "out"), "--no-progress", "--bootstrap", "20"]
    monkeypatch.setattr(_parquet.ItemsWriter, "write", ctrl_c)
    assert cli(*args)[0] == 130
    store = Store()
    [run] = store.list_runs()
    assert list(store.artifacts.rglob("*")) == [store.artifacts / "runs"]
    code, shown, _ = cli("runs", "show", run.id)
    assert "items: 6 (called, never scored: the run was interrupted)" in shown
    data = json.loads(cli("runs", "show", run.id, "--json")[1])
    assert (data["n_done"], data["n_items"], data["not_scored_items"]) == (6, 6, 6)
    monkeypatch.setattr(_parquet.ItemsWriter, "write", write)
    code, _, stderr = cli(*args)
    assert code == 0 and "6 of 6 items already finished" in stderr
    assert len(server.chat_requests) == 6  # none asked again
    [run] = store.list_runs()
    assert (run.id, run.status, run.n_items) == (data["id"], "finished", 6)
    assert [p.name for p in store.run_folder(run.id).iterdir()] == ["items.parquet"]


def test_a_ctrl_c_while_the_second_slot_model_is_called_lists_one_evaluation(
    tmp_path: Path, chat_server: StartServer
) -> None:
    """Ctrl-C while the second model's call is in flight: ``runs list`` showed two ``slots
    run`` rows, one per model (a tester's trial); it shows the evaluation once, counting every
    model's calls, and the same command finishes that run."""
    reached, release = threading.Event(), threading.Event()

    def script(body: dict[str, Any]) -> str:
        if body["model"] == "m2" and not release.is_set():
            reached.set()
            release.wait(30)
        return json.dumps({"basic_info": {"name": ["Ann"]}})

    server = chat_server(script)
    args = _slots_data(tmp_path)
    args += ["--base-url", server.base_url, "--model", "A=m1", "--model", "B=m2"]
    args += ["--out", str(tmp_path / "out"), "--bootstrap", "20", "--no-progress"]
    interrupt(start_cli(*args), reached, release)
    code, listed, _ = cli("runs", "list", "--json")
    [row] = json.loads(listed)
    assert (row["model"], row["status"], row["n_done"], row["n_items"]) == (
        "A",
        "interrupted",
        1,
        2,
    )
    code, _, stderr = cli(*args)
    assert code == 0, stderr
    [run] = Store().list_runs()
    assert (run.id, run.model, run.status, run.n_done, run.n_items) == (
        row["id"],
        "A, B",
        "finished",
        2,
        2,
    )


def test_a_several_model_slots_run_plans_every_models_items_and_resumes_their_count(
    tmp_path: Path, chat_server: StartServer
) -> None:
    """Three models, two users of one session each: the run's count, as ``runs list`` shows it
    when a call reaches the server, plans every model's items from the start (it grew 2 -> 4 ->
    6 as each model opened), and a resume counts what is done already: A's failed call, asked
    again, sees A's two and B's one of 6 (it started over at A's 2 of 2, then climbed back)."""
    reached, release = threading.Event(), threading.Event()
    seen: list[tuple[str, int, int]] = []
    memory = json.dumps({"basic_info": {"name": ["Ann"]}})

    def script(body: dict[str, Any]) -> Reply | str:
        user = "u2" if "Bo" in body["messages"][-1]["content"] else "u1"
        [row] = Store().list_runs()
        seen.append((f"{body['model']}/{user}", row.n_done, row.n_items))
        if body["model"] == "m2" and user == "u2" and not release.is_set():
            reached.set()
            release.wait(30)
        failed = body["model"] == "m1" and user == "u2" and not reached.is_set()
        return Reply(status=500) if failed else memory

    server = chat_server(script)
    convs, gold = tmp_path / "c.jsonl", tmp_path / "g.jsonl"
    lines = [
        {"user": user, "session": 1, "turns": [{"role": "user", "content": f"I am {name}"}]}
        for user, name in (("u1", "Ann"), ("u2", "Bo"))
    ]
    convs.write_text("".join(json.dumps(line) + "\n" for line in lines))
    row = {"user": "u1", "session": 1, "topic": "basic_info", "field": "name", "values": ["Ann"]}
    gold.write_text(json.dumps(row) + "\n")
    args = ["slots", "run", "--conversations", str(convs), "--gold", str(gold)]
    args += ["--base-url", server.base_url, "--concurrency", "1", "--max-retries", "0"]
    args += ["--model", "A=m1", "--model", "B=m2", "--model", "C=m3"]
    args += ["--out", str(tmp_path / "out"), "--bootstrap", "20", "--no-progress"]
    interrupt(start_cli(*args), reached, release)
    assert seen == [("m1/u1", 0, 6), ("m1/u2", 1, 6), ("m2/u1", 2, 6), ("m2/u2", 3, 6)]
    [row_then] = Store().list_runs()
    assert (row_then.status, row_then.n_done, row_then.n_items) == ("interrupted", 3, 6)
    seen.clear()
    code, _, stderr = cli(*args)
    assert code == 0, stderr
    assert seen[:2] == [("m1/u2", 3, 6), ("m2/u2", 3, 6)]
    [run] = Store().list_runs()
    assert (run.id, run.status) == (row_then.id, "finished")  # its counts now its scored items'

"""The store: items keep their call log; Alembic upgrades an older database without losing rows."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text

from chat_server import ChatServer, Reply, Script, user_text
from fieldcheck.runner import ModelSpec, RunHandle, Runner, RunnerSettings, RunSpec, run_task
from fieldcheck.store import Store
from fieldcheck.store._store import MIGRATIONS

Start = Callable[[Script], ChatServer]


def test_items_keep_the_log_of_their_calls(chat_server: Start, tmp_path: Path) -> None:
    state = {"n": 0}

    def script(req: dict[str, Any]) -> Reply:
        state["n"] += 1
        if state["n"] == 1:
            return Reply(status=503)
        return Reply(content="reply to " + user_text(req), prompt_tokens=11, completion_tokens=3)

    server = chat_server(script)
    dataset = tmp_path / "d.txt"
    dataset.write_text("x")
    spec = ModelSpec(name="m", model="scripted", base_url=server.base_url)
    runner = Runner(RunnerSettings(max_retries=1), store=Store())

    async def work(unit: str, handle: RunHandle) -> None:
        first = await handle.client.complete([{"role": "user", "content": unit}])
        second = await handle.client.complete([{"role": "user", "content": unit + "!"}])
        handle.save(unit, {"answer": second.text}, call_log=[first, second])

    async def go() -> RunHandle:
        try:
            return await run_task(
                runner,
                RunSpec(system="test", task="log", dataset=dataset, model=spec),
                ["q"],
                work,
                total_items=1,
                show_progress=False,
            )
        finally:
            await runner.aclose()

    handle = asyncio.run(go())
    [item] = Store().journal(handle.id)
    assert (item.calls, item.cached_calls) == (2, 0)
    assert item.latency_s == sum(c["latency_s"] for c in item.call_log) > 0
    first, second = item.call_log
    assert (first["text"], first["attempts"], first["input_tokens"]) == ("reply to q", 2, 11)
    assert (second["text"], second["output_tokens"], second["error_type"]) == (
        "reply to q!",
        3,
        None,
    )


def test_migrations_upgrade_an_older_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    engine = create_engine(url)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0001")
        connection.execute(
            text(
                "INSERT INTO runs (id, run_key, system, task, dataset, dataset_sha256, model, "
                "endpoint, settings, signature, status, started_at, n_items, n_done, n_errors) "
                "VALUES ('r1', 'k', 'slots', 't', 'd', 's', 'm', 'e', '{}', 'sig', 'finished', "
                "'2026-11-01 00:00:00', 1, 1, 0)"
            )
        )
        connection.execute(
            text(
                "INSERT INTO run_items (run_id, item_key, seq, calls, cached_calls, latency_s, "
                "result, finished_at) VALUES ('r1', 'a', 0, 1, 0, 0.5, '{\"x\": 1}', "
                "'2026-11-01 00:00:00')"
            )
        )
    assert "call_log" not in {c["name"] for c in inspect(engine).get_columns("run_items")}
    engine.dispose()
    store = Store(url)
    [item] = store.items("r1")  # 0007: in the run's items file
    assert (item.key, item.result) == ("a", {"x": 1})
    [call] = store.journal("r1")  # 0006: the model run's calls in the journal
    assert (call.key, call.result, call.call_log, call.latency_s) == ("a", {"x": 1}, [], 0.5)
    with store.engine.connect() as connection:
        assert (
            connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
            == ScriptDirectory(str(MIGRATIONS)).get_current_head()
        )


def test_a_killed_process_not_yet_reaped_is_not_alive() -> None:
    """``kill -9`` from a shell leaves a zombie until the shell reaps it: its run must read as
    stale, or the same command started again makes a new run and calls every item again (a
    tester's finding)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from fieldcheck._util.executor import pid_alive

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert pid_alive(child.pid)
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        stat = Path(f"/proc/{child.pid}/stat")
        while stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert not pid_alive(child.pid)  # a zombie: killed, not reaped (no wait() yet)
    finally:
        child.kill()
        child.wait()
    assert not pid_alive(child.pid)

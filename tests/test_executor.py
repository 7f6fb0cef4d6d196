"""The executors (``fieldcheck._util.executor``, ARCHITECTURE.md "Chunks, digests and
executors"): ``InProcess`` and ``LocalPool`` give the same results in submission order, a task's
error surfaces once with its type and message, and no pool process outlives its pool or its
caller; ``json batch`` (store on) and ``numeric score`` write byte-identical outputs and items
whichever runs their tasks."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from tests.folders import folder_files
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck._util.executor import InProcess, LocalPool, finish, run_map
from fieldcheck.core import InProcess as CoreInProcess
from fieldcheck.store import Store


def square(x: int) -> int:
    if x == 7:
        raise ValueError(f"no square for {x}")
    time.sleep(0.01 * (x % 3))  # later tasks may finish first
    return x * x


def test_in_process_and_a_pool_give_the_same_results_in_order() -> None:
    assert CoreInProcess is InProcess  # the public name (fieldcheck.core)
    expected = [x * x for x in range(7)]
    assert list(run_map(InProcess(), square, range(7))) == expected
    with LocalPool(2, in_flight=3) as pool:
        assert list(run_map(pool, square, range(7))) == expected


@pytest.mark.parametrize("workers", [1, 3])
def test_a_tasks_error_surfaces_once_and_no_process_is_left(workers: int) -> None:
    pool = LocalPool(workers)
    got: list[int] = []
    with pytest.raises(ValueError, match=r"^no square for 7$"):
        for result in run_map(pool, square, range(20)):
            got.append(result)
    assert got == [x * x for x in range(7)]  # every result before the error, in order
    rest = finish(pool)  # the tasks in flight after it: their results, the error not again
    assert rest == [x * x for x in range(8, 8 + len(rest))]
    pool.close()
    assert multiprocessing.active_children() == []


def mark_then_sleep(path: Path) -> None:
    path.touch()
    time.sleep(30)


def test_a_pools_block_ended_by_an_error_kills_its_tasks_rather_than_waiting(
    tmp_path: Path,
) -> None:
    """``with LocalPool(...)``: an error (or Ctrl-C) in the block kills the task running, so a
    30 s task does not hold the caller; without one, the block waits for its tasks."""
    started = tmp_path / "started"
    begin = time.monotonic()
    with pytest.raises(RuntimeError, match="stop"), LocalPool(1) as pool:
        pool.submit(mark_then_sleep, started)
        while not started.exists():  # the task runs
            time.sleep(0.05)
        raise RuntimeError("stop")
    assert time.monotonic() - begin < 25  # killed: not the task's 30 s after it started
    assert multiprocessing.active_children() == []
    with LocalPool(1) as pool:
        pool.submit(square, 5)
    assert multiprocessing.active_children() == []


CALLER = """
import os, sys, time
from fieldcheck._util.executor import LocalPool
pool = LocalPool(2)
pool.drain()
print(" ".join(str(p.pid) for p in pool._pool._processes.values()), flush=True)
time.sleep(60)
"""


def test_pool_processes_end_with_their_caller_and_ignore_its_ctrl_c(tmp_path: Path) -> None:
    """A caller killed outright (``kill -9``) leaves no worker behind; a Ctrl-C at the terminal
    (SIGINT to the foreground process group) reaches the caller, not the workers, which are
    in sessions of their own."""
    caller = subprocess.Popen(
        [sys.executable, "-c", CALLER], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert caller.stdout is not None
    pids = [int(p) for p in caller.stdout.readline().split()]
    assert len(pids) == 2
    os.killpg(caller.pid, signal.SIGINT)  # the terminal's Ctrl-C: the caller's group
    assert caller.wait(timeout=30) != 0
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)

    caller = subprocess.Popen([sys.executable, "-c", CALLER], stdout=subprocess.PIPE, text=True)
    assert caller.stdout is not None
    pids = [int(p) for p in caller.stdout.readline().split()]
    deadline = time.monotonic() + 20  # a worker may not have started yet (the other ran both)
    while time.monotonic() < deadline and not all(os.getsid(p) == p for p in pids):
        time.sleep(0.05)
    assert all(os.getsid(p) == p for p in pids)  # each the leader of its own session
    caller.kill()
    caller.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _items(store: Store) -> list[tuple[Any, ...]]:
    [run] = [r for r in store.list_runs() if r.kind == "score"]
    return [(i.key, i.seq, i.failed, i.result) for i in store.items(run.id)]


def _json_batch(tmp_path: Path) -> Path:
    batch = tmp_path / "batch.jsonl"
    with batch.open("wb") as handle:
        for i in range(3_000):
            gt = {"name": f"n{i % 17}", "city": ["Rome", "Oslo"][i % 2], "n": i % 5}
            output = {**gt, "city": "Rome"} if i % 3 else {"name": gt["name"], "extra": i}
            if i == 1_500:
                output = gt
                i = 4  # a repeated id: its key gets ~seq
            handle.write(orjson.dumps({"id": i, "ground_truth": gt, "output": output}) + b"\n")
    return batch


@pytest.mark.parametrize("system", ["json", "numeric"])
def test_in_process_and_a_pool_write_the_same_bytes_and_items(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, system: str
) -> None:
    """The same input scored with its tasks here and in a pool (the store's part files, of
    about 8 KB each, and numeric's row blocks; numeric's pool also started before the inputs
    are read, reading the predictions): the same output files, stored items and warnings."""
    from fieldcheck.numeric import _stream, _system
    from fieldcheck.store import _recorder

    monkeypatch.setattr(_recorder, "TASK_BYTES", 8 << 10)
    if system == "json":
        strategies = tmp_path / "strategies.json"
        strategies.write_bytes(orjson.dumps({"name": "EXACT", "city": "EXACT", "n": "EXACT"}))
        argv = ["json", "batch", str(_json_batch(tmp_path)), "--strategies", str(strategies)]
        argv += ["--bootstrap", "50"]
    else:
        from tests.numeric.test_streamed import _write_inputs

        data, preds = _write_inputs(tmp_path, 3, 120)
        with preds.open("ab") as handle:  # a bad line and an unknown key: located, warned of
            handle.write(b'{"conversation_id": "c1", "turn": "x"}\n{"turn": 0, "color": 1}\n')
        argv = ["numeric", "score", "--data", str(data), "--predictions", str(preds)]
    found = {}
    modes = (("here", 10**12), ("pool", 0), *((("early", 0),) if system == "numeric" else ()))
    for where, after in modes:
        monkeypatch.setattr(_recorder, "PROCESS_AFTER", after)
        monkeypatch.setattr(_stream, "WRITER_CONVERSATIONS", 10**12 if after else 1)
        monkeypatch.setattr(_system, "EARLY_POOL_BYTES", 0 if where == "early" else 10**18)
        monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{tmp_path}/{where}.sqlite3")
        monkeypatch.setenv("FIELDCHECK_ARTIFACTS", str(tmp_path / f"{where}-artifacts"))
        out = tmp_path / where
        caplog.clear()
        result = CliRunner().invoke(app, [*argv, "--out", str(out)])
        # 3: the inputs have errors (json: the repeated id; numeric: missing predictions),
        # located, and the run goes on
        assert result.exit_code == 3, result.output
        store = Store(f"sqlite:///{tmp_path}/{where}.sqlite3")
        warned = [r.getMessage() for r in caplog.records if "unknown key" in r.getMessage()]
        found[where] = (folder_files(out), _items(store), warned)
        store.close()
    assert found["here"] == found["pool"] == found.get("early", found["pool"])
    outputs, items, warned = found["pool"]
    assert len(warned) == (system == "numeric")
    assert len(items) == (3_000 if system == "json" else outputs["turns.csv"].count(b"\n") - 1)
    assert len(items) > 300 and len(outputs) >= 4
    if system == "json":
        keys = [key for key, *_ in items]
        # the repeated id's item, stored last of its chunk: a key seen before gets ~<seq>
        assert keys.count("4") == 1 and [k for k in keys if k.startswith("4~")] == ["4~2999"]
    parts = list((tmp_path / "pool-artifacts").rglob("items*.parquet"))
    assert len(parts) >= 1


def test_exit_without_collecting_registers_gc_freeze_once() -> None:
    # each run's interrupt line and a scoring's Ctrl-C call it: one Ctrl-C registered it
    # several times (atexit's last callback, registered first, counts the freezes)
    code = (
        "import atexit, gc\n"
        "calls = []\n"
        "atexit.register(lambda: print(len(calls)))\n"
        "gc.freeze = lambda: calls.append(1)\n"
        "from fieldcheck._util.executor import exit_without_collecting\n"
        "for _ in range(3):\n"
        "    exit_without_collecting()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "1\n"

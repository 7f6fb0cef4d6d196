"""RunRecorder: items written by tasks of part files, in this process (a large run: a pool
process, ``fieldcheck._util.executor.LocalPool``), on SQLite and PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from fieldcheck import core
from fieldcheck._util.executor import LocalPool
from fieldcheck.store import RunRecorder, Store
from fieldcheck.store._items import ItemColumns
from fieldcheck.store._recorder import decode_chunk, encode_chunk


def _add(recorder: RunRecorder, items: list[dict[str, Any]]) -> int:
    """Items of the run's system, their columns derived by the system (``item_columns``)."""
    return recorder.add_items(items, core.get(recorder.run.system).item_columns)


def _open(store: Store, tmp_path: Path, system: str = "json") -> RunRecorder:
    return RunRecorder.open(
        store, system=system, inputs=[], settings={}, signature="s", out=tmp_path
    )


def test_prepared_items_are_stored_in_order_with_their_columns(
    store: Store, tmp_path: Path
) -> None:
    recorder = _open(store, tmp_path)
    rows = [
        (
            ItemColumns(f"r{i}", i % 3 == 0, tags={"city": True} if i % 3 == 0 else {}),
            f'{{"i":{i}}}',
        )
        for i in range(2500)
    ]
    for start in range(0, 2500, 1000):  # three chunks, queued to the writer thread
        assert recorder.add_prepared(rows[start : start + 1000]) == min(1000, 2500 - start)
    recorder.add_prepared([(ItemColumns("b", False), b'{"bytes":true}')])
    run = recorder.finish(metrics={"n": 2501})
    assert (run.status, run.n_items, run.metrics) == ("finished", 2501, {"n": 2501})
    items = store.items(run.id)
    assert [i.key for i in items[:3]] == ["r0", "r1", "r2"] and items[-1].key == "b"
    assert [i.seq for i in items] == list(range(2501))
    assert items[1234].result == {"i": 1234} and items[-1].result == {"bytes": True}
    assert store.count_items(run.id, failed=True) == 834  # i % 3 == 0 for i < 2500
    assert store.count_items(run.id, tag="city") == 834
    assert [i.key for i in store.page_items(run.id, tag="city", after=3, limit=2)] == ["r6", "r9"]


def test_a_key_seen_before_gets_its_seq_appended(store: Store, tmp_path: Path) -> None:
    recorder = _open(store, tmp_path)
    _add(recorder, [{"id": "a", "fields": {}}, {"id": "b", "fields": {}}])
    # a duplicate in a later chunk and one inside the same chunk
    _add(recorder, [{"id": "a", "error": {"reason": "duplicate_id"}}, {"id": "c"}, {"id": "c"}])
    run = recorder.finish(metrics=None)
    assert [i.key for i in store.items(run.id)] == ["a", "b", "a~2", "c", "c~4"]
    assert run.n_items == 5 and run.n_errors == 1


def test_a_tasks_error_reaches_the_scoring(store: Store, tmp_path: Path) -> None:
    recorder = _open(store, tmp_path)
    folder = store.run_folder(recorder.id)
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.write_text("a file where the run's item folder goes")
    _add(recorder, [{"id": "x"}])
    # the part file cannot be made: the write fails in the task
    with pytest.raises(OSError, match=str(folder.name)):
        recorder.flush()


def test_abort_keeps_what_was_added_and_starts_no_thread(store: Store, tmp_path: Path) -> None:
    before = threading.active_count()
    with pytest.raises(KeyboardInterrupt), _open(store, tmp_path, "numeric") as recorder:
        for chunk in range(4):
            _add(
                recorder,
                [
                    {"conversation_id": f"c{chunk}", "turn_idx": t, "general_match": t == 0}
                    for t in range(3)
                ],
            )
        raise KeyboardInterrupt
    run = store.get_run(recorder.id)
    assert run is not None and (run.status, run.n_items) == ("interrupted", 12)
    assert threading.active_count() == before


def test_a_current_store_opens_without_importing_alembic(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'current.sqlite3'}"
    code = (
        "import sys; from fieldcheck.store import Store; "
        f"Store({url!r}); print('alembic' in sys.modules)"
    )
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # a new file is migrated by Alembic; once at the newest revision, it is not imported
    assert (first.stdout.strip(), again.stdout.strip()) == ("True", "False")


def test_a_large_run_moves_its_writes_to_a_pool(store: Store, tmp_path: Path) -> None:
    recorder = _open(store, tmp_path)
    recorder.process_after = 1_500  # past 1,500 items the chunks go to a pool process
    for start in range(0, 4_000, 1_000):
        recorder.add_prepared(
            (ItemColumns(f"r{i}", i % 2 == 0), f'{{"i":{i}}}') for i in range(start, start + 1_000)
        )
    run = recorder.finish(metrics={"n": 4_000})
    assert (run.status, run.n_items) == ("finished", 4_000)
    assert store.count_items(run.id, failed=True) == 2_000
    assert [i.result["i"] for i in store.page_items(run.id, after=3_997)] == [3_998, 3_999]


def test_full_tasks_go_as_their_own_parts_and_are_published_in_order(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task takes chunks up to ``TASK_BYTES`` (but always one chunk): with a bound of one
    byte, every chunk of the pool is a part of its own, at most three in flight; the parts are
    the run's item files, numbered in seq order, read as one."""
    from fieldcheck.store import _recorder

    monkeypatch.setattr(_recorder, "TASK_BYTES", 1)
    recorder = _open(store, tmp_path)
    recorder.start_process()
    pool = recorder._executor
    assert isinstance(pool, LocalPool) and pool.in_flight == 3
    for start in range(0, 3_000, 500):
        recorder.add_prepared(
            (ItemColumns(f"r{i}", i % 3 == 0), f'{{"i":{i}}}') for i in range(start, start + 500)
        )
        assert len(pool._futures) <= 3
    recorder.flush()
    folder = store.run_folder(recorder.id)
    assert len(list(folder.glob("items-*.part"))) == 6
    run = recorder.finish(metrics={"n": 3_000})
    assert (run.status, run.n_items) == ("finished", 3_000)
    assert store.count_items(run.id, failed=True) == 1_000
    assert [i.result["i"] for i in store.page_items(run.id, after=2_996)] == [2_997, 2_998, 2_999]
    # kept as they are (joined, every value would be decoded and encoded again), in seq order
    assert sorted(p.name for p in folder.iterdir()) == [f"items-{i:05d}.parquet" for i in range(6)]


def test_a_pool_tasks_error_is_raised_with_its_type_and_message(
    store: Store, tmp_path: Path
) -> None:
    recorder = _open(store, tmp_path)
    recorder.process_after = 0
    folder = store.run_folder(recorder.id)
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.write_text("a file where the run's item folder goes")
    _add(recorder, [{"id": "x"}])
    assert isinstance(recorder._executor, LocalPool)
    with pytest.raises((FileExistsError, NotADirectoryError), match=str(folder.name)):
        recorder.flush()
    assert recorder._executor is not None and not isinstance(recorder._executor, LocalPool)


def _pool_processes(recorder: RunRecorder) -> list[Any]:
    pool = recorder._executor
    assert isinstance(pool, LocalPool) and pool._pool is not None
    return list(pool._pool._processes.values())


def test_large_inputs_start_the_pool_when_the_run_opens(store: Store, tmp_path: Path) -> None:
    from fieldcheck.store._recorder import PROCESS_INPUT_BYTES

    big, small = tmp_path / "big.jsonl", tmp_path / "small.jsonl"
    with big.open("wb") as handle:
        handle.truncate(PROCESS_INPUT_BYTES)  # sparse: its size is what counts
    small.write_bytes(b"{}\n")
    opened = RunRecorder.open(
        store, system="json", inputs=[("batch", big)], settings={}, signature="s", out=tmp_path
    )
    (worker,) = _pool_processes(opened)  # one worker, started at once
    # the database URL (it may hold a password) is on no command line: the pool has no store
    deadline = time.monotonic() + 10
    while not (cmdline := Path(f"/proc/{worker.pid}/cmdline").read_bytes()):
        assert time.monotonic() < deadline  # empty while the new process is still starting
        time.sleep(0.01)
    assert b"multiprocessing" in cmdline and store.url.encode() not in cmdline
    opened.add_prepared((ItemColumns(f"r{i}", False), b'{"b":1}') for i in range(10))
    run = opened.finish(metrics=None)
    assert run.n_items == 10 and store.items(run.id)[9].result == {"b": 1}
    assert worker.exitcode == 0  # stopped once its items were in
    smaller = RunRecorder.open(
        store, system="json", inputs=[("batch", small)], settings={}, signature="s", out=tmp_path
    )
    assert not isinstance(smaller._executor, LocalPool)  # a small run writes in this process
    smaller.abort()


def test_a_pool_process_that_dies_is_reported(store: Store, tmp_path: Path) -> None:
    recorder = _open(store, tmp_path)
    recorder.start_process()
    (worker,) = _pool_processes(recorder)
    worker.kill()
    worker.join()
    with pytest.raises(OSError, match="a pool process ended abruptly"):
        _add(recorder, [{"id": "x"}])
        recorder.flush()


@pytest.mark.parametrize("writer", ["here", "pool"])
def test_items_built_by_a_task_are_numbered_after_the_others(
    store: Store, tmp_path: Path, writer: str
) -> None:
    recorder = _open(store, tmp_path)
    if writer == "pool":
        recorder.start_process()
    recorder.add_prepared([(ItemColumns("a", False), b'{"n":0}')])
    built = [(ItemColumns(f"b{i}", i == 1, tags={"t": True}), f'{{"n":{i + 1}}}') for i in range(2)]
    assert recorder.add_built("builtins:list", built, 2) == 2  # list(payload) builds them
    recorder.add_prepared([(ItemColumns("c", False), b'{"n":3}')])
    run = recorder.finish(metrics=None)
    items = store.items(run.id)
    assert [(i.key, i.seq, i.result["n"]) for i in items] == [
        ("a", 0, 0), ("b0", 1, 1), ("b1", 2, 2), ("c", 3, 3),
    ]  # fmt: skip
    assert store.count_items(run.id, failed=True) == 1 and store.count_items(run.id, tag="t") == 2
    # a builder that makes another number of items than announced stores nothing more
    broken = _open(store, tmp_path)
    if writer == "pool":
        broken.start_process()
    broken.add_built("builtins:list", [], 1)
    with pytest.raises(Exception, match="built 0 items where 1 were announced"):
        broken.flush()


def test_plain_chunks_are_marshalled_and_decode_to_the_same_values() -> None:
    chunk = ("build", "m:f", [(("u", 1), {("t", "f"): ["v", ""]}, 2.5, None, True, b"x")], 7, 1)
    for plain in (True, False):
        data = encode_chunk(chunk, plain)
        assert data[:1] == (b"M" if plain else b"P")
        assert decode_chunk(data) == chunk
    # plain=True on what marshal cannot write fails at once, not in the pool's process
    with pytest.raises(ValueError, match="unmarshallable"):
        encode_chunk(("build", "m:f", [ItemColumns("a", False)], 0, 1), plain=True)


def test_a_sqlite_store_is_wal_without_an_fsync_per_commit(tmp_path: Path) -> None:
    """WAL with ``synchronous=NORMAL`` (docs/decisions.md): a commit does not wait for the
    disk; 8 KiB pages; foreign keys enforced."""
    from sqlalchemy import text

    store = Store(f"sqlite:///{tmp_path}/s.db")
    with store.engine.connect() as conn:
        pragmas = [
            conn.execute(text(f"PRAGMA {name}")).scalar()
            for name in ("journal_mode", "synchronous", "page_size", "foreign_keys")
        ]
    assert pragmas == ["wal", 1, 8192, 1]


def test_an_error_marks_the_run_failed_not_interrupted(store: Store, tmp_path: Path) -> None:
    """A run stopped by an error (a full disk while writing its files) is ``failed``; only
    Ctrl-C leaves it ``interrupted`` (a tester's finding: a failed write read as interrupted,
    and re-scoring it said "a interrupted scored run")."""
    from fieldcheck._util.errors import InputError
    from fieldcheck.runs import rescore

    with pytest.raises(OSError), _open(store, tmp_path, "numeric") as recorder:
        _add(recorder, [{"conversation_id": "c", "turn_idx": 0, "general_match": True}])
        raise OSError(28, "No space left on device")
    run = store.get_run(recorder.id)
    assert run is not None and (run.status, run.n_items) == ("failed", 1)
    with pytest.raises(InputError, match=rf"^run {run.id} is a failed score run: only finished"):
        rescore(store, run.id)
    model_run, _ = store.open_run(
        system="json", task="run", dataset="d", dataset_sha256="x", model="m", endpoint="e",
        settings={}, signature="", n_items=1,
    )  # fmt: skip
    store.set_status(model_run.id, "interrupted")
    with pytest.raises(InputError, match=rf"^run {model_run.id} is an interrupted model run: only"):
        rescore(store, model_run.id)  # it said "an interrupted run run"


@pytest.mark.parametrize("pooled", [False, True])
def test_a_sealed_run_is_published_before_it_is_finished(
    store: Store, tmp_path: Path, pooled: bool
) -> None:
    # ``seal`` sends the last part and the publishing at once (json batch draws its report
    # meanwhile): the items are in place before ``finish``, which stores the counts; an item
    # added after it is refused (the run is reported not stored), not lost silently
    warned: list[BaseException] = []
    recorder = _open(store, tmp_path)
    recorder.on_error = warned.append
    if pooled:
        recorder.start_process()
    _add(recorder, [{"id": f"r{i}", "fields": {}} for i in range(5)])
    recorder.seal()
    recorder.seal()  # once only
    run = recorder.finish(metrics={"n": 5})
    assert (run.status, run.n_items) == ("finished", 5)
    assert [i.key for i in store.items(run.id)] == [f"r{i}" for i in range(5)]
    assert not warned
    late = _open(store, tmp_path)
    late.on_error = warned.append
    late.seal()
    _add(late, [{"id": "x"}])
    assert [str(e) for e in warned] == ["items added to a sealed run"]
    late.abort("failed")
    found = store.get_run(late.id)
    assert found is not None and (found.status, found.n_items) == ("failed", 0)


def test_a_ctrl_c_while_a_part_is_written_leaves_no_file_of_it(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a Ctrl-C inside a part's write left its ``.part.tmp`` in the artifacts root
    from fieldcheck.store import _parquet

    write = _parquet.ItemsWriter.write
    recorder = _open(store, tmp_path)
    _add(recorder, [{"id": "a", "fields": {}}])
    recorder.flush()  # a part of its own, closed

    def ctrl_c(self: Any, *args: Any) -> None:
        write(self, *args)
        raise KeyboardInterrupt

    monkeypatch.setattr(_parquet.ItemsWriter, "write", ctrl_c)
    with pytest.raises(KeyboardInterrupt), recorder:
        _add(recorder, [{"id": "b", "fields": {}}])
        recorder.flush()
    run = store.get_run(recorder.id)
    assert run is not None and (run.status, run.n_items) == ("interrupted", 1)
    assert [i.key for i in store.items(run.id)] == ["a"]
    assert [p.name for p in store.run_folder(run.id).iterdir()] == ["items.parquet"]


def test_a_ctrl_c_inside_seal_publishes_the_parts_written_before_it(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # json batch seals its run before the report: a Ctrl-C while the last part was written
    # there left the parts before it unpublished (the interrupted run showed no item)
    from fieldcheck.store import _parquet

    recorder = _open(store, tmp_path)
    _add(recorder, [{"id": "a", "fields": {}}])
    recorder.flush()  # a part of its own, closed

    def ctrl_c(*_: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(_parquet.ItemsWriter, "write", ctrl_c)
    with pytest.raises(KeyboardInterrupt), recorder:
        _add(recorder, [{"id": "b", "fields": {}}])
        recorder.seal()
    run = store.get_run(recorder.id)
    assert run is not None and (run.status, run.n_items) == ("interrupted", 1)
    assert [i.key for i in store.items(run.id)] == ["a"]
    assert [p.name for p in store.run_folder(run.id).iterdir()] == ["items.parquet"]


KILLED_AFTER_PUBLISH = """
import os, signal
from fieldcheck.store import RunRecorder, Store
from fieldcheck.store._items import ItemColumns
store = Store()
store.count_written = lambda *args: None  # the last parts' counts still in the pool when killed
recorder = RunRecorder.open(store, system="json", inputs=[], settings={}, signature="s", out=None)
errors = ["timeout", None, None, None]
recorder.add_prepared(
    (ItemColumns(f"r{i}", i == 2 or None, error_type=e), b"{}") for i, e in enumerate(errors)
)
recorder.seal()  # every part written and published
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_run_killed_once_its_items_were_published_counts_its_items_file() -> None:
    """SIGKILL after the items were published, before their counts came back from the pool:
    ``runs show`` said ``items: 32768 (20182 failed, ...)``, the failed counted in the 40,000 of
    its items file (a tester's trial). The stale run, marked interrupted, counts its file."""
    from typer.testing import CliRunner

    from fieldcheck._cli.main import app

    killed = subprocess.run([sys.executable, "-c", KILLED_AFTER_PUBLISH], check=False)
    assert killed.returncode == -9
    [run] = Store().list_runs()
    assert (run.status, run.n_items, run.n_done, run.n_errors) == ("interrupted", 4, 4, 1)
    shown = CliRunner().invoke(app, ["runs", "show", run.id]).stdout
    assert "items: 4 (1 failed, 3 not scored)" in shown  # r0, r1, r3 have no verdict

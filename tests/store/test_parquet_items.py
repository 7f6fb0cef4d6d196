"""A scored run's items as one zstd Parquet file under the artifacts root, read with DuckDB
(issue 27 item 5): the file, the same pages and counts as the SQL rows of a run stored before,
the run-to-run join, the Parquet export pandas reads, bounded memory, delete."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from runs_data import json_folder
from sqlalchemy import func, insert, select
from typer.testing import CliRunner

from fieldcheck import core
from fieldcheck._cli.main import app
from fieldcheck._util.jsonio import dumps_bytes
from fieldcheck.runs import compare_runs, record_folder
from fieldcheck.store import (
    ARTIFACTS_ENV,
    DATABASE_ENV,
    ItemColumns,
    ItemsMissing,
    RunRecorder,
    Store,
    artifacts_root,
)
from fieldcheck.store._schema import ItemRow, TagRow


def _open(store: Store, tmp_path: Path, system: str = "json") -> RunRecorder:
    return RunRecorder.open(
        store, system=system, inputs=[], settings={}, signature="s", out=tmp_path
    )


def _item(i: int) -> tuple[ItemColumns, bytes]:
    """Item i of a varied run: every filter column takes several values, None included."""
    failed = None if i % 7 == 0 else i % 3 == 0
    tags = {"city": i % 3 == 0, "name": False} if i % 2 else {}
    if i % 10 == 1:
        tags = {**tags, "zip": True}
    columns = ItemColumns(
        f"k{i:05d}",
        failed,
        model=f"m{i % 3}",
        turn=i % 5,
        error_type="call_error" if failed is None else None,
        tags=tags,
    )
    return columns, dumps_bytes({"i": i, "big": 2**70 + i, "text": "é" * (i % 4)}, 0)


def _sql_run(store: Store, items: list[tuple[ItemColumns, bytes]]) -> str:
    """A scored run whose items are SQL rows, as a store from before issue 27 holds them."""
    run = store.create_scored_run(
        system="json", model="", task="score", inputs=[], settings={}, signature="s", out_dir=None
    )
    now = datetime.now(UTC)
    rows = [
        {
            "run_id": run.id, "item_key": c.key, "seq": seq, "error_type": c.error_type,
            "calls": 0, "cached_calls": 0, "latency_s": 0.0, "result": text.decode(),
            "finished_at": now, "failed": c.failed, "model": c.model, "turn": c.turn,
        }
        for seq, (c, text) in enumerate(items)
    ]  # fmt: skip
    tags = [
        {"run_id": run.id, "name": name, "seq": seq, "failed": f}
        for seq, (c, _) in enumerate(items)
        for name, f in c.tags.items()
    ]
    with store.engine.begin() as conn:
        conn.execute(insert(ItemRow), rows)
        conn.execute(insert(TagRow), tags)
    store.finish_scored_run(run.id, metrics=None, intervals=None)
    return run.id


def _sql_items(store: Store, run_id: str) -> int:
    with store.engine.connect() as conn:
        query = select(func.count()).select_from(ItemRow).where(ItemRow.run_id == run_id)
        return int(conn.scalar(query) or 0)


def test_a_scored_run_is_one_zstd_parquet_file_and_no_sql_rows(
    store: Store, tmp_path: Path
) -> None:
    recorder = _open(store, tmp_path)
    recorder.add_prepared([_item(i) for i in range(40)])
    recorder.add_items(
        [{"id": "bad", "error": {"reason": "not_json"}}], core.get("json").item_columns
    )
    run = recorder.finish(metrics={"n": 41})
    path = store.items_file(run.id)
    if store.url.startswith("sqlite"):  # beside the SQLite file
        root = tmp_path / "artifacts"
    else:  # PostgreSQL: the default SQLite file's folder (XDG_DATA_HOME, set by conftest)
        root = Path(__import__("os").environ["XDG_DATA_HOME"]) / "fieldcheck" / "artifacts"
    assert path == root / "runs" / run.id / "items.parquet" and path.is_file()
    assert sorted(p.name for p in path.parent.iterdir()) == ["items.parquet"]  # no parts left
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    assert (meta.num_rows, meta.num_row_groups) == (41, 1)
    group = meta.row_group(0)
    assert {group.column(c).compression for c in range(group.num_columns)} == {"ZSTD"}
    assert pq.read_schema(path).names == [
        "key", "seq", "error_type", "failed", "model", "turn", "tags", "failed_tags", "result",
    ]  # fmt: skip
    assert _sql_items(store, run.id) == 0  # the run index only
    assert (run.n_items, run.n_done, run.n_errors) == (41, 41, 7)  # i % 7 == 0, and "bad"
    assert store.count_not_scored(run.id) == 7  # the six i % 7 == 0, and "bad"
    assert store.count_items(run.id, failed=True) == 12  # i % 3 == 0 of the others: 3, ..., 39


def test_fieldcheck_artifacts_sets_the_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = Path(__import__("os").environ["XDG_DATA_HOME"]) / "fieldcheck" / "artifacts"
    assert artifacts_root(f"sqlite:///{tmp_path}/a/s.sqlite3") == tmp_path / "a" / "artifacts"
    assert artifacts_root("postgresql+psycopg://u@h/db") == data
    assert artifacts_root("sqlite://") == data  # in memory: no folder of its own
    monkeypatch.setenv(ARTIFACTS_ENV, str(tmp_path / "team"))
    assert artifacts_root("postgresql+psycopg://u@h/db") == tmp_path / "team"
    store = Store(f"sqlite:///{tmp_path}/s.sqlite3")
    recorder = _open(store, tmp_path)
    recorder.add_prepared([_item(1)])
    run = recorder.finish(metrics=None)
    assert store.items_file(run.id) == tmp_path / "team" / "runs" / run.id / "items.parquet"
    store.close()
    # the root set otherwise later: the run's items are said to be missing, never "0 failed"
    monkeypatch.setenv(ARTIFACTS_ENV, str(tmp_path / "elsewhere"))
    store = Store(f"sqlite:///{tmp_path}/s.sqlite3")
    with pytest.raises(ItemsMissing, match=f"the items of run {run.id} are not at .*elsewhere"):
        store.count_items(run.id, failed=True)
    store.close()
    result = CliRunner().invoke(app, ["runs", "show", run.id], env={DATABASE_ENV: store.url})
    assert result.exit_code == 2
    assert f"{ARTIFACTS_ENV}: the items of run {run.id} are not at" in result.stderr


FILTERS: list[dict[str, Any]] = [
    {},
    {"failed": True},
    {"failed": False},
    {"tag": "city"},
    {"tag": "city", "failed": True},
    {"tag": "city", "failed": False},
    {"tag": "zip", "failed": True},
    {"tag": "nope"},
    {"model": "m1"},
    {"turn": 3},
    {"model": "m2", "turn": 0, "failed": False},
    {"tag": "name", "model": "m0", "turn": 1},
]


def test_ten_thousand_items_page_and_filter_as_the_sql_rows_of_an_old_run(
    store: Store, tmp_path: Path
) -> None:
    """The same 10,000 items recorded now (Parquet, DuckDB) and as a run stored before issue 27
    (SQL rows, still read): every filter gives the same pages, counts and tags, and the counts
    are the ones the items were made with."""
    items = [_item(i) for i in range(10_000)]
    recorder = _open(store, tmp_path)
    for start in range(0, len(items), 1_500):
        recorder.add_prepared(items[start : start + 1_500])
    new = recorder.finish(metrics=None).id
    old = _sql_run(store, items)
    assert store.items_file(new) is not None and store.items_file(old) is None

    def shown(run_id: str, **filters: Any) -> list[tuple[Any, ...]]:
        pages, after = [], -1
        while page := store.page_items(run_id, after=after, limit=700, **filters):
            pages += [
                (i.key, i.seq, i.failed, i.model, i.turn, i.error_type, i.result) for i in page
            ]
            after = page[-1].seq
        return pages

    for filters in FILTERS:
        got = shown(new, **filters)
        assert got == shown(old, **filters), filters
        count = store.count_items(new, **filters)
        assert count == store.count_items(old, **filters) == len(got), filters
    assert store.count_items(new) == 10_000
    assert store.count_items(new, failed=True) == sum(
        1 for i in range(10_000) if i % 7 and i % 3 == 0
    )
    assert store.count_items(new, tag="city", failed=False) == sum(
        1 for i in range(10_000) if i % 2 and i % 3
    )
    assert store.count_not_scored(new) == store.count_not_scored(old) == 1_429  # 0, 7, ..., 9996
    assert store.item_tags(new) == store.item_tags(old) == ["city", "name", "zip"]
    assert store.item_tags(new, limit=2) == ["city", "name"]
    [first] = store.page_items(new, after=4_998, limit=1)
    assert (first.key, first.seq, first.result["big"]) == ("k04999", 4_999, 2**70 + 4_999)
    assert first.result["text"] == "é" * 3  # UTF-8 kept
    assert [i.key for i in store.iter_items(new)] == [c.key for c, _ in items]


def test_two_runs_are_joined_on_their_key(store: Store, tmp_path: Path) -> None:
    """Each key's verdict in one run against the other's: a full outer join in DuckDB."""

    def run(verdicts: dict[str, bool | None]) -> Any:
        recorder = _open(store, tmp_path)
        recorder.add_prepared(
            [(ItemColumns(k, f), orjson.dumps({"k": k})) for k, f in verdicts.items()]
        )
        return recorder.finish(metrics={"means": {}})

    a = run({"a": True, "b": True, "c": False, "d": False, "e": None, "gone": False})
    b = run({"a": True, "b": False, "c": True, "d": False, "e": False, "new": True})
    assert store.join_items(a.id, b.id) == {
        "failed -> failed": 1,  # a
        "failed -> passed": 1,  # b
        "missing -> failed": 1,  # new
        "not scored -> passed": 1,  # e
        "passed -> failed": 1,  # c
        "passed -> missing": 1,  # gone
        "passed -> passed": 1,  # d
    }
    table = compare_runs([a, b], store)["tables"][-1]
    assert table["title"] == f"Items against {a.id[:8]} (verdict there -> here)"
    assert {r["name"]: r["values"] for r in table["rows"]}["failed -> passed"] == [None, 1]
    old = store.get_run(_sql_run(store, [_item(1)]))
    assert old is not None and store.join_items(a.id, old.id) is None  # not joined
    assert all(t["row_label"] != "items" for t in compare_runs([a, old], store)["tables"])


def test_runs_export_parquet_is_read_by_pandas_with_typed_columns(tmp_path: Path) -> None:
    import pandas as pd

    store = Store()
    run = record_folder(store, json_folder(tmp_path)[0], model="m")
    out = tmp_path / "items.parquet"
    result = CliRunner().invoke(
        app, ["runs", "export", run.id, "--format", "parquet", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    frame = pd.read_parquet(out)
    assert frame["key"].tolist() == ["r1", "r2", "r3"] and frame["seq"].tolist() == [0, 1, 2]
    assert frame["failed"].tolist() == [False, True, True]
    assert str(frame["accuracy"].dtype) == "float64" and str(frame["seq"].dtype) == "int64"
    stored = store.items(run.id)
    assert frame["accuracy"].tolist() == [i.result["accuracy"] for i in stored]
    assert [json.loads(r) for r in frame["result"]] == [i.result for i in stored]
    assert list(frame.columns)[:6] == ["key", "seq", "failed", "model", "turn", "error_type"]
    # a run stored before issue 27 (SQL rows) exports the same way
    old = _sql_run(store, [_item(3), _item(4)])
    out = tmp_path / "old.parquet"  # a new file: an existing one is never replaced
    result = CliRunner().invoke(
        app, ["runs", "export", old, "--format", "parquet", "--out", str(out)]
    )
    assert result.exit_code == 0 and pd.read_parquet(out)["key"].tolist() == ["k00003", "k00004"]
    result = CliRunner().invoke(app, ["runs", "export", run.id, "--format", "parquet"])
    assert result.exit_code == 2 and "give --out FILE" in result.stderr
    store.close()


MEMORY_SCRIPT = """
import json, sys, tracemalloc
import pyarrow as pa
from fieldcheck.store import RunRecorder, Store
from fieldcheck.store import ItemColumns

store = Store(sys.argv[1])
text = b'{"x":"' + b"a" * 1000 + b'"}'


def record(n):
    recorder = RunRecorder.open(store, system="json", inputs=[], settings={}, signature="s", out=None)
    recorder.process_after = 10**12  # the writer thread, in this process: its memory is measured
    for start in range(0, n, 2_000):
        recorder.add_prepared(
            [(ItemColumns(f"r{i}", i % 3 == 0, tags={"f": True} if i % 3 == 0 else {}), text)
             for i in range(start, start + 2_000)]
        )
    return recorder.finish(metrics=None)


record(2_000)  # what it imports is no item
tracemalloc.start()
run = record(200_000)
peak = tracemalloc.get_traced_memory()[1]
print(json.dumps({"peak": peak, "arrow": pa.default_memory_pool().max_memory(),
                  "items": store.count_items(run.id), "failed": store.count_items(run.id, failed=True)}))
"""


@pytest.mark.slow
def test_two_hundred_thousand_items_are_written_in_bounded_memory(tmp_path: Path) -> None:
    """200,000 items of 1 KB (200 MB of JSON) in chunks of 2,000: Python's heap (tracemalloc)
    and Arrow's pool each stay far under what holding the items would take."""
    url = f"sqlite:///{tmp_path}/s.sqlite3"
    done = subprocess.run(
        [sys.executable, "-c", MEMORY_SCRIPT, url], capture_output=True, text=True, timeout=280
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert (found["items"], found["failed"]) == (200_000, 66_667)
    held = 200_000 * 1_000
    assert found["peak"] < 16 << 20 < held, found  # 2.4 MB: the chunks queued and the one made
    assert found["arrow"] < 48 << 20 < held, found  # 19 MB: a row group (16 MB) at most


def test_deleting_a_run_removes_its_item_files_and_keeps_a_users_file(
    store: Store, tmp_path: Path
) -> None:
    kept, gone = (_open(store, tmp_path) for _ in range(2))
    for recorder in (kept, gone):
        recorder.add_prepared([_item(1)])
        recorder.finish(metrics=None)
    folder = store.run_folder(gone.id)
    assert (folder / "items.parquet").is_file() and store.delete_run(gone.id)
    assert not folder.exists() and store.items_file(kept.id) is not None
    mine = store.run_folder(kept.id) / "notes.txt"
    mine.write_text("a user's file")
    assert store.delete_run(kept.id)
    assert mine.read_text() == "a user's file" and not (mine.parent / "items.parquet").exists()
    assert store.items_file("../" + kept.id) is None and not store.delete_run("..")
    with pytest.raises(ValueError, match="not a run id"):
        store.run_folder("../x")


def test_threads_querying_at_once_share_one_duckdb_connection(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Concurrent API requests each take a cursor of the store's one DuckDB connection: two
    threads that both found none made two, and one was never closed."""
    import threading
    import time

    import duckdb

    made: list[Any] = []
    connect = duckdb.connect

    def slow_connect(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.05)  # a window in which every other thread also finds no connection
        made.append(connect(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(duckdb, "connect", slow_connect)
    start = threading.Barrier(16)
    answers: list[int] = []

    def query() -> None:
        start.wait()
        answers.append(store._duck().execute("SELECT 41 + 1").fetchone()[0])

    threads = [threading.Thread(target=query) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [42] * 16
    assert len(made) == 1
    store.close()
    assert store._duckdb is None

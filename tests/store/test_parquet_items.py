"""A scored run's items as one zstd Parquet file under the artifacts root, read with DuckDB
(issue 27 item 5): the file, the SQL rows of a run stored before migrated into the same file
(0007, nothing lost), the run-to-run join, the Parquet export pandas reads, bounded memory,
delete."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from runs_data import json_folder, upgrade_to
from sqlalchemy import create_engine, inspect, text
from typer.testing import CliRunner

from fieldcheck import core
from fieldcheck._cli.main import app
from fieldcheck._util.jsonio import dumps_bytes
from fieldcheck.runs import iter_export, record_folder, write_parquet
from fieldcheck.store import (
    ARTIFACTS_ENV,
    DATABASE_ENV,
    ItemColumns,
    ItemsMissing,
    Pairing,
    RunRecorder,
    Store,
    artifacts_root,
)


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
    assert not {"run_items", "run_item_tags"} & set(inspect(store.engine).get_table_names())
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


def test_a_run_whose_items_are_under_another_root_is_not_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``runs delete`` under another artifacts root refuses a run that wrote items (finished or
    interrupted) as ``runs show`` does, one line naming FIELDCHECK_ARTIFACTS, nothing deleted (a
    tester's finding: "deleted run", its items file left with nothing referring to it); a run
    that wrote no item is deleted, as one whose file is gone from its folder under the root."""
    monkeypatch.setenv(ARTIFACTS_ENV, str(tmp_path / "team"))
    store = Store(f"sqlite:///{tmp_path}/s.sqlite3")
    made = []
    for n in range(2):
        recorder = _open(store, tmp_path)
        recorder.add_prepared([_item(1)])
        made.append(recorder.finish(metrics=None) if n == 0 else recorder)
    made[1].abort()
    finished, interrupted = made[0], made[1].run
    empty = _open(store, tmp_path)
    empty.abort()
    store.close()
    files = [tmp_path / "team" / "runs" / r.id / "items.parquet" for r in (finished, interrupted)]
    assert all(f.is_file() for f in files)
    monkeypatch.setenv(ARTIFACTS_ENV, str(tmp_path / "elsewhere"))
    store = Store(f"sqlite:///{tmp_path}/s.sqlite3")
    with pytest.raises(ItemsMissing, match=f"items of run {interrupted.id} are not at .*elsewhere"):
        store.delete_run(interrupted.id)
    result = CliRunner().invoke(app, ["runs", "delete", finished.id], env={DATABASE_ENV: store.url})
    assert result.exit_code == 2 and result.stdout == "", result.stdout
    assert result.stderr.startswith(
        f"error: {ARTIFACTS_ENV}: the items of run {finished.id} are not at "
        f"{tmp_path / 'elsewhere' / 'runs' / finished.id / 'items.parquet'} (removed, or the run "
        f"was stored with another {ARTIFACTS_ENV}: set it as then)"
    )
    assert store.delete_run(empty.id) and store.get_run(empty.id) is None  # no item written
    assert all(f.is_file() for f in files) and all(store.get_run(r.id) for r in made[:1])
    assert store.get_run(interrupted.id) is not None
    store.close()
    monkeypatch.setenv(ARTIFACTS_ENV, str(tmp_path / "team"))
    store = Store(f"sqlite:///{tmp_path}/s.sqlite3")
    files[1].unlink()  # gone from its folder under the run's root: deleted all the same
    assert store.delete_run(finished.id) and store.delete_run(interrupted.id)
    assert not any(f.parent.exists() for f in files) and store.list_runs() == []
    store.close()


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


RUN_SQL = (
    "INSERT INTO runs (id, run_key, system, task, dataset, dataset_sha256, model, endpoint, "
    "settings, signature, status, started_at, finished_at, n_items, n_done, n_errors, kind) "
    "VALUES (:id, :id, 'json', 'score', 'd', '', '', '', '{}', 's', 'finished', :at, :at, :n, "
    ":n, 0, :kind)"
)
ITEM_COLUMNS = (
    "run_id, item_key, seq, error_type, failed, model, turn, result, calls, cached_calls, "
    "latency_s, call_log, finished_at"
)
ITEM_SQL = (
    f"INSERT INTO {{table}} ({ITEM_COLUMNS}) VALUES (:run, :key, :seq, :error, :failed, :model, "
    ":turn, :result, :calls, 0, :latency, :log, :at)"
)
AT = datetime(2026, 11, 1, tzinfo=UTC)


def _old_store(url: str, items: list[tuple[ItemColumns, bytes]]) -> dict[str, Any]:
    """A store at 0006 as fieldcheck before issue 27 left it: scored run ``old`` whose
    ``items`` are SQL rows with their tags, and model run ``m`` (its calls only) whose rows 0006
    copied into the journal. The rows inserted, by table."""
    upgrade_to(url, "0006")
    rows: dict[str, Any] = {"run_items": [], "run_item_tags": [], "run_journal": []}
    for seq, (c, result) in enumerate(items):
        values = {"run": "old", "key": c.key, "seq": seq, "error": c.error_type}
        values |= {"failed": c.failed, "model": c.model, "turn": c.turn}
        values |= {"result": result.decode(), "calls": 0, "latency": 0.0, "log": None, "at": AT}
        rows["run_items"].append(values)  # a scored item made no call (insert_scored_rows)
        rows["run_item_tags"] += [
            {"run": "old", "name": n, "seq": seq, "failed": f} for n, f in c.tags.items()
        ]
    for seq, key in enumerate(("q1", "q2")):
        log = json.dumps([{"text": f"reply {key}", "attempts": 1, "latency_s": 0.25}])
        values = {"run": "m", "key": key, "seq": seq, "error": None, "failed": None}
        values |= {"model": None, "turn": None, "result": json.dumps({"output": key})}
        values |= {"calls": 1, "latency": 0.25, "log": log, "at": AT}
        rows["run_items"].append(values)
        rows["run_journal"].append(values)
    engine = create_engine(url)
    with engine.begin() as c:
        c.execute(text(RUN_SQL), {"id": "old", "at": AT, "n": len(items), "kind": "score"})
        c.execute(text(RUN_SQL), {"id": "m", "at": AT, "n": 2, "kind": "model-run"})
        c.execute(text(ITEM_SQL.format(table="run_items")), rows["run_items"])
        journal = ITEM_SQL.format(table="run_journal").replace(", failed, model, turn", "")
        c.execute(text(journal.replace(":failed, :model, :turn, ", "")), rows["run_journal"])
        tags = "INSERT INTO run_item_tags VALUES (:run, :name, :seq, :failed)"
        c.execute(text(tags), rows["run_item_tags"])
    engine.dispose()
    return rows


@pytest.fixture(params=["sqlite", "postgresql"])
def old_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database on each backend, for a store that an older fieldcheck made."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'old.sqlite3'}"
    return str(request.getfixturevalue("pg_url"))


def test_migration_0007_makes_an_old_runs_sql_rows_its_items_file(
    old_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """10,000 items stored as SQL rows before issue 27, upgraded: the run's items file holds
    each item's JSON as it was, and every filter gives the pages, counts and tags of the same
    items recorded now (the counts those the items were made with); ``runs show`` and the
    export give them; the model run keeps its calls in the journal; the tables are gone."""
    monkeypatch.setenv(ARTIFACTS_ENV, str(tmp_path / "team"))  # PostgreSQL: the shared root
    items = [_item(i) for i in range(10_000)]
    rows = _old_store(old_url, items)
    store = Store(old_url)
    path = store.items_file("old")
    assert path == tmp_path / "team" / "runs" / "old" / "items.parquet"
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    assert table.column("result").to_pylist() == [c[1].decode() for c in items]  # same bytes
    assert table.column("seq").to_pylist() == list(range(10_000))
    tagged = [(n, q) for q, names in enumerate(table.column("tags").to_pylist()) for n in names]
    assert len(tagged) == len(rows["run_item_tags"]) == 11_000  # odd: city, name; 1 mod 10: zip
    recorder = _open(store, tmp_path)
    for start in range(0, len(items), 1_500):
        recorder.add_prepared(items[start : start + 1_500])
    new = recorder.finish(metrics=None).id

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
        assert got == shown("old", **filters), filters
        count = store.count_items(new, **filters)
        assert count == store.count_items("old", **filters) == len(got), filters
    assert store.count_items("old") == 10_000
    assert store.count_items("old", failed=True) == sum(
        1 for i in range(10_000) if i % 7 and i % 3 == 0
    )
    assert store.count_items("old", tag="city", failed=False) == sum(
        1 for i in range(10_000) if i % 2 and i % 3
    )
    assert store.count_items("old", tag="zip", failed=True) == 1_000  # i % 10 == 1
    assert store.count_not_scored("old") == 1_429  # 0, 7, ..., 9996
    assert store.item_tags("old") == ["city", "name", "zip"]
    [first] = store.page_items("old", after=4_998, limit=1)
    assert (first.key, first.seq, first.result["big"]) == ("k04999", 4_999, 2**70 + 4_999)
    assert first.result["text"] == "é" * 3  # UTF-8 kept
    assert [i.key for i in store.iter_items("old")] == [c.key for c, _ in items]
    # the model run: its items as they were, its calls in the journal
    assert [i.result for i in store.items("m")] == [{"output": "q1"}, {"output": "q2"}]
    [q1, _] = store.journal("m")
    assert (q1.calls, q1.latency_s, q1.call_log[0]["text"]) == (1, 0.25, "reply q1")
    assert not store.items_in_flight("m")
    with store.engine.connect() as c:
        assert c.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0009"
    assert not {"run_items", "run_item_tags"} & set(inspect(store.engine).get_table_names())
    env = {DATABASE_ENV: old_url}
    result = CliRunner().invoke(app, ["runs", "show", "old", "--items", "2", "--json"], env=env)
    shown_run = json.loads(result.stdout)
    assert (shown_run["failed_items"], shown_run["not_scored_items"]) == (
        2_857,
        1_429,
    )  # 3,334 multiples of 3 less 477 of 21
    assert [i["key"] for i in shown_run["items"]] == ["k00000", "k00001"]
    assert shown_run["items"][1]["result"] == json.loads(items[1][1])
    out = tmp_path / "old.parquet"
    args = ["runs", "export", "old", "--format", "parquet", "--out", str(out)]
    assert CliRunner().invoke(app, args, env=env).exit_code == 0
    exported = pq.read_table(out)
    assert exported.column("key").to_pylist() == [c.key for c, _ in items]
    assert exported.column("failed").to_pylist() == [c.failed for c, _ in items]
    store.close()


@pytest.mark.parametrize("cause", ["root is a file", "calls not in the journal", "no root"])
def test_a_migration_that_cannot_convert_leaves_the_store_at_0006(
    cause: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """An artifacts root that cannot be written, an item whose calls the journal lacks, or a
    PostgreSQL store with no root set: opening the store fails saying why, the database stays
    at 0006 with every row and no items file is left; once the cause is gone it upgrades."""
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    if cause == "no root":
        url = str(request.getfixturevalue("pg_url"))
    root = tmp_path / "root"
    _old_store(url, [_item(i) for i in range(30)])
    engine = create_engine(url)
    if cause == "root is a file":
        root.write_text("not a folder")
    elif cause == "calls not in the journal":
        with engine.begin() as c:
            c.execute(text("DELETE FROM run_journal WHERE item_key = 'q2'"))
    said = {
        "root is a file": "File exists|Not a directory",
        "calls not in the journal": "runs m have items whose calls the journal does not hold: its "
        "items stay SQL rows until they can be converted; the store is left as it was, at "
        "revision 0006$",
        "no root": "set FIELDCHECK_ARTIFACTS to this database's shared artifacts root",
    }[cause]
    with pytest.raises((OSError, RuntimeError), match=said):
        Store(url, artifacts=None if cause == "no root" else root)
    with engine.connect() as c:
        assert c.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0006"
        assert c.execute(text("SELECT count(*) FROM run_items")).scalar() == 32
        assert c.execute(text("SELECT count(*) FROM run_item_tags")).scalar() == 33
    assert not (root / "runs").exists()
    if cause == "calls not in the journal":  # the CLI: one line, exit 2
        result = CliRunner().invoke(app, ["runs", "list"], env={DATABASE_ENV: url})
        assert result.exit_code == 2 and "cannot open the store: runs m have" in result.stderr
        with engine.begin() as c:
            c.execute(
                text(
                    "INSERT INTO run_journal SELECT run_id, item_key, seq, error_type, "
                    "calls, cached_calls, latency_s, result, call_log, finished_at FROM "
                    "run_items WHERE item_key = 'q2'"
                )
            )
    if cause == "root is a file":
        root.unlink()
    engine.dispose()
    store = Store(url, artifacts=root)
    assert store.count_items("old") == 30 and store.count_items("old", tag="zip") == 3
    store.close()


def test_a_store_that_cannot_be_upgraded_names_the_revision_it_stays_at(tmp_path: Path) -> None:
    """The upgrade is one transaction: a 0005 store that 0007 cannot convert stays at 0005, and
    the line says so, in fieldcheck's words alone (a new-user trial's finding: it said 0006,
    after "RuntimeError:")."""
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    upgrade_to(url, "0005")
    engine = create_engine(url)
    with engine.begin() as c:  # a scored item with a call no journal holds: not convertible
        c.execute(text(RUN_SQL), {"id": "s", "at": AT, "n": 1, "kind": "scored"})
        values = {"run": "s", "key": "k", "seq": 0, "error": None, "failed": False}
        values |= {"model": None, "turn": None, "result": "{}", "calls": 1, "latency": 0.5}
        c.execute(text(ITEM_SQL.format(table="run_items")), {**values, "log": None, "at": AT})
    result = CliRunner().invoke(app, ["runs", "list"], env={DATABASE_ENV: url})
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.startswith(
        f"error: {DATABASE_ENV}: cannot open the store: runs s have items whose calls the "
        "journal does not hold: its items stay SQL rows until they can be converted; the store "
        "is left as it was, at revision 0005 ("
    ), result.stderr
    with engine.connect() as c:
        assert c.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0005"
    engine.dispose()


def test_two_runs_are_paired_on_their_key(store: Store, tmp_path: Path) -> None:
    """Each key's verdict in one run against the other's (a full outer join in DuckDB): the keys
    right in one and wrong or not scored in the other, or missing from one, are the ones listed."""

    def run(verdicts: dict[str, bool | None]) -> Any:
        recorder = _open(store, tmp_path)
        recorder.add_prepared(
            [(ItemColumns(k, f), orjson.dumps({"k": k})) for k, f in verdicts.items()]
        )
        return recorder.finish(metrics={"means": {}})

    a = run({"a": True, "b": True, "c": False, "d": False, "e": None, "gone": False})
    b = run({"a": True, "b": False, "c": True, "d": False, "e": False, "new": True})
    found = store.item_matrix([(a.id, None), (b.id, None)], Pairing(), differ=True)
    assert found is not None
    items, differing, rows = found
    assert (items, differing) == (7, 5)  # a and d agree
    assert rows == [
        ("b", "b", False, None, "b", True, None),  # failed -> passed
        ("c", "c", True, None, "c", False, None),  # passed -> failed
        ("e", "e", None, None, "e", True, None),  # not scored -> passed
        ("gone", "gone", True, None, None, None, None),  # passed -> missing
        ("new", None, None, None, "new", False, None),  # missing -> failed
    ]
    _, _, every = store.item_matrix([(a.id, None), (b.id, None)], Pairing(), differ=False) or ()
    assert [r[0] for r in every] == ["a", "b", "c", "d", "e", "gone", "new"]


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
    result = CliRunner().invoke(app, ["runs", "export", run.id, "--format", "parquet"])
    assert result.exit_code == 2 and "give --out FILE" in result.stderr
    store.close()


def test_every_export_file_is_readable_as_the_umask_allows(tmp_path: Path) -> None:
    """``runs export --out`` wrote CSV and JSONL files readable by their owner alone (0600, the
    temporary file's mode) and Parquet ones by all (0644): a team's export to a shared folder
    could not be read (a PostgreSQL trial's finding). Each is made as ``open`` makes a file."""
    import os

    store = Store()
    run = record_folder(store, json_folder(tmp_path)[0], model="m")
    mask = os.umask(0o022)
    try:
        modes = {}
        for fmt in ("csv", "jsonl", "parquet"):
            out = tmp_path / f"items.{fmt}"
            result = CliRunner().invoke(
                app, ["runs", "export", run.id, "--format", fmt, "--out", str(out)]
            )
            assert result.exit_code == 0, result.output
            modes[fmt] = out.stat().st_mode & 0o777
    finally:
        os.umask(mask)
    store.close()
    assert modes == {"csv": 0o644, "jsonl": 0o644, "parquet": 0o644}


def test_every_export_names_a_one_model_runs_model_on_each_item(tmp_path: Path) -> None:
    """A json model run's items carry no model of their own: CSV, JSONL and Parquet give each
    the run's, so exports of several runs put together still say whose item is whose."""
    import pandas as pd

    store = Store()
    run = record_folder(store, json_folder(tmp_path)[0], model="gpt-x'; --")
    assert {i.model for i in store.items(run.id)} == {None}
    rows = b"".join(iter_export(store, run.id, "csv")).decode().splitlines()
    assert [r.split(",")[3] for r in rows] == ["model", *["gpt-x'; --"] * 3]
    lines = b"".join(iter_export(store, run.id, "jsonl")).splitlines()
    assert [orjson.loads(line)["model"] for line in lines] == ["gpt-x'; --"] * 3
    write_parquet(store, run.id, tmp_path / "items.parquet")
    assert pd.read_parquet(tmp_path / "items.parquet")["model"].tolist() == ["gpt-x'; --"] * 3
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
        answers.append(store._query(lambda con: con.execute("SELECT 41 + 1").fetchone()[0]))

    threads = [threading.Thread(target=query) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [42] * 16
    assert len(made) == 1
    store.close()
    assert store._duckdb is None


OPEN_SCRIPT = """
import sys
from fieldcheck.store import Store
store = Store(sys.argv[1])
print(store.count_items("old"), store.count_items("old", failed=True))
"""


def test_processes_opening_an_old_store_at_once_all_open_it(tmp_path: Path) -> None:
    """Three commands started together on a store at 0006: one converts the old run and drops
    the rows (one transaction) while the others wait for it; they find it upgraded and open it
    too, and the run's items are all there."""
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    _old_store(url, [_item(i) for i in range(3_000)])
    started = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_SCRIPT, url], stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    answers = [p.communicate(timeout=240)[0].split() for p in started]
    assert [p.returncode for p in started] == [0, 0, 0]
    assert answers == [["3000", "857"]] * 3  # 1,000 multiples of 3 less 143 of 21
    folder = tmp_path / "artifacts" / "runs" / "old"
    assert sorted(p.name for p in folder.iterdir()) == ["items.parquet"]


def test_a_store_opens_while_another_process_writes_its_old_rollback_journal(
    tmp_path: Path,
) -> None:
    """Leaving an old store's rollback journal for WAL takes a lock SQLite never waits for: a
    command opening the store while another writes it now waits for the writer, where it
    failed at once with "database is locked" (CI saw it in the three processes above)."""
    path = tmp_path / "old.sqlite3"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("CREATE TABLE t (x)")
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO t VALUES (1)")
    committing = threading.Event()

    def commit() -> None:
        committing.set()  # before COMMIT: a store that opens only after it finds this set
        writer.execute("COMMIT")

    threading.Timer(0.5, commit).start()
    store = Store(f"sqlite:///{path}")
    assert committing.is_set()  # it waited for the writer (it failed at once before)
    assert store.cache_count() == 0
    store.close()
    writer.close()
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_export_parquet_of_no_such_run_is_a_key_error_and_writes_nothing(tmp_path: Path) -> None:
    """``Store().export_parquet('nope', path)`` wrote an empty Parquet over ``path`` (a trial's
    finding); it raises KeyError as ``runs.write_parquet`` does, and leaves the file alone."""
    store = Store(f"sqlite:///{tmp_path}/s.sqlite3")
    out = tmp_path / "x.parquet"
    out.write_text("mine\n")
    with pytest.raises(KeyError, match="nope"):
        store.export_parquet("nope", out)
    assert out.read_text() == "mine\n"


def test_the_stores_duckdb_keeps_no_items_file_in_memory_and_gives_freed_memory_back(
    tmp_path: Path,
) -> None:
    """A server that showed one item of 40 MB (its page, its JSON, the export) held ~0.5 GB
    more for good (VmRSS 111 MB at start, 501 MB after; a new-user trial's finding): the
    store's one DuckDB connection kept its external file cache and its allocator's freed
    memory. Its connection now caches no file and flushes its allocator (in the background,
    and after any query past 8 MB); with them the same pages leave it at 215 MB."""
    store = Store(f"sqlite:///{tmp_path / 'runs.sqlite3'}")
    try:
        settings = dict(
            store._query(
                lambda con: con.execute(
                    "SELECT name, value FROM duckdb_settings() WHERE name IN "
                    "('enable_external_file_cache', 'allocator_flush_threshold', "
                    "'allocator_background_threads')"
                ).fetchall()
            )
        )
    finally:
        store.close()
    assert settings == {
        "enable_external_file_cache": "false",
        "allocator_flush_threshold": "8MB",
        "allocator_background_threads": "true",
    }

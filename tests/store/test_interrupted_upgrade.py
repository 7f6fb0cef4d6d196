"""A store's creation or upgrade cut by Ctrl-C or a kill is all or nothing, on both backends:
pysqlite committed each CREATE or ALTER by itself, so a Ctrl-C while ``runs list`` created a
store left its tables with no revision, and every later command failed with "table runs already
exists" (a new-user trial's finding). The interruption comes at a chosen statement: the command
signals itself just after running it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from runs_data import upgrade_to
from sqlalchemy import create_engine, inspect, text

from fieldcheck.store import DATABASE_ENV, Store

# ``fieldcheck runs list``, signalled (argv[2]) just after a statement containing argv[1] ran
INTERRUPTED = """
import os, sys
from sqlalchemy import Engine, event
from fieldcheck._cli.entry import main

CUT, SIGNAL = sys.argv[1], int(sys.argv[2])

def _cut(conn, cursor, statement, *args):
    if CUT in statement:
        os.kill(os.getpid(), SIGNAL)

event.listen(Engine, "after_cursor_execute", _cut)
sys.argv = ["fieldcheck", "runs", "list"]
main()
"""


def _url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.sqlite3'}"
    return str(request.getfixturevalue("pg_url"))


def _runs_list(url: str, cut: str, sig: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, DATABASE_ENV: url, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-c", INTERRUPTED, cut, str(int(sig))],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _schema(url: str) -> tuple[str | None, dict[str, list[str]]]:
    """The database's revision and each table's columns."""
    engine = create_engine(url)
    with engine.connect() as c:
        found = inspect(c)
        tables = {
            t: sorted(col["name"] for col in found.get_columns(t)) for t in found.get_table_names()
        }
        version = None
        if "alembic_version" in tables:
            version = c.execute(text("SELECT version_num FROM alembic_version")).scalar()
    engine.dispose()
    return version, tables


def _store_and_resume(url: str) -> None:
    """A model run stored, interrupted with one item, then resumed with that item."""
    opened = {
        "system": "json",
        "task": "run",
        "dataset": "d",
        "dataset_sha256": "x",
        "model": "m",
        "endpoint": "e",
        "settings": {},
        "signature": "",
        "n_items": 2,
    }
    store = Store(url)
    run, resumed = store.open_run(**opened)
    assert not resumed
    store.save_items([{"run_id": run.id, "key": "a", "seq": 0, "result": {"v": 1}}])
    store.set_status(run.id, "interrupted")
    store.close()
    store = Store(url)
    again, resumed = store.open_run(**opened)
    assert (again.id, resumed) == (run.id, True)
    assert [(i.key, i.result) for i in store.journal(run.id)] == [("a", {"v": 1})]
    store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_a_store_whose_creation_was_cut_opens_on_the_next_command(
    backend: str, sig: signal.Signals, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = _url(backend, tmp_path, request)
    cut = _runs_list(url, "CREATE TABLE response_cache", sig)  # runs and run_items made
    assert cut.returncode == (-9 if sig == signal.SIGKILL else 130), cut.stderr
    version, tables = _schema(url)
    assert (version, set(tables) - {"alembic_version"}) == (None, set())  # nothing kept
    after = _runs_list(url, "no such statement", sig)
    assert (after.returncode, after.stderr) == (0, "")
    assert _schema(url)[0] == "0009"
    _store_and_resume(url)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_an_upgrade_cut_half_way_leaves_the_old_store_and_upgrades_next_time(
    backend: str, sig: signal.Signals, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A store at 0005 cut in 0008 (0006 and 0007 run, 0006's first statements DDL): the store
    is still at 0005 as it was, then the next command upgrades it and keeps its run."""
    url = _url(backend, tmp_path, request)
    upgrade_to(url, "0005")
    engine = create_engine(url)
    with engine.begin() as c:
        c.execute(
            text(
                "INSERT INTO runs (id, run_key, system, task, dataset, dataset_sha256, model, "
                "endpoint, settings, signature, status, started_at) VALUES ('r1', 'k', 'json', "
                "'run', 'd', 's', 'm', 'e', '{}', 'sig', 'finished', '2026-11-01 00:00:00')"
            )
        )
    engine.dispose()
    before = _schema(url)
    assert before[0] == "0005" and "run_journal" not in before[1]
    cut = _runs_list(url, "ADD COLUMN headline", sig)
    assert cut.returncode == (-9 if sig == signal.SIGKILL else 130), cut.stderr
    assert _schema(url) == before
    after = _runs_list(url, "no such statement", sig)
    assert after.returncode == 0 and after.stderr == "" and "r1" in after.stdout
    assert _schema(url)[0] == "0009"
    _store_and_resume(url)


def test_a_store_left_half_made_by_an_older_fieldcheck_says_what_it_is_and_what_to_do(
    tmp_path: Path,
) -> None:
    """Tables and an empty ``alembic_version`` (what a cut creation left before creation was one
    transaction): the usage line says so, counts the runs it holds and how to get a new store,
    not 'table runs already exists' (a tester's finding)."""
    url = f"sqlite:///{tmp_path / 'runs.sqlite3'}"
    Store(url).engine.dispose()
    engine = create_engine(url)
    with engine.begin() as c:
        c.execute(text("DELETE FROM alembic_version"))
    engine.dispose()
    listed = _runs_list(url, "no such statement", signal.SIGINT)
    assert listed.returncode == 2
    assert listed.stderr.endswith(
        f"cannot open the store: {url} has tables but no schema version (an older "
        "fieldcheck was stopped making it), 0 run(s) in it: move it aside for a new store (see "
        "'fieldcheck runs list --help')\n"
    ), listed.stderr

"""``runs import`` stores a run once: however many processes import a folder at the same time,
and whatever the copy of a stored folder is called (a tester's findings: 3 runs of one folder
imported at once; a renamed copy stored again)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from runs_data import ROOT, numeric_folder
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck.store import Store

# each process imports fieldcheck first, then waits for the go file: the imports overlap
_WAITING = """
import os, sys, time
from fieldcheck._cli.entry import main
while not os.path.exists(sys.argv[1]):
    time.sleep(0.005)
sys.argv = ["fieldcheck", "runs", "import", sys.argv[2]]
main()
"""


def runs(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["runs", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_folder_imported_by_three_processes_at_once_is_stored_once(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = numeric_folder(tmp_path)
    url = (
        f"sqlite:///{tmp_path / 'team.sqlite3'}"
        if backend == "sqlite"
        else str(request.getfixturevalue("pg_url"))
    )
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", url)
    monkeypatch.setenv("FIELDCHECK_ARTIFACTS", str(tmp_path / "artifacts"))
    Store(url).close()  # migrated before the race: the race is the import's
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WAITING, str(go), str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=os.environ.copy(),
        )
        for _ in range(3)
    ]
    go.touch()
    done = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in procs]  # type: ignore[union-attr]
    listed = Store(url).list_runs()
    assert len(listed) == 1, ([(r.id, r.status, r.out_dir) for r in listed], done)
    [run] = listed
    assert run.n_items == 51 and run.status == "finished"
    assert sorted(code for code, _, _ in done) == [0, 2, 2], done
    for code, _, stderr in done:
        if code == 2:
            assert stderr.count("\n") == 1 and f"already stored as run {run.id}" in stderr


def test_a_copy_of_a_stored_folder_is_refused_whatever_its_name_or_run_json(
    tmp_path: Path,
) -> None:
    """A renamed copy names the stored run in its run.json; a copy without run.json, or whose
    run.json lists no run, is the same run by its system, model and summary (statistics.json):
    each is refused naming the run, and the store keeps one."""
    out = tmp_path / "scored"  # stored by numeric score itself: run.json lists its run
    examples = ROOT / "examples/numeric"
    args = ["numeric", "score", "--data", str(examples / "data.json"), "--out", str(out)]
    args += ["--predictions", str(examples / "predictions_model_a.jsonl"), "--bootstrap", "50"]
    assert CliRunner().invoke(app, args).exit_code == 0
    [stored] = Store().list_runs()
    assert orjson.loads((out / "run.json").read_bytes())["runs"] == [stored.id]
    renamed = tmp_path / "share" / "renamed"
    shutil.copytree(out, renamed)
    code, stdout, stderr = runs("import", str(renamed))
    assert (code, stdout) == (2, "") and f"already stored as run {stored.id}" in stderr

    bare = tmp_path / "share" / "bare"  # no run.json: its first import stores it
    shutil.copytree(out, bare)
    (bare / "run.json").unlink()
    code, stdout, _ = runs("import", str(bare), "--model", "a", "--json")
    assert code == 0
    first = orjson.loads(stdout)["id"]
    emptied = tmp_path / "share" / "emptied"  # run.json with "runs": []
    shutil.copytree(bare, emptied)
    info = orjson.loads((out / "run.json").read_bytes())
    (emptied / "run.json").write_bytes(orjson.dumps({**info, "runs": []}))
    for copy in (tmp_path / "share" / "bare", emptied):
        code, stdout, stderr = runs("import", str(copy), "--model", "a")
        assert (code, stdout) == (2, "") and f"already stored as run {first}" in stderr
    assert sorted(r.id for r in Store().list_runs()) == sorted([stored.id, first])


def test_two_stores_beside_each_other_import_a_folder_each_under_its_own_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two SQLite stores in one folder share its ``artifacts/``: each import of one folder is a
    run of its own id, so deleting it in one store leaves the other's items (a new-user trial's
    finding: both got one id, the second's items stayed a ``.part`` and the delete removed
    them); the folder's run.json's run is the link (``runs show`` of it finds the import)."""
    out = numeric_folder(tmp_path)
    origin = "0a1b2c3d4e5f"
    info = orjson.loads((out / "run.json").read_bytes())
    (out / "run.json").write_bytes(orjson.dumps({**info, "runs": [origin]}))
    (tmp_path / "stores").mkdir()
    stores = [f"sqlite:///{tmp_path / 'stores' / name}" for name in ("one.db", "two.db")]
    ids = []
    for url in stores:
        monkeypatch.setenv("FIELDCHECK_DATABASE_URL", url)
        code, stdout, _ = runs("import", str(out), "--json")
        assert code == 0
        ids.append(orjson.loads(stdout)["id"])
        assert runs("show", origin, "--json")[1] == runs("show", ids[-1], "--json")[1]
    assert ids[0] != ids[1]
    folders = tmp_path / "stores" / "artifacts" / "runs"
    assert sorted(p.relative_to(folders).as_posix() for p in folders.rglob("*")) == sorted(
        [*ids, *(f"{i}/items.parquet" for i in ids)]
    )
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", stores[0])
    assert runs("delete", ids[0])[0] == 0
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", stores[1])
    code, stdout, _ = runs("export", ids[1], "--format", "jsonl")
    assert code == 0 and len(stdout.splitlines()) == 51

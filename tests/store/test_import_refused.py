"""``runs import`` of a folder it cannot read whole is one ``error:`` line naming the file (and
line) or the folder, exit 2, and stores nothing: no run, not even a failed one of 0 items (a
tester's findings: a half-written turns.csv stored as complete; tracebacks)."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
from runs_data import json_folder, numeric_folder
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck.store import Store


def refused(folder: Path) -> str:
    """The one line ``runs import folder`` wrote, once it exited 2 and stored nothing."""
    result = CliRunner().invoke(app, ["runs", "import", str(folder)])
    assert (result.exit_code, result.stdout) == (2, ""), result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert Store().list_runs() == []
    return result.stderr


def test_a_numeric_folder_whose_turns_csv_is_cut_is_refused(tmp_path: Path) -> None:
    out = numeric_folder(tmp_path)
    half = tmp_path / "half"
    shutil.copytree(out, half)
    data = (half / "turns.csv").read_bytes()
    (half / "turns.csv").write_bytes(data[: len(data) // 2])
    line = data[: len(data) // 2].count(b"\n") + 1
    assert f"{half / 'turns.csv'}:{line}: cut mid-line" in refused(half)

    rows = tmp_path / "rows"  # cut at a row's end: 25 turns of the 51 statistics.json counts
    shutil.copytree(out, rows)
    lines = (out / "turns.csv").read_bytes().splitlines(keepends=True)
    (rows / "turns.csv").write_bytes(b"".join(lines[:26]))
    stderr = refused(rows)
    assert f"{rows / 'turns.csv'}: 25 turns, and its statistics.json counts 51" in stderr
    assert CliRunner().invoke(app, ["runs", "import", str(out)]).exit_code == 0  # whole: stored


def test_a_json_folder_whose_records_are_cut_or_not_json_is_refused(tmp_path: Path) -> None:
    out, _ = json_folder(tmp_path)
    data = (out / "records.jsonl").read_bytes()
    lines = data.splitlines(keepends=True)
    assert len(lines) == 3
    half = tmp_path / "half"
    shutil.copytree(out, half)
    (half / "records.jsonl").write_bytes(b"".join(lines[:2]) + lines[2][:9])
    assert f"{half / 'records.jsonl'}:3: cut mid-line" in refused(half)

    edited = tmp_path / "edited"  # a line not JSON, then whole ones: was a traceback
    shutil.copytree(out, edited)
    (edited / "records.jsonl").write_bytes(lines[0] + lines[1][:9] + b"\n" + lines[2])
    assert f"{edited / 'records.jsonl'}:2: not JSON (a half-written" in refused(edited)


def test_a_folder_whose_run_json_names_another_system_is_refused(tmp_path: Path) -> None:
    out, _ = json_folder(tmp_path)
    info = orjson.loads((out / "run.json").read_bytes())
    (out / "run.json").write_bytes(orjson.dumps({**info, "system": "numeric"}))
    assert f"{out}: not a numeric run, as its run.json says (no statistics.json)" in refused(out)

"""Issue 27, run folders that are never cleaned (reports/_folder.py, docs/formats.md "Output
folders"): ``--out`` must be new or empty, a run writes ``DIR.fieldcheck-partial`` and renames it
into place when complete, its run.json says what wrote it, an unfinished run is continued by the
same command, and a refused ``--out`` is left exactly as it was."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck._util.errors import InputError
from fieldcheck.reports import PARTIAL, FolderError, RunFolder
from fieldcheck.runs import system_of


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "300"})


def _batch(tmp_path: Path, n: int = 3) -> Path:
    path = tmp_path / "d.jsonl"
    rows = [{"id": i, "ground_truth": {"a": i}, "output": {"a": i}} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _state(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every entry under ``root`` (links not followed): its bytes (a link: its target) and
    mtime, to show nothing was touched."""
    found = {}
    for top, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(top) / name
            info = path.lstat()
            if path.is_symlink():
                content = os.readlink(path).encode()
            elif path.is_dir():
                content = b"<dir>"
            else:
                content = path.read_bytes()
            found[str(path.relative_to(root))] = (content, info.st_mtime_ns)
    return found


def test_an_out_holding_files_is_refused_and_nothing_is_touched(tmp_path: Path) -> None:
    data = _batch(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text("mine\n")
    (out / "notes").mkdir()
    (out / "notes" / "a.txt").write_text("keep\n")
    before = _state(tmp_path)
    result = _invoke("json", "batch", str(data), "--out", str(out))
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"error: --out: {out} holds files (notes, summary.json); give a new or empty folder "
        "(see 'fieldcheck json batch --help')"
    )
    assert _state(tmp_path) == before  # contents, mtimes, and no partial folder beside it


def test_an_older_versions_unfinished_folder_is_refused_saying_what_it_is_and_what_to_do(
    tmp_path: Path,
) -> None:
    """A folder an older fieldcheck left unfinished (written in place, its manifest saying
    ``complete: false``) cannot be continued: the line says so and to give a new --out, not
    only that it holds a file (a new-user trial's finding, the command the old version printed
    to resume was refused so); a complete one is a folder holding files, as any."""
    data = _batch(tmp_path)
    out = tmp_path / "jr3"
    out.mkdir()
    header = {"fieldcheck": "output folder manifest", "complete": False, "command": "json run"}
    (out / ".fieldcheck-manifest.jsonl").write_text(json.dumps(header) + "\n{}\n")
    before = _state(tmp_path)
    result = _invoke("json", "batch", str(data), "--out", str(out))
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip() == (
        f"error: --out: {out} is an unfinished run of `fieldcheck json run` left by an older "
        "fieldcheck (its .fieldcheck-manifest.jsonl), which this version cannot continue in "
        "place: give the same command a new --out (a model run resumes there the run the older "
        "version stored, its finished items not called again) (see 'fieldcheck json batch --help')"
    )
    assert _state(tmp_path) == before
    (out / ".fieldcheck-manifest.jsonl").write_text(json.dumps({**header, "complete": True}))
    result = _invoke("json", "batch", str(data), "--out", str(out))
    assert result.exit_code == 2 and "holds files (.fieldcheck-manifest.jsonl); give a new" in (
        result.stderr
    )


def test_a_link_as_out_is_refused_and_nothing_is_written_through_it(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.symlink_to(elsewhere)
    before = _state(tmp_path)
    result = _invoke("json", "batch", str(_batch(tmp_path)), "--out", str(out))
    assert result.exit_code == 2
    assert f"error: --out: {out} is a link; give a new or empty folder" in result.stderr
    assert list(elsewhere.iterdir()) == []
    assert _state(tmp_path) == {**before, "d.jsonl": _state(tmp_path)["d.jsonl"]}


def test_a_file_as_out_and_an_empty_out_are_usage_errors(tmp_path: Path) -> None:
    data = _batch(tmp_path)
    (tmp_path / "f").write_text("x")
    result = _invoke("json", "batch", str(data), "--out", str(tmp_path / "f"))
    assert (result.exit_code, (tmp_path / "f").read_text()) == (2, "x")
    assert f"{tmp_path / 'f'} is a file, not a directory" in result.stderr
    result = _invoke("json", "batch", str(data), "--out", "")
    assert result.exit_code == 2
    assert "must name a folder" in result.stderr
    assert "--force" not in _invoke("json", "batch", "--help").output


def test_an_empty_out_is_filled_and_run_json_says_what_wrote_it(tmp_path: Path) -> None:
    data = _batch(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    result = _invoke("json", "batch", str(data), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert not Path(str(out) + PARTIAL).exists()
    info = json.loads((out / "run.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    assert info["system"] == "json" and info["command"] == "json batch"
    assert info["complete"] is True
    assert info["inputs"] == [
        {
            "role": "batch",
            "path": str(data),
            "sha256": hashlib.sha256(data.read_bytes()).hexdigest(),
        }
    ]
    assert info["signature"] == summary["signature"]
    assert len(info["runs"]) == 1 and info["runs"][0] in result.output  # the stored run's id
    assert f"files in {out}/" in result.output  # the final place, not the partial folder


def _batch_failing_part_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *options: str
) -> tuple[Path, Path, Path, Any]:
    """``json batch`` whose report cannot be written (a full disk, exit 1): its data, ``out``,
    the partial folder it leaves and the result; the writer works again afterwards."""
    from fieldcheck.jsoneval import _io

    data, out = _batch(tmp_path), tmp_path / "out"
    partial = Path(str(out) + PARTIAL)

    def full_disk(*args: Any) -> Any:
        raise OSError(28, "No space left on device", str(partial / "summary.json"))

    with monkeypatch.context() as patch:
        patch.setattr(_io, "write_batch_report", full_disk)
        result = _invoke("json", "batch", str(data), "--out", str(out), *options)
    return data, out, partial, result


def test_the_folder_appears_only_when_complete_and_a_failed_run_is_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails part-way (exit 1) leaves no ``out``: only the partial folder, whose
    run.json says complete: false; the same command again continues in it and puts it in
    place; at the rename every file is already written."""
    data, out, partial, result = _batch_failing_part_way(tmp_path, monkeypatch)
    assert result.exit_code == 1, result.output
    assert "No space left on device" in result.stderr
    assert not out.exists()
    assert json.loads((partial / "run.json").read_text())["complete"] is False
    assert (partial / "records.jsonl").is_file()

    seen: list[tuple[bool, list[str]]] = []
    real_finish = RunFolder.finish

    def watched(folder: RunFolder) -> None:
        if not folder.prefix:
            seen.append((out.exists(), sorted(p.name for p in partial.iterdir())))
        real_finish(folder)

    monkeypatch.setattr(RunFolder, "finish", watched)
    result = _invoke("json", "batch", str(data), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert seen[0][0] is False and "summary.json" in seen[0][1] and "report.html" in seen[0][1]
    assert not partial.exists()
    assert json.loads((out / "run.json").read_text())["complete"] is True
    assert len((out / "records.jsonl").read_text().splitlines()) == 3


def test_the_unfinished_run_of_another_command_or_inputs_is_refused(tmp_path: Path) -> None:
    data, out = _batch(tmp_path), tmp_path / "out"
    partial = Path(str(out) + PARTIAL)
    partial.mkdir()
    (partial / "run.json").write_text(
        json.dumps({"command": "numeric score", "inputs": [], "complete": False})
    )
    before = _state(tmp_path)
    result = _invoke("json", "batch", str(data), "--out", str(out))
    assert result.exit_code == 2
    assert (
        f"{partial} is an unfinished run of `fieldcheck numeric score` on other inputs"
        in result.stderr
    )
    assert _state(tmp_path) == before and not out.exists()
    (partial / "run.json").write_text("{}")  # not a run of fieldcheck's
    result = _invoke("json", "batch", str(data), "--out", str(out))
    assert result.exit_code == 2
    assert f"{partial} is in the way and is not an unfinished fieldcheck run" in result.stderr


def test_an_unfinished_run_with_other_settings_or_models_is_refused_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Continuing an unfinished folder with other settings (or models) would leave the first
    run's files among the second's (a `numeric score --sample-size 3` kept 418 traces of the
    whole run it took over; a tester's finding): refused, nothing touched; the same settings
    continue it."""
    data, out, partial, result = _batch_failing_part_way(tmp_path, monkeypatch, "--no-store")
    assert result.exit_code == 1 and partial.is_dir(), result.output
    before = _state(tmp_path)
    result = _invoke("json", "batch", str(data), "--out", str(out), "--no-store", "--seed", "7")
    assert result.exit_code == 2
    assert (
        f"{partial} is an unfinished run of `fieldcheck json batch` with other settings (it had "
        "seed=0); run that command again to finish it" in result.stderr
    )
    assert _state(tmp_path) == before and not out.exists()
    kept = json.loads((partial / "run.json").read_text())
    with pytest.raises(FolderError, match=r"of other models \(it had none\)"):
        given = [(e["role"], e["path"]) for e in kept["inputs"]]
        RunFolder.open(out, command="json batch", inputs=given, models=["m"])
    assert json.loads((partial / "run.json").read_text()) == kept
    result = _invoke("json", "batch", str(data), "--out", str(out), "--no-store")
    assert result.exit_code == 0, result.output
    assert json.loads((out / "run.json").read_text())["settings"]["seed"] == 0


def test_without_out_each_run_gets_a_new_folder_under_fieldcheck_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    data = _batch(tmp_path)
    said = []
    for _ in range(2):
        result = _invoke("json", "batch", str(data))
        assert result.exit_code == 0, result.output
        said.append(result.stderr.split("no --out: the outputs go to ", 1)[1].split("\n", 1)[0])
    folders = sorted((tmp_path / "fieldcheck-runs").iterdir())
    assert sorted(said) == [f"fieldcheck-runs/{f.name}" for f in folders] and len(folders) == 2
    for folder in folders:
        assert re.fullmatch(r"json-batch-d-\d{8}T\d{6}Z-[0-9a-f]{4}", folder.name)
        assert json.loads((folder / "run.json").read_text())["complete"] is True


@pytest.mark.parametrize("no_cache", [False, True])
def test_a_ctrl_c_says_what_was_written_and_where_the_unfinished_folder_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_cache: bool
) -> None:
    from fieldcheck import core
    from fieldcheck._cli._common import pipeline_errors

    out = tmp_path / "out"
    folder = RunFolder.open(out, command="json batch")
    folder.expect("a.txt", "b.txt")
    note = core.NO_CACHE_NOTE if no_cache else ""
    with pytest.raises(typer.Exit) as stopped, pipeline_errors(), core.writing(folder, note):
        folder.write_text("a.txt", "1")
        (folder.path / "m").mkdir()
        (folder.path / "m" / "plot.png").write_bytes(b"png")  # as matplotlib writes a plot
        (folder.path / "b.txt").write_text("half")  # expected, begun, not finished
        raise KeyboardInterrupt
    assert stopped.value.exit_code == 130
    tail = ", which calls every model again: --no-cache kept no reply" if no_cache else ""
    # every file the folder holds (run.json and the plot too, not only what went through
    # ``atomic``: the line under-reported), and the expected file not finished, named once
    # (it was among the files written too: a hostile-endpoint trial's finding)
    assert capsys.readouterr().err.strip() == (
        f"interrupted: 3 files (a.txt, m/plot.png, run.json) in {out}{PARTIAL}; not "
        f"finished: b.txt (run.json says complete: false); the same command with --out {out} "
        f"continues it{tail}"
    )
    assert not out.exists()


def test_a_multi_model_folder_has_one_run_json_listing_the_models(tmp_path: Path) -> None:
    out = tmp_path / "out"
    folder = RunFolder.open(out, command="json run", models=["a", "b"])
    for name in ("a", "b"):
        sub = folder.sub(name)
        sub.write_text("run.json", json.dumps({"model": name}))  # the model's own run.json
        sub.note(signature={"system": "json", "m": name}, run_id=f"id-{name}")
    folder.finish()
    info = json.loads((out / "run.json").read_text())
    assert info["models"] == ["a", "b"] and info["runs"] == ["id-a", "id-b"]
    assert info["signatures"] == {
        "a": {"system": "json", "m": "a"},
        "b": {"system": "json", "m": "b"},
    }
    assert json.loads((out / "a" / "run.json").read_text()) == {"model": "a"}


def test_runs_import_reads_the_system_from_run_json(tmp_path: Path) -> None:
    """run.json names the system (not the file names); an unfinished folder is refused; a
    folder of an earlier version, without run.json, is still told by its files."""
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "summary.json").write_text("{}")
    (folder / "records.jsonl").write_text("")
    assert system_of(folder) == "json"  # no run.json: the files tell
    (folder / "run.json").write_text(json.dumps({"system": "numeric", "complete": True}))
    with pytest.raises(InputError, match=r"not a numeric run, as its run\.json says"):
        system_of(folder)  # nor is it read as one (no statistics.json)
    (folder / "statistics.json").write_text("{}")
    assert system_of(folder) == "numeric"  # run.json decides between the files
    (folder / "run.json").write_text(json.dumps({"system": "numeric", "complete": False}))
    with pytest.raises(InputError, match="not complete"):
        system_of(folder)
    data = _batch(tmp_path)
    out = tmp_path / "out"
    assert _invoke("json", "batch", str(data), "--out", str(out), "--no-store").exit_code == 0
    result = _invoke("runs", "import", str(out), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["system"] == "json"


def test_runs_import_of_a_folder_of_several_models_names_each_models_folder(
    tmp_path: Path,
) -> None:
    """``json run`` and ``numeric evaluate`` write a run per model inside their folder: importing
    the folder is one usage line naming the model folders (it was a FileNotFoundError
    traceback, a tester's finding); a model's folder imports."""
    out = tmp_path / "out"
    for name in ("a", "b"):
        assert (
            _invoke(
                "json", "batch", str(_batch(tmp_path)), "--out", str(out / name), "--no-store"
            ).exit_code
            == 0
        )
    info = {"system": "json", "command": "json run", "complete": True, "models": ["a", "b"]}
    (out / "run.json").write_text(json.dumps(info))
    result = _invoke("runs", "import", str(out))
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert f"holds a run per model; import each model's folder: {out / 'a'}, {out / 'b'}" in (
        result.stderr
    )
    assert _invoke("runs", "import", str(out / "a"), "--json").exit_code == 0
    (out / "run.json").unlink()  # a folder written in place (make demo's) names them too
    again = _invoke("runs", "import", str(out))
    assert again.exit_code == 2 and "not an output folder of fieldcheck" in again.stderr
    assert f"; import each run folder in it: {out / 'a'}, {out / 'b'}" in again.stderr


def test_a_ctrl_c_once_the_folder_is_in_place_says_it_is_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C while the command prints, after the folder was put in place, says so (exit
    130), never "before any output was written"."""
    from fieldcheck._cli import json_cmd

    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(json_cmd, "print_summary", interrupted)
    out = tmp_path / "out"
    result = _invoke("json", "batch", str(_batch(tmp_path)), "--out", str(out), "--no-store")
    assert result.exit_code == 130
    assert result.stderr.strip() == f"interrupted once every file was written: {out}"
    assert json.loads((out / "run.json").read_text())["complete"] is True


def test_an_unfinished_folder_another_process_still_writes_is_never_taken_over(
    tmp_path: Path,
) -> None:
    """Two identical commands started at once with the same --out: the second finds the
    first's unfinished folder and is refused while the first runs (a tester's finding: both
    wrote into one folder, one failed); once its writer is gone, the folder is continued."""
    import subprocess

    out = tmp_path / "out"
    first = RunFolder.open(out, command="json batch", inputs=[("batch", tmp_path)])
    info = json.loads((tmp_path / f"out{PARTIAL}" / "run.json").read_text())
    assert info["writer"]["pid"] == os.getpid()
    other = subprocess.Popen(["sleep", "30"])
    try:
        info["writer"]["pid"] = other.pid  # as another process's run would have it
        (tmp_path / f"out{PARTIAL}" / "run.json").write_text(json.dumps(info))
        refused = f"being written by another fieldcheck process \\(pid {other.pid}"
        with pytest.raises(FolderError, match=refused):
            RunFolder.open(out, command="json batch", inputs=[("batch", tmp_path)])
    finally:
        other.kill()
        other.wait()
    again = RunFolder.open(out, command="json batch", inputs=[("batch", tmp_path)])
    assert again.resumed and first.path == again.path


def test_a_file_of_an_open_run_folder_is_named_where_it_will_be_in_a_pool_process_too(
    tmp_path: Path,
) -> None:
    """While a run folder is open, an error in a file written in it names the file in DIR, where
    it is once the folder is in place, in this process and in a pool process started meanwhile
    (numeric reads a model run's predictions.jsonl there); once the folder is gone from the
    process, a partial folder's path is its own again (a user's files are never renamed)."""
    import gc

    from fieldcheck._util.errors import shown_path
    from fieldcheck._util.executor import LocalPool
    from fieldcheck.numeric._predictions import index_predictions

    out = tmp_path / "out"
    folder = RunFolder.open(out, command="numeric evaluate", models=["m"])
    with folder.atomic("predictions.jsonl") as path:
        path.write_text('{"conversation_id": "c", "turn": 0, "answer": 1}\n[1]\n', encoding="utf-8")
    expected = f"{out}/predictions.jsonl:2: a predictions line must be a JSON object (got [1])"
    assert [e.one_line() for e in index_predictions(path).errors] == [expected]
    with LocalPool(1) as pool:
        [pooled] = pool.submit(index_predictions, path) or pool.drain()
    assert [e.one_line() for e in pooled.errors] == [expected]
    assert shown_path(f"{out}{PARTIAL}x/p.jsonl") == f"{out}{PARTIAL}x/p.jsonl"  # another folder
    del folder
    gc.collect()
    assert shown_path(path) == str(path)


def _model_run(system: str, tmp_path: Path, url: str, out: Path) -> list[str]:
    """The command line of a model run of ``system`` at ``url`` into ``out``."""
    if system == "json":
        data = tmp_path / "docs.jsonl"
        rows = [{"id": f"r{i}", "document": f"doc {i}", "ground_truth": {"a": i}} for i in range(5)]
        data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        given = ["json", "run", str(data)]
    elif system == "slots":
        conv, gold = tmp_path / "conv.jsonl", tmp_path / "gold.jsonl"
        turns = [{"role": "user", "content": "I am Ann."}]
        conv.write_text(
            "".join(
                json.dumps({"user": "a", "session": s, "turns": turns}) + "\n" for s in (1, 2, 3)
            )
        )
        slot = {
            "user": "a",
            "session": 1,
            "topic": "basic_info",
            "field": "name",
            "values": ["Ann"],
        }
        gold.write_text(json.dumps(slot) + "\n")
        given = ["slots", "run", "--conversations", str(conv), "--gold", str(gold)]
    else:
        data = Path(__file__).parents[1] / "examples" / "numeric" / "data.json"
        given = ["numeric", "evaluate", "--data", str(data), "--sample-size", "3"]
    return [*given, "--model", "m", "--base-url", url, "--out", str(out), "--no-progress"]


@pytest.mark.parametrize("system", ["json", "slots", "numeric"])
def test_a_model_run_stopped_by_a_usage_error_leaves_no_folder(
    tmp_path: Path, chat_server: Any, system: str
) -> None:
    """An endpoint that answers none of the first items stops the run (exit 2, docs/cli.md:
    nothing written): the partial folder this process made holding only its run.json is
    removed, with the parents made for it; an empty --out given is left as it was."""
    from chat_server import Reply

    server = chat_server(lambda body: Reply(status=400))
    out = tmp_path / "new" / "out"
    result = _invoke(*_model_run(system, tmp_path, server.base_url, out))
    assert result.exit_code == 2, result.output
    assert "error: stopped: the first 3 items of m all failed with bad_request" in result.output
    assert not (tmp_path / "new").exists()
    out.mkdir(parents=True)
    again = _invoke(*_model_run(system, tmp_path, server.base_url, out))
    assert again.exit_code == 2, again.output
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == ["out"]
    assert list(out.iterdir()) == []


def test_a_model_run_whose_endpoint_never_answers_stops_early(
    tmp_path: Path, chat_server: Any
) -> None:
    """A server that takes each request and never answers: the first 3 items all time out and
    the run stops (exit 2) naming the endpoint, as a judge's does. Timeouts did not count, so a
    hung server held each item its whole timeout and retries: about 17 h for 2,040 records at
    the defaults (a hostile-endpoint trial's finding)."""
    import threading

    from chat_server import Reply

    release = threading.Event()

    def hold(body: Any) -> Reply:
        release.wait(60)
        return Reply(content="late")

    server = chat_server(hold)
    args = _model_run("json", tmp_path, server.base_url, tmp_path / "out")
    try:
        result = _invoke(*args, "--timeout", "0.3", "--max-retries", "0", "--concurrency", "1")
    finally:
        release.set()
    assert result.exit_code == 2, result.output
    assert (
        f"error: stopped: the first 3 items of m all failed with timeout at {server.base_url} "
        f"({server.base_url}: no complete reply within 0.3 s); check --base-url, --model and "
        "the API key (or raise --timeout)" in " ".join(result.output.split())
    )
    assert not (tmp_path / "out").exists()


def test_a_continued_folder_stopped_by_a_usage_error_is_left_as_found(
    tmp_path: Path, chat_server: Any
) -> None:
    """The unfinished folder of an earlier run, continued by a run the endpoint stops: its
    run.json stays (fieldcheck removes only what it made in the same process)."""
    from chat_server import Reply

    server = chat_server(lambda body: Reply(status=400))
    out = tmp_path / "out"
    args = _model_run("json", tmp_path, server.base_url, out)
    RunFolder.open(out, command="json run", inputs=[("documents", Path(args[2]))], models=["m"])
    partial = Path(f"{out}{PARTIAL}")
    before = _state(partial)
    result = _invoke(*args)
    assert result.exit_code == 2, result.output
    assert "error: stopped: the first 3 items" in result.output
    assert sorted(before) == ["run.json"] and _state(partial).keys() == before.keys()
    assert json.loads((partial / "run.json").read_text())["complete"] is False


def _stop_after_two_items(monkeypatch: pytest.MonkeyPatch, items: int = 2) -> Any:
    """Make a model run stop as Ctrl-C stops it once two (``items``) items are saved; the
    original save."""
    import asyncio

    from fieldcheck.runner import RunHandle

    original, saved = RunHandle.save, []

    def save_then_stop(self: RunHandle, key: str, *args: Any, **kwargs: Any) -> None:
        original(self, key, *args, **kwargs)
        saved.append(key)
        if len(saved) == items:
            raise asyncio.CancelledError  # as Ctrl-C cancels the run, two items finished

    monkeypatch.setattr(RunHandle, "save", save_then_stop)
    return original


@pytest.mark.parametrize("system", ["json", "slots", "numeric"])
def test_a_ctrl_c_under_no_store_says_the_same_command_calls_every_item_again(
    tmp_path: Path, chat_server: Any, monkeypatch: pytest.MonkeyPatch, system: str
) -> None:
    """Ctrl-C during the calls of a run without the store: the line says nothing was stored and
    that the same command starts over, calling every item again (it promised a resume, docs/
    running.md: nothing to resume); the same command then makes every call a whole run makes."""
    from fieldcheck.runner import RunHandle

    server = chat_server(lambda body: "{}")
    whole = _model_run(system, tmp_path, server.base_url, tmp_path / "whole")
    done = _invoke(*whole, "--no-store", "--concurrency", "1")
    assert done.exit_code in (0, 3), done.output
    calls = len(server.chat_requests)
    original = _stop_after_two_items(monkeypatch)
    out = tmp_path / "out"
    command = [*_model_run(system, tmp_path, server.base_url, out), "--no-store"]
    command += ["--concurrency", "1"]
    stopped = _invoke(*command)
    assert stopped.exit_code == 130, stopped.output
    line = " ".join(stopped.output.split())
    said = re.search(
        r"interrupted: 2 of (\d+) items finished, none stored \(no store: nothing to resume\); "
        r"the same command starts over, calling all (\d+) items again: ",
        line,
    )
    assert said is not None and said[1] == said[2], line
    assert "resume with" not in line and "(run " not in line
    monkeypatch.setattr(RunHandle, "save", original)
    asked = len(server.chat_requests)
    again = _invoke(*command)
    assert again.exit_code == done.exit_code, again.output
    assert len(server.chat_requests) - asked == calls  # every call made again
    assert (out / "run.json").is_file()


def test_the_resume_command_of_a_run_without_out_continues_its_unfinished_folder(
    tmp_path: Path, chat_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C of a model run given no --out: the printed command gives --out the folder its
    partial folder goes to, so running it as printed continues that folder; it printed the
    command as given, which made a new folder and left the partial one behind (a robustness
    trial's finding)."""
    import shlex
    import sys

    from fieldcheck.runner import RunHandle

    monkeypatch.chdir(tmp_path)
    server = chat_server(lambda body: "{}")
    given = _model_run("json", tmp_path, server.base_url, tmp_path / "unused")
    command = [*given[:-3], given[-1], "--concurrency", "1"]  # without --out
    command[2] = "my docs.jsonl"  # a name the shell must have quoted
    Path("docs.jsonl").rename(command[2])
    monkeypatch.setattr(sys, "argv", ["fieldcheck", *command])  # as the shell ran it
    original = _stop_after_two_items(monkeypatch)
    stopped = _invoke(*command)
    assert stopped.exit_code == 130, stopped.output
    (partial,) = Path("fieldcheck-runs").iterdir()
    assert partial.name.endswith(PARTIAL)
    dest = f"fieldcheck-runs/{partial.name[: -len(PARTIAL)]}"
    line = stopped.stderr.strip().splitlines()[-1]
    resume = line.split("; resume with: ", 1)[1]
    assert resume == shlex.join(["fieldcheck", *command, "--out", dest])
    monkeypatch.setattr(RunHandle, "save", original)
    again = _invoke(*shlex.split(resume)[1:])
    assert again.exit_code == 0, again.output
    assert "resuming run" in again.stderr and "2 of 5 items already finished" in again.stderr
    assert [p.name for p in Path("fieldcheck-runs").iterdir()] == [Path(dest).name]
    assert json.loads(Path(dest, "run.json").read_text())["complete"] is True


def test_a_resume_into_another_out_names_the_folder_it_was_begun_for_and_leaves_it(
    tmp_path: Path, chat_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run stopped during its calls with ``--out a``, run again with ``--out b``: the resume
    says it was begun for a, whose unfinished copy is left as it is (it said only "resuming
    run", and a's partial folder stayed behind unmentioned: a tester's finding); b is complete
    and a's partial folder is untouched (fieldcheck removes nothing it did not make now)."""
    from fieldcheck.runner import RunHandle

    server = chat_server(lambda body: "{}")
    first = _model_run("numeric", tmp_path, server.base_url, tmp_path / "a")
    original = _stop_after_two_items(monkeypatch)
    assert _invoke(*first, "--concurrency", "1").exit_code == 130
    partial = tmp_path / ("a" + PARTIAL)
    before = _state(partial)
    monkeypatch.setattr(RunHandle, "save", original)
    again = _invoke(*first[:-3], "--out", str(tmp_path / "b"), "--no-progress")
    assert again.exit_code == 0, again.output
    [line] = [x for x in again.stderr.splitlines() if x.startswith("resuming run")]
    assert line.endswith(
        f" (begun for {tmp_path.resolve() / 'a'}, whose unfinished copy is left as it is; the "
        f"outputs go to {tmp_path / 'b'}): 2 of 11 items already finished are not called again"
    )
    assert json.loads((tmp_path / "b" / "run.json").read_text())["complete"] is True
    assert _state(partial) == before and not (tmp_path / "a").exists()


def test_a_ctrl_c_after_the_last_call_says_the_output_folder_was_not_completed(
    tmp_path: Path, chat_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C once every item is saved, before the folder is written: the line says every call
    was made but the output folder was not completed (docs/running.md); it said only "5 of 5
    items finished and stored" (a tester's finding). Its exit skips the last full collection
    (``gc.freeze`` at exit): walking the heap took about half of the second a 1,490-turn run
    took to stop (several under load; running.md says it stops at once)."""
    import atexit
    import gc

    server = chat_server(lambda body: "{}")
    out = tmp_path / "out"
    _stop_after_two_items(monkeypatch, items=5)
    at_exit: list[Any] = []
    monkeypatch.setattr(atexit, "register", at_exit.append)
    stopped = _invoke(*_model_run("json", tmp_path, server.base_url, out), "--concurrency", "1")
    assert stopped.exit_code == 130, stopped.output
    line = stopped.stderr.strip().splitlines()[-1]
    assert line.startswith("interrupted: 5 of 5 items finished and stored (run ")
    assert f"; every call was made, but the output folder {out} was not completed; resume" in line
    assert gc.freeze in at_exit


def test_a_resumed_slots_run_writes_the_predictions_of_an_uninterrupted_one_byte_for_byte(
    tmp_path: Path, chat_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session read back on resume keeps its reply's slot order (name, age, location) in
    pred_m.jsonl, as a run not interrupted does: the journal kept it with its keys sorted, so the
    resumed sessions' slots came out by field (a robustness trial's finding)."""
    from fieldcheck.runner import RunHandle

    reply = '{"basic_info": {"name": ["Ann"], "age": ["30"], "location": ["Oslo"]}}'
    server = chat_server(lambda body: reply)
    whole = [*_model_run("slots", tmp_path, server.base_url, tmp_path / "whole"), "--no-cache"]
    assert _invoke(*whole, "--concurrency", "1").exit_code == 0
    original = _stop_after_two_items(monkeypatch)
    command = [*_model_run("slots", tmp_path, server.base_url, tmp_path / "out"), "--no-cache"]
    assert _invoke(*command, "--concurrency", "1").exit_code == 130
    monkeypatch.setattr(RunHandle, "save", original)
    again = _invoke(*command, "--concurrency", "1")
    assert again.exit_code == 0, again.output
    assert "2 of 3 items already finished" in again.stderr
    pred = (tmp_path / "out" / "pred_m.jsonl").read_bytes()
    assert pred == (tmp_path / "whole" / "pred_m.jsonl").read_bytes()
    fields = [json.loads(line)["field"] for line in pred.decode().splitlines()]
    assert fields == ["name", "age", "location"] * 3


def test_a_model_run_continued_with_other_scoring_settings_applies_them(
    tmp_path: Path, chat_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slots run interrupted, then continued with other scoring settings, is not refused (its
    files are all rewritten when it scores): run.json and metrics.json hold the new settings, as
    a fresh run's; docs/formats.md said it was refused (a robustness trial's finding)."""
    from fieldcheck.runner import RunHandle

    server = chat_server(lambda body: '{"basic_info": {"name": ["Ann"]}}')
    command = _model_run("slots", tmp_path, server.base_url, tmp_path / "out")
    original = _stop_after_two_items(monkeypatch)
    assert _invoke(*command, "--concurrency", "1", "--bootstrap", "500").exit_code == 130
    monkeypatch.setattr(RunHandle, "save", original)
    again = _invoke(*command, "--bootstrap", "300", "--tp", "exact")
    assert again.exit_code == 0, again.output
    settings = json.loads((tmp_path / "out" / "run.json").read_text())["settings"]
    assert (settings["bootstrap"], settings["tp"]) == (300, "exact")
    signature = json.loads((tmp_path / "out" / "metrics.json").read_text())["signature"]
    assert (signature["settings"]["bootstrap"], signature["settings"]["tp"]) == (300, "exact")
    doc = " ".join((Path(__file__).parents[1] / "docs" / "formats.md").read_text().split())
    assert "scoring settings given anew (`--bootstrap`, `--tp`, `--seed`, ...) are applied" in doc
    slots = " ".join((Path(__file__).parents[1] / "docs" / "slots.md").read_text().split())
    assert "3 on a session error (invalid reply or call error)" not in slots
    assert "3 on a call error, when a judge call failed" in slots
    assert "or when a gold line was invalid" in slots


def test_a_library_writer_never_replaces_a_file_it_did_not_write(tmp_path: Path) -> None:
    """A plain path given to a Python writer (slots ``write_outputs``, ``write_report``, numeric
    ``score_to_folder``, ``stream_batch_outputs``) is written in place: a file there of a name it
    writes is refused before anything is written (a new-user trial's report.md was replaced);
    another file is left alone, and what one writer wrote it may write again."""
    from fieldcheck.reports._document import Report, write_report
    from fieldcheck.slots import ModelInput, load_slots, score_models, write_outputs

    gold = tmp_path / "gold.jsonl"
    gold.write_text(
        json.dumps({"user": "u", "session": 1, "topic": "t", "field": "s", "values": ["a"]}) + "\n"
    )
    run = score_models(load_slots(gold), [ModelInput("m", load_slots(gold))], bootstrap=0)
    out = tmp_path / "u"
    out.mkdir()
    (out / "report.md").write_text("precious\n")
    (out / "notes.txt").write_text("mine\n")
    with pytest.raises(FolderError, match=r"report\.md exists; fieldcheck never replaces"):
        write_outputs(run, out)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "report.md"]
    assert (out / "report.md").read_text() == "precious\n"
    with pytest.raises(FolderError, match=r"report\.md exists"):
        write_report(out, Report("t"))
    assert (out / "report.md").read_text() == "precious\n"
    (out / "report.md").unlink()
    assert "report.md" in write_outputs(run, out)
    assert (out / "notes.txt").read_text() == "mine\n"
    with pytest.raises(FolderError, match=r"metrics\.csv exists"):
        write_outputs(run, out)  # a second run into the same folder: its files are not ours now
    folder = RunFolder.of(tmp_path / "v")
    folder.write_text("a.txt", "1")
    assert folder.write_text("a.txt", "2").read_text() == "2"


def test_a_library_function_given_the_wrong_type_names_the_argument(tmp_path: Path) -> None:
    # a str for a list of records, an int for a path: an AttributeError deep inside ("'str'
    # object has no attribute 'id'", a new-user trial's finding); a TypeError naming it now
    from fieldcheck import jsoneval, metrics, numeric, slots

    record = jsoneval.BatchRecord(id="a", ground_truth={"a": 1}, output={"a": 1})
    calls = [
        (metrics.flatten, ("a",), "value must be a mapping (a JSON object) (got str)"),
        (jsoneval.evaluate, ({}, {}, {"flatten": True}), "config must be an EvalConfig (got dict)"),
        (jsoneval.evaluate_batch, ("ab",), "each of records must be a BatchRecord"),
        (
            jsoneval.evaluate_batch,
            ([record, {"id": "b"}],),
            "each of records must be a BatchRecord (read_batch's) (got dict)",
        ),
        (slots.score_models, ("gold.jsonl", []), "gold must be a SlotFile"),
        (slots.score_models, (slots.SlotFile(tmp_path), ["m"]), "each of models must be a Model"),
        (
            numeric.score_to_folder,
            (5, 6, 7),
            "data must be a LoadResult (load_convfinqa's) (got int)",
        ),
    ]
    for function, args, message in calls:
        with pytest.raises(TypeError) as refused:
            function(*args)
        assert str(refused.value).startswith(message)
    assert jsoneval.evaluate_batch(iter([record]), bootstrap=0).summary.scored == 1

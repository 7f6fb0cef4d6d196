"""Issue 9, file-system safety of ``--out`` (reports/_outdir.py): links inside the folder are
never followed, every file is written under a temporary name and renamed, the summary says
``complete: true`` only when everything was written (a killed run never claims it), a re-run
removes exactly what fieldcheck wrote, other files need ``--force``, ``--out ''`` is refused."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck.reports._outdir import (
    MANIFEST,
    TMP_MARK,
    OutputFolder,
    OutputFolderError,
    release_all,
    reserve,
)


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "300"})


def _text(result: Any) -> str:
    return " ".join(result.output.replace("│", " ").split())


def _jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _batch(tmp_path: Path, n: int = 3) -> Path:
    return _jsonl(
        tmp_path / "d.jsonl",
        [{"id": i, "ground_truth": {"a": i}, "output": {"a": i}} for i in range(n)],
    )


def _manifest(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / MANIFEST).read_text().splitlines()]


# ------------------------------------------------------------------ symlinks


def test_planted_link_in_a_new_folder_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    """`summary.json -> ~/.bashrc` in an otherwise empty folder: the folder is not ours (exit 2,
    one line); with --force the link itself is replaced, never the file it points to."""
    victim = tmp_path / "bashrc"
    victim.write_text("export SAFE=1\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").symlink_to(victim)
    data = _batch(tmp_path)
    result = _invoke("json", "batch", str(data), "--out", str(out))
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"error: --out: {out} holds 1 entry fieldcheck did not write (summary.json); give an "
        "empty or new folder, or --force to write beside them (see 'fieldcheck json batch --help')"
    )
    assert victim.read_text() == "export SAFE=1\n"
    result = _invoke("json", "batch", str(data), "--out", str(out), "--force")
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "export SAFE=1\n"
    assert not (out / "summary.json").is_symlink()
    assert json.loads((out / "summary.json").read_text())["records"] == 3


def test_link_swapped_in_for_our_own_file_is_replaced_not_followed(tmp_path: Path) -> None:
    """A file of an earlier run turned into a link: the re-run removes the link (it is ours by
    name), the target keeps its content."""
    victim = tmp_path / "bashrc"
    victim.write_text("keep me\n")
    out, data = tmp_path / "out", _batch(tmp_path)
    assert _invoke("json", "batch", str(data), "--out", str(out)).exit_code == 0
    for name in ("summary.json", "records.jsonl"):
        (out / name).unlink()
        (out / name).symlink_to(victim)
    result = _invoke("json", "batch", str(data), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "keep me\n"
    assert not (out / "summary.json").is_symlink() and not (out / "records.jsonl").is_symlink()
    assert len((out / "records.jsonl").read_text().splitlines()) == 3


def test_linked_subfolder_is_never_written_or_cleaned_through(tmp_path: Path) -> None:
    """numeric's traces/ replaced by a link to another folder: refused without --force; with it
    the link becomes a real folder and nothing in the linked folder is deleted or written."""
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    (elsewhere / "conv-1.json").write_text("mine")
    out = tmp_path / "out"
    data, preds = _numeric_files(tmp_path, ["conv-1"])
    args = ("numeric", "score", "--data", str(data), "--predictions", str(preds))
    assert _invoke(*args, "--out", str(out), "--bootstrap", "0").exit_code == 0
    trace = next((out / "traces").iterdir()).name
    (elsewhere / trace).write_text("mine too")
    for f in (out / "traces").iterdir():
        f.unlink()
    (out / "traces").rmdir()
    (out / "traces").symlink_to(elsewhere, target_is_directory=True)
    result = _invoke(*args, "--out", str(out), "--bootstrap", "0")
    assert result.exit_code == 2
    assert "holds 1 entry fieldcheck did not write (traces)" in _text(result)
    result = _invoke(*args, "--out", str(out), "--bootstrap", "0", "--force")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in elsewhere.iterdir()) == sorted({"conv-1.json", trace})
    assert (elsewhere / trace).read_text() == "mine too"
    assert not (out / "traces").is_symlink() and (out / "traces" / trace).is_file()


# ------------------------------------------------------------------ stale files, --force, --out ''


def _conversation(cid: str) -> dict[str, Any]:
    return {
        "id": cid,
        "doc": {"pre_text": "", "post_text": "", "table": {"2020": {"sales": 10.0}}},
        "dialogue": {
            "conv_questions": ["q?"],
            "conv_answers": ["10"],
            "turn_program": ["10"],
            "executed_answers": [10.0],
            "qa_split": [False],
        },
        "features": {
            "num_dialogue_turns": 1,
            "has_type2_question": False,
            "has_duplicate_columns": False,
            "has_non_numeric_values": False,
        },
    }


def _numeric_files(tmp_path: Path, ids: list[str]) -> tuple[Path, Path]:
    data = tmp_path / f"data{len(ids)}.json"
    data.write_text(json.dumps({"dev": [_conversation(c) for c in ids]}))
    preds = _jsonl(
        tmp_path / f"p{len(ids)}.jsonl",
        [{"conversation_id": c, "turn": 0, "answer": "10"} for c in ids],
    )
    return data, preds


def test_rerun_removes_the_stale_traces_of_the_earlier_run(tmp_path: Path) -> None:
    """44 old traces beside 2 new: the second run leaves exactly its own 2."""
    out = tmp_path / "out"
    old = [f"conv-{i}" for i in range(44)]
    data, preds = _numeric_files(tmp_path, old)
    args = ("numeric", "score", "--bootstrap", "0", "--out", str(out))
    assert _invoke(*args, "--data", str(data), "--predictions", str(preds)).exit_code == 0
    assert len(list((out / "traces").iterdir())) == 44
    data, preds = _numeric_files(tmp_path, ["conv-new-1", "conv-new-2"])
    assert _invoke(*args, "--data", str(data), "--predictions", str(preds)).exit_code == 0
    traces = sorted(p.name for p in (out / "traces").iterdir())
    assert len(traces) == 2 and all("new" in t for t in traces), traces
    assert json.loads((out / "statistics.json").read_text())["complete"] is True
    assert json.loads((out / "statistics.json").read_text())["num_conversations"] == 2


def test_an_empty_subfolder_of_ours_does_not_block_the_next_run(tmp_path: Path) -> None:
    """A run whose traces/ ended empty (the tester's case: an earlier run's traces removed, or
    nothing to trace) left a folder the next run refused as not ours."""
    out = tmp_path / "out"
    first = OutputFolder.prepare(out)
    first.sub("traces")  # created, never written into
    first.finish()
    assert (out / "traces").is_dir() and not any((out / "traces").iterdir())
    again = OutputFolder.prepare(out)  # no OutputFolderError: traces/ is listed as ours
    assert not (out / "traces").exists()  # removed with the rest of the earlier run
    again.finish()
    (out / "traces").mkdir()  # a folder fieldcheck did not create is still foreign
    with pytest.raises(OutputFolderError, match="traces"):
        OutputFolder.prepare(out)


def test_rerun_removes_an_old_plot(tmp_path: Path) -> None:
    """plot_latency.png of a run with --latency is gone after a run without it."""
    gold = _jsonl(
        tmp_path / "gold.jsonl",
        [{"user": "u", "session": 1, "topic": "t", "field": "f", "values": ["v"]}],
    )
    lat = _jsonl(tmp_path / "lat.jsonl", [{"user": "u", "session": 1, "seconds": 1.5}])
    out = tmp_path / "out"
    args = ("slots", "score", "--gold", str(gold), "--pred", f"a={gold}", "--out", str(out))
    assert _invoke(*args, "--bootstrap", "0", "--latency", f"a={lat}").exit_code == 0
    assert (out / "plot_latency.png").exists()
    assert _invoke(*args, "--bootstrap", "0").exit_code == 0
    assert not (out / "plot_latency.png").exists()
    assert (out / "plot_prf1.png").exists()
    assert json.loads((out / "metrics.json").read_text())["complete"] is True


def test_folder_with_other_files_needs_force_and_keeps_them(tmp_path: Path) -> None:
    out, data = tmp_path / "out", _batch(tmp_path)
    out.mkdir()
    (out / "notes.txt").write_text("my notes")
    result = _invoke("json", "batch", str(data), "--out", str(out))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "(notes.txt)" in result.stderr
    assert not (out / "summary.json").exists()
    for _ in range(2):  # the first run with --force, then again: ours replaced, notes kept
        assert _invoke("json", "batch", str(data), "--out", str(out), "--force").exit_code == 0
    assert (out / "notes.txt").read_text() == "my notes"
    listed = {e["file"] for e in _manifest(out) if "file" in e}
    assert listed == {
        "records.jsonl",
        "fields.csv",
        "errors.jsonl",
        "summary.json",
        "report.md",
        "report.html",
        "plot_field_match_rate.png",
        "plot_score_distribution.png",
    }
    assert _manifest(out)[-1] == {"complete": True}


@pytest.mark.parametrize(
    "command",
    [
        ("json", "batch", "d.jsonl"),
        ("json", "run", "d.jsonl", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"),
        ("slots", "score", "--gold", "g", "--pred", "a=g"),
        ("slots", "run", "--conversations", "c", "--gold", "g", "--model", "m"),
        ("numeric", "score", "--data", "x", "--predictions", "x"),
        ("numeric", "evaluate", "--data", "x", "--model", "m"),
    ],
)
def test_empty_out_is_a_usage_error_and_force_is_offered(
    command: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("d.jsonl", "g", "c", "x"):
        Path(name).write_text("{}\n")
    result = _invoke(*command, "--out", "")
    assert result.exit_code == 2
    assert "must name a folder (use '.' for the current one)" in _text(result)
    assert sorted(os.listdir(tmp_path)) == ["c", "d.jsonl", "g", "x"]  # nothing written
    help_text = _text(_invoke(*command[:2], "--help"))
    assert "--force" in help_text and "fieldcheck did not write" in help_text


def test_manifest_outside_names_are_ignored(tmp_path: Path) -> None:
    """A planted manifest cannot make a re-run delete files outside the folder."""
    victim = tmp_path / "victim.txt"
    victim.write_text("x")
    out = tmp_path / "out"
    out.mkdir()
    (out / MANIFEST).write_text(
        '{"file": "../victim.txt"}\n{"file": "/etc/hostname"}\n{"file": "a/../../victim.txt"}\n'
    )
    folder = OutputFolder.prepare(out)
    folder.write_text("x.txt", "y")
    folder.finish()
    assert victim.read_text() == "x"
    assert [e.get("file") for e in _manifest(out)] == [None, "x.txt", None]


def test_prepare_refuses_a_file(tmp_path: Path) -> None:
    a_file = tmp_path / "f"
    a_file.write_text("x")
    with pytest.raises(OutputFolderError, match="is a file, not a directory"):
        OutputFolder.prepare(a_file)


# ------------------------------------------------------------------ killed while writing


def _check_never_claims_more(out: Path, n: int) -> str:
    """The folder's state after a kill: 'complete', 'incomplete' or 'empty'; asserts that a
    summary (or the manifest) claiming completeness comes with every file whole."""
    summary = out / "summary.json"
    records = out / "records.jsonl"
    if records.exists():  # never half a file under its final name
        assert len(records.read_bytes().splitlines()) == n
    manifest_complete = (out / MANIFEST).exists() and _manifest(out)[-1] == {"complete": True}
    if summary.exists():
        assert json.loads(summary.read_text())["complete"] is True
        for name in ("records.jsonl", "fields.csv", "errors.jsonl"):
            assert (out / name).exists(), name
        return "complete"
    assert not manifest_complete
    return "incomplete" if any(p.name != MANIFEST for p in out.iterdir()) else "empty"


def _wait_for_temporary_file(out: Path, proc: subprocess.Popen[str], *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        mark = f".fieldcheck-tmp-{proc.pid}"  # this process's (a killed one leaves its own)
        if out.exists() and any(
            mark in p.name and not p.name.startswith(MANIFEST) for p in out.iterdir()
        ):
            return
        time.sleep(0.001)


@pytest.mark.slow
def test_killed_while_writing_never_claims_completeness(tmp_path: Path) -> None:
    """json batch over 6,000 records into the same folder, killed (SIGKILL, then SIGINT) at
    random moments: the folder never says complete unless every file is there and whole; a
    Ctrl-C prints one line saying what was and was not written."""
    n = 6000
    data = _jsonl(
        tmp_path / "big.jsonl",
        [
            {"id": i, "ground_truth": {"a": i, "b": [1, 2]}, "output": {"a": i, "b": [1, 3]}}
            for i in range(n)
        ],
    )
    out = tmp_path / "out"
    command = [sys.executable, "-m", "fieldcheck._cli.main", "json", "batch", str(data)]
    command += ["--out", str(out)]
    start = time.monotonic()
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    full = time.monotonic() - start
    assert _check_never_claims_more(out, n) == "complete"
    rng = random.Random(9)
    states = []
    for i in range(8):
        sig = signal.SIGKILL if i % 2 == 0 else signal.SIGINT
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if i < 4:  # at a random moment (start-up is most of a run)
            time.sleep(rng.uniform(full * 0.5, full))
        else:  # while a file is being written: once a temporary file shows, after a random pause
            _wait_for_temporary_file(out, proc, timeout=full * 3)
            time.sleep(rng.uniform(0, 0.05))
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=120)
        states.append(_check_never_claims_more(out, n))
        if sig == signal.SIGINT and i >= 4:  # interrupted while writing: one line, exit 130
            assert proc.returncode == 130, stderr
            lines = stderr.strip().splitlines()
            assert len(lines) == 1, stderr
            assert lines[0].startswith(f"interrupted: {out} is not complete; written: "), stderr
            assert "not written: " in lines[0] and "summary.json" in lines[0], stderr
    assert "incomplete" in states, states  # some kill hit the run while it wrote
    assert subprocess.run(command, capture_output=True, timeout=300).returncode == 0
    assert _check_never_claims_more(out, n) == "complete"


def test_ctrl_c_line_names_what_was_and_was_not_written(tmp_path: Path) -> None:
    folder = OutputFolder.prepare(tmp_path / "out")
    folder.expect("records.jsonl", "fields.csv", "summary.json")
    folder.write_text("records.jsonl", "{}\n")
    assert folder.interrupted_line() == (
        f"interrupted: {tmp_path / 'out'} is not complete; written: 1 file (records.jsonl); "
        "not written: fields.csv, summary.json (no summary says complete: true; run the command "
        "again)"
    )


def test_ctrl_c_line_counts_a_written_bulk_folder_and_names_a_missing_one(tmp_path: Path) -> None:
    done = OutputFolder.prepare(tmp_path / "done")
    done.expect("traces", "summary.csv")
    with done.bulk("traces") as tmp:
        (tmp / "a.json").write_text("{}")
    assert "not written: summary.csv (" in done.interrupted_line()
    missing = OutputFolder.prepare(tmp_path / "missing")
    missing.expect("traces", "summary.csv")
    with pytest.raises(RuntimeError), missing.bulk("traces"):
        raise RuntimeError
    assert "not written: summary.csv, traces (" in missing.interrupted_line()


# ------------------------------------------------------------------ bulk folders (issue 10)


def test_an_error_in_a_bulk_folder_names_the_final_path(tmp_path: Path) -> None:
    folder = OutputFolder.prepare(tmp_path / "out")
    with pytest.raises(FileNotFoundError) as caught, folder.bulk("traces") as tmp:
        (tmp / "no-such-folder" / "a.json").write_text("{}")
    assert caught.value.filename == str(tmp_path / "out" / "traces" / "no-such-folder" / "a.json")


def test_bulk_folder_appears_whole_or_not_at_all(tmp_path: Path) -> None:
    """Files written into ``bulk("traces")`` show under traces/ only once the block ends; an
    error inside the block leaves neither traces/ nor the temporary folder; the manifest lists
    the folder once, as wholly ours."""
    out = tmp_path / "out"
    folder = OutputFolder.prepare(out)
    with pytest.raises(RuntimeError), folder.bulk("traces") as tmp:
        (tmp / "a.json").write_text("1")
        assert tmp.parent == out and not (out / "traces").exists()
        raise RuntimeError("killed mid-way")
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST]
    with folder.bulk("traces") as tmp:
        for i in range(3):
            (tmp / f"c{i}.json").write_text(str(i))
        assert not (out / "traces").exists()
    folder.finish()
    assert sorted(p.name for p in (out / "traces").iterdir()) == ["c0.json", "c1.json", "c2.json"]
    assert [e for e in _manifest(out) if "dir" in e or "file" in e] == [
        {"dir": "traces", "all": True, "names": ["c0.json", "c1.json", "c2.json"]}
    ]


def test_next_run_removes_a_bulk_folder_whole_without_following_links(tmp_path: Path) -> None:
    """A later run removes the earlier traces/ with all it holds (a link to a folder elsewhere
    that the run wrote: unlinked, its target kept) and a killed run's temporary folder, and
    neither makes the folder foreign. (An entry put in it after the run is refused:
    ``test_a_users_file_in_a_folder_written_whole_is_never_removed``.)"""
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    (elsewhere / "keep.json").write_text("mine")
    out = tmp_path / "out"
    first = OutputFolder.prepare(out)
    with first.bulk("traces") as tmp:
        (tmp / "c1.json").write_text("1")
        (tmp / "link").symlink_to(elsewhere, target_is_directory=True)
    first.finish()
    stale = out / ".traces.fieldcheck-tmp-999999"  # a run killed inside its bulk block
    stale.mkdir()
    (stale / "c9.json").write_text("half")
    again = OutputFolder.prepare(out)  # no OutputFolderError
    assert not (out / "traces").exists() and not stale.exists()
    with again.bulk("traces") as tmp:
        (tmp / "c2.json").write_text("2")
    again.finish()  # waits for the earlier folders' removal
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "traces"]
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep.json"]
    assert [p.name for p in (out / "traces").iterdir()] == ["c2.json"]
    assert _manifest(out)[-1] == {"complete": True}
    assert not any("traces/" in e.get("file", "") for e in _manifest(out))


_HOLD = """
import sys, time
from fieldcheck.reports._outdir import OutputFolder
folder = OutputFolder.prepare(sys.argv[1])
print("prepared", flush=True)
sys.stdin.readline()
if sys.argv[2] == "finish":
    folder.finish()
    print("finished", flush=True)
    sys.stdin.readline()
"""


def _holder(out: Path, then: str) -> subprocess.Popen[str]:
    """Another process that prepares ``out`` and waits for a line (then ``finish``es it or
    exits)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(out), then],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "prepared\n"
    return proc


def test_a_folder_another_run_is_writing_is_refused_until_it_finishes(tmp_path: Path) -> None:
    """Two runs into one folder would remove and overwrite each other's files: the second is
    a usage error naming the folder, until the first finishes or its process ends (killed
    too)."""
    out = tmp_path / "out"
    proc = _holder(out, "finish")
    with pytest.raises(OutputFolderError, match="is being written by another fieldcheck run"):
        OutputFolder.prepare(out, force=True)
    data = _batch(tmp_path)
    result = _invoke("json", "batch", str(data), "--out", str(out), "--force", "--no-store")
    assert result.exit_code == 2
    assert "is being written by another fieldcheck run" in _text(result)
    assert not (out / "summary.json").exists()
    # a folder inside it: that run's manifest would claim the files written there
    result = _invoke("json", "batch", str(data), "--out", str(out / "sub" / "x"), "--no-store")
    assert result.exit_code == 2
    assert f"is inside {out}, which another fieldcheck run is writing" in _text(result)
    assert not (out / "sub" / "x" / "summary.json").exists()
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == "finished\n"
    result = _invoke("json", "batch", str(data), "--out", str(out), "--no-store")
    assert result.exit_code == 0, result.output
    assert json.loads((out / "summary.json").read_text())["complete"] is True
    proc.kill()
    proc.wait()
    killed = _holder(tmp_path / "other", "exit")
    killed.kill()
    killed.wait()
    OutputFolder.prepare(tmp_path / "other").finish()  # the kernel let go of a killed run's lock


def test_one_process_may_prepare_its_folder_again(tmp_path: Path) -> None:
    """The lock is per process: a command that prepares its folder twice (or a library caller
    re-running into it after an error) is not refused by itself."""
    first = OutputFolder.prepare(tmp_path / "out")
    first.write_text("a.txt", "a")
    again = OutputFolder.prepare(tmp_path / "out")
    inner = OutputFolder.prepare(tmp_path / "out" / "model")  # as json run's model folders
    inner.finish()
    again.finish()
    assert not (tmp_path / "out" / "a.txt").exists()  # the earlier run's file was removed


def test_an_earlier_runs_folders_are_removed_by_a_daemon_and_a_killed_ones_next_time(
    tmp_path: Path,
) -> None:
    """The earlier traces/ is removed in a daemon thread: a Ctrl-C or an error ends the
    process without a silent wait for it (about 4 s for 25,000 traces, a tester's finding);
    the trash folder such an exit leaves is removed by the next run first."""
    out = tmp_path / "out"
    first = OutputFolder.prepare(out)
    with first.bulk("traces") as tmp:
        for i in range(50):
            (tmp / f"c{i}.json").write_text("1")
    first.finish()
    again = OutputFolder.prepare(out)
    cleaning = again._state.cleaning
    assert cleaning is not None and cleaning.daemon
    again.finish()
    left = out / f".trash{TMP_MARK}999999-0"  # what an exit during the removal leaves
    left.mkdir()
    (left / "c1.json").write_text("1")
    OutputFolder.prepare(out).finish()
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST]


@pytest.mark.parametrize(
    "command",
    [
        ["json", "batch", "missing.jsonl"],
        ["slots", "score", "--gold", "missing.jsonl", "--pred", "m=missing.jsonl"],
        ["numeric", "score", "--data", "{empty}", "--predictions", "{empty}"],  # options: exist
    ],
)
def test_an_existing_out_folder_is_taken_before_the_inputs_are_read(
    tmp_path: Path, command: list[str]
) -> None:
    """A long read (a million slot lines: 6-9 s) must not let a run started later take the
    folder first (a tester's finding): the lock comes before the inputs, so a folder another
    run writes is refused even before a missing input is noticed. The command lets go of it
    when it ends, whatever its status."""
    out, empty = tmp_path / "out", tmp_path / "empty"
    empty.write_text("")
    command = [word.format(empty=empty) for word in command]
    proc = _holder(out, "exit")
    result = _invoke(*command, "--out", str(out), "--no-store")
    assert result.exit_code == 2
    assert "is being written by another fieldcheck run" in _text(result)
    proc.kill()
    proc.wait()
    result = _invoke(*command, "--out", str(out), "--no-store")
    assert result.exit_code == 2 and "another fieldcheck run" not in _text(result)
    assert ("missing" if "missing" in " ".join(command) else "empty") in _text(result)
    OutputFolder.prepare(out).finish()  # the failed command let go of it


_WRITES_LATER = """
import sys
from fieldcheck.reports._outdir import OutputFolder
folder = OutputFolder.prepare(sys.argv[1])
print("prepared", flush=True)
sys.stdin.readline()
folder.write_text("late.txt", "written while the run around it ran")
folder.finish()
print("finished", flush=True)
"""


def test_a_run_around_another_runs_folder_never_claims_its_files(tmp_path: Path) -> None:
    """A run with ``--force`` into a folder that holds another run's folder (being written, or
    done) keeps that run's files: its manifest does not list what that run writes meanwhile,
    so its next run does not remove them; nor does it remove what an older manifest of its
    own wrongly listed there."""
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITES_LATER, str(out / "child")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    assert proc.stdout.readline() == "prepared\n"
    with pytest.raises(OutputFolderError, match="child: another run's output folder, kept as"):
        OutputFolder.prepare(out)
    around = OutputFolder.prepare(out, force=True)
    around.write_text("mine.txt", "1")
    proc.stdin.write("\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == "finished\n"
    proc.wait()
    around.finish()
    listed = [e.get("file") for e in _manifest(out)]
    assert "mine.txt" in listed
    assert not [f for f in listed if f and f.startswith("child/")]
    # an older manifest of the run around it that listed a file of the inner run
    (out / "child" / "summary.json").write_text("{}")
    with (out / MANIFEST).open("a") as f:
        f.write(json.dumps({"file": "child/late.txt"}) + "\n")
        f.write(json.dumps({"file": "child/summary.json", "summary": True}) + "\n")
    OutputFolder.prepare(out, force=True).finish()
    assert (out / "child" / "late.txt").read_text() == "written while the run around it ran"
    assert (out / "child" / "summary.json").read_text() == "{}"
    assert not (out / "mine.txt").exists()  # its own file was replaced as before


def _ended_pid() -> int:
    """The pid of a process that has ended (its temporary files are a killed run's leftovers)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_another_running_runs_temporary_files_are_left_alone(tmp_path: Path) -> None:
    """A run into a folder leaves alone the temporary files and folders of another process
    still running (a slot run's scratch folder beside its --out, numeric's traces being
    written), and anything inside another run's folder: removing them killed that run (a
    tester's finding). A killed run's leftovers are still removed."""
    out = tmp_path / "out"
    proc = _holder(out / "inner", "exit")  # a run writing out/inner
    scratch = out / f".scratch{TMP_MARK}{proc.pid}-ab12"
    traces = out / "inner" / f".traces{TMP_MARK}{proc.pid}"
    dead = out / f".scratch{TMP_MARK}{_ended_pid()}-cd34"
    dead_inside = out / "inner" / f".traces{TMP_MARK}{_ended_pid()}"
    for folder in (scratch, traces, dead, dead_inside):
        folder.mkdir(parents=True)
        (folder / "part.bin").write_text("1")
    around = OutputFolder.prepare(out, force=True)
    around.write_text("mine.txt", "1")
    around.finish()
    assert (scratch / "part.bin").exists() and (traces / "part.bin").exists()
    assert not dead.exists()  # a killed run's leftover
    assert (dead_inside / "part.bin").exists()  # inside another run's folder: its own to clean
    assert not [e for e in _manifest(out) if TMP_MARK in e.get("file", "")]
    proc.kill()
    proc.wait()
    OutputFolder.prepare(out, force=True).finish()
    assert not scratch.exists()  # its process has ended


def test_a_killed_slot_runs_scratch_beside_its_out_is_removed_by_the_next(tmp_path: Path) -> None:
    """A slot run's buckets go in the nearest existing folder of its --out; a kill -9 left them
    there for good, since the next run into --out looks only inside it (a tester's finding)."""
    from fieldcheck.slots._stream import partitioned

    left = tmp_path / f".scratch{TMP_MARK}{_ended_pid()}-ef56"
    left.mkdir()
    (left / "bucket0.bin").write_bytes(b"x" * 10)
    gold = tmp_path / "gold.jsonl"
    gold.write_text("")
    with partitioned([gold], beside=tmp_path / "out", k=2) as partition:
        assert partition.folder.parent == tmp_path and partition.folder.exists()
        assert not left.exists()
    left.mkdir()  # a small run (one bucket, its scratch in the system's folder) removes it too
    with partitioned([gold], beside=tmp_path / "out", k=1):
        assert not left.exists()


def test_a_manifest_that_is_a_folder_is_refused_even_with_force(tmp_path: Path) -> None:
    """A folder where the manifest goes: one plain message naming it, nothing written or left
    (a tester's finding: the error named an internal temporary file and left it behind)."""
    out = tmp_path / "out"
    (out / MANIFEST).mkdir(parents=True)
    (out / MANIFEST / "keep.txt").write_text("1")
    for force in (False, True):
        with pytest.raises(OutputFolderError, match=f"{MANIFEST} is a folder"):
            OutputFolder.prepare(out, force=force)
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST]
    assert (out / MANIFEST / "keep.txt").read_text() == "1"


def test_error_messages_name_the_output_a_temporary_file_becomes() -> None:
    """A write that fails on a temporary file names the output it was to become (a tester's
    finding: `cannot write LJ/.records.jsonl.fieldcheck-tmp-17624.jsonl`); the scratch folder
    and every other path are shown as they are."""
    from fieldcheck._cli._common import cannot_write
    from fieldcheck.reports._outdir import final_path

    cases = {
        "LJ/.records.jsonl.fieldcheck-tmp-17624.jsonl": "LJ/records.jsonl",
        "o/.traces.fieldcheck-tmp-55/conv-1.json": "o/traces/conv-1.json",
        "o/.fieldcheck-manifest.jsonl.fieldcheck-tmp-99": "o/.fieldcheck-manifest.jsonl",
        "o/a/.plot_x.png.fieldcheck-tmp-7.png": "o/a/plot_x.png",
        "o/.scratch.fieldcheck-tmp-18-5y8b/bucket2.bin": "o/.scratch.fieldcheck-tmp-18-5y8b/bucket2.bin",
        "o/.trash.fieldcheck-tmp-12-3": "o/.trash.fieldcheck-tmp-12-3",
        "o/report.md": "o/report.md",
    }
    assert {p: final_path(p) for p in cases} == cases
    error = cannot_write(
        PermissionError(13, "Permission denied", "np/.summary.csv.fieldcheck-tmp-9.csv"), "np"
    )
    assert error.message == "--out: cannot write np/summary.csv: Permission denied"
    assert error.exit_code == 1
    full = cannot_write(OSError(28, "No space left on device"), "np")  # write() names no file
    assert full.message == "--out: cannot write np: No space left on device"


def test_a_users_file_in_a_folder_written_whole_is_never_removed(tmp_path: Path) -> None:
    """traces/ is written whole and replaced whole. A file a user put in it after the run, or
    a folder of theirs under that name kept by --force, would go with it (a tester's finding:
    both were deleted, the first even without --force): refused instead, with or without
    --force, naming the file; once it is moved out, the run goes on as before."""
    out = tmp_path / "out"
    folder = OutputFolder.prepare(out)
    with folder.bulk("traces") as tmp:
        (tmp / "c0.json").write_text("{}")
    folder.finish()
    release_all()
    untouched = OutputFolder.prepare(out)  # nothing added: replaced as before
    with untouched.bulk("traces") as tmp:
        (tmp / "c1.json").write_text("{}")
    untouched.finish()
    release_all()
    assert sorted(os.listdir(out / "traces")) == ["c1.json"]
    notes = out / "traces" / "notes.txt"
    notes.write_text("mine")
    # moved in with an old time (mv, cp -p, touch -d), the folder's time set back too: the
    # manifest lists what the run wrote there, so times do not matter (a tester's finding)
    os.utime(notes, ns=(0, 0))
    os.utime(out / "traces", ns=(0, 0))
    for force in (False, True):
        with pytest.raises(OutputFolderError) as refused:
            OutputFolder.prepare(out, force=force)
        assert str(refused.value) == (
            f"{out / 'traces'} holds 1 entry fieldcheck did not write (traces/notes.txt), and "
            "fieldcheck replaces that folder whole; move them out of it or give another folder"
        )
        release_all()
    assert notes.read_text() == "mine" and (out / "traces" / "c1.json").exists()
    notes.unlink()
    again = OutputFolder.prepare(out)
    assert not (out / "traces").exists()  # ours, removed as before
    release_all()
    # a folder of the user's own where traces/ goes, kept by --force: refused when written
    theirs = tmp_path / "theirs"
    (theirs / "traces").mkdir(parents=True)
    (theirs / "traces" / "keep.txt").write_text("mine")
    forced = OutputFolder.prepare(theirs, force=True)
    refusal = r"traces/keep\.txt\), and fieldcheck replaces"
    with pytest.raises(OutputFolderError, match=refusal), forced.bulk("traces"):
        pytest.fail("the block must not run")
    assert (theirs / "traces" / "keep.txt").read_text() == "mine"
    del again


def _state(folder: Path) -> dict[str, tuple[int, int, bytes | None]]:
    """Every entry under ``folder`` (itself too): mode, mtime and a file's bytes."""
    found = {}
    for path in [folder, *sorted(folder.rglob("*"))]:
        st = path.lstat()
        body = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        found[str(path.relative_to(folder))] = (st.st_mode, st.st_mtime_ns, body)
    return found


def _refused_unchanged(out: Path, args: list[str], stderr: str) -> None:
    """``args`` refused with exit 2 and exactly ``stderr``, ``out`` as it was (``_state``)."""
    before = _state(out)
    result = _invoke(*args)
    assert result.exit_code == 2, result.output
    assert result.stderr == stderr
    assert _state(out) == before


def test_a_users_traces_folder_refused_with_force_leaves_the_folder_as_it_was(
    tmp_path: Path,
) -> None:
    """``numeric score --force`` where --out holds a traces/ of the user's: refused (exit 2, one
    line) before anything is changed (a tester's finding: a manifest stub was left, and an
    earlier run's files were removed): the same entries, times and contents after."""
    data, preds = _numeric_files(tmp_path, ["conv-1"])
    args = ("numeric", "score", "--data", str(data), "--predictions", str(preds), "--force")
    fresh, earlier = tmp_path / "fresh", tmp_path / "earlier"
    assert _invoke("json", "batch", str(_batch(tmp_path)), "--out", str(earlier)).exit_code == 0
    for out in (fresh, earlier):
        (out / "traces").mkdir(parents=True)
        (out / "traces" / "notes.txt").write_text("mine")
        (out / "keep.txt").write_text("mine too")
        for path in (out / "traces", out):
            os.utime(path, ns=(10**18, 10**18))  # a change would show
        _refused_unchanged(
            out,
            [*args, "--out", str(out)],
            f"error: --out: {out / 'traces'} holds 1 entry fieldcheck did not write "
            "(traces/notes.txt), and fieldcheck replaces that folder whole; move them out of it "
            "or give another folder (see 'fieldcheck numeric score --help')\n",
        )
    assert not (fresh / MANIFEST).exists() and (earlier / "summary.json").exists()


def test_a_dangling_link_as_out_says_so(tmp_path: Path) -> None:
    """--out a link to a folder that does not exist: one plain refusal naming the target (a
    tester's finding: it said `cannot create directory dangling: File exists`); nothing made."""
    link = tmp_path / "dangling"
    link.symlink_to(tmp_path / "gone")
    with pytest.raises(OutputFolderError) as refused:
        OutputFolder.prepare(link)
    assert str(refused.value) == f"{link} is a link to {tmp_path / 'gone'}, which does not exist"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling"]


def _refused_before_and_while_prepared(out: Path, message: str) -> None:
    """``out`` refused with ``message`` before the inputs are read (``reserve``) and again by
    ``prepare``."""
    for step in (reserve, OutputFolder.prepare):
        with pytest.raises(OutputFolderError) as refused:
            step(out)
        assert str(refused.value) == message


def test_a_link_loop_as_out_says_so(tmp_path: Path) -> None:
    """--out a link loop (``ln -s loop loop``, a -> b -> a) or a folder inside one: one usage
    line saying so (a tester's finding: "a link to loop, which does not exist", or "cannot
    create directory ...: Too many levels of symbolic links"), before the inputs are read
    (``reserve``) and again by ``prepare``; nothing made."""
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    tail = (
        "a link loop (following its links leads back to them); fix the link or give another folder"
    )
    cases = {
        tmp_path / "loop": f"{tmp_path / 'loop'} is {tail}",
        tmp_path / "a": f"{tmp_path / 'a'} is {tail}",
        tmp_path
        / "loop"
        / "sub": f"{tmp_path / 'loop' / 'sub'} is inside {tmp_path / 'loop'}, {tail}",
    }
    for out, message in cases.items():
        _refused_before_and_while_prepared(out, message)
        result = _invoke("json", "batch", str(_batch(tmp_path)), "--out", str(out), "--force")
        assert result.exit_code == 2
        assert result.stderr == f"error: --out: {message} (see 'fieldcheck json batch --help')\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "d.jsonl", "loop"]


def test_a_chain_of_too_many_links_as_out_is_not_called_a_loop(tmp_path: Path) -> None:
    """--out a chain of 50 links to a folder, no loop (the system follows 40, ELOOP as for a
    loop): one usage line saying the chain is too long, not "a link loop" (a tester's finding);
    a chain of 30 is written through."""
    (tmp_path / "target").mkdir()
    previous = "target"
    for i in range(1, 51):
        (tmp_path / f"c{i}").symlink_to(previous)
        previous = f"c{i}"
    tail = (
        "a chain of more links than the system follows (40 on Linux); link to the folder itself "
        "or give another folder"
    )
    cases = {
        tmp_path / "c50": f"{tmp_path / 'c50'} is {tail}",
        tmp_path
        / "c50"
        / "sub": f"{tmp_path / 'c50' / 'sub'} is inside {tmp_path / 'c50'}, {tail}",
    }
    for out, message in cases.items():
        _refused_before_and_while_prepared(out, message)
    assert os.listdir(tmp_path / "target") == []
    batch = _batch(tmp_path)
    assert _invoke("json", "batch", str(batch), "--out", str(tmp_path / "c30")).exit_code == 0
    assert (tmp_path / "target" / "summary.json").exists()


def test_a_manifest_that_cannot_be_completed_is_one_line(tmp_path: Path) -> None:
    """The last write of a run, the manifest's ``complete``, failing (here the folder removed
    just before; a full disk alike) is the one-line exit-1 error of every command, naming the
    manifest (a tester's finding: json and slots printed a traceback)."""
    import shutil

    from fieldcheck._cli._common import OutputFailed, finish

    out = tmp_path / "out"
    folder = OutputFolder.prepare(out)
    folder.write_text("a.txt", "1")
    shutil.rmtree(out)
    with pytest.raises(OutputFailed) as failed:
        finish(folder)
    assert failed.value.exit_code == 1
    assert failed.value.message == (
        f"--out: cannot write {out / MANIFEST}: No such file or directory"
    )
    release_all()


def test_a_manifest_of_an_earlier_version_falls_back_to_times(tmp_path: Path) -> None:
    """A manifest written before bulk folders listed their entries: an entry newer than the
    manifest is not ours (refused); an untouched folder is removed whole, as before."""
    out = tmp_path / "out"
    (out / "traces").mkdir(parents=True)
    (out / "traces" / "c0.json").write_text("{}")
    lines = [
        {"fieldcheck": "output folder manifest", "complete": False},
        {"dir": "traces", "all": True},
    ]
    (out / MANIFEST).write_text("".join(json.dumps(x) + "\n" for x in lines))
    old = os.lstat(out / MANIFEST).st_mtime_ns - 1_000_000_000
    os.utime(out / "traces" / "c0.json", ns=(old, old))
    os.utime(out / "traces", ns=(old, old))
    OutputFolder.prepare(out)
    release_all()
    assert not (out / "traces").exists()
    (out / "traces").mkdir()
    (out / MANIFEST).write_text("".join(json.dumps(x) + "\n" for x in lines))
    later = os.lstat(out / MANIFEST).st_mtime_ns + 1_000_000_000
    (out / "traces" / "mine.txt").write_text("mine")
    os.utime(out / "traces" / "mine.txt", ns=(later, later))
    os.utime(out / "traces", ns=(later, later))
    with pytest.raises(OutputFolderError, match=r"\(traces/mine\.txt\)"):
        OutputFolder.prepare(out, force=True)
    release_all()


@pytest.mark.parametrize("no_cache", [False, True])
def test_a_ctrl_c_while_scoring_a_no_cache_run_says_the_models_are_called_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_cache: bool
) -> None:
    """Ctrl-C after the model calls, while the outputs are written: under --no-cache nothing
    was cached and finished runs are not resumed, so "run the command again" calls every model
    again, and the line says so (a tester's finding: docs said the replies would be reused)."""
    import typer

    from fieldcheck._cli._common import writing

    folder = OutputFolder.prepare(tmp_path / "out")
    folder.expect("a.txt", "b.txt")
    with pytest.raises(typer.Exit) as stopped, writing(folder, no_cache=no_cache):
        folder.write_text("a.txt", "1")
        raise KeyboardInterrupt
    assert stopped.value.exit_code == 130
    line = capsys.readouterr().err.strip()
    tail = ", which calls every model again: --no-cache kept no reply)" if no_cache else ")"
    assert line == (
        f"interrupted: {tmp_path / 'out'} is not complete; written: 1 file (a.txt); not written: "
        f"b.txt (no summary says complete: true; run the command again{tail}"
    )
    release_all()


def test_an_input_named_as_an_output_is_never_replaced(tmp_path: Path) -> None:
    """``json batch records.jsonl --out . --force`` in the input's folder (the output
    records.jsonl would replace the input, kept by --force as a file fieldcheck did not write),
    and alike for slots and numeric: refused while --out is prepared, exit 2, the folder as it
    was (a tester's finding: the input was overwritten; then refused only once an earlier
    run's files were deleted)."""
    out = tmp_path / "here"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    data = out / "records.jsonl"
    data.write_bytes(_batch(tmp_path).read_bytes())
    gold = _jsonl(
        out / "metrics.csv",
        [{"user": "u", "session": 1, "topic": "t", "field": "f", "values": ["v"]}],
    )
    numeric_data, preds = _numeric_files(tmp_path, ["conv-1"])
    (out / "turns.csv").write_bytes(preds.read_bytes())
    commands = {
        data: ["json", "batch", str(data)],
        gold: ["slots", "score", "--gold", str(gold), "--pred", f"m={gold}"],
        out / "turns.csv": [
            "numeric",
            "score",
            "--data",
            str(numeric_data),
            "--predictions",
            str(out / "turns.csv"),
        ],
    }
    for given, args in commands.items():
        _refused_unchanged(
            out,
            [*args, "--out", str(out), "--force", "--no-store"],
            f"error: --out: {given} is an input of this run and has the name of one of its "
            f"outputs, which would replace it; rename it or give another folder (see "
            f"'fieldcheck {args[0]} {args[1]} --help')\n",
        )


def test_an_output_opened_over_an_input_is_refused(tmp_path: Path) -> None:
    """The guard at write time, for outputs a command does not name when --out is prepared
    (a model run's): opening an output whose path is an input of the run raises the OSError of
    the one-line exit-1 error, the input unchanged and no temporary file left."""
    out = tmp_path / "out"
    out.mkdir()
    given = out / "outputs.jsonl"
    given.write_text("input")
    folder = OutputFolder.prepare(out, force=True, inputs=[given])
    with pytest.raises(OSError) as refused, folder.atomic("outputs.jsonl") as tmp:
        tmp.write_text("output")
    assert refused.value.filename == str(given)
    assert refused.value.strerror == (
        "it is an input of this run, which this output would replace; give another folder"
    )
    assert given.read_text() == "input"
    assert not [p for p in out.iterdir() if TMP_MARK in p.name]


def test_an_earlier_runs_folder_that_cannot_be_deleted_is_a_warning(tmp_path: Path) -> None:
    """The earlier run's traces/ cannot be deleted (its folder read-only; as root, the command
    runs without the capabilities that ignore permissions): the run writes its files, exits 0,
    and one warning names the folder left behind, never a thread's traceback (a tester's
    finding)."""
    data, preds = _numeric_files(tmp_path, ["conv-1", "conv-2"])
    out = tmp_path / "out"
    args = ["numeric", "score", "--data", str(data), "--predictions", str(preds)]
    args += ["--out", str(out), "--bootstrap", "0", "--no-store"]
    assert _invoke(*args).exit_code == 0
    (out / "traces").chmod(0o555)
    command = [sys.executable, "-m", "fieldcheck._cli.main", *args]
    if os.geteuid() == 0:  # root ignores the mode unless it drops these capabilities
        command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", *command]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    finally:
        for path in out.glob(".trash*"):
            path.chmod(0o755)
    assert done.returncode == 0, done.stderr
    (left,) = out.glob(f".trash{TMP_MARK}*")
    assert done.stderr == (
        f"warning: an earlier run's folder could not be deleted and is left as {left} "
        f"(Permission denied); the next run into {out} tries again\n"
    )
    assert sorted(p.name for p in (out / "traces").iterdir()) == ["conv-1.json", "conv-2.json"]
    assert _manifest(out)[-1] == {"complete": True}
    assert _invoke(*args).exit_code == 0  # with the permissions back, the next run removes it
    assert not list(out.glob(".trash*"))


@pytest.mark.parametrize("where", ["before the manifest is complete", "after the command wrote"])
def test_a_ctrl_c_once_every_file_is_written_says_the_folder_is_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A Ctrl-C after summary.json, the run's last file, and before the manifest's last line
    (here raised in place of that write), or once the folder is complete (raised in place of
    the printed summary): one line saying the folder is complete, and it is (a tester's
    finding: "interrupted before any output was written", or "not complete ... no summary says
    complete: true" beside a summary.json saying complete: true)."""
    import fieldcheck._cli.json_cmd as json_cmd

    def interrupt(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    target = "finish" if where.startswith("before") else "print_summary"
    monkeypatch.setattr(json_cmd, target, interrupt)
    out = tmp_path / "out"
    result = _invoke("json", "batch", str(_batch(tmp_path)), "--out", str(out), "--no-store")
    assert result.exit_code == 130
    assert result.stderr == f"interrupted after every file was written: {out} is complete\n"
    assert _manifest(out)[-1] == {"complete": True}
    assert json.loads((out / "summary.json").read_text())["complete"] is True


def test_a_ctrl_c_before_the_summary_still_says_what_was_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C while the report is written (after fields.csv, before summary.json): the folder
    is not marked complete and the line names what is missing."""
    import fieldcheck.jsoneval._io as io

    def interrupt(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(io, "write_batch_report", interrupt)
    out = tmp_path / "out"
    result = _invoke("json", "batch", str(_batch(tmp_path)), "--out", str(out), "--no-store")
    assert result.exit_code == 130
    assert result.stderr.startswith(f"interrupted: {out} is not complete; written: ")
    assert "summary.json" in result.stderr.split("not written: ")[1]
    assert {"complete": True} not in _manifest(out)
    assert not (out / "summary.json").exists()


def test_a_run_of_another_command_into_a_folder_needs_force(tmp_path: Path) -> None:
    """``slots score`` into the folder of an earlier ``numeric score`` run is refused without
    --force (exit 2, the folder unchanged): it would delete the other system's results, which
    it did silently (a tester's finding). The manifest names its command; the same command
    again, or --force, replaces the earlier files as before."""
    data, preds = _numeric_files(tmp_path, ["conv-1"])
    out = tmp_path / "out"
    numeric = ["numeric", "score", "--data", str(data), "--predictions", str(preds)]
    numeric += ["--out", str(out), "--bootstrap", "0", "--no-store"]
    assert _invoke(*numeric).exit_code == 0
    assert _manifest(out)[0] == {
        "fieldcheck": "output folder manifest",
        "complete": False,
        "command": "numeric score",
    }
    gold = _jsonl(
        tmp_path / "g.jsonl",
        [{"user": "u", "session": 1, "topic": "t", "field": "f", "values": ["v"]}],
    )
    slots = ["slots", "score", "--gold", str(gold), "--pred", f"m={gold}", "--out", str(out)]
    slots += ["--bootstrap", "0", "--no-store"]
    _refused_unchanged(
        out,
        slots,
        f"error: --out: {out} holds the files of an earlier `fieldcheck numeric score` run, "
        "which this `fieldcheck slots score` run would delete; give another folder, or --force "
        "to replace them (see 'fieldcheck slots score --help')\n",
    )
    assert _invoke(*numeric).exit_code == 0  # the same command: replaced as before
    assert _invoke(*slots, "--force").exit_code == 0
    assert (out / "metrics.json").exists() and not (out / "statistics.json").exists()
    assert _manifest(out)[0]["command"] == "slots score"


def test_a_folder_an_earlier_runs_manifest_lists_is_never_an_out(tmp_path: Path) -> None:
    """``numeric score --out RUN/traces`` (a folder that run writes whole) and ``--out RUN/x``
    where RUN's manifest lists x or files in it: refused, even with --force, before anything
    is made (RUN's next run would delete what is written there). A folder with its own
    manifest inside RUN is that run's own, whatever RUN's manifest says (``prepare`` ignores
    RUN's entries inside it), and a folder RUN's manifest does not list is free."""
    data, preds = _numeric_files(tmp_path, ["conv-1"])
    run = tmp_path / "run"
    args = ["numeric", "score", "--data", str(data), "--predictions", str(preds)]
    assert _invoke(*args, "--out", str(run)).exit_code == 0
    before = _state(run)
    for out in (run / "traces", run / "traces" / "deeper"):
        result = _invoke(*args, "--out", str(out), "--force")
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith(
            f"error: --out: {out} is inside {run}, an earlier run's output folder whose "
            "manifest lists traces: that run's next run would delete what is written here; "
        ), result.stderr
    assert _state(run) == before
    with (run / MANIFEST).open("a") as f:
        f.write(json.dumps({"file": "own/late.txt"}) + "\n")
    with pytest.raises(OutputFolderError, match=r"manifest lists own/late\.txt: that run's"):
        OutputFolder.prepare(run / "own", force=True)
    assert not (run / "own").exists()
    (run / "own").mkdir()
    (run / "own" / MANIFEST).write_text("")  # its own run's folder now
    OutputFolder.prepare(run / "own", force=True).finish()
    OutputFolder.prepare(run / "free").finish()
    assert (run / "free" / MANIFEST).exists()

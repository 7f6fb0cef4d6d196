"""A large ``numeric score`` scores its chunks, rows and traces included, as tasks
(``_stream.score_chunk``) in a pool process (``fieldcheck._util.executor.LocalPool``): a task's failure is the run's (its own
error raised here, nothing half written left behind), a pool that cannot start leaves the
writing here, and Ctrl-C stops it. Its files are compared byte for byte with the in-process ones
in tests/numeric/test_streamed.py."""

from __future__ import annotations

import errno
import json
import logging
import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from tests.numeric.test_streamed import _files, _write_inputs

from fieldcheck._util.executor import LocalPool
from fieldcheck.numeric import _stream, load_convfinqa, load_predictions, score_to_folder
from fieldcheck.numeric._loaders import PlainConversation
from fieldcheck.reports import PARTIAL, RunFolder


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[LocalPool]:
    """Every pool a run of ``numeric score`` starts."""
    seen: list[LocalPool] = []

    class Seen(LocalPool):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.processes = list(self._pool._processes.values())  # type: ignore[union-attr]
            seen.append(self)

    monkeypatch.setattr(_stream, "LocalPool", Seen)
    return seen


def _inputs(tmp_path: Path, conversations: int = 40):  # type: ignore[no-untyped-def]
    data_path, preds_path = _write_inputs(tmp_path, 4, conversations)
    return load_convfinqa(data_path), load_predictions(preds_path)


def test_a_large_run_uses_the_pool_and_a_small_one_does_not(
    tmp_path: Path, started: list[LocalPool], monkeypatch: pytest.MonkeyPatch
) -> None:
    data, preds = _inputs(tmp_path)
    score_to_folder(data, preds, tmp_path / "small", bootstrap=0)
    assert started == []
    monkeypatch.setattr(_stream, "WRITER_CONVERSATIONS", 40)
    score_to_folder(data, preds, tmp_path / "large", bootstrap=0, chunk=7)
    assert len(started) == 1
    assert [p.exitcode for p in started[0].processes] == [0, 0]  # stopped with the run
    assert _files(tmp_path / "large") == _files(tmp_path / "small")


def test_a_pool_that_cannot_start_leaves_the_writing_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    data, preds = _inputs(tmp_path)
    score_to_folder(data, preds, tmp_path / "here", bootstrap=0)

    def cannot(*_: object, **__: object) -> LocalPool:
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(_stream, "LocalPool", cannot)
    monkeypatch.setattr(_stream, "WRITER_CONVERSATIONS", 1)
    with caplog.at_level(logging.WARNING):
        score_to_folder(data, preds, tmp_path / "fallback", bootstrap=0)
    assert "the scoring process could not start" in caplog.text
    assert _files(tmp_path / "fallback") == _files(tmp_path / "here")


def dies(*_: Any) -> Any:
    """A task that ends its process as a crash would (run in the pool's process)."""
    print("boom", file=sys.stderr)
    os._exit(5)


def full_disk(*_: Any) -> Any:
    """A task whose write fails as on a full disk: an OSError naming no file."""
    raise OSError(28, "No space left on device")


def test_a_pool_process_that_dies_fails_the_run_and_leaves_no_row_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, started: list[LocalPool]
) -> None:
    data, preds = _inputs(tmp_path, 60)
    monkeypatch.setattr(_stream, "score_chunk", dies)
    monkeypatch.setattr(_stream, "WRITER_CONVERSATIONS", 1)
    folder = tmp_path / "out"
    with pytest.raises(OSError, match=r"a pool process ended abruptly") as caught:
        score_to_folder(data, preds, folder, bootstrap=0, chunk=1)
    assert caught.value.errno == errno.EIO
    assert not (folder / "statistics.json").exists()  # the run's summary: not complete
    assert all(p.exitcode is not None for p in started[0].processes)


def test_a_tasks_own_error_is_raised_here_with_its_file(tmp_path: Path) -> None:
    conversation = PlainConversation("c", [], {"x": 1}, {})
    job = _stream.ScoreJob(str(tmp_path), "", "derived", "p.jsonl", store=False)
    with LocalPool(1) as pool:
        pool.submit(partial(_stream.score_chunk, job), [("c", "c", conversation, {})])
        with pytest.raises(KeyError):  # the task's own exception: no "has_type2_question"
            pool.drain()
        missing = str(tmp_path / "missing-folder")
        features = {
            "num_dialogue_turns": 0,
            "has_type2_question": False,
            "has_duplicate_columns": False,
            "has_non_numeric_values": False,
        }
        conversation = PlainConversation("c", [], features, {})
        pool.submit(
            partial(_stream.score_chunk, job._replace(traces=missing)),
            [("c", "c", conversation, {})],
        )
        with pytest.raises(FileNotFoundError) as caught:
            pool.drain()
    assert caught.value.filename == f"{missing}{os.sep}c.json"


def test_an_interrupt_stops_the_pool_and_keeps_nothing(
    tmp_path: Path, started: list[LocalPool], monkeypatch: pytest.MonkeyPatch
) -> None:
    data, preds = _inputs(tmp_path, 300)
    monkeypatch.setattr(_stream, "WRITER_CONVERSATIONS", 1)
    folder = RunFolder.open(tmp_path / "out", command="numeric score")  # as the commands do

    def stop(done: int) -> None:
        if done >= 256:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        score_to_folder(data, preds, folder, bootstrap=0, chunk=16, progress=stop)
    assert [p.exitcode for p in started[0].processes] == [-9, -9]  # killed, not left scoring
    assert not (tmp_path / "out").exists()  # only its partial folder
    # the Ctrl-C line names the row files, traces/ and the files written last (the plots are
    # known only then) as not written (a tester's finding: statistics.json and the reports
    # were left out)
    line = folder.interrupted_line()
    # a file being written (traces/, the row files) is named once, as not finished, not among
    # the files written too (a hostile-endpoint trial's finding)
    assert line.startswith(f"interrupted: 1 file (run.json) in {tmp_path / 'out'}{PARTIAL}; ")
    assert line.endswith(
        "not finished: errors.csv, input_errors.csv, report.html, report.md, "
        "statistics.json, summary.csv, traces, turns.csv, validation.csv (run.json says "
        f"complete: false); the same command with --out {tmp_path / 'out'} continues it"
    )


def test_the_command_names_the_folder_when_a_tasks_error_names_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk fails a write() without a file name: the one-line error names --out, never
    ``None``, and exits 1."""
    from typer.testing import CliRunner

    from fieldcheck._cli.main import app

    data_path, preds_path = _write_inputs(tmp_path, 4, 30)
    monkeypatch.setattr(_stream, "score_chunk", full_disk)
    monkeypatch.setattr(_stream, "WRITER_CONVERSATIONS", 1)
    out = tmp_path / "out"
    argv = ["numeric", "score", "--data", str(data_path), "--predictions", str(preds_path)]
    result = CliRunner().invoke(
        app, [*argv, "--out", str(out), "--no-store"], env={"COLUMNS": "400"}
    )
    assert result.exit_code == 1  # a full disk is not a usage error (decisions.md)
    assert "No space left on device" in " ".join(result.output.split())
    assert not out.exists()  # only its partial folder, which run.json says is not complete
    info = json.loads(Path(f"{out}{PARTIAL}", "run.json").read_text())
    assert info["complete"] is False


def test_the_writers_load_neither_the_agent_nor_the_model_client_nor_sqlalchemy() -> None:
    """``fieldcheck.numeric``, ``fieldcheck.runner`` and ``fieldcheck.metrics`` import their
    modules on first use, so what the output writer (and the store's writer, for the rows)
    imports, ``_stream``, loads no agent, model client, SQLAlchemy or matplotlib: 0.04 s to start
    where it took 0.56 s; nor the report (a pool process never writes one); every public name
    still resolves."""
    code = (
        "import sys, fieldcheck.numeric._stream; "
        "print(sorted(m for m in sys.modules if m.startswith(('openai', 'sqlalchemy', "
        "'matplotlib', 'fieldcheck.runner.', 'fieldcheck.numeric._agent', "
        "'fieldcheck.numeric._report'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "['fieldcheck.runner._errors']"
    import fieldcheck.metrics
    import fieldcheck.numeric
    import fieldcheck.runner

    for package in (fieldcheck.numeric, fieldcheck.runner, fieldcheck.metrics):
        assert all(getattr(package, name) is not None for name in package.__all__)
        assert set(package.__all__) <= set(dir(package))
        with pytest.raises(AttributeError, match="no attribute 'nope'"):
            package.nope  # noqa: B018

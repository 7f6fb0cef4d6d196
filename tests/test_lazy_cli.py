"""The command line starts fast: ``fieldcheck --help`` imports no command's module and no heavy
library; a command imports its own module only; the root's list is what the modules declare."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from fieldcheck import _cli
from fieldcheck._cli.main import COMMANDS, app

HEAVY = {"torch", "sentence_transformers", "matplotlib", "pyarrow", "duckdb", "fastapi"}
HEAVY |= {"pandas", "scipy", "openai", "httpx", "uvicorn", "numpy"}


def _imported(args: list[str], tmp_path: Path, url: bool) -> set[str]:
    """The modules a fresh ``fieldcheck ARGS`` process has imported when it ends."""
    code = (
        "import sys\nfrom fieldcheck._cli.main import main\n"
        f"sys.argv = ['fieldcheck', *{args!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write('\\n' + ' '.join(sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "FIELDCHECK_DATABASE_URL"}
    env |= {"XDG_DATA_HOME": str(tmp_path), "PYTHONPATH": os.pathsep.join(sys.path)}
    if url:
        env["FIELDCHECK_DATABASE_URL"] = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return set(done.stderr.rsplit("\n", 1)[1].split())


def _commands(modules: set[str]) -> set[str]:
    return {
        m.rsplit(".", 1)[1] for m in modules if m.startswith("fieldcheck._cli.") and "_cmd" in m
    }


def _top(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


@pytest.mark.parametrize("url", [False, True])
def test_the_roots_help_imports_no_command_and_no_heavy_library(tmp_path: Path, url: bool) -> None:
    """``fieldcheck --help`` (a tester's finding: 2-5 s) lists the commands from their summaries;
    SQLAlchemy only to show a set store URL without its password, pydantic not at all."""
    modules = _imported(["--help"], tmp_path, url)
    assert _commands(modules) == set()
    assert _top(modules) & (HEAVY | {"pydantic", "rapidfuzz"}) == set()
    assert ("sqlalchemy" in _top(modules)) is url
    assert "sqlalchemy" not in _top(_imported(["--version"], tmp_path, True))


@pytest.mark.parametrize(
    ("args", "command"),
    [(["runs", "list"], "runs_cmd"), (["json", "score", "--help"], "json_cmd")],
)
def test_a_command_imports_its_own_module_only(
    tmp_path: Path, args: list[str], command: str
) -> None:
    modules = _imported(args, tmp_path, True)
    assert _commands(modules) == {command}
    assert _top(modules) & (HEAVY - {"numpy"} if command == "json_cmd" else HEAVY) == set()


@pytest.mark.parametrize(
    "args", [["json", "score"], ["slots", "score"], ["numeric", "score"], ["view"]]
)
def test_a_scoring_commands_help_imports_no_sqlalchemy(tmp_path: Path, args: list[str]) -> None:
    """``SYSTEM score --help`` with no store URL to show imports no SQLAlchemy: the runner's
    client, its model runs, the judge and the runner options imported it at their top (about a
    quarter of a second of each help); ``view --help`` neither (the store's error it catches)."""
    assert "sqlalchemy" not in _top(_imported([*args, "--help"], tmp_path, False))


def test_numerics_help_imports_no_numpy(tmp_path: Path) -> None:
    """``numeric score --help`` imports numeric's modules but not numpy: only the bootstrap and
    the report use it (about 0.15 s of each help here)."""
    modules = _imported(["numeric", "score", "--help"], tmp_path, False)
    assert "fieldcheck.numeric._scoring" in modules and "numpy" not in _top(modules)


def test_a_numeric_pool_worker_imports_no_numpy_rich_or_store() -> None:
    """What each numeric scoring process imports before its first chunk (the pool's ``warm``
    module): not numpy (the bootstrap's, in the one process that runs it), nor Rich (the CSV
    cells are escaped without it), nor the store's SQLAlchemy."""
    from fieldcheck.numeric._stream import score_to_folder

    code = f"import sys, {score_to_folder.__module__}; print(' '.join(sys.modules))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    modules = set(done.stdout.split())
    assert "fieldcheck.numeric._scoring" in modules and "fieldcheck.reports._csv" in modules
    assert _top(modules) & (HEAVY | {"rich", "threadpoolctl", "sqlalchemy"}) == set()


def _root_help(group: Any, capsys: pytest.CaptureFixture[str]) -> str:
    group.format_help(typer.Context(group, info_name="fieldcheck"), None)
    return capsys.readouterr().out


def test_the_roots_list_is_what_each_command_declares(capsys: pytest.CaptureFixture[str]) -> None:
    """Each summary in ``COMMANDS`` is the first paragraph of its command's help, every command
    module is listed, and ``--help`` reads the same with every command loaded."""
    modules = {path.stem for path in Path(_cli.__file__).parent.glob("*_cmd.py")}
    assert set(COMMANDS) == modules
    group = typer.main.get_command(app)
    from_summaries = _root_help(group, capsys)
    context = typer.Context(group, info_name="fieldcheck")
    names = group.list_commands(context)
    assert names[:4] == ["score", "serve-model", "serve", "view"] and len(names) == len(modules)
    for name, summary in zip(names, COMMANDS.values(), strict=True):
        command = group.get_command(context, name)
        assert (command.name, command.help.split("\n\n")[0]) == (name, summary)
    assert "json" in from_summaries and _root_help(group, capsys) == from_summaries


def test_a_mistyped_command_is_still_suggested() -> None:
    result = CliRunner().invoke(app, ["jsn", "score"])
    assert result.exit_code == 2
    assert "error: No such command 'jsn'. Did you mean 'json'?" in result.output


def test_ctrl_c_while_a_command_imports_is_the_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A command's module is imported once the root has started: a Ctrl-C then is the line and
    status of one during the console script's own imports (not a traceback, not "aborted")."""
    from fieldcheck._cli import main

    def interrupted(name: str) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(main, "import_module", interrupted)
    status = typer.main.get_command(app).main(["json", "score", "--help"], standalone_mode=False)
    assert status == 130
    assert capsys.readouterr().err.endswith("interrupted before any output was written\n")


def test_numeric_score_imports_no_other_system(tmp_path: Path) -> None:
    """A numeric run's process imports neither json's modules nor rapidfuzz: the progress bar's
    throttle lived in json's stream (~0.05 s of each numeric and slots run)."""
    examples = Path(__file__).parent.parent / "examples" / "numeric"
    args = ["numeric", "score", "--data", str(examples / "data.json"), "--out", str(tmp_path / "o")]
    modules = _imported(
        [*args, "--predictions", str(examples / "predictions_model_a.jsonl")], tmp_path, True
    )
    assert (
        tmp_path / "o" / "statistics.json"
    ).is_file() and "fieldcheck.numeric._stream" in modules
    assert not any(m.startswith("fieldcheck.jsoneval") for m in modules)
    assert "rapidfuzz" not in _top(modules)

"""docs/cli.md: the CI-gating example runs as written and prints what the doc says."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fieldcheck._cli.main import app

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "cli.md").read_text()


def _steps() -> list[tuple[list[str], int, str]]:
    """(arguments, expected exit status, expected line) of each command of the gating block."""
    block = DOC.split("## Gating CI on a model", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    steps = []
    for command, status, line in re.findall(
        r"\.venv/bin/fieldcheck ((?:.|\n)*?)\necho \"exit \$\?\" +# (\d): ([^\n]*)", block
    ):
        steps.append((shlex.split(command.replace("\\\n", " ")), int(status), line.strip()))
    return steps


def test_the_gating_block_has_both_outcomes() -> None:
    assert [status for _, status, _ in _steps()] == [0, 4]


@pytest.mark.parametrize(("args", "status", "line"), _steps())
def test_gating_example_runs_as_documented(
    tmp_path: Path, args: list[str], status: int, line: str
) -> None:
    args = [str(tmp_path / a) if a.startswith("out/") else a for a in args]
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    finally:
        os.chdir(cwd)
    assert result.exit_code == status, result.output
    assert line in result.output

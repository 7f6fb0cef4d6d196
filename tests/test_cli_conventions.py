"""One product (issue 9): the same error style, options and exit statuses in all three systems."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fieldcheck._cli.main import app

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
WIDE = {"COLUMNS": "200", "NO_COLOR": "1"}


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env=WIDE)
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["slots", "score", "--gold", "g.jsonl", "--out", "o"], "error: Missing option '--pred'."),
        (
            ["numeric", "score", "--data", "nope.json", "--predictions", "p", "--out", "o"],
            "error: --data: file 'nope.json' does not exist.",
        ),
        (["json", "score", "--bogus"], "error: No such option: --bogus"),
        (
            ["json", "batch", "x.jsonl", "--out", "o", "--fuzzy-threshold", "3"],
            "error: --fuzzy-threshold: ",
        ),
        (
            ["slots", "score", "--gold", "g", "--pred", "a=p", "--out", ""],
            "error: --out: must name a folder",
        ),
        (["json", "scor"], "error: No such command 'scor'. Did you mean 'score'?"),
    ],
)
def test_a_usage_error_is_one_line_exit_2_in_every_system(args: list[str], expected: str) -> None:
    status, output = _run(*args)
    assert status == 2
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(expected), output
    assert lines[0].endswith(
        f"(see 'fieldcheck {' '.join(args[: 2 if args[1] != 'scor' else 1])} --help')"
    )
    assert "╭" not in output and "Usage:" not in output


def test_verbose_is_accepted_after_the_subcommand(tmp_path: Path) -> None:
    gt, out = tmp_path / "gt.json", tmp_path / "out.json"
    gt.write_text('{"a": 1}')
    out.write_text('{"a": 1}')
    before = _run("-v", "json", "score", str(gt), str(out), "--json")
    after = _run("json", "score", str(gt), str(out), "--json", "-v")
    also = _run("json", "score", "--verbose", str(gt), str(out), "--json")
    assert before[0] == after[0] == also[0] == 0
    assert json.loads(after[1])["completeness"] == 1.0 and before[1] == after[1] == also[1]

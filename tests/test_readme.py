"""The README's examples run as written and print what the README says."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_readme_opens_with_the_two_commands() -> None:
    first = re.search(r"```\n(.*?)```", README, flags=re.S)
    assert first is not None and first.group(1).split() == ["make", "demo", "make", "test"]


def test_python_example_prints_its_comments() -> None:
    (code,) = _blocks("python")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    lines = out.getvalue().splitlines()
    completeness, hallucination, accuracy, rqs = map(float, lines[0].split())
    assert (completeness, hallucination, accuracy) == (2 / 3, 0.25, 1.0)
    # 0.45 * 1 + 0.25 * 2/3 + 0.15 * 1 - 0.15 * 0.25 = 0.729166...
    assert round(rqs, 4) == 0.7292
    f1_value, bleu = map(float, lines[1].split())
    assert f1_value == pytest.approx(0.7) and round(bleu, 4) == 0.3679
    assert lines[2] == "True"
    assert "operation='divide'" in lines[3]


@pytest.mark.slow
def test_json_walkthrough_commands(tmp_path: Path) -> None:
    block = next(b for b in _blocks("bash") if "json score" in b)
    script = block.replace(".venv/bin/fieldcheck", f"{sys.executable} -m fieldcheck._cli.main")
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r"RQS\s+│\s+0\.7375", done.stdout)
    assert re.search(r"completeness\s+│\s+0\.7500", done.stdout)

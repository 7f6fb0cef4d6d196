"""The README's examples run as written and print what the README says."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
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


def test_slots_tour_scores_three_models_and_its_run_rescores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tour's slot block scores the three models its sentence names, and the stored run is
    what `runs rescore RUN_S --tp exact` takes (it said `--strategies`, which only a json run
    takes, and a README reader has no stored json run: exit 2)."""
    from typer.testing import CliRunner

    from fieldcheck._cli.main import app

    (block,) = [b for b in _blocks("bash") if "slots score" in b]
    assert "Three models" in README.split(block, 1)[0].rsplit("```", 1)[0][-200:]
    args = shlex.split(block.replace("\\\n", " "))[1:]
    args = [str(tmp_path / a) if a.startswith("out/") else a for a in args]
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{tmp_path / 's.sqlite3'}")
    monkeypatch.chdir(ROOT)
    scored = CliRunner().invoke(app, [*args, "--json"])
    assert scored.exit_code == 0, scored.output
    assert sorted(json.loads(scored.stdout)["models"]) == ["careful", "eager", "fast"]
    (line,) = [ln for b in _blocks("bash") for ln in b.splitlines() if "runs rescore" in ln]
    rescore = shlex.split(line.split("#", 1)[0])[1:]
    run_id = re.search(r"stored as run (\w+)", scored.stderr).group(1)  # type: ignore[union-attr]
    again = CliRunner().invoke(app, [a.replace("RUN_S", run_id) for a in rescore])
    assert again.exit_code == 0, again.output

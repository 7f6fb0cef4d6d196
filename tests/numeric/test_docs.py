"""docs/numeric.md stays true: its normalisation table and its Python example."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from fieldcheck.metrics import OPERATION_ALIASES

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "numeric.md"


def test_normalisation_table_matches_the_code() -> None:
    text = DOC.read_text()
    table: dict[str, str] = {}
    for target, names in re.findall(
        r"^\| `(\w+)` \| ((?:`\w+`(?:, )?)+) \|$", text, flags=re.MULTILINE
    ):
        for name in re.findall(r"`(\w+)`", names):
            table[name] = target
    assert table == OPERATION_ALIASES


def test_python_example_runs(tmp_path: Path) -> None:
    code = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)[0]
    (tmp_path / "examples").symlink_to(REPO / "examples")
    script = tmp_path / "example.py"
    script.write_text(code)
    env = {**os.environ, "MPLBACKEND": "Agg"}
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "{" in done.stdout  # the failure-mode counts
    assert (tmp_path / "out" / "numeric-model-b" / "statistics.json").is_file()

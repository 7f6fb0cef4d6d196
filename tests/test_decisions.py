"""docs/decisions.md: every decision names a test, and every test it names exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DECISIONS = (ROOT / "docs" / "decisions.md").read_text()
REF = re.compile(r"`(tests/[\w/]+\.py)?::(\w+)`")


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_decision_names_a_test() -> None:
    lines = [line for line in DECISIONS.splitlines() if line.startswith("- ")]
    assert len(lines) >= 40
    missing = [line[:80] for line in lines if "tests/" not in line]
    assert missing == []


def test_every_named_test_exists() -> None:
    checked = 0
    for line in (ln for ln in DECISIONS.splitlines() if ln.startswith("- ")):
        current: str | None = None
        for file, name in REF.findall(line):
            current = file or current  # "`::other`" continues the file named before it
            assert current is not None, f"no file before ::{name} in: {line[:80]}"
            path = ROOT / current
            assert path.is_file(), f"{current} (named in docs/decisions.md) does not exist"
            assert name in _test_names(path), f"{current}::{name} is named but not defined"
            checked += 1
    assert checked >= 40

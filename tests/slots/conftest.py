"""Fixtures of the slot benchmark tests; puts this folder on sys.path for ``slots_helpers``."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def write_jsonl(path: Path, rows: Iterable[dict[str, Any] | str]) -> Path:
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8"
    )
    return path


@pytest.fixture
def jsonl(tmp_path: Path) -> Callable[[str, Iterable[dict[str, Any] | str]], Path]:
    """``jsonl("gold.jsonl", rows)`` writes rows into the test's tmp dir and returns the path."""
    return lambda name, rows: write_jsonl(tmp_path / name, rows)

"""One implementation of every number (ARCHITECTURE.md; issue 27, item 6): the numbers
``fieldcheck numeric score`` prints and writes come from the ``fieldcheck.metrics`` function
named after the spec's metric, so patching that function changes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck.metrics import ParsedAnswer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "numeric"


def _score(out: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """statistics.json and the printed table's rows (metric -> value) of model a."""
    args = ["numeric", "score", "--data", str(EXAMPLES / "data.json")]
    args += ["--predictions", str(EXAMPLES / "predictions_model_a.jsonl")]
    args += ["--out", str(out), "--no-store", "--bootstrap", "0"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    rows = {
        cells[0]: cells[1]
        for cells in (
            [c.strip() for c in line.strip("│┃ ").split("│")] for line in result.stdout.splitlines()
        )
        if len(cells) > 1
    }
    return json.loads((out / "statistics.json").read_text()), rows


def test_patching_numerical_match_changes_what_numeric_score_prints_and_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stats, rows = _score(tmp_path / "before")
    assert stats["numerical_match_accuracy"] == 44 / 51  # tests/numeric/test_cost_per_correct.py
    assert rows["numerical match"] == "0.863"
    assert stats["soft_match_accuracy"] < 1.0

    def exact_only(prediction: ParsedAnswer | None, reference: object) -> bool:
        """A stricter numerical match: the parsed value equals the gold exactly."""
        return prediction is not None and prediction.value == reference

    monkeypatch.setattr("fieldcheck.metrics._numbers.numerical_match", exact_only)
    patched, rows = _score(tmp_path / "after")
    assert patched["numerical_match_accuracy"] < stats["numerical_match_accuracy"]
    assert rows["numerical match"] == f"{patched['numerical_match_accuracy']:.3f}"
    # the failure modes are derived from the match types: more turns fail
    assert patched["num_failed_turns"] > stats["num_failed_turns"]
    assert sum(patched["failure_modes"].values()) == patched["num_failed_turns"]
    # the soft match is its own function (the looser types call numerical_match for yes/no)
    assert patched["soft_match_accuracy"] == stats["soft_match_accuracy"]
    turns = (tmp_path / "after" / "turns.csv").read_text()
    assert turns != (tmp_path / "before" / "turns.csv").read_text()


def test_patching_logic_recall_changes_what_numeric_score_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stats, rows = _score(tmp_path / "before")
    assert 0.0 < stats["avg_logic_recall"] < 1.0
    assert rows["logic recall"] == f"{stats['avg_logic_recall']:.3f}"
    # the same plans and programs scored again (the run's cache is emptied when it starts)
    monkeypatch.setattr("fieldcheck.metrics._programs.logic_recall", lambda plan, gold: 0.25)
    patched, rows = _score(tmp_path / "after")
    assert patched["avg_logic_recall"] == 0.25
    assert rows["logic recall"] == "0.250"
    assert patched["avg_logic_precision"] == stats["avg_logic_precision"]

"""Every slot number users see is made by its ``fieldcheck.metrics`` function (ARCHITECTURE.md
"One implementation of every number"): replacing the function changes what ``fieldcheck slots
score`` writes, point estimates and intervals alike."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck.metrics import _arrays, _slots, _stats, _text

EXAMPLES = Path(__file__).parents[2] / "examples" / "slots"
MODELS = ("careful", "eager", "fast")


def _models(out: Path) -> dict[str, Any]:
    """``slots score`` of the example files (presence TP), its metrics.json's models."""
    args = ["slots", "score", "--gold", str(EXAMPLES / "gold.synthetic.jsonl"), "--no-store"]
    args += ["--out", str(out), "--bootstrap", "100"]
    for m in MODELS:
        name = f"synthetic-{m}"
        args += ["--pred", f"{name}={EXAMPLES / f'pred_{name}.synthetic.jsonl'}"]
        args += ["--latency", f"{name}={EXAMPLES / f'latency_{name}.synthetic.jsonl'}"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    models: dict[str, Any] = json.loads((out / "metrics.json").read_text())["models"]
    return models


def _latencies(model: str) -> list[float]:
    path = EXAMPLES / f"latency_synthetic-{model}.synthetic.jsonl"
    return [json.loads(line)["seconds"] for line in path.read_text().splitlines() if line]


def _bleu_of_presence(m: dict[str, Any]) -> bool:
    return bool(m["bleu1"] == m["recall"])


def _token_f1_is_recall(m: dict[str, Any]) -> bool:
    return bool(m["token_f1"] == m["token_recall"] == m["ci"]["token_f1"]["estimate"])


def _f1_is_precision(m: dict[str, Any]) -> bool:
    return bool(
        m["f1"] == m["precision"] == m["ci"]["f1"]["estimate"]
        and m["token_f1"] == m["token_precision"]
    )


def _exact_of_presence(m: dict[str, Any]) -> bool:
    return bool(m["exact_match_rate"] == m["recall"] == m["ci"]["exact_match_rate"]["estimate"])


# (module, name, replacement, what the output then says): each replacement makes a metric equal
# to another one the output has (under presence TP every predicted gold slot is a TP, so "1 per
# predicted gold slot" over the gold slots is the recall)
CASES: list[tuple[Any, str, Callable[..., Any], Callable[[dict[str, Any]], bool]]] = [
    (_text, "bleu1_score", lambda pred, ref: 1.0 if pred else 0.0, _bleu_of_presence),
    (_slots, "token_f1", lambda m, p, g: _slots.token_recall(m, g), _token_f1_is_recall),
    (_arrays, "f1_from_pr", lambda p, r: p, _f1_is_precision),
    (_slots, "slot_exact_match", lambda p, r: bool(_slots.slot_values(p)), _exact_of_presence),
]


@pytest.mark.parametrize(("module", "name", "replacement", "holds"), CASES)
def test_a_replaced_metric_function_changes_the_cli_output(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    module: Any,
    name: str,
    replacement: Callable[..., Any],
    holds: Callable[[dict[str, Any]], bool],
) -> None:
    before = _models(tmp_path / "before")
    assert not all(holds(m) for m in before.values())  # the real function says otherwise
    monkeypatch.setattr(module, name, replacement)
    after = _models(tmp_path / "after")
    assert all(holds(m) for m in after.values()), after
    assert after != before


def test_a_replaced_p95_changes_the_latency_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _models(tmp_path / "before")
    monkeypatch.setattr(_stats, "p95_nearest_rank", max)
    after = _models(tmp_path / "after")
    for m in MODELS:
        seconds = _latencies(m)
        assert after[f"synthetic-{m}"]["latency"]["p95"] == max(seconds)
        # 15 sessions: the spec's p95 is sorted[max(int(15 * 0.95) - 1, 0)] = sorted[13]
        assert before[f"synthetic-{m}"]["latency"]["p95"] == sorted(seconds)[13] < max(seconds)


def test_token_f1_is_public_beside_token_precision_and_recall() -> None:
    """decisions.md lists ``token_f1``; ``from fieldcheck.metrics import token_f1`` failed."""
    from fieldcheck.metrics import token_f1

    assert token_f1(2, 4, 2) == pytest.approx(2 / 3)  # P 0.5, R 1.0

"""One implementation of every number (issue 27): the ``fieldcheck.metrics`` function named after
the spec's metric is the one behind the numbers ``json score`` and ``json batch`` print and
write. Each test patches one function and sees the CLI's output change, on records scored by
the columnar kernel, by ``_outcome``, by the general path (a FUZZY field) and by the non-object
rule."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fieldcheck import metrics
from fieldcheck._cli.main import app

STRATEGIES = {"code": "EXACT", "age": "EXACT", "name": "FUZZY"}
RECORDS = [
    # the output is its ground truth: the columnar kernel
    {
        "id": "same",
        "ground_truth": {"code": "A-1", "age": 41},
        "output": {"code": "A-1", "age": 41},
    },
    # EXACT fields, a null and an extra key: ``_outcome``
    {
        "id": "fast",
        "ground_truth": {"code": "A-1", "age": 41, "po": None},
        "output": {"code": "a-1", "age": 40, "po": "PO-9", "extra": 1},
    },
    # a FUZZY field to compare: the general path
    {
        "id": "fuzzy",
        "ground_truth": {"name": "John Smith", "code": "A-1"},
        "output": {"name": "John Smyth", "code": "A-1"},
    },
    # not an object: the documented rule (0, 1, 0) and RQS
    {"id": "text", "ground_truth": {"code": "A-1"}, "output": "no invoice here"},
]
SCORES = ("completeness", "hallucination", "accuracy", "safety_score", "rqs")


def _batch(tmp_path: Path) -> dict[str, dict[str, Any]]:
    data, strategies = tmp_path / "d.jsonl", tmp_path / "s.json"
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    strategies.write_text(json.dumps(STRATEGIES))
    out = tmp_path / "out"
    args = ["json", "batch", str(data), "--strategies", str(strategies), "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--no-store", "--bootstrap", "0"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    return {"summary": summary, **{r["id"]: r for r in rows}}


def _score(tmp_path: Path, index: int) -> dict[str, Any]:
    """``json score --json`` of one of RECORDS."""
    record = RECORDS[index]
    gt, out, strategies = tmp_path / "gt.json", tmp_path / "out.json", tmp_path / "s.json"
    gt.write_text(json.dumps(record["ground_truth"]))
    out.write_text(json.dumps(record["output"]))
    strategies.write_text(json.dumps(STRATEGIES))
    args = ["json", "score", str(gt), str(out), "--strategies", str(strategies), "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_the_numbers_unpatched(tmp_path: Path) -> None:
    # what the patched runs below change, worked out by hand (default weights 0.45/0.25/0.15/0.15)
    got = _batch(tmp_path)
    assert [got["same"][s] for s in SCORES] == [1.0, 0.0, 1.0, 1.0, 0.85]
    # fast: gt_non_null code, age (both filled); hallucination (extra + po) / 4 distinct keys;
    # code a-1 = A-1, age 40 != 41: accuracy 1/2; 0.45*0.5 + 0.25 + 0.15 - 0.15*0.5 = 0.55
    assert [got["fast"][s] for s in SCORES] == [1.0, 0.5, 0.5, 1.0, 0.55]
    assert got["fast"]["buckets"]["extra_keys"] == ["extra"]
    # fuzzy: John Smyth ~ John Smith at 0.9 >= 0.85 (rapidfuzz), code equal
    assert [got["fuzzy"][s] for s in SCORES] == [1.0, 0.0, 1.0, 1.0, 0.85]
    assert [got["text"][s] for s in SCORES] == [0.0, 1.0, 0.0, 1.0, 0.0]
    assert got["summary"]["means"]["hallucination"] == (0 + 0.5 + 0 + 1) / 4
    assert _score(tmp_path, 1)["rqs"] == 0.55


def _constant(value: float) -> Callable[..., float]:
    return lambda *args, **kwargs: value


@pytest.mark.parametrize(
    ("name", "score"),
    [
        ("completeness", "completeness"),
        ("hallucination", "hallucination"),
        ("accuracy", "accuracy"),
    ],
)
def test_patching_a_score_function_changes_every_object_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, score: str
) -> None:
    monkeypatch.setattr(metrics, name, _constant(0.125))
    got = _batch(tmp_path)
    assert [got[i][score] for i in ("same", "fast", "fuzzy")] == [0.125] * 3
    assert got["text"][score] == (1.0 if score == "hallucination" else 0.0)  # the non-object rule
    assert got["summary"]["means"][score] == (0.125 * 3 + got["text"][score]) / 4
    assert _score(tmp_path, 2)[score] == 0.125


def test_patching_rqs_changes_every_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "rqs", _constant(0.375))
    got = _batch(tmp_path)
    assert [got[i]["rqs"] for i in ("same", "fast", "fuzzy", "text")] == [0.375] * 4
    assert got["summary"]["means"]["rqs"] == 0.375
    assert _score(tmp_path, 0)["rqs"] == 0.375


def test_patching_exact_match_changes_the_exact_fields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metrics, "exact_match", _constant(False))
    got = _batch(tmp_path)
    for i in ("same", "fast", "fuzzy"):
        assert got[i]["fields"]["code"] == {"strategy": "EXACT", "similarity": 0.0, "score": 0.0}
    assert got["same"]["accuracy"] == 0.0 and got["fuzzy"]["accuracy"] == 0.5
    assert got["summary"]["fields"]["code"]["matched"] == 0
    assert _score(tmp_path, 0)["accuracy"] == 0.0


def test_patching_classify_keys_changes_the_buckets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = metrics.classify_keys

    def with_an_invented_key(output: Any, ground_truth: Any) -> metrics.KeyBuckets:
        b = real(output, ground_truth)
        return b._replace(extra_keys=[*b.extra_keys, "zz"], total_distinct=b.total_distinct + 1)

    monkeypatch.setattr(metrics, "classify_keys", with_an_invented_key)
    got = _batch(tmp_path)
    assert got["same"]["buckets"]["extra_keys"] == ["zz"]
    assert got["same"]["hallucination"] == 1 / 3
    assert got["fast"]["buckets"]["extra_keys"] == ["extra", "zz"]
    assert got["summary"]["fields"]["zz"]["hallucinated"] == 4  # a non-object is classified as {}
    assert _score(tmp_path, 2)["buckets"]["extra_keys"] == ["zz"]

"""The local matchers with the real all-MiniLM-L6-v2 model (loaded once for this module) and the demo."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck.jsoneval import (
    SYSTEM,
    BatchRecord,
    EvalConfig,
    _stream,
    evaluate,
    evaluate_batch,
)
from fieldcheck.matchers import DiskCache, FuzzyMatcher, SemanticMatcher
from fieldcheck.matchers._semantic import load_model

json_columns = SYSTEM.item_columns

pytestmark = pytest.mark.slow
Walk = tuple[dict[str, Any], dict[str, Any], dict[str, str]]


@pytest.fixture(scope="module")
def model() -> Any:
    return load_model()  # ~8 s once; every SemanticMatcher of this process reuses it


def test_walkthrough_with_local_matchers(model: Any, walkthrough: Walk, tmp_path: Path) -> None:
    aio, gt, strategies = walkthrough
    r = evaluate(aio, gt, EvalConfig(strategies=strategies))  # the default: --matcher local
    assert r.completeness == 0.75
    assert abs(r.hallucination - 2 / 6) < 1e-12
    assert r.accuracy == 1.0
    assert r.rqs == 0.7375
    assert r.fields["name"].similarity == 0.9  # token_sort_ratio: one letter of ten differs
    bio = r.fields["bio"].similarity
    assert bio is not None and 0.80 <= bio <= 1.0  # MiniLM cosine of the two bios (about 0.945)
    assert r.signature.settings["semantic"]["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    # the same numbers through `fieldcheck json score --json` (the default --matcher local)
    for name, value in (("gt.json", gt), ("out.json", aio), ("s.json", strategies)):
        (tmp_path / name).write_text(json.dumps(value))
    result = CliRunner().invoke(
        app,
        [
            "json", "score", str(tmp_path / "gt.json"), str(tmp_path / "out.json"),
            "--strategies", str(tmp_path / "s.json"), "--json",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["completeness"], data["accuracy"], data["safety_score"], data["rqs"]) == (
        0.75, 1.0, 1.0, 0.7375,
    )  # fmt: skip
    assert data["hallucination"] == 2 / 6
    assert data["signature"]["settings"]["matcher"] == "local"
    assert data["fields"]["name"] == {"strategy": "FUZZY", "similarity": 0.9, "score": 1.0}


def test_semantic_encodes_each_distinct_string_once(
    model: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_stream, "MATCH_CHUNK", 1)  # other matchers would get one pair per call
    semantic = SemanticMatcher(cache=None)  # no cache to hide a second encoding
    matchers = {"FUZZY": FuzzyMatcher(), "SEMANTIC": semantic}
    gt = {"a": "The invoice was paid in full", "b": "Delivered to the back door"}
    outputs = [
        {"a": "Payment received in full", "b": "Left at the rear entrance"},
        {"a": "Payment received in full", "b": "Delivered to the back door"},
        {"a": "Not paid yet", "b": "Left at the rear entrance"},
    ]
    records = [BatchRecord(id=i, ground_truth=gt, output=o) for i, o in enumerate(outputs)]
    batch = evaluate_batch(records, EvalConfig(), matchers=matchers)
    # distinct strings: 2 GT texts + 3 distinct outputs that differ from their GT
    assert semantic.encoded_count == 5
    assert batch.summary.matcher_pairs == {"FUZZY": 0, "SEMANTIC": 3}
    assert batch.results[2].result.fields["a"].score == 0.0  # "Not paid yet" is not a paraphrase
    cache = DiskCache(tmp_path / "cache.sqlite3")
    first = SemanticMatcher(cache=cache)
    evaluate_batch(records, EvalConfig(), matchers={"FUZZY": FuzzyMatcher(), "SEMANTIC": first})
    again = SemanticMatcher(cache=cache)
    evaluate_batch(records, EvalConfig(), matchers={"FUZZY": FuzzyMatcher(), "SEMANTIC": again})
    assert (first.encoded_count, again.encoded_count) == (5, 0)  # then all from the on-disk cache


def test_the_bundled_example_runs_fast_and_exits_0(model: Any, tmp_path: Path) -> None:
    examples = Path(__file__).resolve().parents[2] / "examples" / "json"
    data, strategies = examples / "invoices.jsonl", examples / "strategies.json"
    options = ["--strategies", str(strategies), "--flatten", "--safety-check", "leaks"]
    start = time.perf_counter()
    result = CliRunner().invoke(
        app, ["json", "batch", str(data), *options, "--out", str(tmp_path / "json"), "--no-store"]
    )
    elapsed = time.perf_counter() - start
    assert result.exit_code == 0, result.output
    assert elapsed < 30  # the model is already loaded; the budget for `make demo` is a minute
    summary = json.loads((tmp_path / "json" / "summary.json").read_text())
    assert summary["records"] == 300 and summary["scored"] == 300 and summary["not_scored"] == 0
    # failed: the records not fully right, as the store reads them from records.jsonl
    records = (tmp_path / "json" / "records.jsonl").read_text().splitlines()
    assert (
        summary["failed"] == sum(bool(json_columns(json.loads(r)).failed) for r in records) == 235
    )
    assert summary["not_an_object"] > 0 and summary["safety_flagged"] > 0
    assert summary["fields"]["line_items[*].description"]["strategies"] == ["SEMANTIC"]
    assert 0.5 < summary["means"]["rqs"] < 0.85
    assert "300 of 300 records scored" in result.output and "summary.json" in result.output


def test_json_score_tells_long_unbroken_strings_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new-user trial: two 5,000-letter runs (auto-detected SEMANTIC) scored 1.0, matched."""
    monkeypatch.setenv("FIELDCHECK_CACHE_DIR", str(tmp_path / "cache"))
    gt, out = tmp_path / "gt.json", tmp_path / "o.json"
    gt.write_text(json.dumps({"token": "L" * 5000}), encoding="utf-8")
    out.write_text(json.dumps({"token": "M" * 5000}), encoding="utf-8")
    result = CliRunner().invoke(app, ["json", "score", str(gt), str(out), "--no-store", "--json"])
    assert result.exit_code == 0, result.output
    field = json.loads(result.stdout)["fields"]["token"]
    assert field["strategy"] == "SEMANTIC"
    assert field["similarity"] < 0.8 and field["score"] == 0.0

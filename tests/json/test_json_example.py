"""The bundled example is generated deterministically, committed as generated, and realistic."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from fieldcheck.jsoneval import load_strategies, read_batch

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "json"


def test_committed_files_equal_a_fresh_generation(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("json_example_generate", EXAMPLES / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    generate_records = module.generate_records
    data, strategies = module.write_example(tmp_path)
    assert data.read_bytes() == (EXAMPLES / "invoices.jsonl").read_bytes()
    assert strategies.read_text() == (EXAMPLES / "strategies.json").read_text()
    assert generate_records(5, seed=1) == generate_records(5, seed=1)
    assert generate_records(5, seed=1) != generate_records(5, seed=2)


def test_example_has_the_variety_the_demo_needs() -> None:
    records, errors = read_batch(EXAMPLES / "invoices.jsonl")
    assert errors == [] and len(records) == 300
    outputs = [r.output for r in records]
    objects = [o for o in outputs if isinstance(o, dict)]
    assert sum(isinstance(o, str) for o in outputs) >= 5  # refusals, fenced and truncated JSON
    assert any(isinstance(o, list) for o in outputs)
    assert any("confidence" in o for o in objects)  # extra keys
    assert any(o.get("customer") is None for o in objects)  # missing or null
    assert any(r.ground_truth["purchase_order"] is None for r in records)  # nulls in GT
    assert any(r.safety_score is not None for r in records)
    assert all(isinstance(r.ground_truth["vendor"]["address"], dict) for r in records)  # nested
    strategies = load_strategies(EXAMPLES / "strategies.json")
    assert strategies["line_items[*].description"] == "SEMANTIC" and strategies["notes"] == "IGNORE"
    assert json.loads((EXAMPLES / "strategies.json").read_text()) == strategies

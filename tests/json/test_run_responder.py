"""The synthetic json-extract responder (serve-model) and the demo hook that runs it."""

from __future__ import annotations

import csv
import io
import json
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from fieldcheck._cli.json_cmd import run_model_demo
from fieldcheck.jsoneval import build_messages, load_schema, read_documents
from fieldcheck.serve_model import (
    EXAMPLES,
    SYNTHETIC_MODELS,
    BackgroundServer,
    LookupResponder,
    create_app,
)
from fieldcheck.serve_model._json import (
    EXTRA_KEYS,
    PROFILES,
    Profile,
    answer,
    build,
    index,
    typo,
)

RECORDS, _ = read_documents(EXAMPLES / "json" / "documents.jsonl")
SCHEMA = load_schema(EXAMPLES / "json" / "invoice.schema.json")


@pytest.fixture(scope="module")
def responder() -> LookupResponder:
    (built,) = build(EXAMPLES)
    assert isinstance(built, LookupResponder) and built.prompt_id == "json-extract-v1"
    return built


def replies(responder: LookupResponder, model: str, seeds: int = 1) -> list[str]:
    return [
        responder.respond(build_messages(r.document, SCHEMA), model, random.Random(f"{r.id}/{k}"))
        for r in RECORDS
        for k in range(seeds)
    ]


def test_without_errors_every_document_gets_its_ground_truth() -> None:
    for record in RECORDS:
        assert json.loads(answer(record.ground_truth, Profile(), random.Random(1))) == (
            record.ground_truth
        )


def test_careful_answers_the_ground_truth_but_for_rare_name_typos(
    responder: LookupResponder,
) -> None:
    got = [json.loads(text) for text in replies(responder, "synthetic-careful", seeds=5)]
    expected = [r.ground_truth for r in RECORDS for _ in range(5)]
    differ = [(g, e) for g, e in zip(got, expected, strict=True) if g != e]
    assert len(differ) == 15  # of 300; the documented rate is 0.05
    for g, e in differ:  # only vendor, customer or street name changed, by one edit
        changed = [
            (g["vendor"]["name"], e["vendor"]["name"]),
            (g["customer"]["name"], e["customer"]["name"]),
            (g["vendor"]["address"]["street"], e["vendor"]["address"]["street"]),
        ]
        assert sum(a != b for a, b in changed) == 1
        g["vendor"]["name"], g["customer"]["name"] = e["vendor"]["name"], e["customer"]["name"]
        g["vendor"]["address"]["street"] = e["vendor"]["address"]["street"]
        assert g == e


def test_replies_are_deterministic_and_unknown_models_are_careful(
    responder: LookupResponder,
) -> None:
    messages = build_messages(RECORDS[3].document, SCHEMA)
    for model in SYNTHETIC_MODELS:
        first = [responder.respond(messages, model, random.Random(s)) for s in range(20)]
        assert first == [responder.respond(messages, model, random.Random(s)) for s in range(20)]
    assert [responder.respond(messages, "gpt-x", random.Random(s)) for s in range(20)] == [
        responder.respond(messages, "synthetic-careful", random.Random(s)) for s in range(20)
    ]


def test_eager_invents_keys_and_values(responder: LookupResponder) -> None:
    texts = replies(responder, "synthetic-eager", seeds=5)
    fenced = [t for t in texts if t.startswith("```json\n")]
    parsed = [json.loads(t.removeprefix("```json\n").removesuffix("\n```")) for t in texts]
    extra = Counter(k for p in parsed for k in p if k not in RECORDS[0].ground_truth)
    assert set(extra) <= {k for k, _ in EXTRA_KEYS}
    assert sum(extra.values()) == 230  # draws 0.5 and 0.3 of 300 replies (240); ties overwrite
    invented = sum(
        1
        for p, r in zip(parsed, [r for r in RECORDS for _ in range(5)], strict=True)
        for k in ("due_date", "purchase_order", "notes")
        if not r.ground_truth[k] and p[k]
    )
    assert (invented, len(fenced)) == (86, 16)  # rates 0.30 and 0.05 of 300


def test_fast_breaks_the_format_now_and_then(responder: LookupResponder) -> None:
    kinds: Counter[str] = Counter()
    for text in replies(responder, "synthetic-fast", seeds=5):
        if text.startswith("```json\n"):
            kinds["fence"] += 1
        elif text.startswith("Here is the data"):
            kinds["prose"] += 1
        else:
            try:
                json.loads(text)
                kinds["json"] += 1
            except json.JSONDecodeError:
                kinds["invalid"] += 1
    assert kinds == {"json": 248, "fence": 16, "prose": 22, "invalid": 14}  # 0.05, 0.06, 0.05


def test_unknown_documents_and_missing_files_answer_an_empty_object(
    responder: LookupResponder, tmp_path: Path
) -> None:
    assert (
        responder.respond(build_messages("not an example"), "synthetic-fast", random.Random(1))
        == "{}"
    )
    assert responder.respond([{"role": "user", "content": "hi"}], "m", random.Random(1)) == "{}"
    assert index(tmp_path) == {}
    (empty,) = build(tmp_path)
    assert empty.respond(build_messages(RECORDS[0].document), "m", random.Random(1)) == "{}"


@pytest.mark.parametrize("text", ["Vertex Cloud Hosting Inc.", "Chen Wei", "abcd", "aabbcc"])
def test_typo_is_one_edit_inside_the_word(text: str) -> None:
    for seed in range(50):
        out = typo(text, random.Random(seed))
        assert out != text and out[0] == text[0] and out[-1] == text[-1]
        assert abs(len(out) - len(text)) <= 1


def test_profiles_are_the_documented_ones() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "json.md").read_text()
    assert PROFILES["synthetic-careful"] == Profile(typo=0.05)
    for line in (
        "| a typo in a name (vendor, customer or street)        | 0.05    | 0.05     | 0.20 |",
        "| invalid JSON (the reply cut in half)                 | 0       | 0        | 0.05 |",
    ):
        assert line in doc


def test_demo_runs_the_synthetic_models(tmp_path: Path) -> None:
    out = io.StringIO()
    with BackgroundServer(create_app()) as server:
        status = run_model_demo(
            server.base_url, tmp_path, list(SYNTHETIC_MODELS), console=Console(file=out, width=80)
        )
    assert status == 0, out.getvalue()
    with (tmp_path / "comparison.csv").open() as handle:
        rows: dict[str, dict[str, Any]] = {r["model"]: r for r in csv.DictReader(handle)}
    assert list(rows) == list(SYNTHETIC_MODELS)
    rqs = {name: float(row["rqs"]) for name, row in rows.items()}
    assert rqs == pytest.approx(
        {
            "synthetic-careful": 0.85,
            "synthetic-eager": 0.8444124793249969,
            "synthetic-fast": 0.8153533633897425,
        },
        abs=1e-12,
    )
    for name in SYNTHETIC_MODELS:
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        assert summary["matcher_pairs"]["SEMANTIC"] == 0  # the demo loads no embedding model
    assert "Models (means over the records with an output)" in out.getvalue()
    for name in SYNTHETIC_MODELS:  # the whole row fits 80 columns, latency last
        assert re.search(
            rf"^{name} +60/60 +0 +\d+ .* 0\.\d{{4}} +[\d.]+ m?s$", out.getvalue(), re.M
        )


def test_the_comparison_fits_80_columns_with_wide_values() -> None:
    """Slow calls (``114.0 ms``, ``12.3 s``) and large counts keep every column whole."""
    from fieldcheck._cli.json_cmd import print_comparison

    out = io.StringIO()
    rows = [
        {"model": m, "with_output": 60_000, "records": 60_000, "call_errors": 1_234,
         "failed": 46_000, "completeness": 1.0, "hallucination": 0.0373, "accuracy": 0.95,
         "rqs": 0.8444, "latency_s_mean": latency}
        for m, latency in (("synthetic-careful", 0.114), ("synthetic-eager", 12.3))
    ]  # fmt: skip
    print_comparison(Console(file=out, width=80), rows)
    lines = out.getvalue().splitlines()
    assert lines[-2].split() == [
        "synthetic-careful", "60000/60000", "1234", "46000", "1.0000", "0.0373", "0.9500",
        "0.8444", "114.0", "ms",
    ]  # fmt: skip
    assert lines[-1].split()[-2:] == ["12.3", "s"] and max(map(len, lines)) <= 80

"""Issue 9 in the JSON evaluation: identifier-like strings are EXACT in auto-detection; a strategy
naming no field warns in `json score` as in `json batch`, in the same words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck.jsoneval import EvalConfig, evaluate
from fieldcheck.metrics import auto_strategy, detect_value_type, is_identifier_text

UNUSED = "the strategy config names fields that no ground truth has: 'nmae'"


@pytest.mark.parametrize(
    "text",
    [
        *("SKU-1001", "A-1001", "abc123", "INV-2024-0042", "+1-555-0100", "USD", "EXW", "N/A"),
        *("v2.1", "x" * 60 + "1234x"),  # a digit: an identifier however long
        # several tokens of digits, capitals and signs with a digit: a written code
        *("+1 555-0100", "DE89 3704 0044 0532 0130 00", "USD 1,200.50", "10:30 AM", "Q3 2024"),
    ],
)
def test_identifiers_are_exact(text: str) -> None:
    assert is_identifier_text(text)
    assert detect_value_type(text) == "identifier"
    assert auto_strategy(text) == "EXACT"


@pytest.mark.parametrize(
    "text",
    [
        "shipped",
        "not shipped",
        "active",
        "Net 30 days",
        "John Smith",
        "Usd",
        "I",
        "Suite 4B",  # a word among the tokens: text
        "Portland, Maine",
        "NEW YORK",  # capitals without a digit: words
        "A 1",
        "X" * 65,  # capitals past 64 characters: a word, not a code
    ],
)
def test_words_and_phrases_stay_semantic(text: str) -> None:
    assert not is_identifier_text(text)
    assert auto_strategy(text) == "SEMANTIC"


def test_wrong_ids_are_no_longer_matched(table_matchers: dict[str, Any]) -> None:
    # the similarities from the local SEMANTIC matcher (measured: 0.930 and 0.826)
    table_matchers["SEMANTIC"].table.update(
        {
            ("SKU-1007", "SKU-1001"): 0.93,
            ("A-1010", "A-1001"): 0.83,
            ("not shipped", "shipped"): 0.81,
        }
    )
    gt = {"sku": "SKU-1001", "ref": "A-1001", "status": "shipped"}
    out = {"sku": "SKU-1007", "ref": "A-1010", "status": "not shipped"}
    r = evaluate(out, gt, matchers=table_matchers)
    assert {k: (f.strategy, f.score) for k, f in r.fields.items()} == {
        "sku": ("EXACT", 0.0),
        "ref": ("EXACT", 0.0),
        "status": ("SEMANTIC", 1.0),  # negation defeats embeddings: documented, use EXACT/LLM
    }
    assert table_matchers["SEMANTIC"].pairs == [("not shipped", "shipped")]
    exact = evaluate(out, gt, EvalConfig(strategies={"status": "EXACT"}), matchers=table_matchers)
    assert exact.fields["status"].score == 0.0 and exact.accuracy == 0.0


def test_codes_of_several_tokens_are_no_longer_matched(table_matchers: dict[str, Any]) -> None:
    # a new-user trial: the local SEMANTIC matcher gave these wrong values 0.94, 0.98 and 0.88
    table_matchers["SEMANTIC"].table.update(
        {("+1 555-0199", "+1 555-0100"): 0.94, ("USD 7,200.50", "USD 1,200.50"): 0.88}
    )
    gt = {"phone": "+1 555-0100", "amount": "USD 1,200.50", "iban": "DE89 3704 0044 0532 0130 00"}
    out = {"phone": "+1 555-0199", "amount": "USD 7,200.50", "iban": "DE89 3704 0044 0532 0130 01"}
    r = evaluate(out, gt, matchers=table_matchers)
    assert {k: (f.strategy, f.score) for k, f in r.fields.items()} == {
        "phone": ("EXACT", 0.0),
        "amount": ("EXACT", 0.0),
        "iban": ("EXACT", 0.0),
    }
    assert table_matchers["SEMANTIC"].pairs == [] and r.accuracy == 0.0
    assert evaluate(gt, gt, matchers=table_matchers).accuracy == 1.0


def test_a_long_token_with_a_digit_is_an_identifier_however_long() -> None:
    # two random 128-character hex tokens: the local SEMANTIC matcher gives 0.84 (> 0.80)
    a, b = "3f9a" * 32, "7c1e" * 32
    r = evaluate({"token": b}, {"token": a})
    assert (r.fields["token"].strategy, r.fields["token"].score) == ("EXACT", 0.0)
    assert evaluate({"token": a}, {"token": a}).fields["token"].score == 1.0
    # a long word in capitals with no digit is still text (a shout, not a code)
    assert evaluate({"w": "M" * 65}, {"w": "L" * 65}).fields["w"].strategy == "SEMANTIC"


def _files(tmp_path: Path) -> tuple[Path, Path, Path]:
    gt = tmp_path / "gt.json"
    gt.write_text(json.dumps({"name": "Acme", "n": 1}), encoding="utf-8")
    strategies = tmp_path / "s.json"
    strategies.write_text('{"nmae": "FUZZY"}', encoding="utf-8")
    batch = tmp_path / "b.jsonl"
    batch.write_text(json.dumps({"id": 1, "ground_truth": {"name": "Acme", "n": 1},
                                 "output": {"name": "Acme", "n": 1}}) + "\n", encoding="utf-8")  # fmt: skip
    return gt, strategies, batch


def test_unknown_strategy_key_warns_in_score_and_batch_alike(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gt, strategies, batch = _files(tmp_path)
    with caplog.at_level("WARNING", logger="fieldcheck"):
        score = CliRunner().invoke(
            app, ["json", "score", str(gt), str(gt), "--strategies", str(strategies)]
        )
    assert score.exit_code == 0, score.output
    score_warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    caplog.clear()
    out = tmp_path / "out"
    args = ["json", "batch", str(batch), "--strategies", str(strategies), "--out", str(out)]
    with caplog.at_level("WARNING", logger="fieldcheck"):
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    batch_warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    expected = f"{UNUSED} (nested paths need --flatten)"
    assert score_warnings == batch_warnings == [expected]


def test_known_strategy_key_does_not_warn(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    gt, strategies, _ = _files(tmp_path)
    strategies.write_text('{"name": "FUZZY"}', encoding="utf-8")
    with caplog.at_level("WARNING", logger="fieldcheck"):
        score = CliRunner().invoke(
            app, ["json", "score", str(gt), str(gt), "--strategies", str(strategies)]
        )
    assert score.exit_code == 0 and caplog.records == []


@pytest.mark.slow
def test_local_semantic_matcher_would_accept_these_ids() -> None:
    """Why identifiers are EXACT: the real MiniLM similarities of the issue's pairs."""
    from fieldcheck.matchers import SemanticMatcher

    got = SemanticMatcher().similarities(
        ["SKU-1007", "A-1010", "not shipped"], ["SKU-1001", "A-1001", "shipped"]
    )
    assert [round(s.score, 2) for s in got] == [0.93, 0.83, 0.81]

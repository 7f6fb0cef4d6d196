"""A hand-made three-conversation case: every statistics.json value computed by hand here."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fieldcheck.numeric import load_convfinqa, load_predictions, score_to_folder


def _record(
    rid: str, turns: list[tuple[str, str, Any, bool]], *, non_numeric: bool = False
) -> dict[str, Any]:
    return {
        "id": rid,
        "doc": {
            "pre_text": "pre",
            "post_text": "post",
            "table": {"2020": {"sales": 100.0, "note": "nm" if non_numeric else 1.0}},
        },
        "dialogue": {
            "conv_questions": [q for q, _, _, _ in turns],
            "conv_answers": [str(a) for _, _, a, _ in turns],
            "turn_program": [p for _, p, _, _ in turns],
            "executed_answers": [a for _, _, a, _ in turns],
            "qa_split": [s for _, _, _, s in turns],
        },
        "features": {
            "num_dialogue_turns": len(turns),
            "has_type2_question": any(s for _, _, _, s in turns),
            "has_duplicate_columns": False,
            "has_non_numeric_values": non_numeric,
        },
    }


def _plan(*ops: str) -> dict[str, Any]:
    return {
        "steps": [{"tool": "extract", "value": 1}]
        + [{"tool": "compute", "operation": o, "args": []} for o in ops]
    }


DATA = {
    "train": [],
    "dev": [
        _record(
            "Single_A",
            [
                ("what was it?", "100", 100.0, False),
                ("percentage change?", "subtract(120, 100), divide(#0, 100)", 0.2, False),
            ],
        ),
        _record(
            "Double_B",
            [
                ("change?", "subtract(50, 80)", -30.0, False),
                ("as a share?", "subtract(50, 80), divide(#0, 80)", -0.375, False),
                ("greater?", "greater(5, 3)", "yes", True),
            ],
        ),
        _record(
            "Single_C",
            [
                ("sum?", "add(1, 2)", 3.0, False),
                ("doubled?", "multiply(3, const_2)", 6.0, False),
                ("ratio?", "divide(2, 3)", 0.66667, False),
            ],
            non_numeric=True,
        ),
    ],
}


def _pred(
    cid: str, turn: int, answer: Any, plan: Any, tin: int, tout: int, lat: float, **extra: Any
) -> dict[str, Any]:
    return {
        "conversation_id": cid,
        "turn": turn,
        "answer": answer,
        "plan": plan,
        "input_tokens": tin,
        "output_tokens": tout,
        "latency_s": lat,
        "error": extra.get("error"),
        "validation": extra.get("validation", []),
    }


PREDICTIONS = [
    # A: both right -> the only successful conversation
    _pred("Single_A", 0, "100", {"steps": [{"tool": "extract", "value": 100}]}, 100, 10, 1.0),
    _pred("Single_A", 1, "20%", _plan("subtract", "divide"), 200, 20, 2.0),
    # B0: sign dropped; B1: percentage points (scale), plan only divides; B2: right, "compare" = greater
    _pred("Double_B", 0, "30", _plan("subtract"), 100, 10, 1.0),
    _pred("Double_B", 1, "-37.5", _plan("divide"), 100, 10, 1.0),
    _pred(
        "Double_B",
        2,
        "yes",
        _plan("compare"),
        100,
        10,
        1.0,
        validation=[{"check": "=cmd()", "passed": False, "message": "+bad"}],
    ),
    # C0: an error; C1: missing; C2: rounding, plan divides then multiplies
    _pred(
        "Single_C",
        0,
        None,
        None,
        50,
        0,
        30.0,
        error={"type": "TimeoutError", "message": "took too long"},
    ),
    _pred("Single_C", 2, "0.7", _plan("divide", "multiply"), 100, 10, 1.0),
]


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "data.json"
    data.write_text(json.dumps(DATA))
    preds = tmp_path / "pred.jsonl"
    preds.write_text("\n".join(json.dumps(p) for p in PREDICTIONS) + "\n")
    return data, preds


def _slow_interval(weights: Any, values: dict[str, list[float]]) -> tuple[float, float]:
    """Percentile interval by a plain loop: resample r draws conversation u ``weights[r][u]``
    times (u in A, B, C order); its value is the mean of the drawn conversations' per-turn values
    (a resample that drew none is left out: it says nothing); then the k kept values sorted, at
    floor(0.025 * (k - 1)) and ceil(0.975 * (k - 1))."""
    order = ["A", "B", "C"]
    resampled = []
    for row in weights:
        drawn = [
            v
            for u, times in zip(order, row, strict=True)
            for _ in range(times)
            for v in values.get(u, [])
        ]
        if drawn:
            resampled.append(sum(drawn) / len(drawn))
    resampled.sort()
    k = len(resampled)
    return resampled[math.floor(0.025 * (k - 1))], resampled[math.ceil(0.975 * (k - 1))]


def test_statistics_by_hand(files: tuple[Path, Path], tmp_path: Path) -> None:
    data, preds = files
    out = tmp_path / "out"
    result = score_to_folder(
        load_convfinqa(data),
        load_predictions(preds),
        out,
        price_in=2.0,
        price_out=10.0,
        bootstrap=200,
        seed=3,
    )
    s = result.statistics
    # 8 scored turns. numerical: A0, A1, B2 -> 3/8
    assert s["numerical_match_accuracy"] == pytest.approx(3 / 8)
    assert s["soft_match_accuracy"] == pytest.approx(3 / 8)  # same three
    # unit-agnostic: + B1 (-37.5 * 0.01 = -0.375) -> 4/8
    assert s["unit_agnostic_accuracy"] == pytest.approx(4 / 8)
    # sign-agnostic: + B0 (|30| = |-30|) -> 4/8
    assert s["sign_agnostic_accuracy"] == pytest.approx(4 / 8)
    # general: + B1 (no percent sign, read as percentage points) -> 4/8
    assert s["general_match_accuracy"] == pytest.approx(4 / 8)
    # logic recall over turns with a plan: A0 1 (both extract-only), A1 1, B0 1, B1 1/2, B2 1, C2 1
    assert s["avg_logic_recall"] == pytest.approx(5.5 / 6)
    # precision: all 1 except C2 (divide, multiply vs divide) 1/2
    assert s["avg_logic_precision"] == pytest.approx(5.5 / 6)
    # order (LCS / longer): B1 1/2, C2 1/2, others 1
    assert s["avg_logic_order_score"] == pytest.approx(5 / 6)
    # operations per turn (plans only): 0, 2, 1, 1, 1, 2
    assert s["avg_operations_per_turn"] == pytest.approx(7 / 6)
    assert s["num_conversations"] == 3
    assert s["num_turns"] == 8
    assert s["num_scored_turns"] == 8
    # "TimeoutError" is this agent's own error type, not a runner call error: scored as a failure
    assert s["num_turns_not_scored_call_errors"] == 0
    assert s["turns_not_scored_call_errors"] == {}
    assert s["num_turns_not_scored_no_gold"] == 0
    assert s["nothing_scored"] is False
    assert s["nothing_scored_reason"] is None
    assert s["num_successful_conversations"] == 1
    assert s["conversation_success_rate"] == pytest.approx(1 / 3)
    # tokens: A 300/30, B 300/30, C 150/10
    assert s["total_input_tokens"] == 750
    assert s["total_output_tokens"] == 70
    assert s["total_tokens"] == 820
    assert s["num_turns_tokens_estimated"] == 0  # no line says its tokens are estimated
    assert s["cost_per_correct_answer"] == pytest.approx(820 / 1)  # per successful conversation
    assert s["tokens_per_correct_turn"] == pytest.approx(820 / 3)  # A0, A1, B2
    # dollars: (750 * 2 + 70 * 10) / 1e6 = 0.0022, one successful conversation
    assert s["total_cost_usd"] == pytest.approx(0.0022)
    assert s["cost_per_correct_answer_usd"] == pytest.approx(0.0022)
    assert s["price_in_usd_per_1m"] == 2.0 and s["price_out_usd_per_1m"] == 10.0
    # by turn: 0 -> A0 yes, B0 no, C0 no; 1 -> A1 yes, B1 no, C1 no; 2 -> B2 yes, C2 no
    assert s["accuracy_by_turn_number"] == pytest.approx({"0": 1 / 3, "1": 1 / 3, "2": 1 / 2})
    # ops by turn (plans only): 0 -> (0 + 1) / 2; 1 -> (2 + 1) / 2; 2 -> (1 + 2) / 2
    assert s["avg_operations_by_turn"] == pytest.approx({"0": 0.5, "1": 1.5, "2": 1.5})
    assert s["turns_by_turn_number"] == {"0": 3, "1": 3, "2": 2}
    assert s["failure_modes"] == {"error": 2, "rounding": 1, "scale": 1, "sign": 1}
    # failed: the 5 scored turns that are not a numerical match, B1 (a general match) included
    assert s["num_failed_turns"] == 5 == sum(s["failure_modes"].values())
    assert s["num_prediction_errors"] == 1
    assert s["num_missing_predictions"] == 1
    assert s["num_input_errors"] == 1  # the missing turn C1
    # latencies of the 7 predictions: 1, 2, 1, 1, 1, 30, 1
    assert s["latency_s"]["total"] == pytest.approx(37.0)
    assert s["latency_s"]["mean"] == pytest.approx(37 / 7)
    assert s["latency_s"]["median"] == 1.0
    assert s["latency_s"]["p95"] == 2.0  # sorted[max(int(7 * 0.95) - 1, 0)] = sorted[5]
    assert s["latency_s"]["count"] == 7
    ci = s["bootstrap_95_ci"]
    for key in (
        "numerical_match_accuracy",
        "soft_match_accuracy",
        "unit_agnostic_accuracy",
        "sign_agnostic_accuracy",
        "general_match_accuracy",
        "avg_logic_recall",
        "conversation_success_rate",
    ):
        assert ci[key]["estimate"] == pytest.approx(s[key])
        assert ci[key]["low"] <= ci[key]["estimate"] <= ci[key]["high"]
        assert ci[key]["resamples"] == 200 and ci[key]["level"] == 0.95
    # the same resamples by an independent slow loop: units are the conversations A, B, C, drawn
    # by the draws bootstrap_totals_ci uses (seeded: 3 conversations picked uniformly, with
    # replacement, per resample, counted one resample at a time here); each resample's value is
    # recomputed from the drawn conversations' turns
    picks = np.random.default_rng(3).integers(0, 3, size=(200, 3))
    weights = [np.bincount(row, minlength=3) for row in picks]
    numerical = {"A": [1, 1], "B": [0, 0, 1], "C": [0, 0, 0]}  # scored turns, in order
    recall = {"A": [1.0, 1.0], "B": [1.0, 0.5, 1.0], "C": [1.0]}  # turns with a plan
    success = {"A": [1], "B": [0], "C": [0]}
    by_turn = {"0": {"A": [1], "B": [0], "C": [0]}, "2": {"B": [1], "C": [0]}}
    for key, values in (
        ("numerical_match_accuracy", numerical),
        ("avg_logic_recall", recall),
        ("conversation_success_rate", success),
    ):
        low, high = _slow_interval(weights, values)
        assert ci[key]["low"] == pytest.approx(low), key
        assert ci[key]["high"] == pytest.approx(high), key
    per_turn = s["bootstrap_95_ci_by_turn_number"]
    assert set(per_turn) == {"0", "1", "2"}
    for turn, values in by_turn.items():
        low, high = _slow_interval(weights, values)
        assert per_turn[turn]["estimate"] == pytest.approx(s["accuracy_by_turn_number"][turn])
        assert (per_turn[turn]["low"], per_turn[turn]["high"]) == pytest.approx((low, high))
    # turn 2 is scored in B and C only: the resamples that drew A alone are left out of it
    with_turn_2 = sum(1 for w in weights if w[1] + w[2] > 0)
    assert 190 <= with_turn_2 < 200  # (1/3)^3 of 200 resamples draw A alone: about 7
    assert (per_turn["2"]["resamples"], per_turn["2"]["drawn"]) == (with_turn_2, 200)
    assert (per_turn["0"]["resamples"], per_turn["0"]["drawn"]) == (200, 200)
    # the values (200 resamples, seed 3): numerical 0 (C three times, in 6 resamples: the 5th
    # lowest value is one of them) to 1 (A three times, 6 resamples); logic recall 2.5/3 (B three
    # times, 11 resamples) to 1
    assert ci["numerical_match_accuracy"]["low"] == 0.0
    assert ci["numerical_match_accuracy"]["high"] == 1.0
    assert ci["avg_logic_recall"]["low"] == pytest.approx(2.5 / 3)
    assert s["signature"].startswith(
        "numeric|bootstrap:200|bootstrap_seed:3|data:data.json|format:derived"
    )
    assert s["signature_settings"]["settings"]["split"] == "dev"

    # nothing above left unchecked
    assert set(s) == {
        "numerical_match_accuracy",
        "soft_match_accuracy",
        "unit_agnostic_accuracy",
        "sign_agnostic_accuracy",
        "general_match_accuracy",
        "avg_logic_recall",
        "avg_logic_precision",
        "avg_logic_order_score",
        "avg_operations_per_turn",
        "num_conversations",
        "num_turns",
        "num_scored_turns",
        "num_failed_turns",
        "num_turns_not_scored_call_errors",
        "turns_not_scored_call_errors",
        "num_turns_not_scored_no_gold",
        "nothing_scored",
        "nothing_scored_reason",
        "num_successful_conversations",
        "conversation_success_rate",
        "total_input_tokens",
        "total_output_tokens",
        "total_tokens",
        "num_turns_tokens_estimated",
        "cost_per_correct_answer",
        "tokens_per_correct_turn",
        "total_cost_usd",
        "cost_per_correct_answer_usd",
        "price_in_usd_per_1m",
        "price_out_usd_per_1m",
        "accuracy_by_turn_number",
        "avg_operations_by_turn",
        "turns_by_turn_number",
        "failure_modes",
        "num_prediction_errors",
        "num_missing_predictions",
        "num_input_errors",
        "latency_s",
        "bootstrap_95_ci",
        "bootstrap_95_ci_by_turn_number",
        "signature",
        "signature_settings",
    }

    # the files
    on_disk = json.loads((out / "statistics.json").read_text())
    assert on_disk["numerical_match_accuracy"] == pytest.approx(3 / 8)
    assert on_disk["cost_per_correct_answer"] == pytest.approx(820)

    with (out / "summary.csv").open() as handle:
        summary = {row["conversation_id"]: row for row in csv.DictReader(handle)}
    assert float(summary["Double_B"]["numerical_match_accuracy"]) == pytest.approx(1 / 3)
    assert float(summary["Double_B"]["sign_agnostic_accuracy"]) == pytest.approx(2 / 3)
    assert float(summary["Double_B"]["avg_logic_recall"]) == pytest.approx(2.5 / 3)
    assert summary["Single_A"]["conversation_success"] == "True"
    assert summary["Single_C"]["has_non_numeric_values"] == "True"
    assert float(summary["Single_C"]["avg_logic_recall"]) == 1.0  # only C2 has a plan: recall 1/1
    assert float(summary["Single_C"]["avg_operations_per_turn"]) == 2.0

    with (out / "errors.csv").open() as handle:
        errors = list(csv.DictReader(handle))
    assert [(e["conversation_id"], e["turn_idx"], e["error_type"]) for e in errors] == [
        ("Double_B", "0", "sign"),
        ("Double_B", "1", "scale"),
        ("Single_C", "0", "TimeoutError"),
        ("Single_C", "1", "missing_prediction"),
        ("Single_C", "2", "rounding"),
    ]
    assert list(errors[0]) == [
        "trace_id",
        "conversation_id",
        "turn_idx",
        "question",
        "expected_answer",
        "error_type",
        "error_message",
        "has_type2_question",
        "has_non_numeric_values",
        "plan_steps",
        "operations_per_turn",
        "error_context",
    ]
    assert json.loads(errors[1]["error_context"])["failure_mode"] == "scale"

    with (out / "validation.csv").open() as handle:
        validation = list(csv.DictReader(handle))
    assert validation == [
        {
            "conversation_id": "Double_B",
            "turn_idx": "2",
            "check": "'=cmd()",
            "passed": "False",
            "message": "'+bad",
        }
    ]
    trace = json.loads((out / "traces" / "Double_B.json").read_text())
    assert [t["failure_mode"] for t in trace["turns"]] == ["sign", "scale", None]
    assert trace["features"]["has_type2_question"] is True
    assert (out / "accuracy_by_turn.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

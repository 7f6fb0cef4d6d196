"""``numeric score`` streams (issue 10): ``score_to_folder`` writes byte for byte the same files
whatever the chunk size (one chunk of every conversation: in-memory scoring) and whether the
writer process writes the row files and traces, on random data with every kind of turn: right,
wrong, scaled, missing, call errors, no gold, plans, validator lines, latencies."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from fieldcheck._util.executor import InProcess, LocalPool
from fieldcheck.numeric import Tally, load_convfinqa, load_predictions, score_to_folder

COMPARED = (
    "summary.csv",
    "turns.csv",
    "validation.csv",
    "errors.csv",
    "input_errors.csv",
    "statistics.json",
    "report.md",
)
OPS = ("add", "subtract", "multiply", "divide")


def _answer(rng: random.Random, gold: float) -> object:
    return rng.choice(
        [
            gold,
            f"{gold:,.2f}",
            f"{gold * 100:.1f}%",
            f"the answer is {-gold:.3f}",
            gold * 100,
            f"{gold * 1.004:.4f}",
            "no idea",
            None,
            str(rng.randint(1, 50)),
            "yes",
        ]
    )


def _write_inputs(root: Path, seed: int, conversations: int) -> tuple[Path, Path]:
    rng = random.Random(seed)
    records = []
    lines = []
    for c in range(conversations):
        cid = f"c{c:04d}" if rng.random() > 0.05 else f"c{c:04d}<img src=x onerror=alert(1)>"
        n = rng.randint(1, 6)
        golds: list[object] = []
        programs = []
        for t in range(n):
            a, b = rng.randint(1, 999), rng.randint(1, 999)
            op = rng.choice(OPS)
            programs.append(f"{op}({a}, {b})" if t % 3 else str(a))
            golds.append(rng.choice([float(a), a / b, -a * 1.5, "yes", None]) if t else float(a))
        records.append(
            {
                "id": cid,
                "doc": {"pre_text": "p", "post_text": "q", "table": {"2019": {"r": 1.0}}},
                "dialogue": {
                    "conv_questions": [f"q{t}?" for t in range(n)],
                    "conv_answers": [str(g) for g in golds],
                    "turn_program": programs,
                    "executed_answers": golds,
                    "qa_split": [rng.random() < 0.3 for _ in range(n)],
                },
            }
        )
        for t in range(n):
            if rng.random() < 0.1:
                continue  # a missing prediction
            value = golds[t]
            gold = value if isinstance(value, float) else 1.0
            line: dict[str, object] = {
                "conversation_id": cid,
                "turn": t,
                "answer": _answer(rng, gold),
                "input_tokens": rng.randint(0, 900),
                "output_tokens": rng.randint(0, 90),
                "latency_s": rng.choice([None, rng.uniform(0.01, 3.0)]),
            }
            if rng.random() < 0.3:  # the runner's characters / 4 (issue 26)
                line["tokens_estimated"] = rng.random() < 0.8
            if rng.random() < 0.7:
                steps: list[dict[str, object]] = [{"tool": "extract", "args": ["r"]}]
                steps += [
                    {"tool": "compute", "operation": rng.choice(OPS), "args": [1, 2]}
                    for _ in range(rng.randint(0, 3))
                ]
                line["plan"] = {"steps": steps}
            roll = rng.random()
            if roll < 0.08:
                line["error"] = {"type": rng.choice(["timeout", "server_error"]), "message": "x"}
            elif roll < 0.14:
                line["error"] = {"type": "invalid_reply", "message": "=cmd|' /C calc'!A0"}
            if rng.random() < 0.3:
                line["validation"] = [
                    {"check": "units", "passed": rng.random() < 0.5, "message": "-1+2"}
                ]
            lines.append(line)
    rng.shuffle(lines)
    lines.append({"conversation_id": "nowhere", "turn": 0, "answer": "1"})
    lines.append({"conversation_id": records[0]["id"], "turn": 99, "answer": "1"})
    data = root / "data.json"
    data.write_text(json.dumps({"dev": records}), encoding="utf-8")
    preds = root / "predictions.jsonl"
    preds.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return data, preds


def _files(folder: Path) -> dict[str, bytes]:
    out = {name: (folder / name).read_bytes() for name in COMPARED}
    out |= {f"traces/{p.name}": p.read_bytes() for p in sorted((folder / "traces").iterdir())}
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_files_are_byte_identical_whatever_the_chunks(tmp_path: Path, seed: int) -> None:
    data_path, preds_path = _write_inputs(tmp_path, seed, 60)
    data, preds = load_convfinqa(data_path), load_predictions(preds_path)
    options: dict[str, Any] = {"price_in": 3.0, "price_out": 15.0, "bootstrap": 200, "seed": 5}
    reference = score_to_folder(
        data, preds, tmp_path / "memory", chunk=10_000, executor=InProcess(), **options
    )
    expected = _files(tmp_path / "memory")
    stats = json.loads(expected["statistics.json"])
    # the data cover what the fold must get right
    assert 0 < stats["num_scored_turns"] < stats["num_turns"]
    assert stats["num_turns_not_scored_call_errors"] > 0
    assert stats["num_turns_not_scored_no_gold"] > 0
    assert stats["num_missing_predictions"] > 0
    assert stats["num_turns_tokens_estimated"] > 0
    assert stats["avg_logic_recall"] is not None
    assert len(stats["failure_modes"]) >= 3
    assert stats["bootstrap_95_ci"]["numerical_match_accuracy"] is not None
    assert expected["validation.csv"].count(b"\n") > 1
    assert b"<img src=x onerror=alert(1)>" not in (tmp_path / "memory" / "report.html").read_bytes()
    # chunks scored here or in a pool (a large run's)
    for chunk, process in ((1, False), (7, False), (1, True), (7, True)):
        folder = tmp_path / f"streamed_{chunk}_{process}"
        executor = LocalPool(2) if process else InProcess()
        try:
            streamed = score_to_folder(
                data, preds, folder, chunk=chunk, executor=executor, **options
            )
        finally:
            executor.close()
        assert streamed.statistics == reference.statistics
        assert [e.to_dict() for e in streamed.input_errors] == [
            e.to_dict() for e in reference.input_errors
        ]
        got = _files(folder)
        assert got.keys() == expected.keys()
        for name in expected:
            assert got[name] == expected[name], (chunk, process, name)


def test_tally_worst_keeps_the_lowest_accuracy_first() -> None:
    """Worst conversations from the bounded list: lowest accuracy, then more scored turns, then
    id; perfect conversations never listed; only the first WORST kept."""

    def turn(idx: int, right: bool) -> dict[str, object]:
        return {
            "turn_idx": idx,
            "scored": True,
            "not_scored": None,
            "numerical_match": right,
            "soft_match": right,
            "unit_agnostic_match": right,
            "sign_agnostic_match": right,
            "general_match": right,
            "failure_mode": None if right else "wrong",
            "logic_recall": None,
            "logic_precision": None,
            "logic_order_score": None,
            "operations_per_turn": None,
            "input_tokens": 1,
            "output_tokens": 2,
            "latency_s": None,
            "error_type": None,
            "validation": [],
        }

    tally = Tally()
    for k in range(100):
        tally.add(f"perfect{k:03d}", [turn(0, True)])
    for k in range(30):  # accuracy 0.5 with 2 scored turns
        tally.add(f"half{k:03d}", [turn(0, True), turn(1, False)])
    tally.add("zero-short", [turn(0, False)])
    tally.add("zero-long", [turn(0, False), turn(1, False)])
    worst = tally.report_tallies().worst
    assert [row[0] for row in worst] == ["zero-long", "zero-short"] + [
        f"half{k:03d}" for k in range(8)
    ]
    assert worst[0] == ["zero-long", "2", "2", "0.000", "turn 0: wrong"]
    assert worst[2] == ["half000", "2", "2", "0.500", "turn 1: wrong"]
    stats = tally.statistics(bootstrap=0)
    assert stats["num_turns"] == 100 + 60 + 1 + 2
    assert stats["numerical_match_accuracy"] == 130 / 163
    assert stats["cost_per_correct_answer"] == 3 * 163 / 100

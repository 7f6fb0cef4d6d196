"""Issue 9: a turn that is not scored (no gold answer, as in the private test split, or a failed
model call) is not an error: errors.csv leaves it out, turns.csv and statistics.json count it.
A real-format private-split file (the original list format, questions only)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from fieldcheck.numeric import load_convfinqa, load_predictions, score_to_folder


def _private(rid: str, questions: list[str]) -> dict[str, Any]:
    """An original-format record of the private test split: no program, no answer."""
    return {
        "pre_text": ["pre"],
        "post_text": ["post"],
        "filename": rid.split("-")[0] + ".pdf",
        "table_ori": [["", "2020"], ["sales", "100"]],
        "table": [["", "2020"], ["sales", "$ 100"]],
        "id": rid,
        "annotation": {"dialogue_break": questions},
    }


def _gold(rid: str, turns: list[tuple[str, str, float]]) -> dict[str, Any]:
    return {
        "id": rid,
        "doc": {"pre_text": "pre", "post_text": "post", "table": {"2020": {"sales": 100.0}}},
        "dialogue": {
            "conv_questions": [q for q, _, _ in turns],
            "conv_answers": [str(a) for _, _, a in turns],
            "turn_program": [p for _, p, _ in turns],
            "executed_answers": [a for _, _, a in turns],
            "qa_split": [False for _ in turns],
        },
    }


def _write(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value))
    return path


def _lines(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open() as handle:
        return list(csv.DictReader(handle))


def _err(kind: str) -> dict[str, str]:
    return {"type": kind, "message": f"{kind} here"}


def test_private_split_partial_predictions_with_errors_lists_no_error_row(tmp_path: Path) -> None:
    data = _write(
        tmp_path / "test_private.json",
        [
            _private("Single_AAA/2019/page_1.pdf-1", ["what was sales?", "and the change?"]),
            _private("Single_BBB/2019/page_2.pdf-2", ["what was it?", "and then?", "ratio?"]),
        ],
    )
    preds = _lines(
        tmp_path / "p.jsonl",
        [
            {"conversation_id": "Single_AAA/2019/page_1.pdf-1", "turn": 0, "answer": "100"},
            # the model's own failure on a turn without gold: nothing to be wrong against
            {
                "conversation_id": "Single_AAA/2019/page_1.pdf-1",
                "turn": 1,
                "answer": None,
                "error": _err("invalid_reply"),
            },
            # a failed call
            {
                "conversation_id": "Single_BBB/2019/page_2.pdf-2",
                "turn": 0,
                "answer": None,
                "error": _err("server_error"),
            },
            # BBB turns 1 and 2: no prediction at all
        ],
    )
    loaded = load_convfinqa(data, split="test")
    assert loaded.source_format == "original" and not loaded.errors
    out = tmp_path / "out"
    result = score_to_folder(loaded, load_predictions(preds), out, bootstrap=20)
    s = result.statistics
    assert (s["num_turns"], s["num_scored_turns"]) == (5, 0)
    # the call error wins over "no gold": 1 call error, the 4 others have no gold
    assert s["num_turns_not_scored_call_errors"] == 1
    assert s["num_turns_not_scored_no_gold"] == 4
    assert s["nothing_scored"] is True
    assert result.input_errors == []  # a turn without gold needs no prediction
    assert _csv(out / "errors.csv") == []
    turns = _csv(out / "turns.csv")
    assert [(t["turn_idx"], t["not_scored"], t["error_type"]) for t in turns] == [
        ("0", "no_gold", ""),
        ("1", "no_gold", "invalid_reply"),
        ("0", "call_error", "server_error"),
        ("1", "no_gold", "missing_prediction"),
        ("2", "no_gold", "missing_prediction"),
    ]


def test_scored_failures_stay_error_rows_call_errors_do_not(tmp_path: Path) -> None:
    data = _write(
        tmp_path / "dev.json",
        {"dev": [_gold("G", [("a?", "100", 100.0), ("b?", "add(1, 2)", 3.0), ("c?", "7", 7.0)])]},
    )
    preds = _lines(
        tmp_path / "p.jsonl",
        [
            {"conversation_id": "G", "turn": 0, "answer": None, "error": _err("timeout")},
            {"conversation_id": "G", "turn": 1, "answer": "4"},
            # turn 2 missing: it has gold, so it is a failure
        ],
    )
    out = tmp_path / "out"
    result = score_to_folder(load_convfinqa(data), load_predictions(preds), out, bootstrap=0)
    errors = _csv(out / "errors.csv")
    assert [(e["turn_idx"], e["error_type"]) for e in errors] == [
        ("1", "wrong"),
        ("2", "missing_prediction"),
    ]
    assert result.statistics["num_scored_turns"] == 2
    assert result.statistics["turns_not_scored_call_errors"] == {"timeout": 1}

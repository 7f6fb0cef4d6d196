"""``numeric score`` records its turns in the store as it scores them (issue 11): the items a
recorder gets from ``score_to_folder`` are those ``runs`` reads back from the finished folder's
turns.csv (``record_folder``), key, columns and result alike, in any chunk size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fieldcheck._util.executor import InProcess, LocalPool
from fieldcheck.numeric import load_convfinqa, load_predictions, score_to_folder, stored_metrics
from fieldcheck.runs import record_folder
from fieldcheck.store import RunRecorder, Store

HOSTILE = "<img src=x onerror=alert(1)>"


def _inputs(root: Path) -> tuple[Path, Path]:
    def record(cid: str, questions: list[str], golds: list[object]) -> dict[str, object]:
        return {
            "id": cid,
            "doc": {"pre_text": "", "post_text": "", "table": {"2019": {"r": 5.0}}},
            "dialogue": {
                "conv_questions": questions,
                "conv_answers": [str(g) for g in golds],
                "turn_program": ["5", "subtract(5, 2)", "1e3"][: len(golds)],
                "executed_answers": golds,
            },
        }

    records = [
        record("c1", ["2019", "=cmd|' /C calc'!A0"], [5.0, 3.0]),
        record(HOSTILE, ["True", "what?"], [5.0, None]),
        record("1e3", ["1.0", "x", "y"], [5.0, 3.0, 1000.0]),
    ]
    lines = [
        {"conversation_id": "c1", "turn": 0, "answer": "5", "latency_s": 0.5},
        {"conversation_id": "c1", "turn": 1, "answer": "-3", "plan": {"steps": []}},
        {"conversation_id": HOSTILE, "turn": 0, "error": {"type": "timeout", "message": "t"}},
        {"conversation_id": HOSTILE, "turn": 1, "answer": "2"},
        {"conversation_id": "1e3", "turn": 0, "answer": "500%", "input_tokens": 7},
        {"conversation_id": "1e3", "turn": 2, "answer": "1,000"},
    ]
    data = root / "data.json"
    data.write_text(json.dumps({"dev": records}), encoding="utf-8")
    preds = root / "predictions.jsonl"
    preds.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return data, preds


def _items(store: Store, run_id: str) -> list[tuple[object, ...]]:
    return [
        (i.key, i.failed, i.turn, i.error_type, i.result)
        for i in store.page_items(run_id, limit=1000)
    ]


@pytest.mark.parametrize(
    ("chunk", "writer", "outputs"),
    [(1, "thread", False), (2, "thread", False), (256, "process", False), (2, "thread", True)],
)
def test_recorded_items_are_the_folder_items(
    tmp_path: Path, chunk: int, writer: str, outputs: bool
) -> None:
    """The items are built with the rows (``score_chunk``) and written by the store's writer:
    here, or in a large run its process; the same whether the chunks are scored in a pool
    (``outputs``) or here."""
    data_path, preds_path = _inputs(tmp_path)
    inputs = [("data", data_path), ("predictions", preds_path)]
    folder = tmp_path / "out"
    streamed = Store(f"sqlite:///{tmp_path}/streamed.db")
    recorder = RunRecorder.open(
        streamed, system="numeric", inputs=inputs, settings={}, signature=None, out=folder
    )
    assert recorder is not None
    if writer == "process":
        recorder.start_process()
    data, preds = load_convfinqa(data_path), load_predictions(preds_path)
    executor = LocalPool(1) if outputs else InProcess()
    try:
        result = score_to_folder(
            data, preds, folder, bootstrap=20, chunk=chunk, recorder=recorder, executor=executor
        )
    finally:
        executor.close()
    metrics, intervals = stored_metrics(result.statistics)
    run = recorder.finish(metrics=metrics, intervals=intervals, signature=result.signature)

    from_folder = Store(f"sqlite:///{tmp_path}/folder.db")
    reference = record_folder(from_folder, folder, inputs=inputs)
    got, expected = _items(streamed, run.id), _items(from_folder, reference.id)
    assert got == expected
    assert run.n_items == reference.n_items == 7
    # statistics.json on disk adds "complete": true; every metric is the same
    assert run.metrics == {k: v for k, v in reference.metrics.items() if k != "complete"}
    # text columns keep the text scored (the CSV's formula ' taken off; "1e3", "2019" and
    # "True" never read as numbers: a new user's finding), number columns are numbers, '' null
    by_key = {key: result for key, _, _, _, result in got}
    assert by_key["c1#0"]["question"] == "2019" and by_key["c1#0"]["turn_idx"] == 0
    assert by_key["c1#1"]["question"] == "=cmd|' /C calc'!A0"
    assert by_key["c1#1"]["predicted_answer"] == "-3"
    assert by_key["c1#1"]["numerical_match"] is False
    assert by_key[f"{HOSTILE}#0"]["question"] == "True"
    assert by_key[f"{HOSTILE}#0"]["error_type"] == "timeout"
    assert by_key["1e3#0"]["conversation_id"] == "1e3"
    assert by_key["1e3#0"]["ground_truth_program"] == "5"
    assert by_key["1e3#1"]["error_type"] == "missing_prediction"
    failed = {key for key, failed, _, _, _ in got if failed}
    # c1#1: -3 vs 3 (sign); 1e3#1 missing; the timeout and no-gold turns are not scored:
    # neither failed nor passed
    assert failed == {"c1#1", "1e3#1"}
    assert {key for key, failed, _, _, _ in got if failed is None} == {
        f"{HOSTILE}#0",
        f"{HOSTILE}#1",
    }

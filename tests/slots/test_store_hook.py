"""The streamed slot scorer hands each bucket's items to a run recorder as it scores them
(issue 11): the stored items are the ones the in-memory ``score_models`` stores (one bucket), in
any number of buckets, and ``runs rescore`` of the stored run gives back its metrics."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from slots_helpers import model_sides, slot

from fieldcheck.runs import rescore
from fieldcheck.slots import (
    SYSTEM,
    ModelInput,
    SlotsRun,
    load_judge_scores,
    load_latencies,
    load_slots,
    score_models,
    slot_metrics,
)
from fieldcheck.slots._loaders import JudgeFile, LatencyFile, SlotFile
from fieldcheck.slots._score import SlotScorer
from fieldcheck.slots._stream import partitioned
from fieldcheck.store import RunRecorder, Store

slot_columns = SYSTEM.item_columns

Jsonl = Callable[[str, list[Any]], Path]
HOSTILE = "<img src=x onerror=alert(1)>"


def _inputs(jsonl: Jsonl) -> dict[str, Path]:
    """Gold of 12 sessions; model a right, wrong, missing, extra and blank values, a session not
    in the gold, latencies and judge scores; model b with two sessions whose call failed."""
    gold, a, b, latency, judge = [], [], [], [], []
    for s in range(12):
        user = f"u{s % 4}"
        for k in range(3):
            topic = ["t1", HOSTILE][k % 2]
            gold.append(slot(user, s, topic, f"f{k}", f"v{s}{k}", "w"))
            if (s + k) % 4:
                a.append(slot(user, s, topic, f"f{k}", f"v{s}{k}" if k else "W ", "w"))
            if (s + k) % 3:
                b.append(slot(user, s, topic, f"f{k}", "x"))
        gold.append(slot(user, s, "t1", "empty"))  # values []: not a gold slot
        a.append(slot(user, s, "t1", "extra", "y"))
        latency.append({"user": user, "session": s, "seconds": 0.5 + s})
        judge.append({"user": user, "session": s, "topic": "t1", "field": "f0", "score": 0.25})
    a.append(slot("zz", 99, "t1", "f0", "nobody"))
    return {
        "gold": jsonl("gold.jsonl", gold),
        "a": jsonl("a.jsonl", a),
        "b": jsonl("b.jsonl", b),
        "latency": jsonl("lat.jsonl", latency),
        "judge": jsonl("judge.jsonl", judge),
    }


NOT_SCORED = {("u1", 5): "timeout", ("u2", 6): "server_error"}


def _models(paths: dict[str, Path], a: SlotFile, b: SlotFile) -> list[ModelInput]:
    return [
        ModelInput(
            "a",
            a,
            load_latencies(paths["latency"]),
            load_judge_scores(paths["judge"]),
        ),
        ModelInput(HOSTILE, b, not_scored=NOT_SCORED),
    ]


def _streamed(
    paths: dict[str, Path], k: int, recorder: RunRecorder | None, tmp_path: Path
) -> SlotsRun:
    """What ``slots score`` does: partition (the side files too), score bucket by bucket with the
    recorder."""
    files = [paths["gold"], paths["a"], paths["b"]]
    sides = model_sides(_models(paths, SlotFile(paths["a"]), SlotFile(paths["b"])))
    with partitioned(files, beside=tmp_path / "out", k=k, sides=sides) as part:
        gold, a, b = [SlotFile(item.path, errors=item.errors) for item in part.inputs]
        latency, judge = part.sides
        models = [
            ModelInput(
                "a",
                a,
                LatencyFile(latency.path, errors=latency.errors),
                JudgeFile(judge.path, errors=judge.errors),
            ),
            ModelInput(HOSTILE, b, not_scored=NOT_SCORED),
        ]
        scorer = SlotScorer(gold, models, bootstrap=40, seed=2, recorder=recorder)
        for chunk in part.chunks():
            scorer.add_part(chunk)
        return scorer.finish()


def _record(store: Store, run: SlotsRun | None = None) -> RunRecorder:
    return RunRecorder.open(
        store,
        system="slots",
        inputs=[],
        settings={"tp": "presence", "threshold": None, "bootstrap": 40, "seed": 2},
        signature=run.signature if run is not None else "slots",
        out=None,
    )


@pytest.mark.parametrize(("k", "writer"), [(1, "thread"), (3, "thread"), (3, "process")])
def test_stored_items_are_those_of_the_in_memory_run(
    jsonl: Jsonl, tmp_path: Path, k: int, writer: str
) -> None:
    """The items are built by ``store_rows`` in the writer: a thread of this process, or (a
    large run) the store's writer process."""
    paths = _inputs(jsonl)
    gold = load_slots(paths["gold"])
    models = _models(paths, load_slots(paths["a"]), load_slots(paths["b"]))
    with _record(Store(f"sqlite:///{tmp_path}/memory.db")) as memory:
        in_memory = score_models(gold, models, bootstrap=40, seed=2, recorder=memory)
        kept = memory.finish(metrics={})
    expected = [i.result for i in memory.store.iter_items(kept.id)]
    assert len(expected) == 2 * 12

    store = Store(f"sqlite:///{tmp_path}/s.db")
    with _record(store) as recorder:
        if writer == "process":
            recorder.start_process()
        run = _streamed(paths, k, recorder, tmp_path)
        metrics, intervals = slot_metrics(run)
        info = recorder.finish(metrics=metrics, intervals=intervals)
    stored = list(store.iter_items(info.id))
    results = [s.result for s in stored]
    if k == 1:  # one bucket: model by model, sessions in order, as in memory
        assert results == expected
    order = lambda item: (item["model"], item["user"], item["session"])  # noqa: E731
    assert sorted(results, key=order) == sorted(expected, key=order)
    # the indexed columns are the store's own derivation of each item
    for s in stored:
        columns = slot_columns(s.result)
        assert (s.key, s.failed, s.model, s.error_type) == (
            columns.key,
            columns.failed,
            columns.model,
            columns.error_type,
        )
    # and so are its tags: per topic, the items failed there and all items with the topic
    derived = [slot_columns(s.result).tags for s in stored]
    for topic in ("t1", HOSTILE):
        failed_there = sum(1 for tags in derived if tags.get(topic))
        having = sum(1 for tags in derived if topic in tags)
        assert store.count_items(info.id, tag=topic, failed=True) == failed_there
        assert store.count_items(info.id, tag=topic) == having
    by_key = {s.key: s for s in stored}
    timed_out = by_key[f"{HOSTILE}/u1/5"]
    # not scored: neither failed nor passed, and on no topic
    assert timed_out.result["not_scored"] == "timeout" and timed_out.failed is None
    assert slot_columns(timed_out.result).tags == {}
    first = by_key["a/u0/0"].result
    # session 0: f0 missed, f1 and f2 right (TP), one extra slot (FP)
    assert first["counts"]["tp"] == 2 and first["counts"]["fn"] == 1 and first["counts"]["fp"] == 1
    assert first["latency_s"] == 0.5 and first["judge"] == [["t1", "f0", 0.25]]
    # t1: f0 (missed), f2 (same), empty (gold only, values []), extra (prediction only)
    # and where it failed: f0 an FN, extra an FP (f2's other values are a TP: presence)
    assert first["per_topic"]["t1"] == {"slots": 4, "differ": 3, "fp": 1, "fn": 1}
    assert ["t1", "f0", ["v10", "w"]] in by_key["a/u1/1"].result["gold"]
    # the metrics of the streamed run are those of the in-memory run
    assert run.metrics_json() == in_memory.metrics_json()
    assert store.count_items(info.id, tag=HOSTILE, failed=True) > 0


def test_rescore_of_a_streamed_run_gives_its_metrics(jsonl: Jsonl, tmp_path: Path) -> None:
    paths = _inputs(jsonl)
    store = Store(f"sqlite:///{tmp_path}/s.db")
    with _record(store) as recorder:
        run = _streamed(paths, 3, recorder, tmp_path)
        metrics, intervals = slot_metrics(run)
        info = recorder.finish(metrics=metrics, intervals=intervals)
    child = rescore(store, info.id)
    assert child.parent_id == info.id and child.n_items == info.n_items == 24
    assert child.metrics == info.metrics
    assert child.intervals == info.intervals
    assert info.metrics is not None and info.metrics["paired_f1"][0]["p_value"] is not None


def test_no_recorder_no_items_and_the_same_run(jsonl: Jsonl, tmp_path: Path) -> None:
    paths = _inputs(jsonl)
    store = Store(f"sqlite:///{tmp_path}/s.db")
    with _record(store) as recorder:
        recorded = _streamed(paths, 2, recorder, tmp_path)
        recorder.finish(metrics=None)
    assert _streamed(paths, 2, None, tmp_path).metrics_json() == recorded.metrics_json()

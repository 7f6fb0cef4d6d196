"""The streamed slot scorer hands each bucket's items to a run recorder as it scores them
(issue 11): the stored items are the ones the in-memory ``score_models`` stores (one bucket), in
any number of buckets, and ``runs rescore`` of the stored run gives back its metrics."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
from slots_helpers import slot

from fieldcheck._util.frames import HEADER
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
from fieldcheck.slots._score import SlotScorer, model_sides
from fieldcheck.slots._second import SecondScorer, score_partition
from fieldcheck.slots._stream import Partition, partitioned
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
    """What ``slots score`` does: partition, score bucket by bucket with the recorder."""
    files = [paths["gold"], paths["a"], paths["b"]]
    with partitioned(files, beside=tmp_path / "out", k=k) as part:
        headers = [SlotFile(item.path, errors=item.errors) for item in part.inputs]
        models = _models(paths, headers[1], headers[2])
        scorer = SlotScorer(headers[0], models, bootstrap=40, seed=2, recorder=recorder)
        for bucket in part.buckets():
            scorer.add(bucket[0], bucket[1:])
        return scorer.finish()


def _parts(
    paths: dict[str, Path], k: int, recorder: RunRecorder, tmp_path: Path, *, second: bool
) -> SlotsRun:
    """As ``slots score``: the latency and judge files split with the slot files, every bucket
    scored here, or (``second``) the last ones by a second scorer process."""
    whole = _models(paths, load_slots(paths["a"]), load_slots(paths["b"]))
    files = [paths["gold"], paths["a"], paths["b"]]
    with partitioned(files, beside=tmp_path / "out", k=k, sides=model_sides(whole)) as part:
        gold, a, b = [SlotFile(item.path, errors=item.errors) for item in part.inputs]
        latency, judge = part.sides
        models = [
            replace(
                whole[0],
                predictions=a,
                latencies=LatencyFile(paths["latency"], errors=latency.errors),
                judge_scores=JudgeFile(paths["judge"], errors=judge.errors),
            ),
            replace(whole[1], predictions=b),
        ]
        scorer = SlotScorer(gold, models, bootstrap=40, seed=2, recorder=recorder)
        if second:
            score_partition(scorer, part)
        else:
            for p in part.parts():
                scorer.add_part(p)
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
    assert first["per_topic"]["t1"] == {"slots": 4, "differ": 3}
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


def test_a_second_scorer_stores_the_same_items_in_the_same_order(
    jsonl: Jsonl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last buckets scored by a second process (``_second``): their items are forwarded
    after this process's own, so the store holds the same items in the same order (seq)."""
    joined: list[bool] = []
    forwards: list[bool] = []  # per forward call: whether the second scorer was joined
    join, forward = SecondScorer.join, SecondScorer.forward

    def spy(self: SecondScorer) -> Any:
        state = join(self)
        joined.append(state is not None)
        return state

    def spy_forward(self: SecondScorer, sink: Any) -> None:
        forwards.append(bool(joined))
        forward(self, sink)

    monkeypatch.setattr(SecondScorer, "join", spy)
    monkeypatch.setattr(SecondScorer, "forward", spy_forward)
    paths = _inputs(jsonl)
    got = {}
    for second in (False, True):
        got[second] = _stored_run(paths, tmp_path / f"{second}", second=second)
    assert joined == [True]
    # its finished buckets' items are stored after each of this process's buckets, the rest
    # once it is joined
    assert forwards == [False, False, False, True]
    assert len(got[True][0]) == 2 * 12
    assert [seq for _, seq, *_ in got[True][0]] == list(range(2 * 12))
    assert got[True] == got[False]


def _stored_run(paths: dict[str, Path], folder: Path, *, second: bool) -> tuple[Any, ...]:
    """A run of 5 buckets stored through the writer process: its items (key, seq, failed,
    result), its metrics and how many items have the topic t1."""
    folder.mkdir()
    store = Store(f"sqlite:///{folder}/s.db")
    with _record(store) as recorder:
        recorder.start_process()
        run = _parts(paths, 5, recorder, folder, second=second)
        metrics, intervals = slot_metrics(run)
        info = recorder.finish(metrics=metrics, intervals=intervals)
    items = [(s.key, s.seq, s.failed, s.result) for s in store.iter_items(info.id)]
    return items, run.metrics_json(), store.count_items(info.id, tag="t1")


# the second scorer, made to die once it has written its first bucket's items
_DIES_AFTER_ONE_BUCKET = """
import os, sys
from fieldcheck.slots import _second
add = _second._ItemFile.add_built
def once(self, *args, **kwargs):
    add(self, *args, **kwargs)
    self.handle.flush()
    os._exit(7)
_second._ItemFile.add_built = once
sys.exit(_second.main())
"""


def test_a_second_scorer_that_dies_leaves_its_stored_buckets_stored_once(
    jsonl: Jsonl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The items of the buckets it finished are stored; this process scores all its buckets
    but stores only the others' items: the same items, each once, in the same order."""
    paths = _inputs(jsonl)
    alone = _stored_run(paths, tmp_path / "alone", second=False)
    stored: list[int] = []
    forward = SecondScorer.forward

    def spy_forward(self: SecondScorer, sink: Any) -> None:
        forward(self, sink)
        stored.append(self.forwarded)

    monkeypatch.setattr(SecondScorer, "forward", spy_forward)
    command = (sys.executable, "-c", _DIES_AFTER_ONE_BUCKET)
    monkeypatch.setattr(SecondScorer, "COMMAND", command)
    assert _stored_run(paths, tmp_path / "dies", second=True) == alone
    assert stored[-1] == 1  # its first bucket's items were stored


def test_misnumbered_second_scorer_items_are_an_error(
    jsonl: Jsonl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second scorer's items are numbered from this process's count of its own sessions:
    a count that is not the number it stored stops the run, never a silent misnumbering."""
    monkeypatch.setattr(Partition, "sessions", lambda self, stop: 1)
    with pytest.raises(RuntimeError, match="numbered from 2, but this process stored"):
        _stored_run(_inputs(jsonl), tmp_path / "wrong", second=True)


def test_forward_stores_only_whole_frames(tmp_path: Path) -> None:
    """A frame the second scorer is still writing is left for a later call."""

    class Sink:
        seq = 0
        calls: ClassVar[list[tuple[bytes, int, int | None]]] = []

        def add_built(
            self, builder: str, payload: Any, count: int, *, plain: bool = False, at: Any = None
        ) -> int:
            self.calls.append((bytes(payload), count, at))
            return count

    second = SecondScorer.__new__(SecondScorer)
    second._items, second._reading, second._process = tmp_path / "items.bin", None, None
    second.seq, second.forwarded = 10, 0
    sink = Sink()
    second.forward(sink)  # no file yet
    frame = HEADER.pack(8 + 3) + (2).to_bytes(8, "little") + b"abc"
    with second._items.open("wb") as handle:
        handle.write(frame + frame[:5])
        handle.flush()
        second.forward(sink)
        assert Sink.calls == [(b"abc", 2, 10)] and second.forwarded == 1
        handle.write(frame[5:-1])
        handle.flush()
        second.forward(sink)
        assert len(Sink.calls) == 1
        handle.write(frame[-1:])
        handle.flush()
        second.forward(sink)
    assert Sink.calls == [(b"abc", 2, 10), (b"abc", 2, 12)]
    assert (second.seq, second.forwarded) == (14, 2)
    second.stop()
    assert not second._items.exists()

"""The JSON batch's store hook (issue 11): ``stream_batch_outputs(..., recorder=...)`` stores each
chunk's records and errors as they are scored, the same items the in-memory ``evaluate_batch``
stores in one chunk, tagged with the fields each record failed on; ``runs rescore`` of the stored
run gives the original's metrics."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from fieldcheck._util.errors import InputError
from fieldcheck.jsoneval import (
    SYSTEM,
    BatchReader,
    EvalConfig,
    RecordError,
    evaluate_batch,
    read_batch,
    stream_batch_outputs,
)
from fieldcheck.jsoneval._stream import Scorer
from fieldcheck.runs import rescore
from fieldcheck.store import RunRecorder, Store, error_kind

from .test_json_streaming import STRATEGIES, matchers, random_batch

json_columns = SYSTEM.item_columns

XSS = "<img src=x onerror=alert(1)>"


def _text(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _store_run(
    tmp_path: Path, data: Path, config: EvalConfig, chunk: int
) -> tuple[Store, str, dict[str, Any]]:
    store = Store(f"sqlite:///{tmp_path}/s.db")
    folder = tmp_path / f"out{chunk}"
    recorder = RunRecorder.open(
        store,
        system="json",
        inputs=[("batch", data)],
        settings={"config": config.model_dump(mode="json"), "bootstrap": 200, "seed": 3},
        signature="",
        out=folder,
    )
    batch = stream_batch_outputs(
        folder,
        BatchReader(data, chunk_lines=chunk).chunks(),
        config,
        matchers=matchers(),
        source=str(data),
        bootstrap=200,
        seed=3,
        recorder=recorder,
    )
    summary = batch.summary.to_json()
    metrics = {k: v for k, v in summary.items() if k not in ("ci", "signature")}
    run = recorder.finish(metrics=metrics, intervals=summary["ci"])
    return store, run.id, summary


def _expected(tmp_path: Path, data: Path, config: EvalConfig) -> list[dict[str, Any]]:
    """The items the in-memory ``evaluate_batch`` (one chunk) stores for the same file."""
    records, errors = read_batch(data)
    store = Store(f"sqlite:///{tmp_path}/memory.db")
    recorder = RunRecorder.open(
        store, system="json", inputs=[], settings={}, signature="", out=None
    )
    with recorder:
        evaluate_batch(
            records,
            config,
            matchers=matchers(),
            errors=[RecordError.of(e) for e in errors],
            source=str(data),
            bootstrap=200,
            seed=3,
            recorder=recorder,
        )
        run = recorder.finish(metrics={})
    return [i.result for i in store.items(run.id)]


@pytest.mark.parametrize("chunk", [7, 10_000])
def test_stored_items_are_those_of_the_in_memory_builder(tmp_path: Path, chunk: int) -> None:
    lines = random_batch(1, 400)
    lines.append(json.dumps({"id": 9999, "ground_truth": {XSS: 1, "a[3].b": 2}, "output": {}}))
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(lines) + "\n")
    config = EvalConfig(strategies=STRATEGIES)
    store, run_id, _ = _store_run(tmp_path, data, config, chunk)
    expected = _expected(tmp_path, data, config)
    stored = store.items(run_id)
    # the same results (a duplicate id's error is stored under its key with ~seq appended)
    assert sorted(_text(i.result) for i in stored) == sorted(map(_text, expected))
    assert len(stored) == len(expected) > 400
    # each item's failed flag and tags are the store's own reading of the builder's dict
    want = {_text(e): json_columns(e) for e in expected}
    tags: Counter[str] = Counter()
    for item in stored:
        columns = want[_text(item.result)]
        assert item.failed == columns.failed, item.key
        assert item.error_type == (columns.error_type and error_kind(columns.error_type)), item.key
        tags.update(columns.tags)
    assert all(tags.values()) and {XSS, "a[*].b"} <= set(tags)  # only fields failed on
    for name, n in tags.items():
        assert store.count_items(run_id, tag=name) == n, name
    assert store.count_items(run_id, failed=True) == sum(
        bool(want[_text(i.result)].failed) for i in stored
    )


def test_a_perfect_record_is_stored_untagged_and_not_failed(tmp_path: Path) -> None:
    # 1 perfect record (the columnar kernel's), 1 with a wrong and a missing field, 1 bad line
    data = tmp_path / "d.jsonl"
    data.write_text(
        '{"id": "a", "ground_truth": {"x": 1, "y": "k"}, "output": {"x": 1, "y": "k"}}\n'
        '{"id": "b", "ground_truth": {"x": 1, "y": "k"}, "output": {"x": 2}}\n'
        "{oops\n"
    )
    config = EvalConfig(strategies={"x": "EXACT", "y": "EXACT"})
    store, run_id, _ = _store_run(tmp_path, data, config, 10_000)
    items = {i.key: i for i in store.items(run_id)}
    assert set(items) == {"a", "b", "line 3"}
    assert items["a"].failed is False and store.count_items(run_id, failed=False) == 1
    assert items["a"].result["ground_truth"] == {"x": 1, "y": "k"}
    assert items["a"].result["rqs"] == 0.85  # 0.45 * 1 + 0.25 * 1 + 0.15 * 1 - 0.15 * 0
    assert items["b"].failed is True and items["b"].result["output"] == {"x": 2}
    assert [i.key for i in store.page_items(run_id, tag="y")] == ["b"]  # missing
    assert [i.key for i in store.page_items(run_id, tag="x")] == ["b"]  # scored 0
    bad = items["line 3"]
    assert bad.failed is None and bad.error_type  # not scored: neither failed nor passed
    assert store.count_not_scored(run_id) == 1 and store.count_items(run_id, failed=True) == 1
    assert bad.result["error"]["reason"].startswith("invalid JSON: ")
    assert bad.error_type == "invalid JSON"  # the reason's head: the column holds 32 characters
    assert items["line 3"].result["error"]["line"] == 3


def test_rescore_of_a_stored_run_gives_its_metrics(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(random_batch(2, 300)) + "\n")
    config = EvalConfig(strategies=STRATEGIES)
    store, run_id, summary = _store_run(tmp_path, data, config, 10_000)
    again = rescore(store, run_id, matchers=matchers())
    assert again.parent_id == run_id
    original = store.get_run(run_id)
    assert original is not None and again.metrics is not None and original.metrics is not None
    for key in ("means", "fields", "scored", "not_an_object", "safety_flagged"):
        assert again.metrics[key] == original.metrics[key], key
    assert again.intervals == original.intervals == summary["ci"]


def test_rescore_scores_the_stored_records_in_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # streamed as json batch streams (bounded memory), not one chunk of every record: the same
    # numbers, items and errors as the parent's, the scorer never given more than a chunk
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(random_batch(4, 300)) + "\n")
    config = EvalConfig(strategies=STRATEGIES)
    store, run_id, summary = _store_run(tmp_path, data, config, 7)
    sizes: list[int] = []
    score = Scorer.score

    def spy(self: Scorer, items: Any) -> Any:
        sizes.append(len(items))
        return score(self, items)

    monkeypatch.setattr(Scorer, "score", spy)
    monkeypatch.setattr("fieldcheck.jsoneval._system.CHUNK_LINES", 7)
    again = rescore(store, run_id, matchers=matchers())
    assert again.metrics is not None and again.metrics["not_scored"] > 0
    assert again.metrics == {k: v for k, v in summary.items() if k not in ("ci", "signature")}
    assert again.intervals == summary["ci"]
    assert sum(sizes) == summary["scored"] > 250 and max(sizes) <= 7
    parent = sorted(_text(i.result) for i in store.items(run_id))
    assert sorted(_text(i.result) for i in store.items(again.id)) == parent


def test_rescore_of_a_run_without_ground_truth_is_refused_before_scoring() -> None:
    items = [{"id": "a", "ground_truth": {"x": 1}, "output": {"x": 1}}, {"id": "b", "rqs": 1.0}]
    with pytest.raises(InputError, match="run r1 keeps no ground truth and output for record 'b'"):
        SYSTEM.rescore(iter(items), {}, {"matchers": matchers()}, run="r1", signature={})

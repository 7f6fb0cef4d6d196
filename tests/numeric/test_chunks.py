"""Numeric scoring in the chunk -> (rows, digest) shape (issue 27 items 1 and 7): the same input
scored here (``InProcess``) and in a pool (``LocalPool(2)``) through ``core.score`` gives the same
files and stored items byte for byte; the digests (``Tally``) of any split of the conversations,
merged in any grouping, finish into the one chunk's numbers; in-memory scoring (conversations and
predictions held as models) is the streamed scoring with one chunk."""

from __future__ import annotations

import copy
import tempfile
from collections.abc import Iterator
from functools import reduce
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.folders import folder_files
from tests.numeric.test_streamed import _files, _write_inputs

from fieldcheck import core
from fieldcheck._util.executor import Executor, InProcess, LocalPool
from fieldcheck.numeric import (
    LoadResult,
    PredictionsResult,
    Tally,
    _stream,
    load_convfinqa,
    load_predictions,
    score_to_folder,
)
from fieldcheck.store import Store


def _items(store: Store) -> list[tuple[Any, ...]]:
    [run] = [r for r in store.list_runs() if r.kind == "score"]
    return [(i.key, i.seq, i.failed, i.turn, i.error_type, i.result) for i in store.items(run.id)]


def test_in_process_and_a_pool_give_the_same_files_and_stored_items(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, preds = _write_inputs(tmp_path, 3, 90)
    inputs = [("data", data), ("predictions", preds)]
    monkeypatch.setattr(_stream, "CHUNK_CONVERSATIONS", 7)  # 13 chunks, two processes
    found = {}
    executors: dict[str, Executor] = {"here": InProcess(), "pool": LocalPool(2)}
    for where, executor in executors.items():
        monkeypatch.setenv("FIELDCHECK_ARTIFACTS", str(tmp_path / f"{where}-artifacts"))
        store = Store(f"sqlite:///{tmp_path}/{where}.sqlite3")
        try:
            outcome = core.score(
                "numeric",
                inputs,
                {"bootstrap": 50, "seed": 3},
                out=tmp_path / where,
                command="numeric score",
                store=store,
                executor=executor,
            )
            found[where] = (folder_files(tmp_path / where), _items(store))
        finally:
            executor.close()
            store.close()
        assert outcome.scored.summary["num_conversations"] == 90
    assert found["here"] == found["pool"]
    outputs, items = found["pool"]
    turns = outputs["turns.csv"].count(b"\n") - 1
    assert len(items) == turns > 90
    assert len([name for name in outputs if name.startswith("traces/")]) == 90
    assert [seq for _, seq, *_ in items] == list(range(turns))  # in chunk order
    assert any(failed for _, _, failed, *_ in items) and any(
        failed is None for _, _, failed, *_ in items
    )


@pytest.fixture(scope="module")
def entries() -> Iterator[tuple[_stream.ScoreJob, list[_stream.Entry]]]:
    """The conversations of a random run as ``score_chunk`` gets them, and a job whose traces go
    to a folder of their own."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data_path, preds_path = _write_inputs(root, 5, 40)
        data, preds = load_convfinqa(data_path), load_predictions(preds_path)
        (root / "traces").mkdir()
        job = _stream.ScoreJob(
            str(root / "traces"), str(data_path), "derived", str(preds_path), store=True
        )
        [everything] = _stream._chunks(data, preds, 10**6)
        yield job, everything


def _finished(tally: Tally) -> tuple[dict[str, Any], Any]:
    stats = tally.statistics(price_in=2.0, price_out=8.0, bootstrap=60, seed=4)
    return stats, tally.report_tallies()


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_digests_of_any_split_merged_in_any_grouping_finish_as_one_chunk(
    entries: tuple[_stream.ScoreJob, list[_stream.Entry]], data: st.DataObject
) -> None:
    job, everything = entries
    n = len(everything)
    cuts = sorted(data.draw(st.sets(st.integers(1, n - 1), max_size=8), label="cuts"))
    pieces = [everything[a:b] for a, b in zip([0, *cuts], [*cuts, n], strict=True)]
    scored = [_stream.score_chunk(job, piece) for piece in pieces]
    whole_rows, whole = _stream.score_chunk(job, everything)
    expected = _finished(whole)
    assert expected[0]["num_conversations"] == n
    assert expected[0]["bootstrap_95_ci"]["numerical_match_accuracy"] is not None
    # the rows of the pieces, in order, are the one chunk's
    for k, text in enumerate(whole_rows.files):
        assert b"".join(rows.files[k] for rows, _ in scored) == text
    digests = [digest for _, digest in scored]

    def merged(a: Tally, b: Tally) -> Tally:
        return copy.deepcopy(a).absorb(copy.deepcopy(b))

    left = reduce(merged, digests)
    right = reduce(lambda a, b: merged(b, a), reversed(digests))
    assert _finished(left) == expected
    assert _finished(right) == expected
    # any tree: adjacent digests merged in a drawn order
    tree = list(digests)
    while len(tree) > 1:
        k = data.draw(st.integers(0, len(tree) - 2), label="merge at")
        tree[k : k + 2] = [merged(tree[k], tree[k + 1])]
    assert _finished(tree[0]) == expected


def test_in_memory_scoring_is_streamed_scoring_with_one_chunk(tmp_path: Path) -> None:
    data_path, preds_path = _write_inputs(tmp_path, 7, 50)
    data, preds = load_convfinqa(data_path), load_predictions(preds_path)
    options: dict[str, Any] = {"bootstrap": 100, "seed": 2, "price_in": 1.0, "price_out": 3.0}
    # held in memory: the conversations as models, the predictions as a dict
    memory = LoadResult(
        path=data.path,
        source_format=data.source_format,
        split=data.split,
        conversations=list(data.conversations),
        errors=data.errors,
        total_records=data.total_records,
        all_ids=data.all_ids,
    )
    held = PredictionsResult(
        path=preds.path,
        predictions={key: preds.predictions[key] for key in preds.predictions},
        lines=dict(preds.lines),
        errors=preds.errors,
    )
    one = score_to_folder(
        memory, held, tmp_path / "memory", chunk=10**6, executor=InProcess(), **options
    )
    pool = LocalPool(2)
    try:
        streamed = score_to_folder(
            data, preds, tmp_path / "streamed", chunk=4, executor=pool, **options
        )
    finally:
        pool.close()
    assert one.statistics == streamed.statistics
    assert one.statistics["num_missing_predictions"] > 0
    assert [e.to_dict() for e in one.input_errors] == [e.to_dict() for e in streamed.input_errors]
    assert _files(tmp_path / "memory") == _files(tmp_path / "streamed")

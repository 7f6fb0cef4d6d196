"""Scored runs in the store on SQLite and PostgreSQL: recorded from the output folders of the
three systems, listed, filtered, paged, compared, exported and re-scored; the same run gives
byte-identical exports on both backends."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from runs_data import EXACT, HOSTILE, JSON_RECORDS, json_folder, numeric_folder, slots_folder
from sqlalchemy import text

from fieldcheck import core
from fieldcheck.metrics import latency_stats
from fieldcheck.runs import compare_runs, iter_export, record_folder, rescore
from fieldcheck.store import RunInfo, RunRecorder, Store
from fieldcheck.store._figures import journal_figures


def _add(recorder: RunRecorder, items: list[dict[str, Any]]) -> int:
    """Items of the run's system, their columns derived by the system (``item_columns``)."""
    return recorder.add_items(items, core.get(recorder.run.system).item_columns)


def test_json_folder_is_stored_with_filterable_items(store: Store, tmp_path: Path) -> None:
    out, batch = json_folder(tmp_path)
    run = record_folder(store, out, inputs=[("batch", batch)], model="m1")
    assert (run.system, run.kind, run.status, run.model, run.n_items) == (
        "json",
        "score",
        "finished",
        "m1",
        3,
    )
    assert run.inputs[0]["name"] == "batch" and len(run.inputs[0]["sha256"]) == 64
    # accuracy: r1 2/2, r2 1/2 (city differs), r3 1/1 -> (1 + 0.5 + 1) / 3
    assert math.isclose(run.metrics["means"]["accuracy"], 2.5 / 3)
    # completeness: r3 misses one of its two fields -> (1 + 1 + 0.5) / 3
    assert math.isclose(run.metrics["means"]["completeness"], 2.5 / 3)
    assert run.intervals["accuracy"]["estimate"] == run.metrics["means"]["accuracy"]
    assert run.out_dir == str(out.resolve())
    assert [i.key for i in store.page_items(run.id)] == ["r1", "r2", "r3"]
    assert [i.key for i in store.page_items(run.id, failed=True)] == ["r2", "r3"]
    assert [i.key for i in store.page_items(run.id, tag="city", failed=True)] == ["r2"]
    assert [i.key for i in store.page_items(run.id, tag=HOSTILE, failed=True)] == ["r3"]
    assert store.count_items(run.id, tag="name", failed=True) == 0
    # a JSON record is tagged with the fields it failed on only: "name" never failed
    assert store.item_tags(run.id) == sorted([HOSTILE, "city"])
    assert [i.key for i in store.page_items(run.id, tag="city")] == ["r2"]
    # keyset paging: after the first item's seq
    assert [i.key for i in store.page_items(run.id, after=0, limit=1)] == ["r2"]


def test_json_rescore_is_a_child_run_without_a_model_call(store: Store, tmp_path: Path) -> None:
    out, batch = json_folder(tmp_path)
    run = record_folder(store, out, inputs=[("batch", batch)])
    child = rescore(store, run.id, strategies={**EXACT, "city": "IGNORE"})
    assert (child.parent_id, child.system, child.n_items) == (run.id, "json", 3)
    # city ignored: r2 scores 1/1 -> accuracy 1.0; completeness unchanged
    assert child.metrics["means"]["accuracy"] == 1.0
    assert math.isclose(child.metrics["means"]["completeness"], 2.5 / 3)
    assert child.settings["config"]["strategies"]["city"] == "IGNORE"
    assert store.count_items(child.id, failed=True) == 1  # only r3 is left


def test_json_rescore_keeps_the_records_that_could_not_be_scored(
    store: Store, tmp_path: Path
) -> None:
    records = [*JSON_RECORDS, {"id": "r4", "ground_truth": "not an object", "output": {}}]
    out, batch = json_folder(tmp_path, records=records)
    run = record_folder(store, out, inputs=[("batch", batch)])
    assert (run.metrics["records"], run.metrics["not_scored"], run.metrics["failed"]) == (4, 1, 2)
    assert (store.count_not_scored(run.id), store.count_items(run.id, failed=True)) == (1, 2)
    child = rescore(store, run.id, strategies={**EXACT, "city": "IGNORE"})
    # the line not scored is counted again, and stored again as an error item; city ignored,
    # only r3 failed
    assert (child.metrics["records"], child.metrics["not_scored"], child.n_items) == (4, 1, 4)
    assert child.metrics["failed"] == 1 and store.count_items(child.id, failed=True) == 1
    assert child.n_errors == 1 and store.count_not_scored(child.id) == 1


def test_slot_folder_and_rescore_with_another_tp_rule(store: Store, tmp_path: Path) -> None:
    out, inputs = slots_folder(tmp_path)
    run = record_folder(store, out, inputs=inputs)
    assert (run.model, run.n_items) == ("a, b", 4)  # 2 models x 2 gold sessions
    models = run.metrics["models"]
    assert models["a"]["f1"] == 1.0  # presence: every gold slot predicted
    assert math.isclose(models["b"]["f1"], 0.8)  # P 1, R 2/3 -> 2 * (2/3) / (5/3)
    assert [i.key for i in store.page_items(run.id, failed=True)] == ["b/u1/1"]
    # failed on a topic: an FP or FN there (a's other job is a TP under presence)
    assert [i.key for i in store.page_items(run.id, tag="work", failed=True)] == ["b/u1/1"]
    assert store.count_items(run.id, model="b") == 2
    assert len(run.metrics["paired_f1"]) == 1
    exact = rescore(store, run.id, tp="exact")
    # exact: a's job "doctor" != "nurse" -> tp 2, fp 1, fn 1 -> P = R = F1 = 2/3
    assert math.isclose(exact.metrics["models"]["a"]["f1"], 2 / 3)
    assert math.isclose(exact.metrics["models"]["b"]["f1"], 0.8)
    assert exact.settings["tp"] == "exact" and exact.parent_id == run.id
    # under exact a's job is an FP and an FN: now a failed on work too
    assert [i.key for i in store.page_items(exact.id, tag="work", failed=True)] == [
        "a/u1/1",
        "b/u1/1",
    ]


def test_numeric_folder_items_by_turn(store: Store, tmp_path: Path) -> None:
    run = record_folder(store, numeric_folder(tmp_path), model="model_a")
    assert run.n_items == 51
    assert math.isclose(run.metrics["general_match_accuracy"], 44 / 51)
    assert store.count_items(run.id, failed=True) == 7  # 51 - 44 general matches
    assert store.count_items(run.id, turn=0) == sum(
        1 for i in store.page_items(run.id, limit=500) if i.result["turn_idx"] == 0
    )
    with pytest.raises(Exception, match="numeric runs cannot be re-scored"):
        rescore(store, run.id)


def test_list_filters_compare_and_delete(store: Store, tmp_path: Path) -> None:
    a = record_folder(store, json_folder(tmp_path, "a")[0], model="alpha")
    b = record_folder(store, json_folder(tmp_path, "b")[0], model="beta")
    s = record_folder(store, slots_folder(tmp_path)[0])
    assert [r.id for r in store.list_runs(system="json")] == [a.id, b.id]
    assert [r.id for r in store.list_runs(model="beta")] == [b.id]
    assert [r.id for r in store.list_runs(model="b")] == [s.id]  # one of "a, b"
    for other in ("B", "A", "Beta", "a, ", "%", "_"):  # case kept, as == keeps it; no wildcard
        assert store.list_runs(model=other) == [], other
    assert [r.id for r in store.list_runs(model="a, b")] == [s.id]
    assert [r.id for r in store.list_runs(newest_first=True, limit=1)] == [s.id]
    assert store.count_runs(system="slots") == 1
    assert store.find_run(a.id[:6]) is not None
    table = compare_runs([a, b])
    rates = {row["name"]: row["values"] for row in table["tables"][0]["rows"]}
    assert rates["city"] == [0.5, 0.5] and rates["name"] == [1.0, 1.0]
    with pytest.raises(Exception, match="different systems"):
        compare_runs([a, s])
    assert store.delete_run(a.id) and store.get_run(a.id) is None
    assert store.count_items(a.id) == 0 and not store.delete_run(a.id)


def test_recorder_chunks_and_abort(store: Store, tmp_path: Path) -> None:
    with (
        pytest.raises(KeyboardInterrupt),
        RunRecorder.open(
            store, system="numeric", inputs=[], settings={}, signature="s", out=tmp_path
        ) as recorder,
    ):
        _add(
            recorder,
            [{"conversation_id": "c", "turn_idx": t, "numerical_match": t == 0} for t in range(3)],
        )
        raise KeyboardInterrupt
    run = store.get_run(recorder.id)
    assert run is not None and (run.status, run.n_items) == ("interrupted", 3)
    assert [i.turn for i in store.page_items(run.id, failed=True)] == [1, 2]


def _exports(store: Store, run_id: str) -> tuple[bytes, bytes]:
    return b"".join(iter_export(store, run_id, "csv")), b"".join(
        iter_export(store, run_id, "jsonl")
    )


def test_same_run_exports_byte_identical_on_both_backends(tmp_path: Path, pg_url: str) -> None:
    out, batch = json_folder(tmp_path)
    slots_out, inputs = slots_folder(tmp_path)
    results = []
    for url in (f"sqlite:///{tmp_path / 'same.sqlite3'}", pg_url):
        store = Store(url)
        run = record_folder(store, out, inputs=[("batch", batch)], model="m")
        child = rescore(store, run.id, strategies={**EXACT, "city": "IGNORE"})
        slot = record_folder(store, slots_out, inputs=inputs)
        slot_child = rescore(store, slot.id, tp="exact")
        listed = [(r.system, r.model, r.n_items) for r in store.list_runs()]
        compared = compare_runs([run, child])
        for entry in compared["runs"]:
            entry.pop("id"), entry.pop("parent_id")
        for column in compared["columns"]:
            column.pop("run"), column.pop("label")
        results.append(
            (
                listed,
                compared,
                *_exports(store, run.id),
                *_exports(store, child.id),
                *_exports(store, slot_child.id),
            )
        )
        store.close()
    sqlite, postgres = results
    assert sqlite == postgres
    assert sqlite[2].startswith(b"key,seq,failed,model,turn,error_type,completeness")
    assert sqlite[2].count(b"\n") == 4  # header + 3 records


def test_a_run_with_re_scores_is_not_deleted_until_they_are(store: Store, tmp_path: Path) -> None:
    from sqlalchemy import text

    from fieldcheck.store import RunHasChildren

    out, batch = json_folder(tmp_path)
    run = record_folder(store, out, inputs=[("batch", batch)])
    first = rescore(store, run.id, strategies={**EXACT, "city": "IGNORE"})
    second = rescore(store, run.id, strategies=EXACT)
    with pytest.raises(
        RunHasChildren, match=f"run {run.id} has re-scores: {first.id}, {second.id}"
    ):
        store.delete_run(run.id)
    assert store.get_run(run.id) is not None and store.count_items(run.id) == 3
    assert store.delete_run(first.id) and store.delete_run(second.id)
    # a re-score of a run that migration 0006 merged names the run's former id
    third = rescore(store, run.id, strategies=EXACT)
    with store.engine.begin() as connection:
        connection.execute(
            text("UPDATE runs SET former_id = 'old0scored1' WHERE id = :i"), {"i": run.id}
        )
        connection.execute(
            text("UPDATE runs SET parent_id = 'old0scored1' WHERE id = :i"), {"i": third.id}
        )
    with pytest.raises(RunHasChildren, match=third.id):
        store.delete_run(run.id)
    assert store.delete_run(third.id) and store.delete_run(run.id)
    assert store.get_run(run.id) is None


def _model_run(store: Store, *, n_items: int) -> RunInfo:
    """A json model run opened in ``store`` (its items then saved to its journal)."""
    run, _ = store.open_run(
        system="json",
        task="run",
        dataset="d",
        dataset_sha256="x",
        model="m",
        endpoint="e",
        settings={},
        signature="",
        n_items=n_items,
    )
    return run


def test_a_reply_cached_twice_keeps_the_first_and_a_journal_item_counts(store: Store) -> None:
    """The hot writes of a model run (Core statements, not the ORM): a key cached again (by
    another process meanwhile) keeps the first reply, on both backends; a journal item is
    committed with the run's counts, several in one transaction (a failed one counted as an
    error)."""
    store.save_items([], [("k", "m", {"text": "first"})])
    store.save_items([], [("k", "m", {"text": "second"})])
    assert store.cache_get("k") == {"text": "first"} and store.cache_count() == 1
    run = _model_run(store, n_items=2)
    store.save_items(
        [
            {"run_id": run.id, "key": "a", "seq": 0, "result": {"v": 1}, "latency_s": 0.5},
            {"run_id": run.id, "key": "b", "seq": 1, "result": {"v": 2}, "error_type": "timeout"},
        ]
    )
    saved = store.get_run(run.id)
    assert saved is not None and (saved.n_done, saved.n_errors) == (2, 1)
    journal = store.journal(run.id)
    assert [(i.key, i.seq, i.result, i.error_type) for i in journal] == [
        ("a", 0, {"v": 1}, None),
        ("b", 1, {"v": 2}, "timeout"),
    ]


def test_items_in_flight_are_kept_only_by_their_call_error(store: Store) -> None:
    """A model run's items in flight (its journal, not scored): the call's error type filters
    them, a scored filter keeps none, an empty text or condition keeps all; each page and its
    count agree (one rule for both)."""
    run = _model_run(store, n_items=3)
    store.save_items(
        [
            {"run_id": run.id, "key": "a", "seq": 0, "result": {"v": 1}},
            {"run_id": run.id, "key": "b", "seq": 1, "result": {}, "error_type": "timeout"},
            {"run_id": run.id, "key": "c", "seq": 2, "result": {"v": 3}},
        ]
    )
    cases: list[tuple[dict[str, Any], list[str]]] = [
        ({}, ["a", "b", "c"]),
        ({"error_type": "timeout"}, ["b"]),
        ({"q": "", "equals": ()}, ["a", "b", "c"]),
        ({"failed": False}, []),
        ({"tag": "city"}, []),
        ({"turn": 0}, []),
        ({"q": "a"}, []),
        ({"equals": (("1", 1),)}, []),
    ]
    for filters, keys in cases:
        assert [i.key for i in store.page_items(run.id, **filters)] == keys, filters
        assert store.count_items(run.id, **filters) == len(keys), filters
    assert [i.key for i in store.page_items(run.id, descending=True, limit=2)] == ["c", "b"]
    assert [i.key for i in store.find_items(run.id, ["c", "a"])] == ["a", "c"]
    assert store.item_values(run.id, "error_type") == ["timeout"]


def test_the_runs_list_sums_latencies_as_the_runs_files_sum_them(tmp_path: Path) -> None:
    """The mean latency of the journal is ``math.fsum`` over the answered calls, as
    ``latency_stats`` gives a run's files theirs (SQL's sum of ten 0.1 s is 0.9999999999999999:
    the store's mean differed from statistics.json's in the last digits, a tester's finding)."""
    store = Store(f"sqlite:///{tmp_path / 's.sqlite3'}")
    prices = {"model_spec": {"price_in": 0.15, "price_out": 0.6}}
    run = store.create_scored_run(
        system="numeric", model="m", task="run", inputs=[], settings=prices, signature="s",
        out_dir=None,
    )  # fmt: skip
    rows = [
        (f"k{n}", None if n < 10 else "server_error", 0.1 if n < 10 else 5.0) for n in range(11)
    ]
    log = orjson.dumps([{"input_tokens": 4412, "output_tokens": 171}]).decode()
    with store.engine.begin() as connection:
        for seq, (key, error, seconds) in enumerate(rows):
            connection.execute(
                text(
                    "INSERT INTO run_journal (run_id, item_key, seq, error_type, calls, "
                    "cached_calls, latency_s, result, call_log, finished_at) VALUES (:run, :key, "
                    ":seq, :error, 1, 0, :seconds, '{}', :log, :at)"
                ),
                {"run": run.id, "key": key, "seq": seq, "error": error, "seconds": seconds,
                 "log": log, "at": datetime.now(UTC)},
            )  # fmt: skip
        found = journal_figures(connection, run.id, ["server_error"])
    expected = latency_stats([0.1] * 10)
    assert expected is not None and found["latency_mean_s"] == expected.mean == 0.1
    assert found["cost_usd"] == (48532 * 0.15 + 1881 * 0.6) / 1e6  # 11 calls' tokens
    store.close()


def test_the_docs_notebook_block_reads_a_run_and_writes_the_clis_parquet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a library user found no documented way to read the store (runs.md showed only the writer),
    # and Store.export_parquet alone lacks the system's columns that `runs export` has
    import contextlib
    import io
    import re

    import pyarrow.parquet as pq

    docs = (Path(__file__).resolve().parents[2] / "docs" / "runs.md").read_text()
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", docs, flags=re.S) if "Store()" in b]
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{tmp_path / 'nb.sqlite3'}")
    with contextlib.closing(Store()) as store:
        out, batch = json_folder(tmp_path)
        run = record_folder(store, out, inputs=[("batch", batch)], model="m1")
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    scope: dict[str, Any] = {}
    with contextlib.redirect_stdout(printed):
        exec(compile(block, "docs/runs.md", "exec"), scope)
    assert printed.getvalue().split()[:4] == [run.id, "json", "m1", "finished"]
    assert [i.key for i in scope["items"]] == [r["id"] for r in JSON_RECORDS]
    table = pq.read_table(tmp_path / "run.parquet")
    assert table.num_rows == len(JSON_RECORDS) and "rqs" in table.column_names

"""JSON scoring in the chunk -> (rows, digest) shape (issue 27 items 1 and 7, chunks.md): the same
files and stored items whatever executor runs ``score_chunk``, digests that merge in any
grouping to the same numbers, and in-memory scoring that is streamed scoring with one chunk."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fieldcheck._util import jsonio
from fieldcheck.core import InProcess, LocalPool, score
from fieldcheck.jsoneval import (
    BatchReader,
    EvalConfig,
    _stream,
    evaluate_batch,
    make_signature,
    read_batch,
)
from fieldcheck.jsoneval._stream import Aggregate, Item, Job, joined, score_chunk
from fieldcheck.store import RunRecorder, Store

from .test_json_streaming import KEYS, STRATEGIES, matchers, random_batch

OUTPUTS = ("records.jsonl", "errors.jsonl", "fields.csv", "summary.json", "report.md")


def _scored(data: Path, out: Path, store: Store, executor: Any, table: dict[str, Any]) -> Any:
    return score(
        "json",
        [("batch", data)],
        {"config": {"strategies": STRATEGIES}, "bootstrap": 200, "seed": 3},
        out=out,
        command="json batch",
        store=store,
        executor=executor,
        extras={"matchers": table, "chunk_lines": 37},
    )


def test_in_process_and_a_pool_give_the_same_files_and_stored_items(tmp_path: Path) -> None:
    data = tmp_path / "batch.jsonl"
    data.write_text("\n".join(random_batch(5, 1500)) + "\n")
    store = Store(f"sqlite:///{tmp_path}/s.db")
    here, there = matchers(), matchers()
    one = _scored(data, tmp_path / "one", store, InProcess(), here)
    with LocalPool(2) as pool:
        two = _scored(data, tmp_path / "two", store, pool, there)
    for name in OUTPUTS:
        assert (one.destination / name).read_bytes() == (two.destination / name).read_bytes(), name
    summary = json.loads((one.destination / "summary.json").read_text())
    assert summary["records"] > 1400 and summary["not_scored"] > 10
    # the pool's processes got the job without its matchers: the chunks with a FUZZY or
    # SEMANTIC pair came back and were matched here, the same pairs as in process
    assert here.keys() == there.keys()
    for family in here:
        assert here[family].pairs == there[family].pairs
    assert here["FUZZY"].pairs

    def items(run_id: str | None) -> list[tuple[Any, ...]]:
        assert run_id is not None
        found = store.items(run_id)
        return [(i.key, i.seq, i.error_type, i.failed, i.result) for i in found]

    assert items(one.run_id) == items(two.run_id)
    assert len(items(one.run_id)) == summary["records"]


def _chunks(lines: list[str], size: int, tmp_path: Path) -> list[list[Item | Any]]:
    data = tmp_path / "b.jsonl"
    data.write_text("\n".join(lines) + "\n")
    return [list(c) for c in BatchReader(data, chunk_lines=size).chunks()]


def _finished(digest: Aggregate) -> tuple[Any, ...]:
    summary = digest.summary(make_signature(EvalConfig(), matchers()))
    data = summary.model_dump(mode="json", exclude={"signature"})
    hist = {k: v.tolist() for k, v in digest.histograms.items()}
    worst = [(r.id, r.scores) for r in digest.worst()]
    return data, hist, worst, sorted(digest.seen)


def _grouped(digests: list[Aggregate], cuts: list[int]) -> Aggregate:
    """The digests merged as groups (each group merged left to right first), the groups then
    merged into a batch's start."""
    bounds = sorted({0, len(digests), *(c % (len(digests) + 1) for c in cuts)})
    total = Aggregate(bootstrap=100, seed=7)
    for a, b in itertools.pairwise(bounds):
        group = Aggregate(start=False)
        for d in digests[a:b]:
            group.merge(d)
        total.merge(group)
    return total


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    size=st.integers(1, 60),
    cuts=st.lists(st.integers(0, 400), max_size=6),
)
def test_digests_merged_in_any_grouping_give_the_numbers_of_one_chunk(
    tmp_path_factory: Any, seed: int, size: int, cuts: list[int]
) -> None:
    tmp_path = tmp_path_factory.mktemp("digests")
    lines = random_batch(seed, 120)
    job = Job(EvalConfig(strategies={**STRATEGIES, "never": "EXACT"}), matchers())
    whole = [x for c in _chunks(lines, 10_000, tmp_path) for x in c]
    one = score_chunk(job, whole)
    assert one is not None
    expected = _finished(Aggregate(bootstrap=100, seed=7).merge(one[1]))
    parts = [score_chunk(job, c) for c in _chunks(lines, size, tmp_path)]
    digests = [p[1] for p in parts if p is not None]
    assert len(digests) == len(parts)
    grouped = _finished(_grouped(digests, cuts))
    assert grouped == _finished(_grouped(digests, []))  # any grouping: the same digest
    # one chunk: the same numbers; only the distinct pairs sent to a matcher, counted per
    # chunk (json-evaluation.md: each distinct pair of a chunk is matched once), may differ
    assert grouped[1:] == expected[1:]
    pairs = "matcher_pairs"
    assert {k: v for k, v in grouped[0].items() if k != pairs} == {
        k: v for k, v in expected[0].items() if k != pairs
    }
    assert grouped[0][pairs]["FUZZY"] >= expected[0][pairs]["FUZZY"]
    assert b"".join(joined(p[0].records) for p in parts if p is not None) == joined(one[0].records)
    assert "never" not in expected[3] and set(expected[3]) <= set(STRATEGIES)


def test_in_memory_scoring_is_streamed_scoring_with_one_chunk(tmp_path: Path) -> None:
    data = tmp_path / "b.jsonl"
    data.write_text("\n".join(random_batch(11, 300)) + "\n")
    records, errors = read_batch(data)
    config = EvalConfig(strategies=STRATEGIES)
    one = evaluate_batch(records, config, matchers=matchers(), bootstrap=50, seed=1)
    many = evaluate_batch(records, config, matchers=matchers(), bootstrap=50, seed=1, chunk_size=7)
    assert one.summary == many.summary
    assert [r.model_dump() for r in one.results] == [r.model_dump() for r in many.results]
    # and the streamed file's numbers (its read errors counted too) are the same
    job = Job(config, matchers(), keep=True)
    digest = Aggregate(bootstrap=50, seed=1)
    for chunk in BatchReader(data, chunk_lines=13).chunks():
        found = score_chunk(job, chunk)
        assert found is not None
        digest.merge(found[1])
    streamed = digest.summary(one.summary.signature)
    assert streamed.means == one.summary.means and streamed.ci == one.summary.ci
    assert streamed.scored == one.summary.scored and streamed.not_scored == len(errors)


def test_a_job_is_sent_with_its_fuzzy_matcher_only_and_a_semantic_chunk_comes_back() -> None:
    import pickle

    from fieldcheck.matchers import FuzzyMatcher

    config = EvalConfig(strategies={"name": "FUZZY", "note": "SEMANTIC"})
    job = Job(config, {**matchers(), "FUZZY": FuzzyMatcher()}, keep=True)
    sent = pickle.loads(pickle.dumps(job))
    assert set(sent.matchers) == {"FUZZY"} and sent.progress is None
    fuzzy = [
        Item(1, "a", 1, {"name": "Alice", "note": "x"}, {"name": "Alicia", "note": "x"}, None, True)
    ]
    there, here = score_chunk(sent, fuzzy), score_chunk(job, fuzzy)  # scored in a pool process
    assert (
        there is not None
        and here is not None
        and joined(there[0].records) == joined(here[0].records)
    )
    assert there[1].matcher_pairs == {"FUZZY": 1, "SEMANTIC": 0}
    semantic = [
        Item(2, "b", 2, {"name": "Bob", "note": "late"}, {"name": "Bob", "note": "due"}, None, True)
    ]
    assert score_chunk(sent, semantic) is None  # a SEMANTIC pair: not scored there
    found = score_chunk(job, semantic)
    assert found is not None and found[1].matcher_pairs["SEMANTIC"] == 1


def _canonical_batch(seed: int, n: int) -> list[str]:
    """``random_batch``'s records, some lines as orjson writes them (the stored items of such a
    chunk are spliced from its lines), some with an unknown key, and ids seen in an earlier
    chunk again."""
    rng = random.Random(seed)
    lines = []
    for i, line in enumerate(random_batch(seed, n)):
        try:
            record = json.loads(line)
        except ValueError:
            lines.append(line)
            continue
        if rng.random() < 0.02:
            record["unknown"] = 1
        if rng.random() < 0.02 and i > 20:
            record["id"] = f"r{rng.randrange(i)}"
        compact = rng.random() < 0.8 and "safety_score" not in record
        lines.append(orjson.dumps(record).decode() if compact else json.dumps(record))
    return lines


def _files_and_items(store: Store, found: Any) -> tuple[list[bytes], list[tuple[Any, ...]]]:
    files = [(found.destination / name).read_bytes() for name in OUTPUTS]
    items = [(i.key, i.seq, i.error_type, i.failed, i.result) for i in store.items(found.run_id)]
    return files, items


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), size=st.integers(1, 40))
def test_unparsed_chunks_give_the_files_and_stored_items_of_chunks_read_line_by_line(
    tmp_path_factory: Any, seed: int, size: int
) -> None:
    # a large file's chunks past its first record are parsed where they are scored (``Lines``),
    # their ids checked afterwards (a chunk with one seen before is read again, line by line)
    # and canonical lines' store items spliced from the lines: all as the reader's own path
    # (read in blocks of a few hundred bytes: a line too long read line by line, a last line
    # with no newline)
    tmp_path = tmp_path_factory.mktemp("unparsed")
    data = tmp_path / "batch.jsonl"
    lines = _canonical_batch(seed, 150)
    long = {"id": "long", "ground_truth": {"a": "x" * 3000}, "output": {"a": "x"}}
    lines.insert(random.Random(seed).randrange(len(lines)), json.dumps(long))
    data.write_text("\n".join(lines) + "\n" * (seed % 2))
    store = Store(f"sqlite:///{tmp_path}/s.db")
    table = matchers()

    def run(unparsed_bytes: int, name: str) -> tuple[list[bytes], list[tuple[Any, ...]]]:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_stream, "UNPARSED_BYTES", unparsed_bytes)
            patch.setattr(jsonio, "MAX_LINE_BYTES", 2000)
            patch.setattr(_stream._Blocks, "SIZE", 64 + seed % 700)
            settings = {"config": {"strategies": STRATEGIES}, "bootstrap": 50, "seed": 3}
            found = score(
                "json",
                [("batch", data)],
                settings,
                out=tmp_path / name,
                command="json batch",
                store=store,
                executor=InProcess(),
                extras={"matchers": table, "chunk_lines": size},
            )
        return _files_and_items(store, found)

    general, unparsed = run(1 << 40, "general"), run(0, "unparsed")
    assert unparsed == general
    summary = json.loads(general[0][OUTPUTS.index("summary.json")])
    assert summary["records"] >= 150 and summary["scored"] > 100
    assert b"line too long: 3,0" in general[0][OUTPUTS.index("errors.jsonl")]


def test_a_large_batch_is_parsed_and_scored_by_a_pool_with_the_same_files_and_items(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # no executor given: ``run_stream`` scores the unparsed chunks in a pool of its own; a
    # chunk with a FUZZY pair comes back and is scored here
    data = tmp_path / "batch.jsonl"
    data.write_text("\n".join(_canonical_batch(4, 1200)) + "\n")
    store = Store(f"sqlite:///{tmp_path}/s.db")
    here = _scored(data, tmp_path / "here", store, InProcess(), matchers())
    monkeypatch.setattr(_stream, "UNPARSED_BYTES", 0)
    pooled = _scored(data, tmp_path / "pooled", store, None, matchers())
    assert _files_and_items(store, pooled) == _files_and_items(store, here)
    reader = BatchReader(data, chunk_lines=37)
    reader.unparsed = True
    kinds = {type(c) for c in reader.chunks()}
    assert kinds == {list, _stream.Lines}


def test_a_chunk_of_canonical_lines_is_stored_as_the_general_path_writes_it(
    tmp_path: Path,
) -> None:
    # ``stored_items`` of ``_spliced`` columns against ``_store_rows``' texts, record by record
    records = {r["id"]: r for r in map(json.loads, filter(_plain, random_batch(8, 400)))}
    mixed = [orjson.dumps(r) + b"\n" for r in records.values()]
    exact = {k: "EXACT" for k in KEYS if k != "note"}
    job = Job(EvalConfig(strategies={**exact, "note": "IGNORE", "extra": "EXACT"}), {})
    job.store = True
    # a chunk with a record not the kernel's (no shared line parts) is stored as rows
    found = score_chunk(job, _stream.Lines(range(1, 401), _offsets(mixed), b"".join(mixed), False))
    assert found is not None and isinstance(found[0].store, bytes)
    items, _, _ = _stream.plain_items(range(1, 401), mixed, False) or ([], [], [])
    scored, _, _, _ = job.scorer.score(items)
    raw = [line for line, r in zip(mixed, scored, strict=True) if r.line_parts is not None]
    assert 0 < len(raw) < len(mixed)
    data = tmp_path / "b.jsonl"
    data.write_bytes(b"".join(raw))
    lines_chunk = _stream.Lines(range(1, len(raw) + 1), _offsets(raw), data.read_bytes(), False)
    found = score_chunk(job, lines_chunk)
    assert found is not None and isinstance(found[0].store, tuple)
    payload = _stream.spliced_payload(found[0], lines_chunk, str(data))
    c = _stream.stored_items(payload).to_pydict()  # the store's table but its seqs
    spliced = zip(c["key"], c["failed"], c["error_type"], c["tags"], c["result"], strict=True)
    items, _, _ = _stream.plain_items(lines_chunk.numbers, raw, False) or ([], [], [])
    scored, _, _, _ = job.scorer.score(items)
    general = _stream._store_rows(scored, list(map(_stream.record_line, scored)), items, [])
    assert [(k, f, e, sorted(tags), t.encode()) for k, f, e, tags, t in spliced] == [
        (key, failed, error, sorted(tags), text) for key, failed, error, tags, text in general
    ]
    assert c["failed_tags"] == c["tags"] and c["model"] == c["turn"] == [None] * len(raw)
    assert len(c["key"]) == len(raw) and any(c["tags"])
    # with calls (a model run's), the table is spliced as rows: the first item gets its call
    store, first = Store(f"sqlite:///{tmp_path}/s.db"), c["key"][0]
    options: dict[str, Any] = {"inputs": [], "settings": {}, "signature": "", "out": None}
    with RunRecorder.open(store, system="json", calls={first: {"n": 1}}, **options) as recorder:
        recorder.add_built(_stream._STORED_ITEMS, payload, len(raw), plain=True)
        recorder.finish(metrics=None)
    stored = store.items(recorder.id)
    assert [(i.key, i.seq, i.failed) for i in stored] == [
        (k, n, f) for n, (k, f) in enumerate(zip(c["key"], c["failed"], strict=True))
    ]
    texts = [orjson.loads(t) for t in c["result"]]
    assert [i.result for i in stored] == [{**texts[0], "call": {"n": 1}}, *texts[1:]]
    tag = next(t for ts in c["tags"] for t in ts)
    assert store.count_items(recorder.id, tag=tag, failed=True) == sum(
        tag in ts for ts in c["failed_tags"]
    )


def _offsets(lines: list[bytes]) -> list[int]:
    return list(itertools.accumulate(map(len, lines), initial=0))


def _plain(line: str) -> bool:
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return set(record) == {"id", "ground_truth", "output"} and isinstance(
        record["ground_truth"], dict
    )


@pytest.mark.parametrize("flatten", [True, False])
def test_scoring_a_chunk_leaves_no_reference_cycle(tmp_path: Path, flatten: bool) -> None:
    # pool workers run with the collector off (executor._worker_start): a cycle made per record
    # (flatten's closure calling itself held each record's flat values) grew a worker's memory
    # with the number of records, 5 KB each (678 MB at 100k records)
    import gc

    data = tmp_path / "b.jsonl"
    data.write_text("\n".join(random_batch(4, 300)) + "\n")
    config = EvalConfig(strategies=STRATEGIES, flatten=flatten, safety_check="leaks")
    job = Job(config, matchers())
    chunks = list(BatchReader(data, chunk_lines=64).chunks())
    gc.collect()
    gc.disable()
    try:
        found = [score_chunk(job, c) for c in chunks]
        garbage = gc.collect()
    finally:
        gc.enable()
    assert all(f is not None for f in found) and sum(f[1].scored for f in found if f) > 200
    assert garbage == 0

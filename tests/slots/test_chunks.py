"""Slot scoring as chunk -> (rows, digest) on the executors (issue 27 item 7, ARCHITECTURE.md
"Chunks, digests and executors"): a bucket of sessions is a chunk (``score_chunk``), its digest
a ``ScorerState`` that merges associatively; the pipeline gives the same files and stored items
whichever executor runs the chunks, and in-memory scoring is the streamed one with one chunk."""

from __future__ import annotations

import json
import marshal
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import partial, reduce
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fieldcheck import core
from fieldcheck._util.executor import Executor, InProcess, LocalPool, run_map
from fieldcheck.slots import ModelInput, _score, _stream, _system, score_models
from fieldcheck.slots._loaders import SlotFile, add_slot
from fieldcheck.slots._score import ScorerState, SlotJob, SlotScorer, headers, score_chunk
from fieldcheck.slots._stream import Bucket
from fieldcheck.store import Store

OUTPUTS = ("metrics.json", "metrics.csv", "per_topic.csv", "errors.jsonl", "report.md")
WORDS = ["chess", "café", "a b", "", "jazz", "Hiking!"]


def _files(folder: Path) -> list[tuple[str, Path]]:
    """Gold, two models (right, wrong, missing, extra values; a session not in the gold; a bad
    line and a repeated slot each), model a's latencies: the pipeline's inputs, shuffled."""
    rng = random.Random(7)
    rows: dict[str, list[str]] = {"gold": [], "a": [], "b": [], "latency": []}
    for s in range(90):
        head = {"user": f"u{s % 9}", "session": s}
        rows["latency"].append(json.dumps({**head, "seconds": rng.random()}))
        for k in range(rng.randint(1, 5)):
            slot = {**head, "topic": rng.choice(["t1", "t2"]), "field": f"f{k}"}
            values = [rng.choice(WORDS) for _ in range(rng.randint(0, 2))]
            rows["gold"].append(json.dumps({**slot, "values": values}))
            for m in ("a", "b"):
                if rng.random() < 0.8:
                    guess = values if rng.random() < 0.6 else [rng.choice(WORDS)]
                    rows[m].append(json.dumps({**slot, "values": guess}))
    rows["a"].append(json.dumps({"user": "zz", "session": 1, "topic": "t", "field": "f", "values": ["v"]}))  # fmt: skip
    paths = {}
    for name, lines in rows.items():
        lines.insert(rng.randrange(len(lines)), "not json")
        if name != "latency":
            lines.append(lines[0])  # a repeated slot
        rng.shuffle(lines)
        paths[name] = folder / f"{name}.jsonl"
        paths[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [
        ("gold", paths["gold"]),
        ("pred:a", paths["a"]),
        ("pred:b", paths["b"]),
        ("latency:a", paths["latency"]),
    ]


@contextmanager
def _buckets(k: int) -> Iterator[None]:
    """``prepare`` splits its inputs into ``k`` buckets (chunks)."""
    split = _system.partitioned

    @contextmanager
    def into_k(paths: list[Path], **options: Any) -> Iterator[_stream.Partition]:
        with split(paths, k=k, **options) as part:
            yield part

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_system, "partitioned", into_k)
        yield


def _run(given: list[tuple[str, Path]], out: Path, executor: Executor, tp: str) -> Any:
    """The spec's files and the stored items of one pipeline run through ``executor``."""
    store = Store(f"sqlite:///{out}.db")
    settings = {"tp": tp, "threshold": None, "bootstrap": 50, "seed": 3}
    with _buckets(5):
        outcome = core.score(
            "slots", given, settings, out=out, command="slots score", store=store, executor=executor
        )
    assert outcome.run_id is not None
    items = [(i.key, i.seq, i.failed, i.model, i.result) for i in store.iter_items(outcome.run_id)]
    return {name: (out / name).read_bytes() for name in OUTPUTS}, items


@pytest.mark.parametrize("tp", ["presence", "exact"])
def test_in_process_and_a_pool_give_the_same_files_and_stored_items(
    tmp_path: Path, tp: str
) -> None:
    """(a) Five chunks through ``InProcess`` and through ``LocalPool(2)`` (built items: the
    pool's workers build them): byte-identical files, the same items in the same order (seq).
    A matcher's job (``--tp exact``) runs here whatever the executor."""
    given = _files(tmp_path)
    files, items = _run(given, tmp_path / "here", InProcess(), tp)
    with LocalPool(2) as pool:
        assert _run(given, tmp_path / "pool", pool, tp) == (files, items)
    metrics = json.loads(files["metrics.json"])
    assert metrics["models"]["a"]["counts"]["sessions"] == 90
    assert metrics["models"]["a"]["latency"]["total"] > 0
    assert [seq for _, seq, *_ in items] == list(range(2 * 90))
    errors = [json.loads(line) for line in files["errors.jsonl"].decode().splitlines()]
    assert len(errors) == 7  # a bad line per file, a repeated slot per slot file


# ---------------------------------------------------------------- digests (hypothesis)

VALUES = st.lists(st.sampled_from(["x", "y z", "", "Ünï", "7"]), max_size=2)
SLOTS = st.dictionaries(st.tuples(st.sampled_from(["t1", "t2"]), st.sampled_from(["f", "g"])), VALUES, max_size=3)  # fmt: skip
SESSIONS = st.lists(st.tuples(SLOTS, SLOTS, SLOTS), min_size=1, max_size=14)


def _rows(slots: dict[tuple[str, str], list[str]], key: tuple[str, int]) -> list[Any]:
    return [(key[0], key[1], topic, name, values) for (topic, name), values in slots.items()]


def _chunks(sessions: list[Any], where: list[int]) -> list[Bucket]:
    """The sessions (gold, model a, model b) as chunks: session i in chunk ``where[i]``."""
    n = max(where) + 1
    batches: list[list[list[Any]]] = [[[], [], []] for _ in range(n)]
    for i, (session, chunk) in enumerate(zip(sessions, where, strict=False)):
        for file, slots in enumerate(session):
            line = 100 * i + 1
            batches[chunk][file] += [
                (line + j, row) for j, row in enumerate(_rows(slots, (f"u{i % 3}", i)))
            ]
    paths = [Path("gold.jsonl"), Path("a.jsonl"), Path("b.jsonl")]
    return [Bucket(paths, [], [], list(enumerate(files))) for files in batches]


def _job() -> SlotJob:
    models = [ModelInput(m, SlotFile(Path(f"{m}.jsonl"))) for m in ("a", "b")]
    return SlotJob(SlotFile(Path("gold.jsonl")), headers(models))


def _finished(digest: ScorerState) -> dict[str, Any]:
    models = [ModelInput(m, SlotFile(Path(f"{m}.jsonl"))) for m in ("a", "b")]
    scorer = SlotScorer(SlotFile(Path("gold.jsonl")), models, bootstrap=30, seed=5)
    scorer.absorb(digest)
    run = scorer.finish()
    return {"metrics": run.metrics_json(), "warnings": run.warnings}


def _digests(sessions: list[Any], where: list[int]) -> list[ScorerState]:
    return [digest for _, digest in map(partial(score_chunk, _job()), _chunks(sessions, where))]


def _merged(left: ScorerState, right: ScorerState) -> ScorerState:
    left.absorb(right)
    return left


def _tree(digests: list[ScorerState]) -> ScorerState:
    """Neighbours merged pairwise, then the pairs, ...: another grouping, the same order."""
    while len(digests) > 1:
        digests = [
            _merged(digests[i], digests[i + 1]) if i + 1 < len(digests) else digests[i]
            for i in range(0, len(digests), 2)
        ]
    return digests[0]


@settings(max_examples=40, deadline=None)
@given(sessions=SESSIONS, data=st.data())
def test_digests_of_any_split_merged_in_any_grouping_finish_alike(
    sessions: list[Any], data: st.DataObject
) -> None:
    """(b) A random split of the sessions into chunks (in order), the digests merged left to
    right, right to left and as a tree, finish to the metrics, intervals and warnings of one
    chunk."""
    n = len(sessions)
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=4)))
    where = [sum(1 for c in cuts if c <= i) for i in range(n)]
    one = _finished(_digests(sessions, [0] * n)[0])
    left = reduce(_merged, _digests(sessions, where))
    assert _finished(left) == one
    digests = _digests(sessions, where)
    right = reduce(lambda later, d: _merged(d, later), reversed(digests))
    assert _finished(right) == one
    assert _finished(_tree(_digests(sessions, where))) == one
    gold_sessions = sum(1 for gold, _, _ in sessions if gold)  # a session is its gold lines
    assert one["metrics"]["models"]["a"]["counts"]["sessions"] == gold_sessions


def test_in_memory_scoring_is_streamed_scoring_with_one_chunk() -> None:
    """(c) ``score_models`` (the files in memory) gives the run of ``score_chunk`` over one
    chunk holding every session, its digest finished; with every interval and p-value."""
    rng = random.Random(2)
    sessions = [
        tuple(
            {(rng.choice(["t1", "t2"]), f"f{k}"): [rng.choice(WORDS)] for k in range(3)}
            for _ in range(3)
        )
        for _ in range(40)
    ]
    [chunk] = _chunks(sessions, [0] * len(sessions))
    files = [SlotFile(path) for path in chunk.paths]
    for index, rows in chunk.memory:
        for line, row in rows:
            add_slot(files[index], line, row)
    gold, a, b = files
    memory = score_models(gold, [ModelInput("a", a), ModelInput("b", b)], bootstrap=30, seed=5)
    streamed = _finished(_digests(sessions, [0] * len(sessions))[0])
    assert memory.metrics_json() == streamed["metrics"]
    assert memory.warnings == streamed["warnings"]
    paired = streamed["metrics"]["paired_f1"]
    assert paired and paired[0]["p_value"] is not None
    assert streamed["metrics"]["models"]["a"]["ci"]["f1"] is not None


def test_a_pool_task_spills_its_items_in_pieces_read_back_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pool's task (built items) puts its bucket's items in the bucket's ``spill`` file, in
    pieces of ``PIECE_ITEMS``: read back, they are the items built in memory, in order, and the
    file is removed once read (peak RSS of the scoring process, docs/decisions.md)."""
    rng = random.Random(4)
    sessions = [
        tuple({("t1", f"f{k}"): [rng.choice(WORDS)] for k in range(2)} for _ in range(3))
        for _ in range(10)
    ]
    monkeypatch.setattr(_score, "PIECE_ITEMS", 3)
    job = replace(_job(), store=True, built=True)
    [chunk] = _chunks(sessions, [0] * len(sessions))
    chunk.spill = tmp_path / "items0.bin"
    spilled, _ = score_chunk(job, chunk)
    assert chunk.spill.stat().st_size > 0
    pieces = list(spilled)
    assert not chunk.spill.exists()
    assert [count for _, _, count in pieces] == [3] * 6 + [2]  # 10 sessions x 2 models
    in_memory, _ = score_chunk(job, _chunks(sessions, [0] * len(sessions))[0])
    rows = [row for _, data, _ in pieces for row in marshal.loads(data)]
    assert rows == [row for _, data, _ in in_memory for row in marshal.loads(data)]
    assert [row[0] for row in rows[:2]] == ["a/u0/0", "a/u0/3"]  # model a, sorted sessions


def _fieldcheck_file(_: Any) -> str:
    import fieldcheck

    return str(fieldcheck.__file__)


def test_pool_workers_import_this_fieldcheck_not_the_working_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool's processes (spawned with this process's ``sys.path``) run this fieldcheck,
    never a ``fieldcheck`` folder in the working folder: the chunks are scored by this code."""
    import fieldcheck

    decoy = tmp_path / "fieldcheck"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise SystemExit('the decoy was imported')\n")
    monkeypatch.chdir(tmp_path)
    with LocalPool(1) as pool:
        assert list(run_map(pool, _fieldcheck_file, [None])) == [fieldcheck.__file__]

"""``slots score`` bucket by bucket (issue 10): shuffled files split into any number of buckets
give byte-identical outputs, equal to the spec's per-session counts summed by hand."""

from __future__ import annotations

import json
import logging
import math
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from slots_helpers import model_sides, naive_counts

from fieldcheck import core
from fieldcheck._util.executor import InProcess, LocalPool, run_map
from fieldcheck.metrics import bleu1_score, slot_values, tokenize_values
from fieldcheck.reports import RunFolder
from fieldcheck.slots import (
    SYSTEM,
    ModelInput,
    SlotsRun,
    _stream,
    _system,
    load_judge_scores,
    load_latencies,
    load_slots,
    score_models,
    write_outputs,
)
from fieldcheck.slots._loaders import JudgeFile, LatencyFile, SlotFile
from fieldcheck.slots._score import SlotJob, SlotScorer, headers, score_chunk
from fieldcheck.slots._stream import Bucket, bucket_count, partitioned

BUCKETS = ".fieldcheck-scratch-"  # the bucket folder's name, beside --out

WORDS = ["Reading", "hiking!", "chess", "café", "calm", "a b", "", "  ", "jazz", "<img src=x onerror=alert(1)>"]  # fmt: skip
OUTPUTS = ("metrics.json", "metrics.csv", "per_topic.csv", "errors.jsonl", "report.md")


def _files(folder: Path, seed: int, *, shuffle: bool) -> dict[str, Path]:
    """Gold and two models: wrong, missing, extra and blank values, a repeated slot, bad lines,
    a session not in the gold; lines shuffled (or grouped by session)."""
    rng = random.Random(seed)
    rows: dict[str, list[str]] = {"gold": [], "a": [], "b": []}
    for s in range(80):
        user = f"u{s % 7}"
        for k in range(rng.randint(0, 6)):
            topic = rng.choice(["t1", "t2", "<b>t3</b>"])
            values = [rng.choice(WORDS) for _ in range(rng.randint(0, 3))]
            head = {"user": user, "session": s, "topic": topic, "field": f"f{k}"}
            rows["gold"].append(json.dumps({**head, "values": values}))
            for m in ("a", "b"):
                roll = rng.random()
                if roll < 0.8:
                    guess = values if roll < 0.5 else [rng.choice(WORDS)]
                    rows[m].append(json.dumps({**head, "values": guess}))
        for m in ("a", "b"):
            if rng.random() < 0.3:
                extra = {"user": user, "session": s, "topic": "t1", "field": "x", "values": ["y z"]}
                rows[m].append(json.dumps(extra))
    rows["a"].append(json.dumps({"user": "zz", "session": 9, "topic": "t", "field": "f", "values": ["v"]}))  # fmt: skip
    paths = {}
    for name, lines in rows.items():
        lines.insert(rng.randrange(len(lines)), lines[rng.randrange(len(lines))])  # repeated slot
        lines.insert(rng.randrange(len(lines)), '{"user": "u1", "session": "x"}')
        lines.insert(rng.randrange(len(lines)), "not json")
        if shuffle:
            rng.shuffle(lines)
        paths[name] = folder / f"{name}.jsonl"
        paths[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
    return paths


def _spy_helpers(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """A pool that reads the last files (``read_files``) for any input size, splitting by bytes
    alone; the list gets what each ``Partition._joined`` returned (``True``: it read them)."""
    monkeypatch.setattr(_stream, "_HELPER_START_BYTES", 0)
    monkeypatch.setattr(_system, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(_system, "POOL_BYTES", 0)
    joined: list[bool] = []
    join = _stream.Partition._joined

    def spy(self: _stream.Partition, *args: Any) -> bool:
        joined.append(join(self, *args))
        return joined[-1]

    monkeypatch.setattr(_stream.Partition, "_joined", spy)
    return joined


@contextmanager
def _buckets(k: int | None, parallel: int | None = None) -> Iterator[None]:
    """The slots system's ``prepare`` splits its inputs into ``k`` buckets (None: as many as
    their size gives); ``parallel``: ``parallel_bytes``."""

    @contextmanager
    def split(paths: list[Path], **options: Any) -> Iterator[_stream.Partition]:
        with partitioned(paths, k=k, parallel_bytes=parallel, **options) as part:
            assert part.k == (k or 1)
            yield part

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_system, "partitioned", split)
        yield


def _score(
    paths: dict[str, Path], out: Path, k: int | None, parallel: int | None = None, **options: Any
) -> dict[str, bytes]:
    """Outputs of ``paths`` scored by the pipeline in ``k`` buckets (``_buckets``)."""
    given = [("gold", paths["gold"]), ("pred:a", paths["a"]), ("pred:b", paths["b"])]
    settings = {"tp": "presence", "threshold": None, "bootstrap": 60, "seed": 2} | options
    with _buckets(k, parallel):
        core.score("slots", given, settings, out=RunFolder.of(out), command="slots score")
    return {name: (out / name).read_bytes() for name in OUTPUTS}


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("tp", ["presence", "exact"])
def test_any_bucket_count_gives_the_same_bytes(
    tmp_path: Path, shuffle: bool, tp: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _files(tmp_path, seed=5, shuffle=shuffle)
    one = _score(paths, tmp_path / "k1", None, tp=tp)
    for k in (2, 7, 64):
        assert _score(paths, tmp_path / f"k{k}", k, tp=tp) == one
    # a helper process reads the last files (the split evens out bytes when its start is free)
    joined = _spy_helpers(monkeypatch)
    assert _score(paths, tmp_path / "helper", 7, parallel=0, tp=tp) == one
    assert joined == [True]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(BUCKETS)]
    errors = [json.loads(line) for line in one["errors.jsonl"].decode().splitlines()]
    assert len(errors) == 9  # 2 bad lines and a repeated slot per file, in line order per file
    assert [e["line"] for e in errors[:3]] == sorted(e["line"] for e in errors[:3])


def test_counts_equal_the_per_session_reference(tmp_path: Path) -> None:
    paths = _files(tmp_path, seed=9, shuffle=True)
    metrics = json.loads(_score(paths, tmp_path / "out", 5)["metrics.json"])
    gold = load_slots(paths["gold"])
    for name in ("a", "b"):
        pred = load_slots(paths[name])
        sessions = [naive_counts(pred.sessions.get(k, {}), gold.sessions[k]) for k in gold.sessions]
        got = metrics["models"][name]["counts"]
        assert [got["tp"], got["fp"], got["fn"]] == [sum(s[i] for s in sessions) for i in range(3)]
        assert metrics["models"][name]["extra_slots"] == sum(s[3] for s in sessions)
        assert got["sessions"] == len(gold.sessions)
        bleu = [
            bleu1_score(
                tokenize_values(slot_values(pred.sessions.get(k, {}).get(slot, ()))),
                tokenize_values(slot_values(values)),
            )
            for k, slots in gold.sessions.items()
            for slot, values in slots.items()
            if slot_values(values)
        ]
        assert metrics["models"][name]["bleu1"] == math.fsum(bleu) / len(bleu)


def test_bucket_count_follows_the_file_size(tmp_path: Path) -> None:
    small = tmp_path / "s.jsonl"
    small.write_bytes(b"x" * 1000)
    assert bucket_count([small, small], bucket_bytes=1000) == 2
    assert bucket_count([small], bucket_bytes=1001) == 1
    assert bucket_count([tmp_path / "missing.jsonl"], bucket_bytes=10) == 1


def test_bucket_files_are_removed_on_an_error(tmp_path: Path) -> None:
    paths = _files(tmp_path, seed=1, shuffle=True)
    with pytest.raises(RuntimeError), partitioned([paths["gold"]], beside=tmp_path / "out", k=4):
        assert [p for p in tmp_path.iterdir() if p.name.startswith(BUCKETS)]
        raise RuntimeError
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(BUCKETS)]


def _sides(folder: Path, paths: dict[str, Path]) -> dict[str, Path]:
    """Latencies of model a and judge scores of model b for the gold's sessions, shuffled, with
    a repeated line, a bad line and a session not in the gold in each."""
    rng = random.Random(4)
    gold = load_slots(paths["gold"])
    latency = [{"user": u, "session": s, "seconds": rng.random() * 9} for u, s in gold.sessions]
    judge = [
        {"user": u, "session": s, "topic": t, "field": f, "score": rng.choice([0.0, 0.5, 1.0])}
        for (u, s), slots in gold.sessions.items()
        for t, f in slots
    ]
    out = {}
    for name, rows in (("latency", latency), ("judge", judge)):
        lines = [json.dumps(r) for r in rows]
        lines.append(json.dumps({**rows[0], "user": "stranger"}))
        lines.insert(rng.randrange(len(lines)), lines[rng.randrange(len(lines))])
        lines.insert(rng.randrange(len(lines)), '{"user": "u1", "session": 1, "seconds": -1}')
        rng.shuffle(lines)
        out[name] = folder / f"{name}.jsonl"
        out[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def _score_with_sides(
    paths: dict[str, Path],
    sides: dict[str, Path],
    out: Path,
    k: int | None,
    parallel: int | None = None,
    *,
    pool: bool = False,
) -> dict[str, bytes]:
    """Every file loaded whole and scored in memory (k None: ``score_models``) or split with
    the slot files into k buckets (``model_sides``, ``SlotScorer.add_part``); ``parallel``: the
    last files read by a pool of one; ``pool``: the buckets scored by ``score_chunk`` in a pool
    of two, their digests absorbed in bucket order."""
    models = [
        ModelInput("a", load_slots(paths["a"]), latencies=load_latencies(sides["latency"])),
        ModelInput("b", load_slots(paths["b"]), judge_scores=load_judge_scores(sides["judge"])),
    ]
    if k is None:  # in memory: one bucket, every file loaded whole
        run = score_models(load_slots(paths["gold"]), models, bootstrap=60, seed=2)
    else:
        run = _split_with_sides(paths, models, out, k, parallel, pool=pool)
    write_outputs(run, out)
    files = {name: (out / name).read_bytes() for name in (*OUTPUTS, "report.html")}
    return files | {"warnings": "\n".join(run.warnings).encode()}


def _split_with_sides(
    paths: dict[str, Path],
    models: list[ModelInput],
    out: Path,
    k: int,
    parallel: int | None,
    *,
    pool: bool,
) -> SlotsRun:
    slot_paths = [paths["gold"], paths["a"], paths["b"]]
    with ExitStack() as stack:
        reader = stack.enter_context(LocalPool(1)) if parallel is not None else None
        part = stack.enter_context(
            partitioned(
                slot_paths,
                beside=out,
                k=k,
                sides=model_sides(models),
                parallel_bytes=parallel,
                pool=reader,
            )
        )
        gold, *preds = [SlotFile(i.path, errors=i.errors) for i in part.inputs]
        read = [
            replace(
                m,
                predictions=p,
                latencies=None if m.latencies is None else LatencyFile(m.latencies.path, errors=side.errors),
                judge_scores=None if m.judge_scores is None else JudgeFile(m.judge_scores.path, errors=side.errors),
            )
            for m, p, side in zip(models, preds, part.sides, strict=True)
        ]  # fmt: skip
        scorer = SlotScorer(gold, read, bootstrap=60, seed=2)
        if pool:
            job = SlotJob(SlotFile(gold.path), headers(read))
            with LocalPool(2) as two:
                for _, digest in run_map(two, partial(score_chunk, job), part.chunks()):
                    scorer.absorb(digest)
        else:
            for chunk in part.chunks():
                scorer.add_part(chunk)
        return scorer.finish()


def test_latency_and_judge_files_split_with_the_buckets_give_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _files(tmp_path, seed=6, shuffle=True)
    sides = _sides(tmp_path, paths)
    whole = _score_with_sides(paths, sides, tmp_path / "whole", None)
    for k in (1, 3, 16):
        assert _score_with_sides(paths, sides, tmp_path / f"k{k}", k) == whole
    joined = _spy_helpers(monkeypatch)  # a pool reads the last files
    assert _score_with_sides(paths, sides, tmp_path / "helper", 3, parallel=0) == whole
    assert joined == [True]
    assert _score_with_sides(paths, sides, tmp_path / "pool", 6, pool=True) == whole
    metrics = json.loads(whole["metrics.json"])
    assert metrics["models"]["a"]["latency"]["total"] > 0
    assert metrics["models"]["b"]["llm_judge"] is not None
    errors = [json.loads(line) for line in whole["errors.jsonl"].decode().splitlines()]
    side_errors = [e for e in errors if e["file"].endswith(("latency.jsonl", "judge.jsonl"))]
    # per side file: the bad line and the repeated line, in line order
    assert len(side_errors) == 4
    warnings = whole["warnings"].decode()
    assert "latency.jsonl: 1 latency line(s) for sessions not in the gold file" in warnings
    assert "judge.jsonl: 1 judge score(s) for sessions not in the gold file" in warnings


class _FailingTasks(InProcess):
    """An executor whose tasks all fail (as a pool process that died would)."""

    def submit(self, fn: Any, chunk: Any) -> list[Any]:
        self.failed = True
        return []

    def drain(self) -> list[Any]:
        if getattr(self, "failed", False):
            self.failed = False
            raise OSError(5, "a pool process ended abruptly (boom)")
        return []


def test_a_failed_helper_is_replaced_by_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    paths = _files(tmp_path, seed=5, shuffle=True)
    files = [paths["gold"], paths["a"], paths["b"]]
    with partitioned(files, beside=tmp_path / "alone", k=4) as part:
        alone = [
            (slots[0].sessions, slots[1].sessions, slots[2].lines)
            for slots, _ in map(Bucket.part, part.chunks())
        ]
        counts = [(i.records, len(i.errors)) for i in part.inputs]
    joined = _spy_helpers(monkeypatch)
    with (
        caplog.at_level(logging.WARNING, logger="fieldcheck.slots._stream"),
        partitioned(
            files, beside=tmp_path / "out", k=4, parallel_bytes=0, pool=_FailingTasks()
        ) as part,
    ):
        assert [
            (slots[0].sessions, slots[1].sessions, slots[2].lines)
            for slots, _ in map(Bucket.part, part.chunks())
        ] == alone
        assert [(i.records, len(i.errors)) for i in part.inputs] == counts
    assert joined == [False]
    assert "the second reader of the slot files failed (OSError: [Errno 5] a pool" in caplog.text


def _pool_processes(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The processes of every ``LocalPool`` closed, as it closes them."""
    seen: list[Any] = []
    close = LocalPool.close

    def spy(self: LocalPool, *, kill: bool = False) -> None:
        pool = self._pool
        seen.extend(getattr(pool, "_processes", {}).values())
        close(self, kill=kill)

    monkeypatch.setattr(LocalPool, "close", spy)
    return seen


def test_ctrl_c_while_reading_leaves_no_process_and_no_scratch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _files(tmp_path, seed=5, shuffle=True)
    _spy_helpers(monkeypatch)
    processes = _pool_processes(monkeypatch)
    read_into = _stream.read_into

    def interrupted(index: int, *args: Any) -> Any:
        if index == 0:
            raise KeyboardInterrupt
        return read_into(index, *args)

    monkeypatch.setattr(_stream, "read_into", interrupted)
    given = [("gold", paths["gold"]), ("pred:a", paths["a"]), ("pred:b", paths["b"])]
    with (
        pytest.raises(KeyboardInterrupt),
        _buckets(4, 0),
        SYSTEM.prepare(given, {}, beside=tmp_path / "out", progress=None, extras={}),
    ):
        pass
    assert processes and all(p.exitcode is not None for p in processes)  # ended, waited for
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(BUCKETS)]


def test_a_file_name_that_is_not_utf8_is_read_by_the_helper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _files(tmp_path, seed=5, shuffle=True)
    odd = tmp_path / os.fsdecode(b"b\xff.jsonl")
    odd.write_bytes(paths["b"].read_bytes())
    joined = _spy_helpers(monkeypatch)
    with (
        LocalPool(1) as pool,
        partitioned(
            [paths["gold"], paths["a"], odd],
            beside=tmp_path / "out",
            k=3,
            parallel_bytes=0,
            pool=pool,
        ) as p,
    ):
        assert [i.records for i in p.inputs][2] > 0 and p.inputs[2].path == odd
    assert joined == [True]


@pytest.mark.parametrize("helper", [False, True])
def test_the_partition_says_which_files_share_a_session_with_the_gold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helper: bool
) -> None:
    """Each --pred file's first session and whether it shares one with the gold, found while the
    partition reads (by this process, or by the pool's task: its sessions come back as keys);
    the session keys are not kept once checked."""
    paths = _files(tmp_path, seed=5, shuffle=False)
    other = tmp_path / "other.jsonl"  # model a's lines, every user renamed: no gold session
    other.write_text(paths["a"].read_text().replace('"user": "u', '"user": "v'))
    if helper:
        joined = _spy_helpers(monkeypatch)
    files = [paths["gold"], other, paths["a"]]
    for k in (1, 3):
        with ExitStack() as stack:
            pool = stack.enter_context(LocalPool(1)) if helper and k > 1 else None
            part = stack.enter_context(
                partitioned(files, beside=tmp_path / "out", k=k, parallel_bytes=0, pool=pool)
            )
            assert [(i.first, i.shared, i.sessions) for i in part.inputs] == [
                (("u0", 0), False, None),
                (("v0", 0), False, None),
                (("u0", 0), True, None),
            ]
    if helper:
        assert joined == [True]


def test_buckets_go_to_the_system_temp_folder_when_out_is_not_writable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As root a folder cannot be made read-only, so the refusal is the operating system's
    answer replayed: mkdtemp beside --out fails; the buckets go to the system's temp folder
    and --out is then checked (and refused) by the command as usual."""
    import tempfile

    paths = _files(tmp_path, seed=5, shuffle=True)
    mkdtemp, made = tempfile.mkdtemp, []

    def refused(*args: Any, **kwargs: Any) -> str:
        if kwargs.get("dir") is not None:
            raise PermissionError(13, "Permission denied")
        made.append(mkdtemp(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(_stream.tempfile, "mkdtemp", refused)
    with partitioned([paths["gold"], paths["a"]], beside=tmp_path / "out", k=3) as part:
        assert sum(len(b[0].sessions) for b in (c.part()[0] for c in part.chunks())) == len(
            load_slots(paths["gold"]).sessions
        )
    assert made and Path(made[0]).parent == Path(tempfile.gettempdir())
    assert not Path(made[0]).exists()


def test_the_readers_start_without_the_scoring_and_report_modules() -> None:
    """``fieldcheck.slots`` imports its modules on first use, so a process that only reads
    slot files (``_stream``) starts without the scoring's and the report's imports; every
    public name still resolves."""
    code = (
        "import sys, fieldcheck.slots._stream; "
        "print(sorted(m for m in sys.modules if m.startswith(('fieldcheck.slots.', "
        "'matplotlib', 'sqlalchemy', 'openai'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == (
        "['fieldcheck.slots._loaders', 'fieldcheck.slots._records', 'fieldcheck.slots._stream']"
    )
    import fieldcheck.slots as package

    assert all(getattr(package, name) is not None for name in package.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        package.nope  # noqa: B018


def test_ctrl_c_while_a_pool_scores_leaves_no_process_and_no_scratch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Large inputs are scored by the pool ``prepare`` started: Ctrl-C kills its processes
    and the scratch folder goes."""
    paths = _files(tmp_path, seed=5, shuffle=True)
    monkeypatch.setattr(_system, "POOL_BYTES", 0)
    processes = _pool_processes(monkeypatch)
    calls: list[tuple[int, int]] = []

    def interrupted(phase: str, done: int, total: int) -> None:
        calls.append((done, total))
        if done:
            raise KeyboardInterrupt

    given = [("gold", paths["gold"]), ("pred:a", paths["a"]), ("pred:b", paths["b"])]
    out = tmp_path / "out"
    with (
        pytest.raises(KeyboardInterrupt),
        _buckets(6),
        SYSTEM.prepare(given, {"bootstrap": 0}, beside=out, progress=None, extras={}) as read,
    ):
        assert isinstance(read.pool, LocalPool) and read.pool.workers == 2
        SYSTEM.score(read, RunFolder.of(out), {"bootstrap": 0}, recorder=None, progress=interrupted)
    assert calls == [(0, 6), (1, 6)]
    assert len(processes) == 2 and all(p.exitcode is not None for p in processes)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(BUCKETS)]


def test_absorb_handles_every_field_of_a_models_fold() -> None:
    """A field added to ``_ModelFold`` must be merged by ``_absorb_fold`` (or be one it leaves:
    the model and a bucket's sides, never split)."""
    from dataclasses import fields

    from fieldcheck.slots import _score

    merged = {"topics", "classes", "left_out", "session_seconds", "latency_lines"}
    merged |= {"judge_lines", "unknown_first", "unknown_shown"}
    merged |= {*_score._FOLD_SUMS, *_score._FOLD_LISTS}
    left = {"model", "latency", "judge_scores", "judged"}
    assert {f.name for f in fields(_score._ModelFold)} == merged | left
    assert not merged & left


def test_an_existing_empty_out_folder_stays_empty_while_the_buckets_are_made(
    tmp_path: Path,
) -> None:
    """With ``--out`` an existing empty folder, the buckets go beside it, never in it: the
    run's folder is renamed onto it, which an entry in it would refuse (and a user's
    folder is never written into)."""
    paths = _files(tmp_path, seed=3, shuffle=True)
    out = tmp_path / "out"
    out.mkdir()
    files = [paths["gold"], paths["a"], paths["b"]]
    with partitioned(files, beside=out, k=3) as part:
        assert part.folder.parent == tmp_path and part.folder.name.startswith(BUCKETS)
        assert list(out.iterdir()) == []
    assert not part.folder.exists()

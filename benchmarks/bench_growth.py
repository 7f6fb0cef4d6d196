"""Inputs whose cost used to grow faster than the input (issue 10, "measured at n and 10n"): each
fixed function timed (or its memory measured) at the issue's n and 10n, one row per case with
``cost at 10n / (10 x cost at n)``: about 1 when growth is linear, about 10 when quadratic
(target <= 2). The slots bootstrap must stay flat, so its row is ``peak at 10n / peak at n``.

In-process cases use the functions the tests call (tests/test_growth.py, tests/test_long_values.py,
tests/slots/test_many_topics.py, tests/slots/test_bootstrap_flat.py); the slots report with many
topics runs in a child (``main``) so its peak RSS is its own; its plots are bounded (30 topics),
so its memory row is ``peak at 10n / peak at n`` too (``/ (10 x ...)`` would hide a growth of
gigabytes under the interpreter's and matplotlib's fixed 150 MiB), and a run at 30 topics is shown
beside it: that fixed cost is most of the time at either size.
"""

from __future__ import annotations

import gc
import json
import logging
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._harness import best_seconds
from benchmarks._proc import ProcRun, run_child
from benchmarks._table import Row, Target

LINEAR = Target("<=", 2)


def _peak_bytes(fn: Callable[[], object]) -> int:
    """Peak traced Python heap (tracemalloc) allocated while ``fn`` runs."""
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _growth(small: float, large: float) -> float:
    return large / (10 * small) if small > 0 else float("nan")


def _time_row(case: str, n: str, big: str, small_s: float, large_s: float) -> Row:
    return Row(
        f"{case}: time at 10n / (10 x time at n)",
        f"{n}: {small_s * 1000:,.1f} ms; {big}: {large_s * 1000:,.1f} ms",
        "linear: 10 x the time at n",
        _growth(small_s, large_s),
        LINEAR,
    )


def _mem_row(case: str, n: str, big: str, small_b: float, large_b: float) -> Row:
    return Row(
        f"{case}: peak heap at 10n / (10 x at n)",
        f"{n}: {small_b / 2**20:,.2f} MiB; {big}: {large_b / 2**20:,.2f} MiB",
        "linear: 10 x the peak at n",
        _growth(small_b, large_b),
        LINEAR,
        ours_mem=f"{large_b / 2**20:.1f} heap",
    )


# --- FUZZY on long values ------------------------------------------------------------------------


def fuzzy_row(chars: int) -> Row:
    """fuzzy_similarity of two texts of ``chars`` and 10 x ``chars`` characters, every word one
    letter off (the long-value 3-gram method beyond 10,000 characters)."""
    from fieldcheck.matchers import compared_linearly, fuzzy_similarity

    def pair(n: int) -> tuple[str, str]:
        return "abcd " * (n // 5), "ABCE " * (n // 5)

    small, large = pair(chars), pair(10 * chars)
    assert compared_linearly(*small) and compared_linearly(*large)
    t_small = best_seconds(lambda: fuzzy_similarity(*small), repeat=3)
    t_large = best_seconds(lambda: fuzzy_similarity(*large), repeat=2)
    return _time_row(
        "FUZZY similarity, long values", f"{chars:,} chars", f"{10 * chars:,}", t_small, t_large
    )


def slots_fuzzy_row(chars: int) -> Row:
    """``slots score --tp fuzzy``'s scoring (``score_models``, files read) of one session whose
    gold and predicted notes are ``chars`` and 10 x ``chars`` characters, every word one letter
    off, beside a short slot: FUZZY match, exact match, token P/R/F1 and BLEU-1 of each."""
    from fieldcheck.slots import ModelInput, load_slots, score_models

    def files(folder: Path, n: int) -> tuple[Path, Path]:
        gold, pred = folder / f"gold_{n}.jsonl", folder / f"pred_{n}.jsonl"
        for path, notes in ((gold, "abcd " * (n // 5)), (pred, "ABCE " * (n // 5))):
            rows = [
                {"user": "u", "session": 1, "topic": "t", "field": "notes", "values": [notes]},
                {"user": "u", "session": 1, "topic": "t", "field": "name", "values": ["Alice"]},
            ]
            path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        return gold, pred

    def score(gold: Path, pred: Path) -> None:
        run = score_models(
            load_slots(gold), [ModelInput("m", load_slots(pred))], tp="fuzzy", bootstrap=0
        )
        assert "3-gram" in run.warnings[-1]  # the long value was compared linearly

    logger = logging.getLogger("fieldcheck")
    level = logger.level
    logger.setLevel(logging.ERROR)  # the run's warning is expected: not in the table
    with tempfile.TemporaryDirectory() as folder:
        small, large = files(Path(folder), chars), files(Path(folder), 10 * chars)
        t_small = best_seconds(lambda: score(*small), repeat=3)
        t_large = best_seconds(lambda: score(*large), repeat=2)
    logger.setLevel(level)
    return _time_row(
        "slots score --tp fuzzy, one long value", f"{chars:,} chars", f"{10 * chars:,}",
        t_small, t_large,
    )  # fmt: skip


# --- --flatten on a chain of 10 KB keys ----------------------------------------------------------


def _chain(depth: int, leaf: Any) -> Any:
    node: Any = leaf
    for i in range(depth):
        node = {f"{i:05d}" + "k" * 10_000: node}
    return node


def flatten_row(depth: int) -> Row:
    """flatten_pair's peak heap on chains of ``depth`` and 10 x ``depth`` keys of 10 KB (the
    inputs built before tracing; the flattened paths are what it allocates)."""
    from fieldcheck.metrics import flatten_pair

    peaks = []
    for d in (depth, 10 * depth):
        out, gt = _chain(d, "v"), _chain(d, None)
        peaks.append(_peak_bytes(partial(flatten_pair, out, gt)))
    return _mem_row(
        "--flatten, chain of 10 KB keys", f"depth {depth}", f"{10 * depth}", peaks[0], peaks[1]
    )


# --- numeric trace ids sharing 120 characters ----------------------------------------------------


def trace_ids_row(n: int) -> Row:
    from fieldcheck.numeric import trace_ids

    prefix = "9" * 120
    times = []
    for size in (n, 10 * n):
        ids = [f"{prefix}{i}" for i in range(size)]
        times.append(best_seconds(partial(trace_ids, ids), repeat=3))
    return _time_row(
        "numeric trace ids sharing 120 chars",
        f"{n:,} ids",
        f"{10 * n:,}",
        times[0],
        times[1],
    )


def _seen_ids(chunks: list[list[str]]) -> int:
    """``json batch``'s duplicate-id index over ``chunks`` of new ids: each chunk looked up among
    the older ids, then added (``BatchReader.chunks``); the number of sorted runs left."""
    from fieldcheck.jsoneval._stream import _SeenIds, id_hashes

    seen = _SeenIds(Path("/dev/null"))
    for keys in chunks:
        hashes = id_hashes(keys)
        if seen.candidates(hashes).any():
            raise AssertionError("distinct ids taken for duplicates")
        seen.add(hashes, range(len(keys)), range(len(keys)))
    return len(seen.runs)


def seen_ids_row(n: int) -> Row:
    from fieldcheck.jsoneval._stream import CHUNK_LINES

    times = []
    for size in (n, 10 * n):
        ids = [f"INV-{i:09d}" for i in range(size)]
        chunks = [ids[i : i + CHUNK_LINES] for i in range(0, size, CHUNK_LINES)]
        times.append(best_seconds(partial(_seen_ids, chunks), repeat=2))
    return _time_row(
        f"json batch duplicate-id lookups, chunks of {CHUNK_LINES:,}",
        f"{n:,} ids",
        f"{10 * n:,}",
        times[0],
        times[1],
    )


# --- original-format tables with repeated row names ----------------------------------------------


def _original_file(path: Path, rows: int) -> Path:
    table = [["", "2020"], *(["sales", str(i)] for i in range(rows))]
    record = {
        "id": "r1",
        "pre_text": [],
        "post_text": [],
        "table": table,
        "annotation": {
            "dialogue_break": ["what were sales?"],
            "turn_program": ["100"],
            "exe_ans_list": [100.0],
            "answer_list": ["100"],
        },
    }
    path.write_text(json.dumps([record]), encoding="utf-8")
    return path


def repeated_rows_row(n: int) -> Row:
    from fieldcheck.numeric import load_convfinqa

    times = []
    with tempfile.TemporaryDirectory(prefix="fieldcheck-bench-growth-") as tmp:
        for size in (n, 10 * n):
            path = _original_file(Path(tmp) / f"rows{size}.json", size)
            (conversation,) = load_convfinqa(path).conversations
            assert len(conversation.doc.table) == size
            times.append(best_seconds(partial(load_convfinqa, path), repeat=3))
    return _time_row(
        "original-format table, rows of one name (load)",
        f"{n:,} rows",
        f"{10 * n:,}",
        times[0],
        times[1],
    )


# --- the numeric default bootstrap ---------------------------------------------------------------


def _numeric_units(conversations: int) -> Any:
    """BootstrapUnits of ``conversations`` of 4 scored turns, as ``Tally`` folds them."""
    from fieldcheck.numeric._scoring import BootstrapUnits

    rng = np.random.default_rng(4)
    units = BootstrapUnits()
    matches = rng.integers(0, 2, (conversations, 4, 5))
    logic = rng.random((conversations, 3))
    success = rng.integers(0, 2, conversations)
    for c in range(conversations):
        turns = matches[c]
        row = [float(v) for v in turns.sum(axis=0)] + [4.0]
        for value in logic[c]:
            row += [4 * float(value), 4.0]
        row += [float(success[c]), 1.0]
        units.add(row, [(t, bool(turns[t, 0])) for t in range(4)])
    return units


def numeric_bootstrap_row(n: int) -> Row:
    """The default 1,000 resamples of ``BootstrapUnits.intervals`` (overall and per turn)."""
    times = []
    for size in (n, 10 * n):
        units = _numeric_units(size)
        found = units.intervals(resamples=1000, seed=0)
        assert found.overall["numerical_match_accuracy"] is not None
        times.append(best_seconds(partial(units.intervals, resamples=1000, seed=0), repeat=2))
    return _time_row(
        "numeric default bootstrap (1,000 resamples)",
        f"{n:,} conversations",
        f"{10 * n:,}",
        times[0],
        times[1],
    )


# --- slots bootstrap memory ----------------------------------------------------------------------

CHUNK = 1_000


def _session_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    """Session rows as the scorer folds them: tp, fp, fn, gold, exact, token m/p/g."""
    tp, fp, fn = rng.integers(0, 5, n), rng.integers(0, 3, n), rng.integers(0, 3, n)
    exact = np.minimum(tp, rng.integers(0, 4, n))
    tok_m = rng.integers(0, 10, n)
    tok_p, tok_g = tok_m + rng.integers(0, 5, n), tok_m + rng.integers(0, 5, n)
    return np.column_stack([tp, fp, fn, tp + fn, exact, tok_m, tok_p, tok_g]).astype(np.int64)


def _slots_bootstrap(sessions: int) -> tuple[int, float]:
    """Two models' sessions folded 1,000 at a time into the scorer's classes (every CI group and
    the paired test), then the default 1,000 resamples: (peak heap bytes, seconds)."""
    from fieldcheck.metrics._arrays import (
        RowClasses,
        bootstrap_classes_ci,
        paired_bootstrap_classes_pvalue,
    )
    from fieldcheck.slots._score import _PAIR_F1, CI_GROUPS, PAIR_COLUMNS

    pair = list(PAIR_COLUMNS)

    def work() -> None:
        rng = np.random.default_rng(3)
        groups = [[RowClasses(len(c)) for c, _ in CI_GROUPS] for _ in range(2)]
        paired = RowClasses(2 * len(pair))
        for _ in range(sessions // CHUNK):
            a, b = _session_rows(rng, CHUNK), _session_rows(rng, CHUNK)
            for rows, model in ((a, groups[0]), (b, groups[1])):
                for classes, (columns, _) in zip(model, CI_GROUPS, strict=True):
                    classes.add(rows[:, list(columns)])
            paired.add(np.hstack([a[:, pair], b[:, pair]]))
        for model in groups:
            for stream, (classes, (_, statistics)) in enumerate(zip(model, CI_GROUPS, strict=True)):
                bootstrap_classes_ci(classes, statistics, resamples=1000, stream=stream)
        paired_bootstrap_classes_pvalue(paired, len(pair), _PAIR_F1, resamples=1000, stream=3)

    start = time.perf_counter()
    work()
    seconds = time.perf_counter() - start
    return _peak_bytes(work), seconds


def slots_bootstrap_row(n: int) -> Row:
    (small, t_small), (large, t_large) = _slots_bootstrap(n), _slots_bootstrap(10 * n)
    return Row(
        "slots bootstrap, 2 models: peak heap at 10n / peak at n (flat)",
        f"{n:,} sessions: {small / 2**20:,.2f} MiB, {t_small:.2f} s; "
        f"{10 * n:,}: {large / 2**20:,.2f} MiB, {t_large:.2f} s",
        "flat: the peak at n",
        large / small if small else float("nan"),
        LINEAR,
        ours_mem=f"{large / 2**20:.1f} heap",
    )


# --- slots report with many topics (a child process each) ----------------------------------------

PLOT_CAP_TOPICS = 30  # slots._report.PLOT_TOPICS: the plots are the same from here on


def _topics_report(topics: int, out: Path) -> None:
    """tests/slots/test_many_topics.py's input: 2 sessions per topic, model a right on even
    topics, b on multiples of 3; scored without bootstrap, every output file and plot written."""
    from fieldcheck.slots import ModelInput, load_slots, score_models
    from fieldcheck.slots._report import write_outputs

    def write(name: str, rows: list[dict[str, Any]]) -> Path:
        path = out.parent / name
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        return path

    def slots(keep: int) -> list[dict[str, Any]]:
        return [
            {"user": f"u{t % 50}", "session": s, "topic": f"topic_{t:04d}", "field": "f"}
            | {"values": [f"v{t}"]}
            for t in range(0, topics, keep)
            for s in (1, 2)
        ]

    models = [
        ModelInput(name, load_slots(write(f"{name}.jsonl", slots(k))))
        for name, k in (("a", 2), ("b", 3))
    ]
    run = score_models(load_slots(write("gold.jsonl", slots(1))), models, bootstrap=0)
    write_outputs(run, out)


def main(argv: Sequence[str]) -> int:
    """``topics N``: the slots report of N topics into a temporary folder (a child's work)."""
    kind, size = argv
    if kind != "topics":
        raise SystemExit(f"unknown case {kind!r}")
    with tempfile.TemporaryDirectory(prefix="fieldcheck-bench-topics-") as tmp:
        _topics_report(int(size), Path(tmp) / "out")
    return 0


def _topics_child(topics: int) -> ProcRun:
    run = run_child("bench_growth", ["topics", str(topics)], timeout=120)
    if not run.ok:
        raise RuntimeError(f"slots report of {topics:,} topics: {run.problem()}")
    return run


def topics_rows(n: int) -> list[Row]:
    """Time and peak RSS of the slots report at n and 10n topics, a run at the plot cap shown
    beside them: its cost (interpreter, bounded plots) is most of either run's."""
    base, small, large = (_topics_child(t) for t in (PLOT_CAP_TOPICS, n, 10 * n))
    sizes = f"{PLOT_CAP_TOPICS} / {n:,} / {10 * n:,} topics"
    return [
        Row(
            "slots report, many topics: time at 10n / (10 x time at n)",
            f"{sizes}: {base.seconds:.2f} / {small.seconds:.2f} / {large.seconds:.2f} s",
            "linear: 10 x the time at n",
            _growth(small.seconds, large.seconds),
            LINEAR,
        ),
        Row(
            "slots report, many topics: peak RSS at 10n / peak RSS at n (plots bounded)",
            f"{sizes}: {base.peak_rss_mib:,.0f} / {small.peak_rss_mib:,.0f} / "
            f"{large.peak_rss_mib:,.0f} MiB RSS",
            "flat: the peak at n",
            large.peak_rss_mib / small.peak_rss_mib if small.peak_rss_mib else float("nan"),
            LINEAR,
            ours_mem=f"{large.peak_rss_mib:,.0f} RSS",
        ),
    ]


def run(quick: bool = False) -> list[Row]:
    """Every case at the issue's n and 10n (``quick``: smaller n, same shape)."""
    if quick:
        sizes = {"fuzzy": 30_000, "depth": 10, "ids": 1_000, "rows": 1_000, "seen": 20_000}
        sizes |= {"conv": 300, "topics": 100, "sessions": 10_000}
    else:
        sizes = {"fuzzy": 300_000, "depth": 20, "ids": 2_000, "rows": 2_000, "seen": 200_000}
        sizes |= {"conv": 1_000, "topics": 300, "sessions": 30_000}
    return [
        fuzzy_row(sizes["fuzzy"]),
        slots_fuzzy_row(sizes["fuzzy"]),
        flatten_row(sizes["depth"]),
        trace_ids_row(sizes["ids"]),
        seen_ids_row(sizes["seen"]),
        repeated_rows_row(sizes["rows"]),
        numeric_bootstrap_row(sizes["conv"]),
        *topics_rows(sizes["topics"]),
        slots_bootstrap_row(sizes["sessions"]),
    ]

"""Numeric QA: ``fieldcheck numeric score`` on 100k turns (issue 10, figure 4; defaults) against
``literal_numeric``, a per-turn reference of the five match types (>= 1x), peak RSS flat from 10k
to 100k turns (<= 1.2x); answer parsing and the five match types against a bare ``float()`` after stripping
symbols (the minimum any scorer does); the program parser against CPython's ``ast.parse``."""

from __future__ import annotations

import ast
import os
import random
import re
from pathlib import Path

from benchmarks import _data, baseline_rows
from benchmarks._harness import Comparison, measure, row_of
from benchmarks._proc import TIME_LIMIT, ProcRun, fresh, run_child
from benchmarks._scale import cpu_bound_row, memory_row, speed_row
from benchmarks._table import Row, Target
from fieldcheck.metrics import match_answer, parse_answer, parse_program

_STRIP = re.compile(r"[^0-9.\-]")
# a stored turn of the generated data (its turns.csv row as JSON, issue 11): 719 bytes on
# average, no tag rows
ITEM_BYTES = 719


def _answers(rng: random.Random, n: int) -> list[tuple[str, float]]:
    out = []
    for _ in range(n):
        gold = rng.uniform(-5000, 5000)
        form = rng.randrange(5)
        text = (
            f"{gold:,.2f}",
            f"${gold:.1f}",
            f"{gold / 100:.1%}",
            f"the answer is {gold:.3f}",
            f"({abs(gold):.0f})",
        )[form]
        out.append((text, gold))
    return out


def _programs(rng: random.Random, n: int) -> list[str]:
    ops = ["add", "subtract", "multiply", "divide"]
    out = []
    for _ in range(n):
        steps = [f"{rng.choice(ops)}({rng.randint(1, 9999)}, {rng.randint(1, 9999)})"]
        for k in range(rng.randint(0, 3)):
            steps.append(f"{rng.choice(ops)}(#{k}, {rng.uniform(1, 100):.2f})")
        out.append(", ".join(steps))
    return out


def _in_process() -> list[Comparison]:
    rng = random.Random(5)
    answers = _answers(rng, 20_000)

    def ours() -> None:
        for text, gold in answers:
            match_answer(parse_answer(text), gold)

    def naive() -> int:
        hits = 0
        for text, gold in answers:
            try:
                value = float(_STRIP.sub("", text))
            except ValueError:
                continue
            hits += abs(value - gold) <= 0.01 * abs(gold)
        return hits

    programs = _programs(rng, 20_000)
    return [
        Comparison(
            "parse answer + five match types",
            "answers",
            measure(ours, len(answers)),
            measure(naive, len(answers)),
            "strip symbols + float() + one tolerance",
        ),
        Comparison(
            "parse turn_program",
            "programs",
            measure(lambda: [parse_program(p) for p in programs], len(programs)),
            measure(lambda: [ast.parse(p.replace("#", "ref_")) for p in programs], len(programs)),
            "ast.parse (syntax tree only, #k renamed)",
        ),
    ]


def _traces_alone(traces: Path) -> tuple[str, ProcRun]:
    """As many files of the same size as ``numeric score`` wrote in ``traces`` (one per
    conversation), written alone: a label and the run."""
    sizes = [p.stat().st_size for p in traces.iterdir()]
    size = round(sum(sizes) / len(sizes)) if sizes else 0
    folder = fresh(traces.parent.parent / "numeric_traces_alone")
    alone = run_child("baseline_traces", [str(folder), str(len(sizes)), str(size)])
    fresh(folder)
    return f"{len(sizes):,} files of {size:,} bytes", alone


def _rows_alone(out: Path) -> tuple[str, ProcRun]:
    """The row files (``*.csv``) ``numeric score`` wrote in ``out``, each of the same shape
    written alone by ``csv.writer`` (``baseline_rows``): a label and the run."""
    shapes = [baseline_rows.shape_of(p) for p in sorted(out.glob("*.csv"))]
    folder = fresh(out.parent / "numeric_rows_alone")
    alone = run_child("baseline_rows", [str(folder), *shapes])
    fresh(folder)
    lines = sum(int(s.rsplit(":", 3)[1]) for s in shapes)
    return f"{len(shapes)} files, {lines:,} rows", alone


def _against(n: int, argv: list[str], literal: ProcRun) -> list[Row]:
    """What the >= 1x target is up against, each against the same literal run: the traces
    ``argv``'s run wrote, written alone (the spec asks for one file per conversation); the
    command without the store; the store's inserts of as many turn items alone; the literal
    read at its cheapest (orjson, collector off); and the most a program doing that reading and
    matching, the traces, the row files and the inserts (each as costly as alone) could reach
    on this machine's cores, with the store and without. The bound leaves out the rest of the
    command (logic recall, the checks of the input, statistics, the report), so it is
    generous."""
    out = Path(argv[argv.index("--out") + 1])
    files, traces = _traces_alone(out / "traces")
    row_files, rows = _rows_alone(out)
    fresh(out)
    bare = run_child("fieldcheck", [*argv, "--no-store"], timeout=TIME_LIMIT)
    inserts = run_child("baseline_store", [str(n), str(ITEM_BYTES), "0"])
    data, preds = argv[argv.index("--data") + 1], argv[argv.index("--predictions") + 1]
    fast_csv = str(out.parent / f"numeric_literal_fast_{n}.csv")
    fast = run_child("literal_numeric", [data, preds, fast_csv, "dev", "fast"])
    literal_name = "literal per-turn loop"
    fast_name = "literal, orjson, collector off"
    cores = os.cpu_count() or 1
    return [
        speed_row(
            f"the literal read at its cheapest (orjson, collector off), {n:,} turns vs literal",
            n,
            "turns",
            fast,
            literal,
            literal_name,
            None,
        ),
        speed_row(
            f"writing traces/ alone, {files} ({n:,} turns) vs literal",
            n,
            "turns",
            traces,
            literal,
            literal_name,
            None,
        ),
        speed_row(
            f"writing the row files alone, {row_files} ({n:,} turns) vs literal",
            n,
            "turns",
            rows,
            literal,
            literal_name,
            None,
        ),
        speed_row(
            f"numeric score --no-store, {n:,} turns vs literal five match types",
            n,
            "turns",
            bare,
            literal,
            literal_name,
            None,
        ),
        speed_row(
            f"the store's item writes alone, {n:,} turn items of {ITEM_BYTES:,} bytes vs literal",
            n,
            "items",
            inserts,
            literal,
            literal_name,
            None,
        ),
        cpu_bound_row(
            f"the cheapest literal + traces/ + row files + the store's inserts, each alone, their "
            f"CPU on all cores, {n:,} turns vs literal",
            n,
            "turns",
            literal,
            literal_name,
            {fast_name: fast, "traces/": traces, "row files": rows, "inserts": inserts},
            cores,
        ),
        cpu_bound_row(
            f"the cheapest literal + traces/ + row files, each alone (--no-store), their CPU on "
            f"all cores, {n:,} turns vs literal",
            n,
            "turns",
            literal,
            literal_name,
            {fast_name: fast, "traces/": traces, "row files": rows},
            cores,
        ),
    ]


def scale_rows(quick: bool) -> list[Row]:
    small_n, large_n = (1_000, 10_000) if quick else (10_000, 100_000)
    out = _data.DATA_DIR / "out"
    rows: list[Row] = []
    runs = {}
    for n in (small_n, large_n):
        data, preds = _data.numeric(n)
        argv = ["numeric", "score", "--data", str(data), "--predictions", str(preds)]
        argv += ["--out", str(fresh(out / f"numeric_{n}"))]
        runs[n] = ours = run_child("fieldcheck", argv, timeout=TIME_LIMIT)
        literal = run_child(
            "literal_numeric", [str(data), str(preds), str(out / f"numeric_literal_{n}.csv"), "dev"]
        )
        rows.append(
            speed_row(
                f"numeric score, {n:,} turns vs literal five match types",
                n,
                "turns",
                ours,
                literal,
                "literal per-turn loop",
                Target(">=", 1.0) if n == large_n else None,
            )
        )
        if n == large_n and ours.ok:
            rows += _against(n, argv, literal)
    rows.append(
        memory_row(
            f"numeric score peak RSS, {large_n:,} vs {small_n:,} turns",
            f"{small_n:,}",
            f"{large_n:,}",
            runs[small_n],
            runs[large_n],
            Target("<=", 1.2),
        )
    )
    return rows


def run(quick: bool = False) -> list[Row]:
    return [row_of(c) for c in _in_process()] + scale_rows(quick)

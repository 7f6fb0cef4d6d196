"""The ``make bench`` table (benchmarks/_table.py, _scale.py) on fake rows and fake runs: which
rows hold, the exit status, bounds from stopped runs; and the literal JSON reference of the
benchmark agrees with fieldcheck on hand-checked records. No timing here."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from benchmarks import baseline_rows, literal_json, literal_numeric
from benchmarks._proc import ProcRun, fastest
from benchmarks._scale import cpu_bound_row, memory_row, speed_row
from benchmarks._table import Row, Target, exit_status, failing, format_table

from fieldcheck.jsoneval import EvalConfig, evaluate


def _line(table: str, name: str) -> list[str]:
    (line,) = [x for x in table.splitlines() if x.startswith(f"| {name} |")]
    return [c.strip() for c in line.strip("|").split(" | ")]


def test_holds_and_exit_status() -> None:
    rows = [
        Row("fast", "10/s", "b: 2/s", 5.0, Target(">=", 3.0)),
        Row("slow", "1/s", "b: 2/s", 0.5, Target(">=", 3.0)),
        Row("flat", "1M: 120 RSS", "100k: 110 RSS", 120 / 110, Target("<=", 1.2)),
        Row("info", "1/s", "b: 1/s", 0.01),  # no target: never fails
    ]
    table = format_table(rows)
    assert _line(table, "fast")[3:6] == ["5x", ">= 3", "yes"]
    assert _line(table, "slow")[3:6] == ["0.5x", ">= 3", "NO"]
    assert _line(table, "flat")[3:6] == ["1.09x", "<= 1.2", "yes"]
    assert _line(table, "info")[3:6] == ["0.01x", "-", "-"]
    assert [r.name for r in failing(rows)] == ["slow"]
    assert exit_status(rows) == 1
    assert exit_status([rows[0], rows[2], rows[3]]) == 0


def test_target_edges_and_missing_ratio() -> None:
    assert Target(">=", 0.2).holds(0.2) and not Target(">=", 0.2).holds(0.19999)
    assert Target("<=", 1.2).holds(1.2) and not Target("<=", 1.2).holds(1.2001)
    assert not Target(">=", 1.0).holds(math.nan)  # a run that failed never holds
    row = Row("broken", "-", "-", math.nan, Target(">=", 1.0), note="ours exit status 2")
    table = format_table([row])
    assert _line(table, "broken")[3] == "n/a" and _line(table, "broken")[5] == "NO"
    assert "- broken: ours exit status 2" in table
    assert exit_status([row]) == 1


def test_pipe_in_a_name_does_not_break_the_table() -> None:
    table = format_table([Row("a|b", "1/s", "2/s", 0.5)])
    assert r"| a\|b |" in table


def test_speed_row_ratio_and_bounds() -> None:
    ours = ProcRun(seconds=2.0, peak_rss_mib=100.0, status=0)
    base = ProcRun(seconds=0.5, peak_rss_mib=20.0, status=0)
    row = speed_row("x", 1000, "records", ours, base, "literal", Target(">=", 3.0))
    assert row.ratio == 0.25  # 500/s over 2000/s
    assert row.ours == "500 records/s" and row.baseline == "literal: 2,000 records/s"
    assert row.holds is False
    stopped = ProcRun(seconds=300.0, peak_rss_mib=6200.0, status=-9, stopped="time limit")
    bound = speed_row("y", 3000, "records", stopped, base, "literal", Target(">=", 0.001))
    assert bound.bound == "<" and bound.ratio == 10 / 6000  # at most 10/s over 6000/s
    assert bound.ours == "<10 records/s" and "ours time limit" in bound.note
    failed = ProcRun(seconds=0.1, peak_rss_mib=50.0, status=2, stderr_tail="error: bad")
    assert math.isnan(speed_row("z", 10, "r", failed, base, "b", Target(">=", 1.0)).ratio)
    # a baseline timed on a sample: 100 of 1000 records in 0.5 s is 200 records/s
    sampled = speed_row("s", 1000, "records", ours, base, "b", None, base_items=100)
    assert sampled.ratio == 500 / 200


def test_cpu_bound_row_shares_the_parts_cpu_among_the_cores() -> None:
    """A literal of 1 s wall (0.9 s CPU) and parts of 1.5 and 0.6 s CPU on 2 cores: no program
    doing all three finishes before 1.5 s, so it reaches at most 1 / 1.5 of the literal's rate."""
    literal = ProcRun(seconds=1.0, peak_rss_mib=20.0, status=0, cpu_seconds=0.9)
    parts = {
        "literal": literal,
        "traces": ProcRun(seconds=1.4, peak_rss_mib=10.0, status=0, cpu_seconds=1.5),
        "inserts": ProcRun(seconds=0.7, peak_rss_mib=60.0, status=0, cpu_seconds=0.6),
    }
    row = cpu_bound_row("b", 3000, "turns", literal, "literal", parts, 2)
    assert math.isclose(row.ratio, 1 / 1.5) and row.holds is None
    assert row.ours == "at most 2,000 turns/s" and row.baseline == "literal: 3,000 turns/s"
    assert "literal 0.90 s, traces 1.50 s, inserts 0.60 s; shared by 2 cores" in row.note
    # the literal only as the yardstick: a faster reader's 0.5 s in its place, 2.6 s on 2 cores
    del parts["literal"]
    parts["fast reader"] = ProcRun(seconds=0.6, peak_rss_mib=20.0, status=0, cpu_seconds=0.5)
    row = cpu_bound_row("b", 3000, "turns", literal, "literal", parts, 2)
    assert math.isclose(row.ratio, 1 / 1.3) and "literal 0.90" not in row.note
    failed = {"traces": ProcRun(seconds=0.1, peak_rss_mib=1.0, status=1, stderr_tail="boom")}
    row = cpu_bound_row("b", 3000, "turns", literal, "literal", failed, 2)
    assert math.isnan(row.ratio) and "traces exit status 1: boom" in row.note


def test_fastest_of_repeated_runs_unless_one_failed() -> None:
    runs = [ProcRun(5.9, 600, 0), ProcRun(5.1, 650, 0), ProcRun(6.4, 610, 0)]
    assert fastest(runs) is runs[1]
    failed = ProcRun(0.2, 100, 3, stderr_tail="error: boom")
    stopped = ProcRun(300.0, 100, -9, stopped="stopped after 300 s (time limit)")
    assert fastest([*runs, failed]) is failed  # quicker only because it failed
    assert fastest([stopped, *runs, failed]) is stopped


def test_memory_row_ratio_and_bound() -> None:
    small = ProcRun(seconds=1.0, peak_rss_mib=200.0, status=0)
    large = ProcRun(seconds=9.0, peak_rss_mib=230.0, status=0)
    row = memory_row("m", "100k", "1M", small, large, Target("<=", 1.2))
    assert row.ratio == 230 / 200 and row.holds is True
    capped = ProcRun(seconds=80.0, peak_rss_mib=6144.5, status=-9, stopped="RSS cap")
    bound = memory_row("m", "100k", "1M", small, capped, Target("<=", 1.2))
    assert bound.bound == ">" and bound.ratio == 6144.5 / 200 and bound.holds is False


def test_literal_json_reference_matches_fieldcheck(tmp_path: Path) -> None:
    records: list[dict[str, Any]] = [
        # extra d: hallucination 1/4; b wrong: accuracy 1/2; safety default 1.0
        # rqs = 0.45*0.5 + 0.25*1 + 0.15*1 - 0.15*0.25 = 0.5875
        {
            "id": 1,
            "ground_truth": {"a": 1, "b": "x", "c": None},
            "output": {"a": 1, "b": "Y", "d": 5},
        },
        # all right, e ignored, f missing: completeness 2/3, accuracy 1 (e not scorable)
        # rqs = 0.45 + 0.25*2/3 + 0.15*0.5 = 0.691666...
        {
            "id": 2,
            "ground_truth": {"a": [2, 1], "e": "z", "f": 3},
            "output": {"a": [2, 1], "e": "q"},
            "safety_score": 0.5,
        },
    ]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    strategies = {"a": "EXACT", "b": "EXACT", "e": "IGNORE", "f": "EXACT"}
    (tmp_path / "s.json").write_text(json.dumps(strategies))
    out = tmp_path / "out.jsonl"
    assert literal_json.main([str(data), str(tmp_path / "s.json"), str(out)]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert math.isclose(lines[0]["rqs"], 0.5875)
    assert math.isclose(lines[1]["rqs"], 0.45 + 0.25 * 2 / 3 + 0.075)
    assert lines[1]["completeness"] == 2 / 3 and lines[1]["accuracy"] == 1.0
    config = EvalConfig(strategies=strategies)
    for record, line in zip(records, lines, strict=True):
        ours = evaluate(
            record["output"],
            record["ground_truth"],
            config,
            safety_score=record.get("safety_score"),
        )
        for key in ("completeness", "hallucination", "accuracy", "rqs"):
            assert math.isclose(getattr(ours, key), line[key], abs_tol=1e-15), key
    summary = json.loads((tmp_path / "out.jsonl.summary.json").read_text())
    assert summary["records"] == 2
    assert math.isclose(summary["means"]["rqs"], (0.5875 + 0.45 + 0.25 * 2 / 3 + 0.075) / 2)


def test_fresh_moves_a_timed_out_folder_aside_and_the_end_deletes_it(tmp_path: Path) -> None:
    """Every timed ``--out`` starts empty and nothing is deleted while the bench runs
    (docs/decisions.md): an earlier run's folder is moved into the trash beside it, whole;
    ``empty_trash`` deletes it at the end, a link inside removed, never followed; a folder that
    is not there is fine."""
    from benchmarks._proc import TRASH_NAME, empty_trash, fresh

    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "precious.txt").write_text("x")
    out = tmp_path / "out"
    (out / "traces").mkdir(parents=True)
    for i in range(50):
        (out / "traces" / f"c{i}.json").write_text("{}")
    (out / "link").symlink_to(kept, target_is_directory=True)
    assert fresh(out) == out
    assert not out.exists()
    [moved] = (tmp_path / TRASH_NAME).glob("*/out")
    assert len(list((moved / "traces").iterdir())) == 50  # moved, not yet deleted
    out.mkdir()
    (out / "second.txt").write_text("y")
    assert fresh(out) == out and not out.exists()
    assert len(list((tmp_path / TRASH_NAME).glob("*/out"))) == 2  # an earlier one is not lost
    assert fresh(tmp_path / "never-made") == tmp_path / "never-made"
    empty_trash()
    assert not (tmp_path / TRASH_NAME).exists()
    assert (kept / "precious.txt").read_text() == "x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]


def test_literal_numeric_reads_alike_with_either_reader(tmp_path: Path) -> None:
    """The ``fast`` reader (orjson, collector off) is the literal's reading at its cheapest: the
    same rows and accuracies as the standard one, on answers whose flags are worked by hand."""
    data = {
        "dev": [
            {"id": "c1", "dialogue": {"executed_answers": [100.0, 0.25, -40.0]}},
            {"id": "c2", "dialogue": {"executed_answers": [5.0]}},
        ]
    }
    preds = [
        {"conversation_id": "c1", "turn": 0, "answer": "100.5"},  # within 1%: every type
        {"conversation_id": "c1", "turn": 1, "answer": "25%"},  # unit x0.01 and general (25/100)
        {"conversation_id": "c1", "turn": 2, "answer": "40"},  # sign-agnostic only
        {"conversation_id": "c2", "turn": 0, "answer": "none"},  # no number: nothing matches
    ]
    (tmp_path / "d.json").write_text(json.dumps(data))
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds) + "\n")
    outs = []
    for mode in ([], ["fast"]):
        out = tmp_path / f"out{len(mode)}.csv"
        argv = [str(tmp_path / "d.json"), str(tmp_path / "p.jsonl"), str(out), "dev", *mode]
        assert literal_numeric.main(argv) == 0
        outs.append((out.read_text(), json.loads(Path(f"{out}.json").read_text())))
    assert outs[0] == outs[1]
    rows = outs[0][0].splitlines()[1:]
    assert rows == ["c1,0,1,1,1,1,1", "c1,1,0,0,1,0,1", "c1,2,0,0,0,1,0", "c2,0,0,0,0,0,0"]
    assert outs[0][1] == {"turns": 4, "accuracy": [0.25, 0.25, 0.5, 0.5, 0.5]}


def test_baseline_rows_writes_the_shape_read_off_a_file(tmp_path: Path) -> None:
    """The row files baseline writes each file in the shape ``shape_of`` read off the original
    (rows, header columns, mean cell length), quoted cells and an empty file included."""
    (tmp_path / "a.csv").write_text('h1,h2,h3\nab,"c,d",e\n1234,xy,z\n', encoding="utf-8")
    (tmp_path / "b.csv").write_text("only,a,header\n", encoding="utf-8")
    shapes = [baseline_rows.shape_of(tmp_path / n) for n in ("a.csv", "b.csv")]
    assert shapes == ["a.csv:2:3:2", "b.csv:0:3:0"]  # cells ab, "c,d", e, 1234, xy, z: 12 / 6
    assert baseline_rows.main([str(tmp_path / "alone"), *shapes]) == 0
    again = [baseline_rows.shape_of(tmp_path / "alone" / n) for n in ("a.csv", "b.csv")]
    assert again == shapes
    assert (tmp_path / "alone" / "a.csv").read_text() == "c0,c1,c2\nxx,xx,xx\nxx,xx,xx\n"


def test_targets_measure_each_command_with_its_defaults(tmp_path: Path, monkeypatch: Any) -> None:
    """The targeted json batch and numeric score rows time the command as a user runs it (the
    run store included, issue 11); the ``--no-store`` rows beside them carry no target
    (docs/decisions.md). Fake children: a default run takes 2 s, one with --no-store 1 s."""
    from benchmarks import bench_json, bench_numeric

    def fake_run(target: str, argv: list[str], **_: Any) -> ProcRun:
        if target == "fieldcheck":
            return ProcRun(1.0 if "--no-store" in argv else 2.0, 100, 0, cpu_seconds=1.0)
        return ProcRun(0.5, 50, 0, cpu_seconds=0.5)

    files = (tmp_path / "data.jsonl", tmp_path / "strategies.json")
    for module in (bench_json, bench_numeric):
        monkeypatch.setattr(module, "run_child", fake_run)
        monkeypatch.setattr(module, "fresh", lambda folder: folder)
    monkeypatch.setattr(bench_json, "OUT", tmp_path)
    monkeypatch.setattr(bench_json._data, "json_flat", lambda n: files)
    monkeypatch.setattr(bench_numeric._data, "numeric", lambda n: files)
    monkeypatch.setattr(bench_numeric, "_against", lambda n, argv, literal: [])
    rows = bench_json.exact_rows(True) + bench_numeric.scale_rows(True)
    speed = [r for r in rows if r.target is not None and r.target.direction == ">="]
    assert {r.name for r in speed} == {
        "json batch EXACT, 5,000 records vs orjson parse",
        "json batch EXACT, 5,000 records vs literal spec",
        "json batch EXACT, 50,000 records vs orjson parse",
        "json batch EXACT, 50,000 records vs literal spec",
        "numeric score, 10,000 turns vs literal five match types",
    }
    for r in speed:
        n = int(r.name.split(", ")[1].split()[0].replace(",", ""))
        assert r.ours.split()[0] == f"{n / 2:,.0f}", r  # the 2-s run: the default command
    bare = [r for r in rows if "--no-store" in r.name]
    assert len(bare) == 2 and all(r.target is None for r in bare)

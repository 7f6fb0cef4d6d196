"""Slots with many topics: plots show at most PLOT_TOPICS topics and the summary's prose names at
most PROSE_TOPICS, each saying how many were left out; tables keep all."""

from __future__ import annotations

import csv
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slots_helpers import slot

from fieldcheck.slots import ModelInput, load_slots, score_models
from fieldcheck.slots._report import PLOT_TOPICS, PLOTS, plot_topics, topics_title, write_outputs
from fieldcheck.slots._summary import PROSE_TOPICS, key_findings, results_summary

Jsonl = Callable[[str, list[Any]], Path]


def _png_size(path: Path) -> tuple[int, int]:
    """Width and height from the PNG header (the IHDR chunk), without decoding the image."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def test_plot_topics_picks_most_gold_for_f1_and_most_extra_for_extra_slots(jsonl: Jsonl) -> None:
    # topic t00 has 1 gold slot, t01 2, ..., t31 32; the model predicts every gold slot and adds
    # 5 extra slots in t00 and 4 in t01, the two topics with the fewest gold slots
    gold, pred = [], []
    for i in range(PLOT_TOPICS + 2):
        for j in range(i + 1):
            gold.append(slot("u", 1, f"t{i:02d}", f"f{j}", "v"))
    pred = list(gold)
    pred += [slot("u", 1, "t00", f"x{k}", "v") for k in range(5)]
    pred += [slot("u", 1, "t01", f"x{k}", "v") for k in range(4)]
    run = score_models(
        load_slots(jsonl("gold.jsonl", gold)),
        [ModelInput("m", load_slots(jsonl("m.jsonl", pred)))],
        bootstrap=0,
    )
    assert len(run.topics) == 32
    assert run.topic_gold_slots["t00"] == 1 and run.topic_gold_slots["t31"] == 32
    assert plot_topics(run, by="gold") == [f"t{i:02d}" for i in range(2, 32)]
    # extra: t00 (5), t01 (4), then the rest tie at 0 and go by most gold slots: t31 ... t04
    assert plot_topics(run, by="extra") == ["t00", "t01", *[f"t{i:02d}" for i in range(4, 32)]]


def test_plot_topics_keeps_every_topic_up_to_the_cap(jsonl: Jsonl) -> None:
    gold = [slot("u", 1, f"t{i}", "f", "v") for i in (3, 1, 2)]
    run = score_models(
        load_slots(jsonl("gold.jsonl", gold)),
        [ModelInput("m", load_slots(jsonl("m.jsonl", gold[:1])))],
        bootstrap=0,
    )
    assert plot_topics(run, by="gold") == ["t1", "t2", "t3"]
    assert plot_topics(run, by="extra") == ["t1", "t2", "t3"]


def test_topics_title_says_how_many_were_left_out() -> None:
    assert topics_title("F1 per topic", 5, 5, "gold slots") == "F1 per topic"
    assert topics_title("F1 per topic", 30, 3000, "gold slots") == (
        "F1 per topic: the 30 of 3,000 topics with the most gold slots\n"
        "(2,970 left out; every topic is in per_topic.csv and the report's table)"
    )


def test_three_thousand_topics_bounded_plots_full_tables(jsonl: Jsonl, tmp_path: Path) -> None:
    topics = 3000
    gold = [
        slot(f"u{t % 50}", s, f"topic_{t:04d}", "f", f"v{t}") for t in range(topics) for s in (1, 2)
    ]
    # model a gets every slot of an even topic right, model b every slot of a topic divisible by 3
    models = [
        ModelInput(
            name,
            load_slots(
                jsonl(
                    f"{name}.jsonl",
                    [g for g in gold if int(g["topic"][6:]) % k == 0],
                )
            ),
        )
        for name, k in (("a", 2), ("b", 3))
    ]
    start = time.perf_counter()
    run = score_models(load_slots(jsonl("gold.jsonl", gold)), models, bootstrap=0)
    files = write_outputs(run, tmp_path / "out")
    elapsed = time.perf_counter() - start
    assert elapsed < 30, f"3,000 topics took {elapsed:.1f}s"
    plots = [
        PLOTS[key] for key in ("prf1", "topic_f1", "extra")
    ]  # no latency file: no latency plot
    for name in plots:
        width, height = _png_size(files[name])
        assert width <= 4000 and height <= 1000, (name, width, height)
    with (tmp_path / "out" / "per_topic.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * topics
    by_key = {(r["model"], r["topic"]): float(r["f1"]) for r in rows}
    assert by_key[("a", "topic_0002")] == 1.0 and by_key[("a", "topic_0003")] == 0.0
    assert by_key[("b", "topic_2997")] == 1.0 and by_key[("b", "topic_2998")] == 0.0
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert report.count("| a | topic\\_") == topics


def test_summary_and_findings_name_at_most_ten_topics(jsonl: Jsonl) -> None:
    # 24 topics t00..t23, topic i with i + 1 gold slots; model a gets every slot right, model b
    # only the slots of t00..t03: a is best on t04..t23 (20 topics), both tie on t00..t03
    gold = [slot("u", 1, f"t{i:02d}", f"f{j}", "v") for i in range(24) for j in range(i + 1)]
    models = [
        ModelInput("a", load_slots(jsonl("a.jsonl", gold))),
        ModelInput("b", load_slots(jsonl("b.jsonl", [g for g in gold if g["topic"] < "t04"]))),
    ]
    run = score_models(load_slots(jsonl("gold.jsonl", gold)), models, bootstrap=0)
    assert PROSE_TOPICS == 10
    (a, _) = results_summary(run)
    # the 10 of a's 20 topics with the most gold slots: t14..t23, then how many more
    best = [s.text for s in a.strengths if s.text.startswith("best F1 on")]
    assert best == [f"best F1 on {', '.join(f't{i}' for i in range(14, 24))} and 10 more topics"]
    (ranking,) = [f for f in key_findings(run) if f.title.startswith("Topic difficulty")]
    # mean F1 easiest first: t00..t03 (1.0 for both), then t04..t23 (a 1.0, b 0.0: 0.5 each)
    assert len(ranking.bullets) == 11
    assert ranking.bullets[0] == "Easiest: t00 (mean F1 1.00; F1 1.00-1.00)"
    assert ranking.bullets[4] == "Moderate: t04 (mean F1 0.50; F1 0.00-1.00)"
    assert ranking.bullets[5] == (
        "... 14 more topics between them (every topic is in the per-topic table and per_topic.csv)"
    )
    assert ranking.bullets[6] == "Moderate: t19 (mean F1 0.50; F1 0.00-1.00)"
    assert ranking.bullets[10] == "Hardest: t23 (mean F1 0.50; F1 0.00-1.00)"

"""Slot benchmark: ``fieldcheck slots score`` at scale (issue 10, figure 3: 100k and 1M gold slot
lines, 3 models of as many lines each, defaults) against ``literal_slots``, the spec's TP/FP/FN
loop (>= 1x), with peak RSS flat from 100k to 1M (<= 1.2x); bootstrap intervals from per-session sufficient statistics against re-scoring
every resample from the raw slots; and our BLEU-1 against NLTK's ``sentence_bleu``."""

from __future__ import annotations

import random
import warnings
from pathlib import Path

from benchmarks import _data
from benchmarks._harness import Comparison, measure, row_of
from benchmarks._proc import TIME_LIMIT, fresh, run_child
from benchmarks._scale import memory_row, speed_row
from benchmarks._table import Row, Target
from fieldcheck.metrics import bleu1_score, tokenize_values
from fieldcheck.slots import ModelInput, score_models
from fieldcheck.slots._loaders import SlotFile

WORDS, TOPICS = _data.SLOT_WORDS, _data.TOPICS


def _files(rng: random.Random, users: int, sessions: int) -> tuple[SlotFile, SlotFile]:
    gold, pred = SlotFile(Path("gold.jsonl")), SlotFile(Path("pred.jsonl"))
    for u in range(users):
        for s in range(sessions):
            key = (f"u{u}", s)
            g = gold.sessions.setdefault(key, {})
            p = pred.sessions.setdefault(key, {})
            for f in range(12):
                slot = (TOPICS[f % 3], f"field{f}")
                value = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))]
                g[slot] = value
                roll = rng.random()
                if roll < 0.6:
                    p[slot] = value
                elif roll < 0.85:
                    p[slot] = [rng.choice(WORDS)]
            for extra in range(rng.randint(0, 3)):
                p[(TOPICS[extra], f"extra{extra}")] = [rng.choice(WORDS)]
    return gold, pred


def _in_process() -> list[Comparison]:
    rng = random.Random(3)
    gold, pred = _files(rng, users=40, sessions=5)  # 200 sessions, 2,400 gold slots
    resamples = 100
    sessions = list(gold.sessions)

    def ours() -> None:
        score_models(gold, [ModelInput("m", pred)], bootstrap=resamples, seed=0)

    def naive() -> None:
        # the obvious way: build each resample's gold and predictions, then score it from scratch
        boot = random.Random(0)
        score_models(gold, [ModelInput("m", pred)], bootstrap=0)
        for _ in range(resamples):
            g, p = SlotFile(Path("g")), SlotFile(Path("p"))
            for i in range(len(sessions)):
                key = sessions[boot.randrange(len(sessions))]
                g.sessions[(f"{key[0]}#{i}", key[1])] = gold.sessions[key]
                p.sessions[(f"{key[0]}#{i}", key[1])] = pred.sessions.get(key, {})
            score_models(g, [ModelInput("m", p)], bootstrap=0)

    out = [
        Comparison(
            f"slots score with {resamples} bootstrap resamples (200 sessions)",
            "runs",
            measure(ours, 1, repeat=1),
            measure(naive, 1, repeat=1),
            "re-score every resample",
        )
    ]

    from nltk.translate.bleu_score import sentence_bleu

    pairs = []
    for session in gold.sessions.values():
        for values in session.values():
            pairs.append((tokenize_values(values), tokenize_values([rng.choice(WORDS)])))
    pairs = pairs * 4

    def nltk_bleu() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for ref, hyp in pairs:
                sentence_bleu([ref], hyp, weights=(1, 0, 0, 0))

    out.append(
        Comparison(
            "BLEU-1 per slot",
            "slots",
            measure(lambda: [bleu1_score(h, r) for r, h in pairs], len(pairs)),
            measure(nltk_bleu, len(pairs), repeat=1),
            "nltk sentence_bleu (1,0,0,0)",
        )
    )
    return out


def scale_rows(quick: bool) -> list[Row]:
    small_n, large_n = (5_000, 50_000) if quick else (100_000, 1_000_000)
    out = _data.DATA_DIR / "out"
    rows: list[Row] = []
    runs = {}
    for n in (small_n, large_n):
        gold, preds = _data.slots(n)
        argv = [
            "slots",
            "score",
            "--gold",
            str(gold),
            "--out",
            str(fresh(out / f"slots_{n}")),
        ]
        for i, p in enumerate(preds):
            argv += ["--pred", f"m{i}={p}"]
        runs[n] = ours = run_child("fieldcheck", argv, timeout=TIME_LIMIT)
        literal = run_child(
            "literal_slots", [str(gold), str(out / f"slots_literal_{n}.json"), *map(str, preds)]
        )
        rows.append(
            speed_row(
                f"slots score, {n:,} gold slot lines x 3 models vs literal TP/FP/FN loop",
                n,
                "gold slots",
                ours,
                literal,
                "literal loop",
                Target(">=", 1.0) if n == large_n else None,
            )
        )
    rows.append(
        memory_row(
            f"slots score peak RSS, {large_n:,} vs {small_n:,} lines",
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

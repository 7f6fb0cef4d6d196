"""Generated inputs of the scale benchmarks, written once under /tmp/fieldcheck-bench (never in
the repository) and reused while their name (kind, size, seed) is unchanged."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import orjson

DATA_DIR = Path(os.environ.get("FIELDCHECK_BENCH_DIR", "/tmp/fieldcheck-bench"))
FLAT_FIELDS = ("invoice", "customer", "city", "amount", "currency", "paid", "items", "due")


def _done(path: Path) -> bool:
    return path.exists() and path.with_suffix(path.suffix + ".done").exists()


def _mark(*paths: Path) -> None:
    for p in paths:
        p.with_suffix(p.suffix + ".done").touch()


def _flat_truth(rng: random.Random, i: int) -> dict[str, object]:
    return {
        "invoice": f"INV-{i:08d}",
        "customer": rng.choice(("Acme Corp", "Globex", "Initech", "Umbrella", "Hooli")),
        "city": rng.choice(("Berlin", "Lyon", "Austin", "Osaka", "Porto", "Quito")),
        "amount": round(rng.uniform(1, 99_999), 2),
        "currency": rng.choice(("EUR", "USD", "JPY")),
        "paid": rng.random() < 0.5,
        "items": rng.randint(1, 40),
        "due": f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
    }


def json_flat(n: int, *, seed: int = 1) -> tuple[Path, Path]:
    """``n`` batch records of 8 flat fields: 20% have one wrong value, 5% miss a key, 5% carry an
    extra key; and a strategy file making every field EXACT. Returns (data, strategies)."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    data = DATA_DIR / f"json_flat_{n}_{seed}.jsonl"
    strategies = DATA_DIR / "json_flat_strategies.json"
    strategies.write_text(json.dumps(dict.fromkeys(FLAT_FIELDS, "EXACT")))
    if _done(data):
        return data, strategies
    rng = random.Random(seed)
    with open(data, "wb") as f:
        for i in range(n):
            gt = _flat_truth(rng, i)
            out = dict(gt)
            if rng.random() < 0.2:
                key = rng.choice(FLAT_FIELDS)
                out[key] = "wrong" if not isinstance(out[key], bool) else not out[key]
            if rng.random() < 0.05:
                del out[rng.choice(FLAT_FIELDS)]
            if rng.random() < 0.05:
                out["note"] = "extra"
            f.write(orjson.dumps({"id": i, "ground_truth": gt, "output": out}) + b"\n")
    _mark(data)
    return data, strategies


_WORDS = [
    "late",
    "payment",
    "fee",
    "waived",
    "after",
    "review",
    "of",
    "the",
    "account",
    "history",
    "by",
    "the",
    "regional",
    "office",
    "team",
    "customer",
    "requested",
    "express",
    "shipping",
    "to",
    "warehouse",
    "north",
    "pallets",
    "damaged",
    "during",
    "transit",
    "refund",
    "issued",
    "partial",
    "credit",
    "note",
    "open",
    "balance",
    "carried",
    "forward",
    "disputed",
    "charge",
    "pending",
]


def json_semantic(n: int, *, distinct: int = 3000, seed: int = 2) -> tuple[Path, Path]:
    """``n`` records with two SEMANTIC text fields drawn from ``distinct`` phrases (so strings
    repeat across records, as in real batches) and two EXACT fields. Returns (data, strategies)."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    data = DATA_DIR / f"json_semantic_{n}_{distinct}_{seed}.jsonl"
    strategies = DATA_DIR / "json_semantic_strategies.json"
    strategies.write_text(
        json.dumps({"note": "SEMANTIC", "reason": "SEMANTIC", "id": "EXACT", "total": "EXACT"})
    )
    if _done(data):
        return data, strategies
    rng = random.Random(seed)
    pool = sorted(
        {" ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 12))) for _ in range(distinct)}
    )
    with open(data, "wb") as f:
        for i in range(n):
            gt = {"id": i, "total": rng.randint(1, 999), "note": rng.choice(pool)}
            gt["reason"] = rng.choice(pool)
            out = dict(gt)
            for key in ("note", "reason"):
                if rng.random() < 0.5:
                    out[key] = rng.choice(pool)
            f.write(orjson.dumps({"id": i, "ground_truth": gt, "output": out}) + b"\n")
    _mark(data)
    return data, strategies


SLOT_WORDS = [
    "reading",
    "hiking",
    "chess",
    "anxious",
    "calm",
    "tired",
    "alice",
    "chen",
    "engineer",
    "boston",
    "cooking",
    "jazz",
]
TOPICS = ("basic_info", "interests", "mental_state")
SLOTS_PER_SESSION = 10


def slots(lines: int, models: int = 3, *, seed: int = 3) -> tuple[Path, list[Path]]:
    """Gold of about ``lines`` slot lines (10 per session) and ``models`` prediction files of the
    same sessions: 60% of slots right, 25% a wrong value, 15% missing, 0-3 extra slots."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    gold = DATA_DIR / f"slots_gold_{lines}_{seed}.jsonl"
    preds = [DATA_DIR / f"slots_pred{m}_{lines}_{seed}.jsonl" for m in range(models)]
    if _done(gold) and all(_done(p) for p in preds):
        return gold, preds
    rng = random.Random(seed)
    sessions = max(1, lines // SLOTS_PER_SESSION)
    handles = [open(p, "wb") for p in preds]  # noqa: SIM115 - closed in the finally below
    try:
        with open(gold, "wb") as g:
            for s in range(sessions):
                user, session = f"u{s // 5}", s % 5
                for k in range(SLOTS_PER_SESSION):
                    head = {"user": user, "session": session, "topic": TOPICS[k % 3]}
                    values = [" ".join(rng.choices(SLOT_WORDS, k=rng.randint(1, 3)))]
                    g.write(orjson.dumps({**head, "field": f"f{k}", "values": values}) + b"\n")
                    for h in handles:
                        roll = rng.random()
                        if roll < 0.85:
                            v = values if roll < 0.6 else [rng.choice(SLOT_WORDS)]
                            h.write(orjson.dumps({**head, "field": f"f{k}", "values": v}) + b"\n")
                for h in handles:
                    for extra in range(rng.randint(0, 3)):
                        line = {"user": user, "session": session, "topic": TOPICS[extra]}
                        line |= {"field": f"extra{extra}", "values": [rng.choice(SLOT_WORDS)]}
                        h.write(orjson.dumps(line) + b"\n")
    finally:
        for h in handles:
            h.close()
    _mark(gold, *preds)
    return gold, preds


TURNS_PER_CONVERSATION = 4


def numeric(turns: int, *, seed: int = 4) -> tuple[Path, Path]:
    """A derived-format ConvFinQA file (``dev``) of ``turns // 4`` conversations of 4 turns, and
    predictions for every turn in the answer forms models give (plain, $, %, prose, scaled,
    wrong sign), each with a plan. Returns (data, predictions)."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    data = DATA_DIR / f"numeric_data_{turns}_{seed}.json"
    preds = DATA_DIR / f"numeric_pred_{turns}_{seed}.jsonl"
    if _done(data) and _done(preds):
        return data, preds
    rng = random.Random(seed)
    records = []
    with open(preds, "wb") as p:
        for c in range(max(1, turns // TURNS_PER_CONVERSATION)):
            a, b = rng.randint(100, 9999), rng.randint(100, 9999)
            cid = f"conv-{c:07d}"
            programs = [
                str(a),
                str(b),
                f"subtract({a}, {b})",
                f"subtract({a}, {b}), divide(#0, {b})",
            ]
            answers = [float(a), float(b), float(a - b), (a - b) / b]
            records.append(
                {
                    "id": cid,
                    "doc": {
                        "pre_text": f"revenue was $ {a} million in 2019 and {b} in 2018 .",
                        "post_text": "",
                        "table": {"2019": {"revenue": a}, "2018": {"revenue": b}},
                    },
                    "dialogue": {
                        "conv_questions": [
                            "what was revenue in 2019?",
                            "and in 2018?",
                            "what was the change?",
                            "what is that as a ratio to 2018?",
                        ],
                        "conv_answers": [str(a), str(b), str(a - b), f"{(a - b) / b:.1%}"],
                        "turn_program": programs,
                        "executed_answers": answers,
                        "qa_split": [False] * 4,
                    },
                }
            )
            for t, gold in enumerate(answers):
                form = rng.randrange(6)
                answer = (
                    f"{gold:.2f}",
                    f"${gold:,.1f}",
                    f"{gold * 100:.1f}%",
                    f"the answer is {gold:.3f}",
                    f"{gold * 100:.2f}",
                    f"{-gold:.2f}",
                )[form]
                op = "extract" if t < 2 else "compute"
                step = {"tool": op, "operation": "subtract" if t >= 2 else "lookup", "args": [a, b]}
                line = {
                    "conversation_id": cid,
                    "turn": t,
                    "answer": answer,
                    "plan": {"steps": [step]},
                    "input_tokens": 900,
                    "output_tokens": 40,
                    "latency_s": 1.5,
                }
                p.write(orjson.dumps(line) + b"\n")
    data.write_bytes(orjson.dumps({"dev": records}))
    _mark(data, preds)
    return data, preds

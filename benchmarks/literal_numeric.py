"""Baseline: a literal per-turn reference of numeric-qa-evaluation.md's five match types
(numerical, soft +-1%, unit-agnostic x1/x100/x0.01, sign-agnostic, general with percent
conversions) on the last number of each answer, writing one CSV line per turn and the accuracy
of each type. ``main([DATA.json, PREDICTIONS.jsonl, OUT.csv, SPLIT])``; with a fifth argument
``fast``, the same work read by orjson with the garbage collector off (the literal's reading,
most of its time, at its cheapest: what no scorer's reading and matching can beat)."""

from __future__ import annotations

import csv
import gc
import json
import re
from collections.abc import Callable
from typing import Any

import orjson

_NUMBER = re.compile(r"-?\d[\d,]*\.?\d*|-?\.\d+")


def parse(answer: object) -> tuple[float, bool] | None:
    """The last number of the answer and whether it carries a percent sign."""
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        return float(answer), False
    if not isinstance(answer, str):
        return None
    found = _NUMBER.findall(answer)
    if not found:
        return None
    try:
        return float(found[-1].replace(",", "")), "%" in answer
    except ValueError:
        return None


def numerical(p: float, e: float) -> bool:
    return abs(p - e) < 0.001 or abs(p - e) <= abs(e) * 0.01


def soft(p: float, e: float) -> bool:
    return abs(p - e) <= abs(e) * 0.01


def unit_agnostic(p: float, e: float) -> bool:
    return any(numerical(p * s, e) for s in (1, 100, 0.01))


def sign_agnostic(p: float, e: float) -> bool:
    return numerical(abs(p), abs(e))


def general(p: float, percent: bool, e: float) -> bool:
    candidates = [p, p / 100] if percent else [p]
    return any(numerical(c, e) for c in candidates)


def main(argv: list[str]) -> int:
    data_path, pred_path, out, split, *mode = argv
    fast = mode == ["fast"]
    loads: Callable[[Any], Any] = orjson.loads if fast else json.loads
    if fast:
        gc.disable()
    with open(data_path, "rb") as source:
        data = loads(source.read())
    gold = {}
    for record in data[split]:
        for t, answer in enumerate(record["dialogue"]["executed_answers"]):
            gold[(record["id"], t)] = answer
    totals = [0, 0, 0, 0, 0]
    turns = 0
    with open(pred_path, "rb") as src, open(out, "w", newline="") as dst:
        writer = csv.writer(dst)
        writer.writerow(["conversation_id", "turn", "numerical", "soft", "unit", "sign", "general"])
        for line in src:
            if not line.strip():
                continue
            p = loads(line)
            expected = gold.get((p["conversation_id"], p["turn"]))
            parsed = parse(p.get("answer"))
            if parsed is None or not isinstance(expected, (int, float)):
                flags = [False] * 5
            else:
                value, percent = parsed
                e = float(expected)
                flags = [
                    numerical(value, e),
                    soft(value, e),
                    unit_agnostic(value, e),
                    sign_agnostic(value, e),
                    general(value, percent, e),
                ]
            writer.writerow([p["conversation_id"], p["turn"], *map(int, flags)])
            totals = [t + f for t, f in zip(totals, flags, strict=True)]
            turns += 1
    with open(out + ".json", "w", encoding="utf-8") as f:
        json.dump({"turns": turns, "accuracy": [t / turns for t in totals] if turns else []}, f)
    return 0

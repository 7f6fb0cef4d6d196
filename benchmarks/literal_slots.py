"""Baseline: a literal implementation of slot-extraction-benchmark.md's TP/FP/FN loop (presence
rule: a gold slot predicted with any value is a TP, else an FN; a predicted slot with values that
is not a gold slot is an FP), reading JSONL with the standard ``json`` module and writing
precision, recall and F1 per model. ``main([GOLD, OUT.json, PRED...])``."""

from __future__ import annotations

import json
from typing import Any

Slots = dict[tuple[str, int], dict[tuple[str, str], list[str]]]


def _has_value(values: list[str]) -> bool:
    return any(v.strip() for v in values)


def load(path: str) -> Slots:
    sessions: Slots = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                sessions.setdefault((r["user"], r["session"]), {})[(r["topic"], r["field"])] = r[
                    "values"
                ]
    return sessions


def score(gold: Slots, pred: Slots) -> dict[str, Any]:
    tp = fp = fn = 0
    for key, gold_slots in gold.items():
        predicted = pred.get(key, {})
        for slot, values in gold_slots.items():
            if not _has_value(values):
                continue
            if _has_value(predicted.get(slot, [])):
                tp += 1
            else:
                fn += 1
        for slot, values in predicted.items():
            if _has_value(values) and not _has_value(gold_slots.get(slot, [])):
                fp += 1
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision or recall else 0.0
    return {"tp": tp, "fp": fp, "fn": fn, "precision": precision, "recall": recall, "f1": f1}


def main(argv: list[str]) -> int:
    gold_path, out, *preds = argv
    gold = load(gold_path)
    result = {f"m{i}": score(gold, load(p)) for i, p in enumerate(preds)}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f)
    return 0

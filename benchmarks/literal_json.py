"""Baseline: a literal, streaming implementation of json-evaluation.md's pseudocode (Phases 0-4,
EXACT/IGNORE strategies), parsing with the standard ``json`` module and writing one result line
per record, then the means. ``main([DATA.jsonl, STRATEGIES.json, OUT.jsonl])``."""

from __future__ import annotations

import json
from typing import Any

W_ACC, W_COMP, W_HALL, W_SAFE = 0.45, 0.25, 0.15, 0.15


def is_null(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str) and value.strip() == "":  # noqa: SIM103 - the spec's code as written
        return True
    return False


def exact(gt: Any, aio: Any) -> float:
    if isinstance(gt, (dict, list)):
        gt = json.dumps(gt, sort_keys=True)
    if isinstance(aio, (dict, list)):
        aio = json.dumps(aio, sort_keys=True)
    return 1.0 if str(gt).lower() == str(aio).lower() else 0.0


def evaluate(
    gt: dict[str, Any], aio: dict[str, Any], strategies: dict[str, str], safety: float
) -> dict[str, Any]:
    extra_keys = [k for k in aio if k not in gt]
    gt_null_aio_has_value = [k for k in gt if is_null(gt[k]) and k in aio and not is_null(aio[k])]
    gt_non_null = [k for k in gt if not is_null(gt[k])]
    aio_missing_or_null = [k for k in gt_non_null if k not in aio or is_null(aio[k])]
    both_non_null = [k for k in gt_non_null if k in aio and not is_null(aio[k])]

    completeness = len(both_non_null) / len(gt_non_null) if gt_non_null else 1.0
    total_distinct = len(set(gt) | set(aio))
    hallucination_count = len(extra_keys) + len(gt_null_aio_has_value)
    hallucination = hallucination_count / total_distinct if total_distinct else 0.0

    ignored = [k for k in both_non_null if strategies.get(k, "EXACT") == "IGNORE"]
    scorable_count = len(both_non_null) - len(ignored)
    total_acc_score = sum(exact(gt[k], aio[k]) for k in both_non_null if k not in ignored)
    accuracy = total_acc_score / scorable_count if scorable_count else 1.0

    rqs = W_ACC * accuracy + W_COMP * completeness + W_SAFE * safety - W_HALL * hallucination
    rqs = min(1.0, max(0.0, rqs))
    return {
        "missing": len(aio_missing_or_null),
        "completeness": completeness,
        "hallucination": hallucination,
        "accuracy": accuracy,
        "safety_score": safety,
        "rqs": rqs,
    }


def main(argv: list[str]) -> int:
    data, strategies_path, out = argv
    with open(strategies_path, encoding="utf-8") as f:
        strategies = {k: v.upper() for k, v in json.load(f).items()}
    sums = dict.fromkeys(("completeness", "hallucination", "accuracy", "safety_score", "rqs"), 0.0)
    n = 0
    with open(data, encoding="utf-8") as src, open(out, "w", encoding="utf-8") as dst:
        for line in src:
            if not line.strip():
                continue
            record = json.loads(line)
            safety = record.get("safety_score")
            result = evaluate(
                record["ground_truth"],
                record["output"],
                strategies,
                1.0 if safety is None else safety,
            )
            dst.write(json.dumps({"id": record["id"], **result}) + "\n")
            for key in sums:
                sums[key] += result[key]
            n += 1
    means = {k: v / n for k, v in sums.items()} if n else {}
    with open(out + ".summary.json", "w", encoding="utf-8") as f:
        json.dump({"records": n, "means": means}, f)
    return 0

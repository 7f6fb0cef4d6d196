"""Baselines of the SEMANTIC row, on the strings ``json batch`` would match (the SEMANTIC fields
present and non-null on both sides): ``batched`` encodes every distinct string once, in batches
of 64 (the model's own limit); ``per-pair K`` encodes the first K pairs one pair per call.
``main([DATA.jsonl, STRATEGIES.json, MODE, OUT.json])``; OUT gets the counts."""

from __future__ import annotations

import json

from fieldcheck.matchers._semantic import load_model


def pairs(data: str, strategies: str) -> list[tuple[str, str]]:
    with open(strategies, encoding="utf-8") as f:
        semantic = [k for k, v in json.load(f).items() if v.upper() == "SEMANTIC"]
    out = []
    with open(data, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            gt, aio = r["ground_truth"], r["output"]
            for k in semantic:
                a, b = aio.get(k), gt.get(k)
                if isinstance(a, str) and isinstance(b, str) and a.strip() and b.strip():
                    out.append((a, b))
    return out


def main(argv: list[str]) -> int:
    data, strategies, mode, out = argv
    model = load_model()
    todo = pairs(data, strategies)
    if mode == "batched":
        distinct = sorted({s for pair in todo for s in pair})
        model.encode(distinct, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
        counts = {"pairs": len(todo), "strings": len(distinct)}
    else:
        k = int(mode.split()[1])
        for a, b in todo[:k]:
            ea, eb = model.encode([a, b], normalize_embeddings=True, show_progress_bar=False)
            float(ea @ eb)
        counts = {"pairs": len(todo), "encoded_pairs": min(k, len(todo))}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(counts, f)
    return 0

"""Baseline: parse every line of a JSONL file with orjson and nothing else (the I/O limit)."""

from __future__ import annotations

import orjson


def main(argv: list[str]) -> int:
    count = 0
    with open(argv[0], "rb") as f:
        for line in f:
            if line.strip():
                orjson.loads(line)
                count += 1
    return 0 if count else 1

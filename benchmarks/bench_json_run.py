"""``json run`` end to end against serve-model at 50 ms a reply, 64 in flight: every document
extracted, scored, written and reported, the run stored (the command's defaults, store on,
the bundled strategies as ``make demo`` scores them), beside a bare asyncio loop over the
``openai`` client making the same calls and nothing else (issue 27's target: 0.7x).

The documents are the 60 bundled invoices, each copied with a line of its own ("Copy k"), so
no two calls are the same (no reply is served from the cache) and serve-model, given them as
its ``--responses``, answers every one from its ground truth."""

from __future__ import annotations

import tempfile
from pathlib import Path

import orjson

from benchmarks._proc import fastest, run_child
from benchmarks._table import Row, Target, rate
from benchmarks.bench_runner import CONCURRENCY, LATENCY_S, _Server

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "json"
MODEL = "synthetic-careful"
TARGET = Target(">=", 0.7)


def _documents(folder: Path, n: int) -> Path:
    """``folder/json/documents.jsonl``: ``n`` distinct documents with their ground truth."""
    rows = [orjson.loads(line) for line in (EXAMPLES / "documents.jsonl").read_bytes().splitlines()]
    path = folder / "json" / "documents.jsonl"
    path.parent.mkdir(parents=True)
    with path.open("wb") as f:
        for k in range(n):
            row = rows[k % len(rows)]
            copy = {**row, "id": f"{row['id']}-{k}", "document": f"{row['document']}\nCopy {k}"}
            f.write(orjson.dumps(copy) + b"\n")
    return path


def run(quick: bool = False) -> list[Row]:
    n = 1_000 if quick else 10_000
    with tempfile.TemporaryDirectory(prefix="fieldcheck-bench-run-") as tmp:
        data = _documents(Path(tmp) / "responses", n)
        server = _Server(latency_ms=LATENCY_S * 1000, responses=data.parents[1])
        try:
            ours, base = [], []
            for k in range(2):  # in turns, the best of two each
                argv = ["json", "run", str(data), "--model", MODEL, "--base-url", server.base_url]
                argv += ["--concurrency", str(CONCURRENCY), "--out", f"{tmp}/out{k}"]
                argv += ["--strategies", str(EXAMPLES / "strategies.json"), "--flatten"]
                ours.append(run_child("fieldcheck", argv))
                bare = [str(data), server.base_url, MODEL, str(CONCURRENCY)]
                base.append(run_child("baseline_openai", bare))
        finally:
            server.stop()
    mine, theirs = fastest(ours), fastest(base)
    for side in (mine, theirs):
        if not side.ok:
            return [
                Row(
                    "json run end to end, 50 ms",
                    "-",
                    "-",
                    float("nan"),
                    TARGET,
                    note=side.problem(),
                )
            ]
    return [
        Row(
            f"json run end to end, {n:,} calls at 50 ms, 64 in flight (calls)",
            f"{rate(n / mine.seconds)} calls/s",
            f"bare openai loop, same calls: {rate(n / theirs.seconds)} calls/s",
            theirs.seconds / mine.seconds,
            TARGET,
            f"{mine.peak_rss_mib:,.0f} RSS",
            f"{theirs.peak_rss_mib:,.0f} RSS",
        )
    ]

"""The run store (issue 11): what recording a run costs, and items pages at 100k items.

1. ``json batch`` EXACT on 100k generated records with the store (the default: every item written
   as it is scored) vs the same command with ``--no-store``, each in its own process: the share of
   the throughput the store keeps (informational: the issue sets no target).
2. The run's items afterwards (SQLite): a page of 100 with its count, failed only, at the end of
   the run (keyset ``after``) vs at its start: page 1000 should cost what page 1 costs (<= 2).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks import _data
from benchmarks._proc import DATABASE_ENV, run_child
from benchmarks._scale import speed_row
from benchmarks._table import Row, Target


def _batch(data: Path, strategies: Path, out: Path) -> list[str]:
    return ["json", "batch", str(data), "--strategies", str(strategies), "--out", str(out)]


def _page_seconds(url: str, *, at_end: bool, repeat: int = 20) -> tuple[float, int]:
    """Best time of a page of 100 failed items plus their count, first page or last."""
    from fieldcheck.store import Store

    store = Store(url)
    [run] = [r for r in store.list_runs() if r.kind == "score"]
    after = run.n_items - 2_000 if at_end else -1
    best = float("inf")
    shown = 0
    for _ in range(repeat):
        start = time.perf_counter()
        page = store.page_items(run.id, after=after, limit=100, failed=True)
        store.count_items(run.id, failed=True)
        best = min(best, time.perf_counter() - start)
        shown = len(page)
    store.close()
    return best, shown


def run(quick: bool = False) -> list[Row]:
    n = 10_000 if quick else 100_000
    data, strategies = _data.json_flat(n)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="fieldcheck-bench-store-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'store.sqlite3'}"
        stored = run_child(
            "fieldcheck", _batch(data, strategies, Path(tmp) / "a"), env={DATABASE_ENV: url}
        )
        bare = run_child("fieldcheck", [*_batch(data, strategies, Path(tmp) / "b"), "--no-store"])
        rows.append(
            speed_row(
                f"json batch EXACT, {n:,} records, with the store vs --no-store",
                n,
                "records",
                stored,
                bare,
                "--no-store",
                None,
            )
        )
        if stored.ok:
            last, shown_last = _page_seconds(url, at_end=True)
            first, shown_first = _page_seconds(url, at_end=False)
            rows.append(
                Row(
                    f"runs items: a page of 100 failed items + count, {n:,} items, "
                    "last page vs first",
                    f"last page: {last * 1000:.1f} ms ({shown_last} items)",
                    f"first page: {first * 1000:.1f} ms ({shown_first} items)",
                    last / first if first else float("nan"),
                    Target("<=", 2),
                )
            )
    return rows

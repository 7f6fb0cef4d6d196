"""The run page's item table at a million items (issue 28 page 2): a stored ``json batch`` run
of 1M records (100k with ``--quick``), then what ``GET /api/runs/{id}/items`` asks the store
(``Store.page_items`` with the table's columns, and ``count_items``), each on a fresh Store (no
count remembered), best of a few:

1. the first page of 100 in seq order with its count (the page as it opens);
2. a search (``q=osaka``: one item in six) for its first page and count (a full scan);
3. a page sorted by RQS, descending, at offset n/2, with its count;
4. the search's second page on the same Store (its count remembered);
5. the sorted table's next page on the same Store (its order remembered).

Informational rows (the issue sets no number): ours is the query, the baseline the first page.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import _data
from benchmarks._proc import DATABASE_ENV, run_child
from benchmarks._table import Row

LIMIT = 100


def _timed(
    url: str, ask: Callable[[Any, str], Any], *, repeat: int = 3, warm: bool = False
) -> float:
    """Best seconds of ``ask(store, run_id)``, each time on a fresh Store (``warm``: asked once
    before the timing on the same Store)."""
    from fieldcheck.store import Store

    best = float("inf")
    for _ in range(repeat):
        store = Store(url)
        [run] = [r for r in store.list_runs() if r.system == "json"]
        if warm:
            ask(store, run.id)
        start = time.perf_counter()
        ask(store, run.id)
        best = min(best, time.perf_counter() - start)
        store.close()
    return best


def _table(**query: Any) -> Callable[[Any, str], Any]:
    """The store calls of one items request: its page (the json table's values) and count."""
    from fieldcheck import core

    values = [c.sql for c in core.get("json").item_table]
    sort = {c.name: c.order or c.sql for c in core.get("json").item_table}.get(
        query.pop("sort", "")
    )
    offset = query.pop("offset", 0)

    def ask(store: Any, run_id: str) -> int:
        page = store.page_items(
            run_id, limit=LIMIT, offset=offset, order=sort, values=values, **query
        )
        assert len(page) == LIMIT, len(page)
        return int(
            store.count_items(run_id, **{k: v for k, v in query.items() if k != "descending"})
        )

    return ask


def run(quick: bool = False) -> list[Row]:
    n = 100_000 if quick else 1_000_000
    data, strategies = _data.json_flat(n)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="fieldcheck-bench-items-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'store.sqlite3'}"
        args = ["json", "batch", str(data), "--strategies", str(strategies), "--bootstrap", "0"]
        stored = run_child(
            "fieldcheck", [*args, "--out", str(Path(tmp) / "out")], env={DATABASE_ENV: url}
        )
        if not stored.ok:
            return [
                Row(f"run page items, {n:,} items", "-", "-", float("nan"), note=stored.problem())
            ]
        first = _timed(url, _table())
        base = f"first page of {LIMIT} + count: {first * 1000:.0f} ms"
        for name, seconds in (
            (
                "a search (q=osaka, 1 in 6 items): first page + count",
                _timed(url, _table(q="osaka")),
            ),
            (
                f"sorted by RQS descending: the page at offset {n // 2:,} + count",
                _timed(url, _table(sort="rqs", descending=True, offset=n // 2)),
            ),
            (
                "the search's second page (its count remembered)",
                _timed(url, _table(q="osaka", offset=LIMIT), warm=True),
            ),
            (
                f"the sorted table's page at offset {n // 2 + LIMIT:,} (its order remembered)",
                _timed(url, _table(sort="rqs", descending=True, offset=n // 2 + LIMIT), warm=True),
            ),
        ):
            rows.append(
                Row(
                    f"run page items, {n:,} items: {name}",
                    f"{seconds * 1000:.0f} ms",
                    base,
                    seconds / first if first else float("nan"),
                )
            )
    return rows

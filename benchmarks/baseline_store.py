"""Baseline: the run store's inserts alone, what ``json batch`` cannot be faster than while it
records its run (the default). ``main([N, BYTES, TAGGED])`` inserts N items of BYTES bytes of
result text each (a JSON item of the generated records is 1,096-1,252 bytes, 1,187 on average),
a tag row for TAGGED of them (0.3: the records that failed on a field), in chunks of 4,096
through ``Store.insert_scored_rows`` (the writer process's own call), into the store of
``FIELDCHECK_DATABASE_URL``, migrated before the clock by ``_driver``. With a fourth argument
``sqlite3``, the same rows go through Python's ``sqlite3`` module itself (the store's file,
tables, indexes and settings, one transaction per chunk; no SQLAlchemy, no fieldcheck code):
SQLite's own limit for these rows."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

CHUNK = 4_096
Item = tuple[str, int, str | None, bool | None, str | None, int | None, str | bytes]
Tag = tuple[str, int, bool]


def main(argv: list[str]) -> int:
    from fieldcheck.store import Store

    n, size, tagged, *mode = int(argv[0]), int(argv[1]), float(argv[2]), *argv[3:]
    store = Store()
    run = store.create_scored_run(
        system="json", model="", task="score", inputs=[], settings={}, signature="baseline",
        out_dir=None, parent_id=None,
    )  # fmt: skip
    text = '{"x":"' + "a" * max(0, size - 8) + '"}'
    every = round(1 / tagged) if tagged > 0 else 0
    insert = _sqlite3_inserts(store, run.id) if mode == ["sqlite3"] else store.insert_scored_rows
    for start in range(0, n, CHUNK):
        seqs = range(start, min(n, start + CHUNK))
        items: list[Item] = [
            (str(i), i, None, bool(every) and i % every == 0, None, None, text) for i in seqs
        ]
        tags = [("city", i, True) for i in seqs if every and i % every == 0]
        insert(run.id, items, tags)
    stored = store.count_items(run.id)
    store.close()
    return 0 if stored == n else 1


def _sqlite3_inserts(store: Any, run_id: str) -> Callable[[str, list[Item], list[Tag]], None]:
    """``insert_scored_rows`` done by ``sqlite3`` alone on the store's file and settings."""
    path = store.engine.url.database
    connection = sqlite3.connect(path, timeout=30, isolation_level=None)
    for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON"):
        connection.execute(f"PRAGMA {pragma}")
    finished = datetime.now(UTC).isoformat(sep=" ")
    item_sql = (
        "INSERT INTO run_items (run_id, item_key, seq, error_type, failed, model, turn, result, "
        "calls, cached_calls, latency_s, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, 0, 0.0, ?)"
    )
    tag_sql = "INSERT INTO run_item_tags (run_id, name, seq, failed) VALUES (?, ?, ?, ?)"
    count_sql = (
        "UPDATE runs SET n_done = n_done + ?, n_items = n_items + ?, n_errors = n_errors + ? "
        "WHERE id = ?"
    )

    def insert(_: str, items: list[Item], tags: list[Tag]) -> None:
        connection.execute("BEGIN")
        connection.executemany(
            item_sql, [(run_id, k, q, e, f, m, t, r, finished) for k, q, e, f, m, t, r in items]
        )
        connection.executemany(tag_sql, [(run_id, name, q, f) for name, q, f in tags])
        errors = sum(1 for i in items if i[2])
        connection.execute(count_sql, (len(items), len(items), errors, run_id))
        connection.execute("COMMIT")

    return insert

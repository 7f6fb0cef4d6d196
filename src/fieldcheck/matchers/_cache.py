"""A persistent key-value cache in SQLite for embeddings and judge replies, at
``$FIELDCHECK_CACHE_DIR/cache.sqlite3`` or ``~/.cache/fieldcheck/cache.sqlite3``."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path


class DiskCache:
    """Namespaced bytes store keyed by SHA-256 digests (``cache_key``); thread-safe."""

    def __init__(self, path: str | Path | None = None) -> None:
        if path is None:
            root = os.environ.get("FIELDCHECK_CACHE_DIR")
            path = (Path(root) if root else Path.home() / ".cache" / "fieldcheck") / "cache.sqlite3"
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS entries "
                "(namespace TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL, "
                "PRIMARY KEY (namespace, key))"
            )
            self._conn.commit()

    def get_many(self, namespace: str, keys: Sequence[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        unique = list(dict.fromkeys(keys))
        with self._lock:
            for start in range(0, len(unique), 500):
                chunk = unique[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(
                    f"SELECT key, value FROM entries WHERE namespace = ? AND key IN ({marks})",
                    [namespace, *chunk],
                )
                found.update((k, bytes(v)) for k, v in rows)
        return found

    def put_many(self, namespace: str, items: Iterable[tuple[str, bytes]]) -> None:
        rows = [(namespace, k, v) for k, v in items]
        if not rows:
            return
        with self._lock:
            self._conn.executemany(
                "INSERT OR REPLACE INTO entries (namespace, key, value) VALUES (?, ?, ?)", rows
            )
            self._conn.commit()

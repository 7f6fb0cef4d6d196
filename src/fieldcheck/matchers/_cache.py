"""A persistent key-value cache in SQLite for embeddings and judge replies.

Default location: ``$FIELDCHECK_CACHE_DIR/cache.sqlite3`` or ``~/.cache/fieldcheck/cache.sqlite3``.
Keys are SHA-256 digests of their parts, so values never leak into file names.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path


def default_cache_path() -> Path:
    root = os.environ.get("FIELDCHECK_CACHE_DIR")
    base = Path(root) if root else Path.home() / ".cache" / "fieldcheck"
    return base / "cache.sqlite3"


class DiskCache:
    """Namespaced bytes store; safe to share between threads of one process."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
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

    def put_many(
        self, namespace: str, items: Mapping[str, bytes] | Iterable[tuple[str, bytes]]
    ) -> None:
        pairs = list(items.items()) if isinstance(items, Mapping) else list(items)
        if not pairs:
            return
        with self._lock:
            self._conn.executemany(
                "INSERT OR REPLACE INTO entries (namespace, key, value) VALUES (?, ?, ?)",
                [(namespace, k, v) for k, v in pairs],
            )
            self._conn.commit()

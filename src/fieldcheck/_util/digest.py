"""Stable digests of values, for cache keys (values never leak into keys or file names), and of
files."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson


def cache_key(*parts: object) -> str:
    """A stable digest of ``parts`` (JSON-encoded, so ``("a", "b")`` and ``("ab",)`` differ)."""
    return hashlib.sha256(orjson.dumps(list(parts), option=orjson.OPT_SORT_KEYS)).hexdigest()


def sha256_file(path: str | Path) -> str:
    """The sha256 of a file's bytes (an input's, as run.json and the store record it)."""
    with Path(path).open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()

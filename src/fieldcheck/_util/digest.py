"""Stable digests of values, for cache keys (values never leak into keys or file names)."""

from __future__ import annotations

import hashlib

import orjson


def cache_key(*parts: object) -> str:
    """A stable digest of ``parts`` (JSON-encoded, so ``("a", "b")`` and ``("ab",)`` differ)."""
    return hashlib.sha256(orjson.dumps(list(parts), option=orjson.OPT_SORT_KEYS)).hexdigest()

"""Keep file access inside a configured data root (uploaded names are hostile)."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_filename(name: str, *, max_len: int = 120) -> str:
    """A file-safe version of an id: only ``[A-Za-z0-9._-]``, no leading dot, bounded length."""
    cleaned = _UNSAFE.sub("_", name).strip("._") or "unnamed"
    return cleaned[:max_len]


def unique_filenames(names: Iterable[str]) -> dict[str, str]:
    """One file-safe name per name, distinct on a case-insensitive file system (a clash gets
    ``-2``, ``-3``, ...): the one rule for model folders and files."""
    out: dict[str, str] = {}
    used: set[str] = set()
    tried: dict[str, int] = {}  # base -> last suffix tried, so many clashes stay linear
    for name in names:
        if name in out:
            continue
        base = safe_filename(name)
        stem, n = base, tried.get(base.lower(), 1)
        if n > 1 or stem.lower() in used:
            while (stem := f"{base}-{n + 1}").lower() in used:
                n += 1
            n += 1
        tried[base.lower()] = n
        used.add(stem.lower())
        out[name] = stem
    return out


def file_bytes(paths: Iterable[str | Path]) -> int:
    """The files' bytes in all (0 for one that is not a regular file, a pipe, or that cannot be
    read: it is reported when it is read): what sizes a run's pool or buckets."""
    total = 0
    for path in paths:
        with suppress(OSError):
            st = os.stat(path)
            total += st.st_size if stat.S_ISREG(st.st_mode) else 0
    return total

"""Keep file access inside a configured data root (uploaded names are hostile)."""

from __future__ import annotations

import re
from pathlib import Path

from fieldcheck._util.errors import InputError

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def resolve_inside(root: str | Path, relative: str | Path) -> Path:
    """Resolve ``relative`` under ``root``; refuse anything that escapes it (``..``, absolute, links)."""
    base = Path(root).resolve()
    target = (base / relative).resolve()
    if target != base and base not in target.parents:
        raise InputError("path escapes the data root", file=str(relative), value=str(base))
    return target


def safe_filename(name: str, *, max_len: int = 120) -> str:
    """A file-safe version of an id: only ``[A-Za-z0-9._-]``, no leading dot, bounded length."""
    cleaned = _UNSAFE.sub("_", name).strip("._") or "unnamed"
    return cleaned[:max_len]

"""Small iteration helpers shared by the systems and the store."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def chunked(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (the last one shorter), as ``itertools.batched`` of
    Python 3.12 but as lists: what a chunk-by-chunk writer or scorer takes."""
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk

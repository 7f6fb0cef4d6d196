"""Fixtures of the JSON-evaluation tests: the spec's walkthrough and a deterministic matcher."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from fieldcheck.jsoneval import BatchRecord, EvalConfig, StreamedBatch, stream_batch_outputs
from fieldcheck.jsoneval._stream import record_items
from fieldcheck.matchers import Similarity, fuzzy_similarity
from walkthrough import WALK_AIO, WALK_GT, WALK_STRATEGIES


class TableMatcher:
    """A Matcher with scripted similarities (else rapidfuzz's), recording every pair it is sent."""

    def __init__(self, name: str, table: dict[tuple[str, str], float] | None = None) -> None:
        self.name = name
        self.table = table or {}
        self.calls: list[list[tuple[str, str]]] = []

    def similarities(
        self, predictions: Sequence[str], references: Sequence[str]
    ) -> list[Similarity]:
        pairs = list(zip(predictions, references, strict=True))
        self.calls.append(pairs)
        return [Similarity(self.table.get(p, fuzzy_similarity(*p))) for p in pairs]

    def signature(self) -> dict[str, Any]:
        return {"matcher": self.name}

    @property
    def pairs(self) -> list[tuple[str, str]]:
        return [p for call in self.calls for p in call]


def write_outputs(
    out: Path,
    records: Iterable[BatchRecord],
    config: EvalConfig | None = None,
    **options: Any,
) -> StreamedBatch:
    """``json batch``'s files of in-memory ``records`` (one chunk) through the streamed writer,
    as ``json batch`` writes them; ``options``: ``stream_batch_outputs``'s."""
    chunk = list(record_items(records))
    return stream_batch_outputs(out, [chunk], config or EvalConfig(), **options)


@pytest.fixture
def walkthrough() -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """(AIO, GT, strategies) of the spec's walkthrough."""
    return dict(WALK_AIO), dict(WALK_GT), dict(WALK_STRATEGIES)


@pytest.fixture
def table_matchers() -> dict[str, TableMatcher]:
    """FUZZY and SEMANTIC matchers answering the walkthrough's 0.92 (name) and 0.88 (bio)."""
    return {
        "FUZZY": TableMatcher("table-fuzzy", {(WALK_AIO["name"], WALK_GT["name"]): 0.92}),
        "SEMANTIC": TableMatcher("table-semantic", {(WALK_AIO["bio"], WALK_GT["bio"]): 0.88}),
    }

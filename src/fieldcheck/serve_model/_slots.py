"""Synthetic slots responder (placeholder until the slots task runner lands)."""

from __future__ import annotations

from pathlib import Path

from fieldcheck.serve_model._base import Responder

FACTORIES: list[object] = []


def factories() -> list[object]:
    return FACTORIES


def build(responses_dir: Path) -> list[Responder]:
    return []

"""A run's ``model``: the names of the models it scores joined by ``", "`` in the order they were
given (``--model careful=... --model eager=... --model fast=...``: ``careful, eager, fast``).
One rule for the commands that name a run, the runs list's ``model=`` filter and the store's
migrations (docs/runs.md "The runs list")."""

from __future__ import annotations

from collections.abc import Iterable

SEPARATOR = ", "


def models_label(names: Iterable[str]) -> str:
    """The ``model`` of a run of ``names`` (each once, first place kept)."""
    return SEPARATOR.join(dict.fromkeys(names))


def label_models(label: str) -> list[str]:
    """The model names of a run's ``model`` (``models_label``'s inverse)."""
    return label.split(SEPARATOR)

"""What a synthetic task responder is: built once from the responses folder, then answers one
chat request deterministically from the request and a seeded random generator."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

Message = dict[str, str]

SYNTHETIC_MODELS = ("synthetic-careful", "synthetic-eager", "synthetic-fast")


class Responder(Protocol):
    """Answers requests of one task (found by its prompt id in the system message)."""

    prompt_id: str

    @property
    def missing(self) -> str | None:
        """Its task and data file when the responses folder gave it no data (every request then
        gets a naive reply): serve-model names them at startup."""
        ...

    def respond(self, messages: list[Message], model: str, rng: random.Random) -> str:
        """The reply text for ``messages`` as synthetic model ``model`` would give it."""
        ...


def digest_seed(data: bytes) -> int:
    """A random generator's seed from the sha256 of ``data``: the same request, the same reply."""
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big")


def last_user_text(messages: list[Message]) -> str:
    users = [m.get("content") or "" for m in messages if m.get("role") == "user"]
    return users[-1] if users else ""


@dataclass
class LookupResponder:
    """Answers the item whose ``digest`` is in ``table`` (its text ``find`` takes from the last
    user message) with ``answer`` and the model's profile (else ``synthetic-careful``'s); an
    unknown item gets ``{}``."""

    prompt_id: str
    table: Mapping[str, Any]
    find: Callable[[str], str | None]
    digest: Callable[[str], str]
    answer: Callable[[Any, Any, random.Random], str]
    profiles: Mapping[str, Any]
    data: str  # its task and data file (``Responder.missing``)

    @property
    def missing(self) -> str | None:
        return None if self.table else self.data

    def respond(self, messages: list[Message], model: str, rng: random.Random) -> str:
        text = self.find(last_user_text(messages))
        gold = self.table.get(self.digest(text)) if text is not None else None
        if gold is None:
            return "{}"
        return self.answer(gold, self.profiles.get(model, self.profiles[SYNTHETIC_MODELS[0]]), rng)

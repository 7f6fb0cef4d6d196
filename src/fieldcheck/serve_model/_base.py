"""What a synthetic task responder is: built once from the responses folder, then answers one
chat request deterministically from the request and a seeded random generator."""

from __future__ import annotations

import random
from typing import Protocol

Message = dict[str, str]

SYNTHETIC_MODELS = ("synthetic-careful", "synthetic-eager", "synthetic-fast")


class Responder(Protocol):
    """Answers requests of one task (found by its prompt id in the system message)."""

    prompt_id: str

    def respond(self, messages: list[Message], model: str, rng: random.Random) -> str:
        """The reply text for ``messages`` as synthetic model ``model`` would give it."""
        ...


def system_text(messages: list[Message]) -> str:
    return "\n".join(m.get("content") or "" for m in messages if m.get("role") == "system")


def last_user_text(messages: list[Message]) -> str:
    users = [m.get("content") or "" for m in messages if m.get("role") == "user"]
    return users[-1] if users else ""

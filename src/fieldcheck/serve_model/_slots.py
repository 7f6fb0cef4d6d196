"""Synthetic slot-memory responder (``slot-memory-v1``): the session's gold slots with each model's
seeded errors (``PROFILES``: docs/slots.md "Synthetic models"), drawn in a fixed order."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from fieldcheck._util.errors import InputError
from fieldcheck.serve_model._base import LookupResponder, Responder
from fieldcheck.slots import (
    PROMPT_ID,
    Memory,
    load_conversations,
    load_slots,
    render_transcript,
    transcript_digest,
)

GOLD_FILE = Path("slots") / "gold.synthetic.jsonl"
CONVERSATIONS_FILE = Path("slots") / "conversations.synthetic.jsonl"


@dataclass(frozen=True)
class Profile:
    """Error rates of one synthetic model (see the module docstring's table)."""

    miss: float = 0.0
    paraphrase: float = 0.0
    extra_value: float = 0.0
    extra_slot_draws: tuple[float, ...] = ()
    invalid_json: float = 0.0


PROFILES: dict[str, Profile] = {
    "synthetic-careful": Profile(miss=0.03, extra_slot_draws=(0.05,)),
    "synthetic-eager": Profile(miss=0.05, extra_value=0.15, extra_slot_draws=(0.5, 0.5)),
    "synthetic-fast": Profile(
        miss=0.20, paraphrase=0.25, extra_slot_draws=(0.10,), invalid_json=0.08
    ),
}

# Invented slots: fields no gold slot of the example uses, so they are always extra slots.
HALLUCINATIONS: tuple[tuple[str, str, str], ...] = (
    ("basic_info", "pets", "a cat"),
    ("basic_info", "languages", "Spanish"),
    ("basic_info", "hometown", "Portland"),
    ("interests", "travel", "Japan"),
    ("interests", "movies", "documentaries"),
    ("interests", "games", "board games"),
    ("mental_state", "energy", "low"),
    ("mental_state", "motivation", "high"),
)
EXTRA_VALUES = ("cooking", "running", "podcasts", "photography")


def session_block(text: str) -> str | None:
    """The transcript of a ``slot-memory-v1`` user message (after the first ``<session>`` line,
    up to the last ``</session>``); the memory before it cannot hold ``<`` (escaped)."""
    start = text.find("<session>\n")
    end = text.rfind("\n</session>")
    if start < 0 or end < start + len("<session>"):
        return None
    return text[start + len("<session>\n") : end]


def paraphrase(value: str, rng: random.Random) -> str:
    """A looser wording of ``value``: words added or the first word only."""
    words = value.split()
    choices = [f"about {value}", f"{value} I think", f"mostly {value}"]
    if len(words) > 1:
        choices.append(words[0])
    return rng.choice(choices)


def answer(gold: Memory, profile: Profile, rng: random.Random) -> str:
    """The reply of a model with ``profile`` for a session whose gold update is ``gold``."""
    update: Memory = {}
    for topic, fields in gold.items():
        for name, values in fields.items():
            if rng.random() < profile.miss:
                continue
            out = list(values)
            if rng.random() < profile.paraphrase:
                out = [paraphrase(v, rng) for v in out]
            if rng.random() < profile.extra_value:
                out.append(rng.choice(EXTRA_VALUES))
            update.setdefault(topic, {})[name] = out
    for chance in profile.extra_slot_draws:
        if rng.random() < chance:
            topic, name, value = rng.choice(HALLUCINATIONS)
            update.setdefault(topic, {})[name] = [value]
    text = json.dumps(update, ensure_ascii=False)
    if rng.random() < profile.invalid_json:
        return text[: len(text) // 2]
    return text


def index(responses_dir: Path) -> dict[str, Memory]:
    """Transcript digest -> gold slots (with values) of that session; empty if files are missing."""
    try:
        conversations = load_conversations(responses_dir / CONVERSATIONS_FILE)
        gold = load_slots(responses_dir / GOLD_FILE)
    except InputError:
        return {}
    out: dict[str, Memory] = {}
    for conv in conversations:
        update: Memory = {}
        for (topic, name), values in gold.sessions.get(conv.key, {}).items():
            kept = [v for v in values if v.strip()]
            if kept:
                update.setdefault(topic, {})[name] = kept
        out[transcript_digest(render_transcript(conv.turns))] = update
    return out


def build(responses_dir: Path) -> list[Responder]:
    """The slot-memory responder over ``responses_dir`` (default: the repository's examples/)."""
    table = index(responses_dir)
    data = f"slot memory ({CONVERSATIONS_FILE}, {GOLD_FILE})"
    return [
        LookupResponder(PROMPT_ID, table, session_block, transcript_digest, answer, PROFILES, data)
    ]

"""The synthetic slot-memory responder of `fieldcheck serve-model`: gold answers, documented
errors, determinism, unknown sessions and models."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from fieldcheck.serve_model import LookupResponder
from fieldcheck.serve_model._slots import (
    HALLUCINATIONS,
    PROFILES,
    Profile,
    answer,
    build,
    session_block,
)
from fieldcheck.slots import Conversation, Memory, ReplyError, build_messages, parse_reply
from fieldcheck.slots._extract import load_conversations

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GOLD_U1_S1: Memory = {
    "basic_info": {"name": ["Alice Chen"], "age": ["29"], "location": ["Seattle"]},
    "interests": {"hobbies": ["hiking", "reading"]},
    "mental_state": {"mood": ["stressed"]},
}


@pytest.fixture(scope="module")
def responder() -> LookupResponder:
    (r,) = build(EXAMPLES)
    assert isinstance(r, LookupResponder) and r.prompt_id == "slot-memory-v1"
    return r


@pytest.fixture(scope="module")
def conversations() -> list[Conversation]:
    return load_conversations(EXAMPLES / "slots" / "conversations.synthetic.jsonl")


def test_every_example_session_is_indexed_by_its_transcript(
    responder: LookupResponder, conversations: list[Conversation]
) -> None:
    assert len(responder.table) == 15
    assert sum(len(f) for u in responder.table.values() for f in u.values()) == 69
    messages = build_messages(
        {"basic_info": {"name": ["x </session> <session>\n"]}}, conversations[0]
    )
    block = session_block(messages[1]["content"])
    assert block is not None and block.startswith("user: Hi! My name is Alice Chen.\n")


def test_a_model_without_errors_answers_the_gold_exactly() -> None:
    assert json.loads(answer(GOLD_U1_S1, Profile(), random.Random(0))) == GOLD_U1_S1


def test_careful_returns_gold_values_and_rarely_errs(
    responder: LookupResponder, conversations: list[Conversation]
) -> None:
    """Over 15 sessions x 40 seeds: every gold slot careful gives has exactly the gold values;
    its misses and extra slots are few (rates 0.03 and 0.05 per session)."""
    gold_slots = missed = extras = 0
    for conv in conversations:
        messages = build_messages({}, conv)
        gold = responder.table[next(iter(k for k in responder.table if _is(k, messages)))]
        for seed in range(40):
            reply = parse_reply(
                responder.respond(messages, "synthetic-careful", random.Random(seed))
            )
            for topic, fields in gold.items():
                for name, values in fields.items():
                    gold_slots += 1
                    if name in reply.get(topic, {}):
                        assert reply[topic][name] == values
                    else:
                        missed += 1
            for topic, fields in reply.items():
                for name, values in fields.items():
                    if name not in gold.get(topic, {}):
                        extras += 1
                        assert (topic, name, values[0]) in HALLUCINATIONS
    assert gold_slots == 69 * 40
    assert (missed, extras) == (93, 30)  # 3.4% and 5.0%


def _is(digest: str, messages: list[dict[str, str]]) -> bool:
    from fieldcheck.slots._extract import transcript_digest

    block = session_block(messages[1]["content"])
    return block is not None and transcript_digest(block) == digest


def test_replies_are_deterministic_per_model_and_rng(
    responder: LookupResponder, conversations: list[Conversation]
) -> None:
    messages = build_messages({}, conversations[4])
    for model in ("synthetic-careful", "synthetic-eager", "synthetic-fast", "other"):
        first = responder.respond(messages, model, random.Random(7))
        assert responder.respond(messages, model, random.Random(7)) == first
    # an unknown model answers as careful
    assert responder.respond(messages, "gpt-x", random.Random(3)) == responder.respond(
        messages, "synthetic-careful", random.Random(3)
    )


def test_fast_and_eager_show_their_documented_errors(
    responder: LookupResponder, conversations: list[Conversation]
) -> None:
    messages = build_messages({}, conversations[0])  # u1 session 1: 5 gold slots
    invalid = paraphrased = 0
    for seed in range(400):
        text = responder.respond(messages, "synthetic-fast", random.Random(seed))
        try:
            reply = parse_reply(text)
        except ReplyError:
            invalid += 1
            continue
        paraphrased += sum(
            1
            for topic, fields in reply.items()
            for name, values in fields.items()
            if name in GOLD_U1_S1.get(topic, {}) and values != GOLD_U1_S1[topic][name]
        )
    assert (invalid, paraphrased) == (28, 377)  # 7% invalid; ~1 in 4 kept slots reworded
    eager_extra = 0
    for seed in range(400):
        reply = parse_reply(responder.respond(messages, "synthetic-eager", random.Random(seed)))
        eager_extra += sum(1 for t, f in reply.items() for n in f if n not in GOLD_U1_S1.get(t, {}))
    assert eager_extra == 385  # ~1 hallucinated slot a session
    assert PROFILES["synthetic-fast"].invalid_json == 0.08


def test_unknown_sessions_and_missing_files_leave_the_memory_unchanged(
    tmp_path: Path, responder: LookupResponder
) -> None:
    conv = Conversation.model_validate(
        {"user": "x", "session": 1, "turns": [{"role": "user", "content": "unseen"}]}
    )
    messages = build_messages({"basic_info": {"name": ["X"]}}, conv)
    assert responder.respond(messages, "synthetic-eager", random.Random(0)) == "{}"
    assert (
        responder.respond([{"role": "user", "content": "no block"}], "m", random.Random(0)) == "{}"
    )
    (empty,) = build(tmp_path)
    assert empty.respond(messages, "synthetic-careful", random.Random(0)) == "{}"

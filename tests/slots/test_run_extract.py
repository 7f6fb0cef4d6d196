"""The slot-memory task's pieces: reply validation, merging, the prompt, the conversations loader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fieldcheck._util.errors import InputError
from fieldcheck.slots import (
    PROMPT_ID,
    SYSTEM_PROMPT,
    Conversation,
    ReplyError,
    build_messages,
    load_conversations,
    merge,
    parse_reply,
)
from fieldcheck.slots._extract import MAX_MEMORY_SLOTS, memory_json


def test_reply_is_trimmed_deduplicated_and_fenced_json_is_accepted() -> None:
    text = '```json\n{" basic_info ": {"name": [" Ann ", "Ann", "", "  "], "age": []}}\n```'
    assert parse_reply(text) == {"basic_info": {"name": ["Ann"], "age": []}}
    assert parse_reply("{}") == {}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (None, "the reply is empty"),
        ('{"a": {"b": ["x"]}', "the reply is not JSON"),
        ("Sure! Here it is: {}", "the reply is not JSON"),
        ('["x"]', "the reply is not a JSON object (got list)"),
        ('{"basic_info": {"age": 30}}', "basic_info.age: Input should be a valid list"),
        ('{"basic_info": {"age": [30]}}', "basic_info.age.0: Input should be a valid string"),
        ('{"basic_info": ["x"]}', "basic_info: Input should be a valid dictionary"),
        ('{"basic_info": {"": ["x"]}}', "String should have at least 1 character"),
        ('{"basic_info": {"  ": ["x"]}}', "basic_info: blank field name '  '"),
        ('{"a": {"x": []}, " a": {}}', "topic 'a' given twice"),
        (json.dumps({"t": {"f": ["v" * 501]}}), "String should have at most 500 characters"),
        (json.dumps({"t": {"f": ["v"] * 21}}), "List should have at most 20 items"),
        ("[" * 5000 + "]" * 5000, "the reply is not JSON"),
        (" " * 100_001, "the reply has 100001 characters (at most 100000)"),
    ],
)
def test_hostile_or_malformed_replies_are_reply_errors(text: str | None, reason: str) -> None:
    with pytest.raises(ReplyError) as info:
        parse_reply(text)
    assert reason in str(info.value)
    assert len(str(info.value)) < 300 and "\n" not in str(info.value)


def test_a_very_long_key_is_cut_in_the_error_message() -> None:
    with pytest.raises(ReplyError) as info:
        parse_reply(json.dumps({"t": {"k" * 5000: ["x"]}}))
    assert str(info.value) == (
        "t." + "k" * 37 + "....[key]: String should have at most 100 characters"
    )


def test_merge_replaces_slots_removes_empty_ones_and_keeps_the_rest() -> None:
    memory = {"basic_info": {"name": ["Ann"], "age": ["30"]}, "interests": {"music": ["jazz"]}}
    update = {"basic_info": {"age": ["31"]}, "interests": {"music": []}, "mental_state": {}}
    assert merge(memory, update) == {"basic_info": {"name": ["Ann"], "age": ["31"]}}
    assert memory["interests"] == {"music": ["jazz"]}  # the old memory is not changed


def test_a_memory_that_would_grow_past_the_limit_is_a_reply_error() -> None:
    memory = {"t": {f"f{i}": ["x"] for i in range(MAX_MEMORY_SLOTS)}}
    with pytest.raises(ReplyError, match=f"501 slots \\(at most {MAX_MEMORY_SLOTS}\\)"):
        merge(memory, {"u": {"g": ["y"]}})


def test_prompt_carries_its_id_the_memory_and_the_session() -> None:
    conv = Conversation.model_validate(
        {
            "user": "u",
            "session": 2,
            "turns": [
                {"role": "user", "content": "I moved to Oslo."},
                {"role": "assistant", "content": "Nice!"},
            ],
        }
    )
    system, user = build_messages({"basic_info": {"name": ["A<session>"]}}, conv)
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    assert f"(prompt {PROMPT_ID})" in SYSTEM_PROMPT and PROMPT_ID == "slot-memory-v1"
    assert user["content"] == (
        "Current memory (JSON):\n<memory>\n"
        '{"basic_info": {"name": ["A\\u003csession\\u003e"]}}\n</memory>\n\n'
        "Session 2 transcript:\n<session>\nuser: I moved to Oslo.\nassistant: Nice!\n</session>"
    )
    assert json.loads(memory_json({"a": {"b": ["<x>"]}})) == {"a": {"b": ["<x>"]}}


def test_conversations_load_in_file_order(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text(
        '{"user": "b", "session": 1, "turns": [], "comment": "ignored"}\n\n'
        '{"user": "a", "session": 2, "turns": [{"role": "user", "content": "hi"}]}\n',
        encoding="utf-8",
    )
    convs = load_conversations(path)
    assert [c.key for c in convs] == [("b", 1), ("a", 2)]
    assert convs[1].turns[0].content == "hi"


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"user": "a", "session": "1", "turns": []}'], ":1: field 'session': must be a valid integer"),
        (['{"user": "a", "session": 1, "turns": [{"role": "bot", "content": "x"}]}'], ":1: field 'turns.0.role'"),
        (['{"user": "a", "session": 1, "turns": []}', '{"user": "a", "session": 1, "turns": []}'],
         ":2: field 'session': user 'a' session 1 repeats line 1 (got 1)"),
        (['{"user": "a"'], ":1: "),
        (["[1]"], ":1: expected a JSON object"),
        ([], ": no conversation in the file"),
    ],
)  # fmt: skip
def test_bad_conversation_files_are_one_located_error(
    tmp_path: Path, lines: list[str], message: str
) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_conversations(path)
    assert str(info.value).startswith(str(path)) and message in str(info.value)


def test_docs_show_the_prompt_in_full() -> None:
    from fieldcheck.slots._extract import USER_TEMPLATE

    docs = (Path(__file__).resolve().parents[2] / "docs" / "slots.md").read_text(encoding="utf-8")
    assert f"```text\n{SYSTEM_PROMPT}\n```" in docs
    assert f"```text\n{USER_TEMPLATE}\n```" in docs

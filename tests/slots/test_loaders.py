"""Loading: errors name file, line, field and value; duplicates are errors, never overwrites."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from slots_helpers import slot

from fieldcheck.slots import load_judge_scores, load_latencies, load_slots

Jsonl = Callable[[str, list[Any]], Path]


def test_slot_lines_load_by_session(jsonl: Jsonl) -> None:
    path = jsonl(
        "gold.jsonl",
        [
            slot("u1", 3, "basic_info", "name", "Alice Chen"),
            slot("u1", 3, "interests", "hobbies", "hiking", "reading"),
            "",
            {**slot("u2", 1, "basic_info", "age", "41"), "comment": "synthetic"},
        ],
    )
    f = load_slots(path)
    assert not f.errors
    assert f.sessions[("u1", 3)] == {
        ("basic_info", "name"): ["Alice Chen"],
        ("interests", "hobbies"): ["hiking", "reading"],
    }
    assert f.lines[(("u2", 1), ("basic_info", "age"))] == 4
    assert f.slot_count == 3


@pytest.mark.parametrize(
    ("line", "field", "fragment"),
    [
        (
            '{"user": "u1", "session": "three", "topic": "t", "field": "f", "values": []}',
            "session",
            "'three'",
        ),
        (
            '{"user": "u1", "session": 1, "topic": "t", "field": "f", "values": "Alice"}',
            "values",
            "'Alice'",
        ),
        (
            '{"user": "u1", "session": 1, "topic": "t", "field": "f", "values": [3]}',
            "values.0",
            "3",
        ),
        ('{"user": "u1", "session": 1, "topic": "", "field": "f", "values": []}', "topic", "''"),
        ('{"user": "u1", "session": 1, "topic": "t", "values": []}', "field", None),
        (
            '{"user": "u1", "session": true, "topic": "t", "field": "f", "values": []}',
            "session",
            "True",
        ),
    ],
)
def test_bad_line_names_file_line_field_and_value(
    jsonl: Jsonl, line: str, field: str, fragment: str | None
) -> None:
    path = jsonl("pred.jsonl", [slot("u1", 1, "t", "ok", "x"), line])
    f = load_slots(path)
    (err,) = f.errors
    assert err.line == 2 and err.field == field and err.file == str(path)
    message = str(err)
    assert message.startswith(f"{path}:2: field {field!r}: ")
    if fragment is not None:
        assert f"(got {fragment})" in message
    assert "\n" not in message
    assert f.sessions == {("u1", 1): {("t", "ok"): ["x"]}}  # the good line is kept


def test_invalid_json_and_non_object(jsonl: Jsonl) -> None:
    path = jsonl("g.jsonl", ["{not json", "[1, 2]"])
    errors = load_slots(path).errors
    assert [e.line for e in errors] == [1, 2]
    assert "invalid JSON" in str(errors[0]) and "expected a JSON object" in str(errors[1])


def test_duplicate_slot_line_is_an_error_and_first_wins(jsonl: Jsonl) -> None:
    path = jsonl(
        "pred.jsonl",
        [
            slot("u1", 1, "t", "name", "Alice"),
            slot("u1", 2, "t", "name", "Bob"),
            slot("u1", 1, "t", "name", "Eve"),
        ],
    )
    f = load_slots(path)
    (err,) = f.errors
    assert err.line == 3 and "duplicate slot" in str(err) and "first at line 1" in str(err)
    assert f.sessions[("u1", 1)][("t", "name")] == ["Alice"]


def test_value_empty_after_canonicalising_warns(
    jsonl: Jsonl, caplog: pytest.LogCaptureFixture
) -> None:
    path = jsonl("g.jsonl", [slot("u1", 1, "t", "name", "李明")])
    with caplog.at_level(logging.WARNING, logger="fieldcheck"):
        load_slots(path)
    assert "empty once canonicalised" in caplog.text and f"{path}:1" in caplog.text


def test_latency_and_judge_files(jsonl: Jsonl) -> None:
    lat = jsonl(
        "lat.jsonl",
        [
            {"user": "u1", "session": 1, "seconds": 12.5},
            {"user": "u1", "session": 2, "seconds": -1},
            {"user": "u1", "session": 1, "seconds": 3},
            {"user": "u1", "session": 3, "seconds": "NaN"},
        ],
    )
    lf = load_latencies(lat)
    assert lf.seconds == {("u1", 1): 12.5}
    assert [(e.line, e.field) for e in lf.errors] == [
        (2, "seconds"),
        (3, "session"),
        (4, "seconds"),
    ]
    judge = jsonl(
        "judge.jsonl",
        [
            {"user": "u1", "session": 1, "topic": "t", "field": "f", "score": 0.25},
            {"user": "u1", "session": 1, "topic": "t", "field": "g", "score": 1.5},
        ],
    )
    jf = load_judge_scores(judge)
    assert jf.scores == {("u1", 1): {("t", "f"): 0.25}}
    assert (
        jf.errors[0].line == 2
        and jf.errors[0].field == "score"
        and "(got 1.5)" in str(jf.errors[0])
    )


def test_blank_value_warns(jsonl: Jsonl, caplog: pytest.LogCaptureFixture) -> None:
    path = jsonl("p.jsonl", [slot("u1", 1, "t", "name", "Ann", "  ")])
    with caplog.at_level(logging.WARNING, logger="fieldcheck"):
        f = load_slots(path)
    assert f"{path}:1: field 'values': blank value '  ' counts as no value" in caplog.text
    assert f.sessions[("u1", 1)][("t", "name")] == ["Ann", "  "]  # kept as read; scoring skips it

"""Loading: errors name file, line, field and value; duplicates are errors, never overwrites."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from slots_helpers import slot

from fieldcheck._util.errors import InputError, input_error_of
from fieldcheck._util.jsonio import iter_jsonl
from fieldcheck.slots import load_judge_scores, load_latencies, load_slots
from fieldcheck.slots._loaders import read_slot_rows, slot_row
from fieldcheck.slots._records import SlotRecord

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
    assert sum(map(len, f.sessions.values())) == 3


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


def _reference_rows(path: Path) -> tuple[list[tuple[int, Any]], list[str]]:
    """The slot lines of ``path`` read as before the fast path: ``iter_jsonl``, then
    ``slot_row`` or ``SlotRecord``; the errors as their one-line text."""
    rows, errors = [], []
    for line, raw in iter_jsonl(path):
        if isinstance(raw, InputError):
            errors.append(raw.one_line())
            continue
        row = slot_row(raw)
        if row is None:
            if not isinstance(raw, dict):
                errors.append(
                    InputError("expected a JSON object", file=path, line=line, value=raw).one_line()
                )
                continue
            try:
                rec = SlotRecord.model_validate(raw)
            except ValidationError as exc:
                errors.append(input_error_of(exc, file=path, line=line).one_line())
                continue
            row = (rec.user, rec.session, rec.topic, rec.field, list(rec.values))
        rows.append((line, row))
    return rows, errors


def test_fast_reader_gives_the_rows_and_errors_of_the_line_parser(tmp_path: Path) -> None:
    good = {"user": "u", "session": 1, "topic": "t", "field": "f", "values": ["a", ""]}
    deep: Any = ["x"]
    for _ in range(250):
        deep = [deep]
    lines = [
        b"\xef\xbb\xbf" + json.dumps(good).encode(),  # a BOM on line 1
        json.dumps({**good, "field": "g"}).encode() + b"\r",  # CRLF
        b"",
        b"   ",
        b"not json",
        b'{"user": "u", "session": NaN}',
        b"[1, 2]",
        json.dumps({**good, "session": "1"}).encode(),  # a string session: pydantic refuses
        json.dumps({**good, "session": True}).encode(),
        json.dumps({**good, "values": "a"}).encode(),
        json.dumps({**good, "user": ""}).encode(),
        json.dumps({**good, "field": "h", "note": "extra keys are ignored"}).encode(),
        json.dumps({**good, "field": "deep", "values": deep}).encode(),
        json.dumps({**good, "field": "<img src=x onerror=alert(1)>", "values": []}).encode(),
        '{"user": "ü", "session": 2, "topic": "t", "field": "f", "values": ["café"]}'.encode(),
        b'{"user": "u", "session": 3, "topic": "t", "field": "f", "values": ["\xff"]}',
        json.dumps({**good, "session": 2**70}).encode(),
    ]
    path = tmp_path / "slots.jsonl"
    path.write_bytes(b"\n".join(lines))  # no newline after the last line
    errors: list[InputError] = []
    rows = list(read_slot_rows(path, errors))
    expected_rows, expected_errors = _reference_rows(path)
    assert rows == expected_rows
    assert [e.one_line() for e in errors] == expected_errors
    # valid: the BOM line, the CRLF line, extra keys, values [], non-ASCII, and a session of
    # 2**70 (integers beyond 64 bits are read exactly on both paths, issue 26 item 3)
    assert [line for line, _ in rows] == [1, 2, 12, 14, 15, 17]
    assert 2**70 in rows[-1][1]
    assert [e.line for e in errors] == [5, 6, 7, 8, 9, 10, 11, 13, 16]

"""The extraction task's pieces: prompt, document markers, reply parsing, the documents reader, and
the bundled example (60 synthetic documents rendering their ground truth)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fieldcheck.jsoneval import (
    PROMPT_ID,
    build_messages,
    document_from_prompt,
    load_schema,
    parse_reply,
    read_documents,
)
from fieldcheck.jsoneval._extract import SYSTEM_PROMPT
from fieldcheck.serve_model import EXAMPLES


def test_the_prompt_names_its_version_and_wraps_the_document() -> None:
    system, user = build_messages("Invoice 7", '{"type":"object"}')
    assert f"(prompt {PROMPT_ID})" in system["content"] and PROMPT_ID == "json-extract-v1"
    assert system["content"].endswith('The object must follow this JSON Schema:\n{"type":"object"}')
    assert user == {
        "role": "user",
        "content": "Extract the data from this document.\n<document>\nInvoice 7\n</document>",
    }


@pytest.mark.parametrize(
    "doc",
    ["plain", "", "a\n</document>\nb", "<document>\nx\n</document>", "ünï\ud7ff"],
)
def test_document_round_trips_through_the_prompt(doc: str) -> None:
    assert document_from_prompt(build_messages(doc)[1]["content"]) == doc


def test_document_from_a_foreign_prompt_is_none() -> None:
    assert document_from_prompt("no markers here") is None
    assert document_from_prompt("</document> then <document>\n") is None


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (' {"a": 1}\n', ({"a": 1}, True)),
        ("[1, 2]", ([1, 2], True)),
        ("null", (None, True)),
        ('```json\n{"a": 1}\n```', ('```json\n{"a": 1}\n```', False)),
        ('Here: {"a": 1}', ('Here: {"a": 1}', False)),
        ('{"a": NaN}', ('{"a": NaN}', False)),
        ('{"a": 1', ('{"a": 1', False)),
        ("", ("", False)),
    ],
)
def test_parse_reply_is_strict_json_else_the_raw_text(reply: str, expected: Any) -> None:
    assert parse_reply(reply) == expected


def test_read_documents_reports_each_bad_line_and_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    lines = [
        json.dumps({"id": "a", "document": "A", "ground_truth": {"x": 1}}),
        json.dumps({"id": 7, "document": "B", "ground_truth": {}, "comment": "ignored"}),
        "{broken",
        json.dumps([1]),
        json.dumps({"id": "a", "document": "C", "ground_truth": {}}),
        json.dumps({"id": True, "document": "D", "ground_truth": {}}),
        json.dumps({"id": "e", "document": 5, "ground_truth": {}}),
        json.dumps({"id": "f", "document": "F", "ground_truth": [1]}),
        json.dumps({"id": " ", "document": "G", "ground_truth": {}}),
        "",
        json.dumps({"id": "h", "ground_truth": {}}),
    ]
    path.write_text("\n".join(lines) + "\n")
    records, errors = read_documents(path)
    assert [(r.id, r.line, r.document) for r in records] == [("a", 1, "A"), (7, 2, "B")]
    assert [str(e) for e in errors] == [
        f"{path}:3: invalid JSON: unexpected character, expected a string key at column 2",
        f"{path}:4: a line must be a JSON object with id, document and ground_truth (got [1])",
        f"{path}:5: record a: field 'id': duplicate id (first on line 1)",
        f"{path}:6: field 'id': must be a string or an integer (got True)",
        f"{path}:7: record e: field 'document': must be a string (got 5)",
        f"{path}:8: record f: field 'ground_truth': must be a JSON object (got [1])",
        f"{path}:9: field 'id': must not be empty (got ' ')",
        f"{path}:11: record h: field 'document': missing",
    ]


def test_load_schema_gives_compact_sorted_json(tmp_path: Path) -> None:
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "object", "properties": {}}')
    assert load_schema(schema) == '{"properties":{},"type":"object"}'
    # a bad schema is named a schema, its JSON type in JSON's words (not a Python repr)
    deep = '{"properties": ' + "[" * 300 + "]" * 300 + "}"
    for text, reason in (
        ('"object"', "a JSON Schema must be a JSON object (got a string)"),
        ("null", "a JSON Schema must be a JSON object (got null)"),
        ("[1]", "a JSON Schema must be a JSON object (got an array)"),
        ("2.5", "a JSON Schema must be a JSON object (got a number)"),
        ("false", "a JSON Schema must be a JSON object (got a boolean)"),
        (" \n", "no JSON Schema (the file is empty)"),
        (deep, "the JSON Schema is nested deeper than 200 arrays/objects (under key 'properties')"),
    ):
        schema.write_text(text)
        with pytest.raises(ValueError) as refused:
            load_schema(schema)
        assert str(refused.value) == f"{schema}: {reason}"


def test_a_schema_giving_a_key_twice_is_refused_at_its_line(tmp_path: Path) -> None:
    # {"a": ..., "a": ...} was taken, the last one shown to the model (a new-user trial's
    # finding); the same key in two objects is no repeat, nor a brace or key inside a string
    schema = tmp_path / "s.json"
    schema.write_text(
        '{"type": "object", "title": "{\\"a\\": 1, \\"a\\": 2}",\n'
        ' "items": [{"a": 1}, {"a": 2}],\n'
        ' "properties": {"a": {"type": "string"},\n'
        '                "\\u0061": {"type": "number"}}}'
    )
    with pytest.raises(ValueError) as refused:
        load_schema(schema)
    assert str(refused.value) == f"{schema}:4: the key 'a' is given twice in one object"
    schema.write_text('{"items": [{"a": 1}, {"a": 2}], "title": "{\\"a\\":1,\\"a\\":2}"}')
    assert load_schema(schema) == '{"items":[{"a":1},{"a":2}],"title":"{\\"a\\":1,\\"a\\":2}"}'


def test_a_schema_and_a_strategies_file_are_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each was read a second time to look for a key given twice
    from fieldcheck.jsoneval import load_strategies

    read: list[str] = []
    read_bytes = Path.read_bytes

    def counted(self: Path) -> bytes:
        read.append(self.name)
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", counted)
    (tmp_path / "s.json").write_text('{"type": "object"}')
    (tmp_path / "st.json").write_text('{"name": "FUZZY"}')
    assert load_schema(tmp_path / "s.json") == '{"type":"object"}'
    assert load_strategies(tmp_path / "st.json") == {"name": "FUZZY"}
    assert read == ["s.json", "st.json"]


def test_the_bundled_documents_show_their_ground_truth() -> None:
    records, errors = read_documents(EXAMPLES / "json" / "documents.jsonl")
    assert errors == [] and len(records) == 60
    assert load_schema(EXAMPLES / "json" / "invoice.schema.json").startswith('{"$schema":')
    for record in records:
        gt, doc = record.ground_truth, record.document
        assert "synthetic example document" in doc
        for value in (
            gt["invoice_number"],
            gt["vendor"]["name"],
            gt["vendor"]["email"],
            gt["customer"]["name"],
            gt["payment_terms"],
            *(item["sku"] for item in gt["line_items"]),
            *(item["description"] for item in gt["line_items"]),
        ):
            assert value in doc, (record.id, value)
        assert gt["purchase_order"] is None or gt["purchase_order"] in doc
        assert f"{gt['total']:,.2f}" in doc


def test_system_prompt_text_is_the_documented_one() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "json.md").read_text()
    assert SYSTEM_PROMPT in docs

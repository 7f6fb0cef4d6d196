"""File names that are not UTF-8 (a byte such as 0xff in a Linux file name: a lone surrogate in
Python's str) are shown as U+FFFD in every output file, never a traceback (a tester's finding,
session 7: errors.jsonl, report.md and statistics.json could not be written)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck._util.errors import InputError, shown_path
from fieldcheck._util.jsonio import dumps
from fieldcheck._util.term import safe_text

ROOT = Path(__file__).resolve().parent.parent
ODD = os.fsdecode(b"p\xff.jsonl")


def test_a_name_that_is_not_utf8_is_shown_with_a_replacement_character() -> None:
    assert shown_path(ODD) == "p\ufffd.jsonl"
    assert shown_path("dir/été.jsonl") == "dir/été.jsonl"  # valid UTF-8: unchanged
    assert json.loads(dumps({"file": ODD, ODD: [ODD, 1.5]})) == {
        "file": "p\ufffd.jsonl",
        "p\ufffd.jsonl": ["p\ufffd.jsonl", 1.5],
    }
    assert InputError("bad", file=ODD, line=3).one_line() == "p\ufffd.jsonl:3: bad"
    assert safe_text(ODD) == "p\\udcff.jsonl"  # on a terminal: a visible escape


def test_slots_and_numeric_write_every_file_for_such_a_name(tmp_path: Path) -> None:
    env = {"FIELDCHECK_DATABASE_URL": f"sqlite:///{tmp_path / 's.sqlite3'}"}
    gold = ROOT / "examples" / "slots" / "gold.synthetic.jsonl"
    pred = tmp_path / ODD
    pred.write_bytes(gold.read_bytes() + b"{not json\n")
    result = CliRunner().invoke(
        app, ["slots", "score", "--gold", str(gold), "--pred", f"m={pred}", "--out", str(tmp_path / "s")], env=env
    )  # fmt: skip
    assert result.exit_code == 3, result.output  # 3: scored, but an input line was bad
    errors = [
        json.loads(line) for line in (tmp_path / "s" / "errors.jsonl").read_text().splitlines()
    ]
    assert [e["file"].endswith("p\ufffd.jsonl") for e in errors] == [True]
    assert (tmp_path / "s" / "report.md").is_file()
    data = tmp_path / os.fsdecode(b"d\xff.json")
    shutil.copy(ROOT / "examples" / "numeric" / "data.json", data)
    preds = ROOT / "examples" / "numeric" / "predictions_model_a.jsonl"
    result = CliRunner().invoke(
        app, ["numeric", "score", "--data", str(data), "--predictions", str(preds), "--out", str(tmp_path / "n")], env=env
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    statistics = (tmp_path / "n" / "statistics.json").read_text(encoding="utf-8")
    assert "d\ufffd.json" in statistics and '"complete": true' in statistics
    # the report's signature goes through safe_text, which writes the byte as a visible escape
    assert "data:d\\udcff.json" in (tmp_path / "n" / "report.md").read_text(encoding="utf-8")


def test_a_line_that_is_not_utf8_is_reported_as_such_with_its_column() -> None:
    """orjson says "str is not valid UTF-8: surrogates not allowed" at column 1 for any bad
    byte; the message names the byte and where it is (a tester's finding, session 7)."""
    from fieldcheck._util.jsonio import parse_jsonl_line

    where = Path("f.jsonl")
    bad = parse_jsonl_line('{"a": "éx'.encode() + b'\xffy"}', 2, where)
    assert str(bad) == "f.jsonl:2: invalid JSON: not UTF-8 text (byte 0xff at column 10)"
    assert str(parse_jsonl_line(b"\x80", 1, where)).endswith("(byte 0x80 at column 1)")


def test_a_bad_byte_in_a_json_document_names_its_line_and_column(tmp_path: Path) -> None:
    """A byte that is not UTF-8 on the third line of a JSON document (a --data file): its line
    and its column on that line, in characters (a tester's finding: line 1, and the byte's
    offset in the file as the column)."""
    from fieldcheck._util.jsonio import read_json

    path = tmp_path / "d.json"
    path.write_bytes('{\n  "a": 1,\n  "é": "x'.encode() + b'\xe9y"\n}\n')
    with pytest.raises(InputError) as bad:
        read_json(path)
    assert str(bad.value) == f"{path}:3: invalid JSON: not UTF-8 text (byte 0xe9 at column 10)"

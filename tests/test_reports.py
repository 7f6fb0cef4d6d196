"""CSV safety and shared utilities: formula neutralisation, errors that name their place, paths."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fieldcheck._util.errors import InputError
from fieldcheck._util.jsonio import iter_jsonl, read_json
from fieldcheck._util.paths import safe_filename
from fieldcheck._util.signature import Signature
from fieldcheck._util.term import safe_cell
from fieldcheck.reports import neutralise_cell, write_csv
from fieldcheck.reports._csv import is_plain_number


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("+1+1", "'+1+1"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tcmd", "'\tcmd"),
        ("-3", "-3"),
        ("-inf", "'-inf"),
        ("+nan", "'+nan"),
        ("-Infinity", "'-Infinity"),
        ("-1.5e-3", "-1.5e-3"),
        (" -3", " -3"),
        ("1e5", "1e5"),
        (-3, -3),
        (0.5, 0.5),
        (None, ""),
        ({"b": 1, "a": [1, 2]}, '{"a":[1,2],"b":1}'),
        ("plain text", "plain text"),
    ],
)
def test_neutralise_cell(cell: object, expected: object) -> None:
    assert neutralise_cell(cell) == expected


@pytest.mark.parametrize(
    "cell",
    [
        "-9.7%",  # issue 9: a real answer, not a formula
        "-9.7 %",
        "+12.5%",
        "-$1,234.50",
        "$-1,234",
        "-€3.2 million",
        "-1,234,567",
        "+3.2 billion",
        "-0.5bn",
        "-12K",
        "-.5",
        "-1.5e-3",
    ],
)
def test_plain_numbers_are_data_never_altered(cell: str) -> None:
    assert is_plain_number(cell)
    assert neutralise_cell(cell) == cell


@pytest.mark.parametrize(
    "cell",
    [
        "=1+1",
        "-2+3",
        "@SUM(A1)",
        "+cmd|' /C calc'!A0",
        "-9.7%+1",
        "-1,23",  # not a thousands group
        "-9.7% ",
        "%5",
        "|x",
        "-٣",  # Arabic-Indic digit: not a plain (ASCII) number
        "-5\n=1+1",
        "-1e5+1",
    ],
)
def test_formulas_are_still_neutralised(cell: str) -> None:
    assert not is_plain_number(cell)
    assert neutralise_cell(cell) == "'" + cell


_DANGEROUS = ("=", "+", "-", "@", "|", "%", "\t", "\r", "\n")
_PLAIN_CHARS = set("0123456789,.%$€£¥₹+- eE") | set("thousandmilionbrk" + "THOUSANDMILIONBRK")


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(), st.text(alphabet="=+-@|%\t\r\n0123456789,.$e %kmbn")))
@example("-9.7%")
@example("+cmd|' /C calc'!A0")
def test_no_neutralised_cell_starts_like_a_formula_unless_a_plain_number(text: str) -> None:
    cell, shown = neutralise_cell(text), safe_cell(text)  # terminal controls escaped
    assert cell in (shown, "'" + shown)
    if cell.startswith(_DANGEROUS):
        assert cell == shown and is_plain_number(cell)
        # a plain number carries no formula syntax: no operator but signs, no cell reference
        assert set(cell) <= _PLAIN_CHARS
        assert "|" not in cell and "=" not in cell and "@" not in cell and "\n" not in cell


def test_write_csv_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    n = write_csv(path, [{"a": "=1+1", "b": 2}, {"a": "ok"}], ["a", "b"])
    rows = list(csv.DictReader(path.open()))
    assert n == 2 and rows == [{"a": "'=1+1", "b": "2"}, {"a": "ok", "b": ""}]


def test_csv_cells_never_hold_a_terminal_escape(tmp_path: Path) -> None:
    """A model's key ``=HYPERLINK(...)<ESC>[31m`` reached fields.csv / per_topic.csv with its
    ESC byte raw: ``cat`` ran the escape sequence (a hostile-endpoint trial's finding). Every
    CSV cell escapes the controls as the terminal output does; a JSON cell stays the same JSON;
    tab and line breaks, and every ordinary cell, are written as they were."""
    import json

    path = tmp_path / "x.csv"
    key = '=HYPERLINK("http://e.x","y")\x1b[31m'
    rows = [
        {"a": key, "b": {"k": "\x85\u202e\x1b"}},
        {"a": "tab\there\nline", "b": "café -9.7%"},
    ]
    write_csv(path, rows, ["a", "b"])
    text = path.read_text(encoding="utf-8")
    assert not any(c in text for c in "\x1b\x85\u202e")
    read = list(csv.DictReader(path.open(encoding="utf-8", newline="")))
    assert read[0]["a"] == "'" + key.replace("\x1b", "\\x1b")
    assert json.loads(read[0]["b"]) == {"k": "\x85\u202e\x1b"}
    assert read[1] == {"a": "tab\there\nline", "b": "café -9.7%"}


def test_input_error_is_one_line() -> None:
    err = InputError(
        "must be one of EXACT, FUZZY", file="s.json", line=3, field="name", value="FUZZ\nY"
    )
    assert str(err) == "s.json:3: field 'name': must be one of EXACT, FUZZY (got 'FUZZ\\nY')"
    assert err.to_dict()["line"] == 3


def test_iter_jsonl_reports_bad_lines_and_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"a": 1}\n\n{broken\n{"a": 2}\n')
    got = list(iter_jsonl(path))
    assert [n for n, _ in got] == [1, 3, 4]
    assert isinstance(got[1][1], InputError) and str(got[1][1]).startswith(
        f"{path}:3: invalid JSON"
    )
    assert got[2][1] == {"a": 2}


def test_jsonl_column_points_into_an_unfinished_line(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"id": "é", "output": {"a": 1}\n{"a": 2}\n')
    (_, err), second = list(iter_jsonl(path))
    # the line has 29 characters; the missing "}" is reported just past its end, on line 1
    assert str(err) == f"{path}:1: invalid JSON: unexpected end of data at column 30"
    assert second == (2, {"a": 2})


def test_read_json_names_line(tmp_path: Path) -> None:
    path = tmp_path / "g.json"
    path.write_text('{\n"a": 1,\n}\n')
    with pytest.raises(InputError, match=r"g\.json:2: invalid JSON: trailing comma"):
        read_json(path)


def test_safe_filename() -> None:
    assert safe_filename("Single_JKHY/2009/page_28.pdf-3") == "Single_JKHY_2009_page_28.pdf-3"
    assert safe_filename("../..") == "unnamed"


def test_signature_format_is_stable() -> None:
    sig = Signature(system="json", settings={"matcher": "local", "weights": {"b": 0.2, "a": 0.8}})
    assert sig.format().startswith("json|matcher:local|weights:a=0.8,b=0.2|version:")


def test_jsonl_names_nan_and_accepts_a_bom(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\n{"a": NaN}\n{"a": "NaN is fine in a string"}\n')
    got = list(iter_jsonl(path))
    assert got[0] == (1, {"a": 1})
    assert (
        str(got[1][1])
        == f"{path}:2: invalid JSON: NaN and Infinity are not JSON numbers (write null or a number)"
    )
    assert got[2] == (3, {"a": "NaN is fine in a string"})
    doc = tmp_path / "g.json"
    doc.write_bytes(b'\xef\xbb\xbf{"x": -Infinity}')
    with pytest.raises(InputError, match="NaN and Infinity are not JSON numbers"):
        read_json(doc)


def test_format_pvalue() -> None:
    from fieldcheck.reports import format_pvalue

    assert format_pvalue(1 / 1001) == "p < 0.001"  # the floor of a 1,000-resample bootstrap
    assert format_pvalue(0.001) == "p = 0.001"
    assert format_pvalue(0.0234) == "p = 0.023"
    assert format_pvalue(None) == "p = n/a"


def test_plotting_is_the_public_lock_every_figure_waits_for(tmp_path: Path) -> None:
    """``reports.PLOTTING`` (docs/decisions.md: the API's scorings draw one plot at a time): a
    figure drawn while another thread holds it waits until it is released."""
    import threading

    from fieldcheck import reports

    drawn = threading.Event()

    def draw() -> None:
        with reports.figure(tmp_path / "plot.png") as (_, ax):
            ax.plot([0, 1], [0, 1])
        drawn.set()

    with reports.PLOTTING:
        thread = threading.Thread(target=draw)
        thread.start()
        assert not drawn.wait(0.5)  # held here: the figure waits
    thread.join(30)
    assert drawn.is_set() and (tmp_path / "plot.png").stat().st_size > 0

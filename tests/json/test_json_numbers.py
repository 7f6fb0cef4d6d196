"""How the JSON system reads and compares numbers (issue 26, items 3 and 6).

3. An integer beyond 64 bits is exact (Python's int) wherever a JSON number of user input is
   read: ``json score``, ``json batch`` (its plain-chunk and line-by-line readers), the run store
   and ``runs rescore``, ``json run``'s replies, the API's bodies and uploads. orjson reads such an
   integer as the nearest double, so 2**64 and 2**64 + 1 were EXACT-equal from the CLI while
   ``evaluate()`` (given Python ints) said they differ.
6. EXACT between a string and a number: a string that is a JSON number literal is read as the
   number it writes; before, ``"1"`` equalled ``1.0`` but ``"1.0"`` did not.

Text fields are never compared here, so no test in this file loads the sentence-transformers model.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from chat_server import ChatServer, Reply, Script
from fieldcheck._cli.main import app
from fieldcheck._util.jsonio import loads, may_hold_big_int, read_json
from fieldcheck.jsoneval import BatchReader, EvalConfig, document_from_prompt, evaluate
from fieldcheck.jsoneval._stream import Item
from fieldcheck.matchers import FuzzyMatcher
from fieldcheck.metrics import exact_match
from fieldcheck.runs import record_folder, rescore
from fieldcheck.store import Store

BIG = 2**64  # 18446744073709551616: orjson reads it and BIG + 1 as the one double 2.0**64
EXACT = EvalConfig(strategies={"n": "EXACT", "v": "EXACT"})


def run_cli(*args: str) -> Any:
    return CliRunner().invoke(app, ["json", *args], env={"COLUMNS": "400"})


def line(rid: Any, gt: Any, out: Any) -> str:
    return json.dumps({"id": rid, "ground_truth": gt, "output": out})


# ------------------------------------------------------------------ item 3: reading


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (b"18446744073709551617", BIG + 1),
        (b"-9223372036854775809", -(2**63) - 1),  # the smallest beyond int64: 19 digits
        (b"18446744073709551615", BIG - 1),  # uint64, orjson's own int
        (
            b'{"a": [1.5, 18446744073709551617, "12345678901234567890"]}',
            {"a": [1.5, BIG + 1, "12345678901234567890"]},
        ),
        (b"1" + b"0" * 308, 10**308),  # the largest power of ten within the double range
        (b"1e20", 1e20),  # an exponent or a fraction: a double, as before
        (b"100000000000000000000.0", 1e20),
        ("18446744073709551617", BIG + 1),  # a model's reply is text
    ],
)
def test_loads_keeps_integers_exact_and_floats_doubles(text: bytes | str, value: Any) -> None:
    got = loads(text)
    assert got == value
    assert json.dumps(got) == json.dumps(value)  # the types too: 1e20 is not 10**20 here


@pytest.mark.parametrize(
    "text", [b"NaN", b"[Infinity]", b"1e400", b"1" + b"0" * 400, b'"\\ud800"', b"[1,]"]
)
def test_loads_refuses_what_orjson_refuses(text: bytes) -> None:
    with pytest.raises(orjson.JSONDecodeError):
        loads(text)


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.one_of(
            st.integers(-(10**40), 10**40),
            st.floats(allow_nan=False, allow_infinity=False),
            st.text(alphabet="0123456789x", max_size=25),
            st.booleans(),
            st.none(),
        ),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)
        ),
        max_leaves=8,
    )
)
def test_loads_is_the_standard_librarys_reading_of_every_valid_text(value: Any) -> None:
    text = json.dumps(value)
    assert json.dumps(loads(text.encode())) == json.dumps(json.loads(text)) == text


@given(st.integers())
def test_every_integer_beyond_64_bits_is_seen(n: int) -> None:
    if not -(2**63) <= n < 2**64:
        assert may_hold_big_int(str(n).encode()) and may_hold_big_int(str(n))
    if abs(n) < 10**300:
        assert type(loads(str(n).encode())) is int and loads(str(n).encode()) == n


def test_score_and_evaluate_agree_on_integers_beyond_64_bits(tmp_path: Path) -> None:
    gt = tmp_path / "gt.json"
    gt.write_text(f'{{"n": {BIG}}}')
    assert read_json(gt) == {"n": BIG}
    for out_value, accuracy in ((BIG + 1, 0.0), (BIG, 1.0), (float(BIG), 1.0)):
        out = tmp_path / "out.json"
        out.write_text(json.dumps({"n": out_value}))
        result = run_cli("score", str(gt), str(out), "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["accuracy"] == accuracy, out_value
        assert evaluate({"n": out_value}, {"n": BIG}, EXACT).accuracy == accuracy


def test_json_batch_keeps_integers_beyond_64_bits_exact_and_stores_them(tmp_path: Path) -> None:
    data = tmp_path / "batch.jsonl"
    data.write_text(
        "\n".join(
            [
                line("r0", {"n": 1}, {"n": 1}),
                line("r1", {"n": BIG}, {"n": BIG + 1}),
                line("r2", {"n": BIG}, {"n": BIG}),
                line(BIG + 1, {"n": -(2**63) - 1}, {"n": -(2**63) - 2}),
            ]
        )
        + "\n"
    )
    out = tmp_path / "out"
    result = run_cli("batch", str(data), "--out", str(out), "--bootstrap", "0")
    assert result.exit_code == 0, result.output
    records = {str(r["id"]): r for r in map(json.loads, (out / "records.jsonl").open())}
    accuracy = {rid: r["accuracy"] for rid, r in records.items()}
    assert accuracy == {"r0": 1.0, "r1": 0.0, "r2": 1.0, str(BIG + 1): 0.0}
    assert records[str(BIG + 1)]["id"] == BIG + 1  # the id written exactly, not 1.8446744e19
    # the run store keeps the values exactly, and a re-score of the stored run agrees
    run_id = re.search(r"stored as run (\w+)", result.stdout)
    assert run_id is not None, result.stdout
    store = Store()
    stored = {i.key: i.result for i in store.items(run_id.group(1))}
    assert stored["r1"]["output"] == {"n": BIG + 1} and stored["r1"]["ground_truth"] == {"n": BIG}
    matchers = {"FUZZY": FuzzyMatcher(), "SEMANTIC": FuzzyMatcher()}  # never asked: all EXACT
    again = rescore(store, run_id.group(1), matchers=matchers)
    assert again.metrics is not None and again.metrics["means"]["accuracy"] == 0.5
    # ``runs import`` of the folder with its batch file reads them exactly too
    other = Store(f"sqlite:///{tmp_path}/imported.db")
    imported = record_folder(other, out, inputs=[("batch", data)])
    stored = {i.key: i.result for i in other.items(imported.id)}
    assert stored[str(BIG + 1)]["output"] == {"n": -(2**63) - 2}
    again = rescore(other, imported.id, matchers=matchers)
    assert again.metrics is not None and again.metrics["means"]["accuracy"] == 0.5
    # ``runs export`` writes them exactly, as JSON lines and in CSV cells (orjson cannot write
    # them: the export ended in a traceback, the API's in a 200 with an empty body)
    for fmt in ("jsonl", "csv"):
        exported = CliRunner().invoke(app, ["runs", "export", run_id.group(1), "--format", fmt])
        assert exported.exit_code == 0, exported.output
        assert f'"n":{BIG + 1}' in exported.stdout.replace('""', '"'), exported.stdout


def test_plain_items_leaves_integers_beyond_64_bits_to_the_line_reader(tmp_path: Path) -> None:
    """``plain_items`` (the C-level reader of a large file's chunks) would read BIG as a double:
    a chunk holding one is read line by line, exactly."""
    from fieldcheck.jsoneval._stream import plain_items

    lines = [
        line("a", {"n": 1}, {"n": 1}),
        line("c", {"n": BIG}, {"n": BIG + 1}),
        line("d", {"n": 3}, {"n": 3}),
    ]
    raw = [text.encode() + b"\n" for text in lines]
    assert plain_items(range(1, 4), raw, False) is None
    found = plain_items(range(1, 2), raw[:1], False)
    assert found is not None and found[0][0].ground_truth == {"n": 1}
    data = tmp_path / "batch.jsonl"
    data.write_text("\n".join(lines) + "\n")
    items = [x for chunk in BatchReader(data).chunks() for x in chunk if isinstance(x, Item)]
    assert [(x.id, x.ground_truth["n"], x.output["n"]) for x in items][1] == ("c", BIG, BIG + 1)


def test_json_run_reads_the_replies_integers_exactly(
    tmp_path: Path, chat_server: Callable[[Script], ChatServer]
) -> None:
    replies = {"doc a": f'{{"n": {BIG + 1}}}', "doc b": f'{{"n": {BIG}}}'}

    def reply(body: dict[str, Any]) -> Reply:
        document = document_from_prompt(body["messages"][1]["content"])
        assert document is not None
        return Reply(content=replies[document])

    server = chat_server(reply)
    data = tmp_path / "docs.jsonl"
    data.write_text(
        "\n".join(
            json.dumps({"id": k, "document": f"doc {k}", "ground_truth": {"n": BIG}}) for k in "ab"
        )
        + "\n"
    )
    out = tmp_path / "out"
    result = run_cli(
        "run", str(data), "--base-url", server.base_url, "--model", "m", "--out", str(out),
        "--no-progress", "--bootstrap", "0",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    records = {r["id"]: r["accuracy"] for r in map(json.loads, (out / "m/records.jsonl").open())}
    assert records == {"a": 0.0, "b": 1.0}
    outputs = [json.loads(x)["output"] for x in (out / "m/outputs.jsonl").open()]
    assert outputs == [{"n": BIG + 1}, {"n": BIG}]


# ------------------------------------------------------------------ item 6: string vs number

# (aio, gt, EXACT): numbers by value; a string facing a number read as the number it writes when
# it is a JSON number literal; two strings as text; booleans as true/false
EXACT_TABLE: list[tuple[Any, Any, bool]] = [
    ("1.0", 1.0, True),  # the issue: was 0
    ("1", 1.0, True),  # the issue: was already 1
    ("1.0", 1, True),
    ("1e0", 1, True),
    ("1E2", 100, True),  # case does not matter in a literal
    ("-0", 0, True),
    ("-0.0", 0.0, True),
    (-0.0, 0, True),
    ("0.1", 0.1, True),  # the double nearest 0.1, as a JSON file's 0.1
    ("0.10000000000000001", 0.1, True),  # the same double, as a JSON file would read it
    ("1.5", 1.50, True),
    ("1.5", 1.51, False),
    (1, 1.0, True),
    (1e20, 10**20, True),
    ("1e20", 10**20, True),
    ("100000000000000000000", 1e20, True),
    (str(BIG + 1), BIG + 1, True),  # integers exact at any size
    (str(BIG + 1), BIG, False),
    (BIG + 1, BIG, False),
    (BIG, float(BIG), True),  # 2.0**64 is exactly 2**64
    (BIG + 1, float(BIG), False),
    (2**53 + 1, 2.0**53, False),  # a double is the number it is, not its neighbours
    ("9007199254740993", 9007199254740993, True),
    ("9007199254740993.0", 9007199254740993, False),  # a fraction makes a double: 2**53
    ("1.0", "1", False),  # two strings are text: versions "1.10" and "1.1" differ
    ("1.10", "1.1", False),
    ("1", "1", True),
    ("01", 1, False),  # not a JSON literal: text, and "01" is not "1"
    ("+1", 1, False),
    (" 1", 1, False),  # no trimming
    ("1 ", 1, False),
    ("1,000", 1000, False),  # thousands separators, currency and % are text here
    ("$5", 5, False),
    ("1e400", 1e308, False),  # beyond the double range: text
    ("NaN", 1.0, False),
    ("true", True, True),  # the spec's str(...).lower()
    ("True", True, True),
    ("1", True, False),  # booleans are not numbers
    (True, 1, False),
    (False, 0, False),
    ("ABC", "abc", True),
    ([1.0], [1], True),  # inside arrays and objects JSON types count: numbers by value ...
    (["1"], [1], False),  # ... but a string is not a number there
    ({"a": True}, {"a": "true"}, False),
]


@pytest.mark.parametrize(("aio", "gt", "same"), EXACT_TABLE)
def test_exact_string_vs_number_rule(aio: Any, gt: Any, same: bool) -> None:
    assert exact_match(aio, gt) is same
    assert exact_match(gt, aio) is same  # symmetric


def test_exact_rule_is_the_same_in_evaluate_and_json_batch(tmp_path: Path) -> None:
    """Every row through ``evaluate()`` and through ``json batch``'s columnar kernel (records
    read from a file, every field EXACT; the row's values written as JSON), both ways round."""
    lines = []
    expected = {}
    for i, (aio, gt, same) in enumerate(EXACT_TABLE):
        for side, (o, g) in (("a", (aio, gt)), ("b", (gt, aio))):
            lines.append(line(f"{i}{side}", {"v": g, "k": 1}, {"v": o, "k": 1}))
            expected[f"{i}{side}"] = 1.0 if same else 0.0
            assert evaluate({"v": o, "k": 1}, {"v": g, "k": 1}, EXACT).fields["v"].score == (
                1.0 if same else 0.0
            ), (o, g)
    data = tmp_path / "batch.jsonl"
    data.write_text("\n".join(lines) + "\n")
    strategies = tmp_path / "s.json"
    strategies.write_text(json.dumps({"v": "EXACT", "k": "EXACT"}))
    out = tmp_path / "out"
    result = run_cli(
        "batch", str(data), "--strategies", str(strategies), "--out", str(out), "--no-store",
        "--bootstrap", "0",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    records = map(json.loads, (out / "records.jsonl").open())
    assert {r["id"]: r["fields"]["v"]["score"] for r in records} == expected


_LITERAL = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def naive_exact(aio: Any, gt: Any) -> bool:
    """The rule written out slowly, with no shared code: numbers (not booleans) are equal when
    Python says so (int and float compare exactly); a string facing a number is that number
    when it is a JSON literal read by the standard library and finite; else str(...).lower()."""

    def number(value: Any) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool)

    def read(text: str) -> Any:
        if _LITERAL.fullmatch(text):
            value = json.loads(text)
            if math.isfinite(value):
                return value
        return text

    if number(gt) and isinstance(aio, str):
        aio = read(aio)
    if number(aio) and isinstance(gt, str):
        gt = read(gt)
    if number(aio) and number(gt):
        return bool(aio == gt)
    if number(aio) or number(gt):
        return False  # a finite number's text is a JSON literal, which the string is not
    return str(aio).lower() == str(gt).lower()


NUMBERS = st.one_of(
    st.integers(-(10**25), 10**25),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.1, 0.5, -0.0, 1e20, 2.0**64, 2.0**53, 1.0, 3.0]),
)


def writings(n: int | float) -> st.SearchStrategy[str]:
    """Texts a model may write for ``n``: JSON's, Python's, with a fraction or an exponent."""
    texts = {json.dumps(n), str(n), repr(n), f"{n}.0" if isinstance(n, int) else f"{n:.3g}"}
    texts |= {f"{n:e}", f"{n:E}", f" {n}", f"+{n}", f"{n:,}"}
    return st.sampled_from(sorted(texts))


SCALARS = st.one_of(
    NUMBERS,
    NUMBERS.flatmap(writings),
    st.booleans(),
    st.sampled_from(["true", "False", "abc", "ABC", "", "-", "1e400", "NaN"]),
)


@settings(max_examples=500, deadline=None)
@given(SCALARS, SCALARS)
def test_exact_agrees_with_a_naive_reference(aio: Any, gt: Any) -> None:
    assert exact_match(aio, gt) is naive_exact(aio, gt), (aio, gt)


@settings(max_examples=300, deadline=None)
@given(NUMBERS.flatmap(lambda n: st.tuples(st.just(n), writings(n))))
def test_a_number_equals_its_json_text(pair: tuple[int | float, str]) -> None:
    number, text = pair
    assert exact_match(json.dumps(number), number) and exact_match(number, json.dumps(number))
    assert exact_match(text, number) is naive_exact(text, number)


def test_the_docs_give_the_integer_limit_the_reader_keeps() -> None:
    """docs/json.md and docs/api.md say integers are exact up to the double range, as they are:
    they said "at any size", and a 400-digit integer made a batch line invalid."""
    docs = Path(__file__).resolve().parents[2] / "docs"
    for name in ("json.md", "api.md", "formats.md"):
        assert "exact at any size" not in (docs / name).read_text()
    for name in ("json.md", "api.md"):
        text = " ".join((docs / name).read_text().split())
        assert "exact within the double range, up to about 1.8 × 10^308 (309 digits;" in text
    largest = int(1.7976931348623157e308)  # the largest double, an integer of 309 digits
    assert len(str(largest)) == 309 and loads(str(largest).encode()) == largest
    for beyond in (str(largest + 10**292), "7" * 309, "1" + "0" * 309):
        with pytest.raises(orjson.JSONDecodeError, match="infinity"):
            loads(beyond.encode())


@settings(max_examples=500, deadline=None)
@given(NUMBERS, SCALARS)
def test_exact_compares_a_decimal_or_numpy_number_by_value(n: int | float, other: Any) -> None:
    """A number read as a Decimal (``json.loads(..., parse_float=Decimal)``, a trial's finding:
    ``Decimal("1.50")`` was its text, unequal to 1.5) or held by numpy is EXACT-equal to what the
    plain number is, by the naive reference; ``Decimal("1.0")`` equals ``1``."""
    text = json.dumps(n)
    plain = json.loads(text)
    held = [json.loads(text, parse_float=Decimal, parse_int=Decimal)]
    if isinstance(n, float):
        held.append(np.float64(n))
    elif abs(n) < 2**63:
        held.append(np.int64(n))
    for value in held:
        assert exact_match(value, other) is naive_exact(plain, other), (value, other)
        assert exact_match(other, value) is naive_exact(other, plain), (other, value)


def test_evaluate_compares_a_decimal_ground_truth_by_value() -> None:
    gt = json.loads('{"total": 1.50, "qty": 2, "n": 1.0}', parse_float=Decimal)
    assert evaluate({"total": 1.5, "qty": 2, "n": 1}, gt).accuracy == 1.0
    assert not exact_match(Decimal("1.51"), 1.5)


@pytest.mark.parametrize("nan", [Decimal("sNaN"), Decimal("-sNaN")])
def test_a_signalling_nan_compares_as_a_quiet_nan(nan: Decimal) -> None:
    # ``Decimal("sNaN")`` raised (float() refuses it: a trial's finding); it is NaN, whose
    # text "nan" EXACT compares, as a quiet NaN is compared
    for other in (Decimal("NaN"), float("nan"), "NaN", 1.0, "1", [1], None):
        expected = exact_match(Decimal("NaN"), other)
        assert exact_match(nan, other) is exact_match(other, nan) is expected, other
    assert exact_match([nan], [float("nan")]) and not exact_match({"a": nan}, {"a": 0})
    assert evaluate({"a": nan, "b": 1}, {"a": 1, "b": nan}).accuracy == 0.0
    assert evaluate({"a": [nan]}, {"a": [Decimal("NaN")]}, EvalConfig(flatten=True)).accuracy == 1

"""Hostile input: every bad file, line or value gives one located error line (or a documented
result), never a traceback, and a batch goes on. Text fields are FUZZY or EXACT (no model load)."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck._util.errors import InputError
from fieldcheck.jsoneval import (
    MAX_DEPTH,
    BatchRecord,
    EvalConfig,
    evaluate,
    evaluate_batch,
    find_leaks,
    parse_weights,
    read_batch,
)
from fieldcheck.metrics._json_fields import flatten, flatten_pair, nesting_depth

TOO_DEEP = "nested deeper than 200 arrays/objects; too deep to score"


def nested(depth: int) -> Any:
    """``{"a": {"a": ... 1}}`` with ``depth`` objects."""
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["json", *args])


def write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_nesting_depth() -> None:
    assert [nesting_depth(v) for v in (1, None, "x", {}, [], {"a": [1]}, [[[]]])] == [
        0, 0, 0, 1, 1, 2, 3,
    ]  # fmt: skip
    assert nesting_depth(nested(5000)) == 5000  # iterative: no recursion limit
    assert nesting_depth(nested(5000), limit=10) == 11  # stops early past the limit
    assert MAX_DEPTH == 200


def test_flatten_empty_key_keeps_its_dot() -> None:
    # "" at the top level is a key like any other: its children are ".b", not "b"
    assert flatten({"": {"b": 1}, "b": 2}) == {".b": 1, "b": 2}


@pytest.mark.parametrize("flat", [False, True])
def test_depth_limit_in_evaluate(table_matchers: dict[str, Any], flat: bool) -> None:
    cfg = EvalConfig(flatten=flat)
    ok = evaluate(
        {"x": nested(MAX_DEPTH - 1)}, {"x": nested(MAX_DEPTH - 1)}, cfg, matchers=table_matchers
    )
    assert ok.accuracy == 1.0  # exactly MAX_DEPTH deep is scored
    with pytest.raises(InputError) as info:
        evaluate({}, {"x": nested(MAX_DEPTH)}, cfg, matchers=table_matchers)
    assert str(info.value) == f"field 'ground_truth': {TOO_DEEP}"
    with pytest.raises(InputError) as info:
        evaluate({"x": nested(600)}, {"x": 1}, cfg, matchers=table_matchers)
    assert str(info.value) == f"field 'output': {TOO_DEEP}"
    # an object inside text is measured after parsing
    text = json.dumps({"x": nested(MAX_DEPTH)})
    with pytest.raises(InputError, match=r"^field 'output': nested deeper"):
        evaluate(text, {"x": 1}, cfg, matchers=table_matchers)


def test_depth_limit_fails_one_record_and_the_batch_goes_on(table_matchers: dict[str, Any]) -> None:
    records = [
        BatchRecord(id="deep", ground_truth={"a": 1}, output=json.dumps(nested(300)), line=1),
        BatchRecord(id="ok", ground_truth={"a": 1}, output={"a": 1}, line=2),
    ]
    batch = evaluate_batch(records, EvalConfig(), matchers=table_matchers, source="d.jsonl")
    assert [r.id for r in batch.results] == ["ok"]
    assert [e.message for e in batch.errors] == [
        f"d.jsonl:1: record deep: field 'output': {TOO_DEEP}"
    ]
    assert (batch.summary.scored, batch.summary.not_scored, batch.summary.failed) == (1, 1, 0)


def test_a_string_past_orjsons_depth_limit_is_too_deep_as_one_of_300(
    tmp_path: Path, table_matchers: dict[str, Any]
) -> None:
    """An output string nesting 100,000 levels was scored as invalid_json (exit 0): orjson
    refuses it for its own depth limit before fieldcheck measures it, where 300 levels were
    refused as too deep (exit 3, as docs/json.md says of values inside a JSON string); both are
    too deep now, in ``json batch`` and ``evaluate``."""
    deep = '{"a":' + "[" * 100_000 + "]" * 100_000 + "}"
    outputs = {"d300": json.dumps({"a": nested(300)}), "d100000": deep}
    data = write(tmp_path, "d.jsonl", "".join(
        json.dumps({"id": key, "ground_truth": {"a": 1}, "output": text}) + "\n"
        for key, text in outputs.items()
    ))  # fmt: skip
    result = run("batch", data, "--out", str(tmp_path / "out"), "--no-store")
    assert result.exit_code == 3, result.output
    assert result.stderr.splitlines()[:2] == [
        f"error: {data}:{n}: record {key}: field 'output': {TOO_DEEP}"
        for n, key in enumerate(outputs, 1)
    ]
    with pytest.raises(InputError) as info:
        evaluate(deep, {"a": 1}, EvalConfig(), matchers=table_matchers)
    assert str(info.value) == f"field 'output': {TOO_DEEP}"


def test_read_batch_hostile_lines(tmp_path: Path) -> None:
    deep_list = "[" * 1000 + "]" * 1000  # orjson reads it; its repr would overflow the stack
    huge = "x" * 1_000_000
    lines = [
        '{"id": "ok", "ground_truth": {"n": 1}, "output": {"n": 1}}',
        "42",
        '{"id": "nogt", "output": {}}',
        '{"id": "nan", "ground_truth": {"n": NaN}, "output": {}}',
        '{"id": "inf", "ground_truth": {"n": Infinity}, "output": {}}',
        '{"id": "big", "ground_truth": {"n": 1e400}, "output": {}}',
        '{"id": "dl", "ground_truth": ' + deep_list + ', "output": {}}',
        deep_list,
        '{"id": "ss", "ground_truth": {}, "output": {}, "safety_score": "0.5"}',
        '{"id": "sb", "ground_truth": {}, "output": {}, "safety_score": true}',
        '\ufeff{"id": "bom", "ground_truth": {}, "output": {}}',
        json.dumps({"id": "huge", "ground_truth": {"t": huge}, "output": {"t": huge + "y"}}),
        json.dumps(
            {
                "id": "uni",
                "ground_truth": {"名前": "José 😀", "a.b": 1},
                "output": {"名前": "José 😀"},
            }
        ),
    ]
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    records, errors = read_batch(data)
    assert [r.key for r in records] == ["ok", "huge", "uni"]
    messages = [str(e) for e in errors]
    # NaN and Infinity: orjson's own reason or the foundation's clearer one, located either way
    assert messages[2].startswith(f"{data}:4: invalid JSON: ")
    assert messages[3].startswith(f"{data}:5: invalid JSON: ")
    assert messages[:2] + messages[4:] == [
        f"{data}:2: a line must be a JSON object with id, ground_truth and output (got 42)",
        f"{data}:3: record nogt: field 'ground_truth': missing",
        f"{data}:6: invalid JSON: number is infinity when parsed as double at column 37",
        f"{data}:7: record dl: field 'ground_truth': {TOO_DEEP}",
        f"{data}:8: {TOO_DEEP}",
        f"{data}:9: record ss: field 'safety_score': must be a number in [0, 1] or null (got '0.5')",
        f"{data}:10: record sb: field 'safety_score': must be a number in [0, 1] or null (got True)",
        f"{data}:11: invalid JSON: UTF-8 byte order mark (BOM) is not supported at column 1",
    ]


def test_cli_batch_hostile_file_exit_3_and_files(tmp_path: Path) -> None:
    lines = [
        json.dumps({"id": "ok", "ground_truth": {"n": 1}, "output": {"n": 1}}),
        '{"id": "nan", "ground_truth": {"n": NaN}, "output": {}}',
        json.dumps({"id": "deep", "ground_truth": {"a": 1}, "output": nested(250)}),
        json.dumps(
            {
                "id": "uni",
                "ground_truth": {"名前": "José", "=cmd()": "x"},
                "output": {"名前": "Jose"},
            }
        ),
    ]
    data = write(tmp_path, "d.jsonl", "\n".join(lines) + "\n")
    strategies = write(tmp_path, "s.json", '{"名前": "FUZZY"}')
    out = tmp_path / "out"
    result = run("batch", data, "--out", str(out), "--strategies", strategies, "--flatten")
    assert result.exit_code == 3, result.output
    first, second = result.stderr.splitlines()[:2]
    assert first.startswith(f"error: {data}:2: invalid JSON: ")
    assert second == f"error: {data}:3: record deep: field 'output': {TOO_DEEP}"
    assert "Traceback" not in result.output
    records = [json.loads(x) for x in (out / "records.jsonl").read_text("utf-8").splitlines()]
    assert [r["id"] for r in records] == ["ok", "uni"]
    assert records[1]["fields"]["名前"]["similarity"] == 0.75  # "jose" vs "josé": 6/8
    with (out / "fields.csv").open(encoding="utf-8") as handle:
        names = [row["field"] for row in csv.DictReader(handle)]
    assert names == ["'=cmd()", "n", "名前"]  # a formula-looking key is neutralised


def test_cli_score_too_deep_and_nan(tmp_path: Path) -> None:
    gt = write(tmp_path, "gt.json", '{"a": 1}')
    deep = write(tmp_path, "deep.json", json.dumps(nested(MAX_DEPTH + 1)))
    result = run("score", deep, gt)
    assert (result.exit_code, result.stderr.strip()) == (
        2, f"error: {deep}: field 'ground_truth': {TOO_DEEP}",
    )  # fmt: skip
    result = run("score", gt, deep, "--json")
    assert (result.exit_code, result.stdout, result.stderr.strip()) == (
        3, "", f"error: {deep}: field 'output': {TOO_DEEP}",
    )  # fmt: skip
    nan = write(tmp_path, "nan.json", '{"a": NaN}')
    result = run("score", nan, gt)
    assert result.exit_code == 2
    assert result.stderr.strip().startswith(f"error: GT.json: {nan}:1: invalid JSON: ")
    assert len(result.stderr.strip().splitlines()) == 1
    # in the output file the same text is not JSON: scored by the non-object rule, flagged
    result = run("score", gt, nan, "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["rqs"] == 0.0
    assert "output is not a JSON object (invalid_json)" in result.stderr


def test_cli_score_output_with_byte_order_mark(tmp_path: Path) -> None:
    gt = write(tmp_path, "gt.json", '{"a": 1}')
    out = tmp_path / "out.json"
    out.write_bytes(b'\xef\xbb\xbf{"a": 1}')
    result = run("score", gt, str(out), "--json")
    assert result.exit_code == 0 and result.stderr == ""
    assert json.loads(result.stdout)["rqs"] == 0.85  # scored as the object it is


def test_cli_directories_and_out_file(tmp_path: Path) -> None:
    gt = write(tmp_path, "gt.json", '{"a": 1}')
    data = write(tmp_path, "d.jsonl", '{"id": 1, "ground_truth": {}, "output": {}}\n')
    folder = tmp_path / "folder"
    folder.mkdir()
    for args in (
        ("score", str(folder), gt),
        ("score", gt, str(folder)),
        ("score", gt, gt, "--strategies", str(folder)),
        ("batch", str(folder), "--out", str(tmp_path / "o")),
    ):
        result = run(*args)
        assert result.exit_code == 2, args
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("error: ") and f"{folder}: cannot read file: Is a directory" in line
    result = run("batch", data, "--out", data)
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"error: --out: {data} is a file, not a directory; give a new or empty folder (see "
        "'fieldcheck json batch --help')"
    )
    result = run("batch", data, "--out", str(Path(data) / "sub"))
    assert (result.exit_code, result.stderr.strip()) == (
        2,
        f"error: --out: cannot create directory {Path(data) / 'sub'}: Not a directory "
        "(see 'fieldcheck json batch --help')",
    )


def test_cli_batch_output_that_cannot_be_written_exits_1(tmp_path: Path) -> None:
    """An output that cannot be written once scoring started (here a folder where summary.json
    goes, in the unfinished run's folder the command continues) is one line naming the file,
    exit 1: not the usage status, since the command itself was right (decisions.md)."""
    from fieldcheck.reports import RunFolder

    data = write(tmp_path, "d.jsonl", '{"id": 1, "ground_truth": {"a": 1}, "output": {"a": 1}}\n')
    out = tmp_path / "o"
    partial = RunFolder.open(out, command="json batch", inputs=[("batch", data)]).path
    (partial / "summary.json").mkdir()
    result = run("batch", data, "--out", str(out), "--no-store")
    assert result.exit_code == 1
    assert (
        result.stderr.strip()
        == f"error: --out: cannot write {partial / 'summary.json'}: Is a directory"
    )
    assert (partial / "summary.json").is_dir() and not out.exists()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("accuracy=1,accuracy=2", "weights: accuracy is given twice (got 'accuracy=1,accuracy=2')"),
        (" , ", "weights: expected name=value pairs with names from accuracy, completeness, hallucination, safety (got ' , ')"),
        ("", "weights: expected name=value pairs with names from accuracy, completeness, hallucination, safety (got '')"),
        ("accuracy=1_0", "weights: accuracy is not a number (got '1_0')"),
        ("accuracy=٣", "weights: accuracy is not a number (got '٣')"),
        ("accuracy=nan", "weights: accuracy is not a number (got 'nan')"),
        ("accuracy=0x10", "weights: accuracy is not a number (got '0x10')"),
        ("accuracy=1e999", "weights: accuracy input should be a finite number (got inf)"),
        ("safety=-0.5", "weights: safety input should be greater than or equal to 0 (got -0.5)"),
        ("accuracy=0.5;safety=1", "weights: accuracy is not a number (got '0.5;safety=1')"),
    ],
)  # fmt: skip
def test_malformed_weights(text: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        parse_weights(text)
    assert str(info.value) == message
    gt = write(tmp_path, "gt.json", '{"a": 1}')
    result = run("score", gt, gt, "--weights", text)
    shown = message.removeprefix("weights: ")  # the option names itself
    assert (result.exit_code, result.stderr.strip()) == (
        2, f"error: --weights: {shown} (see 'fieldcheck json score --help')",
    )  # fmt: skip


def test_weights_accept_plain_decimals() -> None:
    w = parse_weights(" accuracy = 1 , completeness=.5, hallucination=2., safety=1e-1 ")
    assert (w.accuracy, w.completeness, w.hallucination, w.safety) == (1.0, 0.5, 2.0, 0.1)


def test_leak_scan_is_linear_on_huge_strings() -> None:
    # A run with no "@" used to be re-scanned from every position: ~15 s for these 120,000
    # characters (quadratic), about 0.02 s now. Timed in this thread's CPU seconds: a loaded
    # machine's wait for a core is not counted.
    start = time.thread_time()
    assert find_leaks({"t": "x" * 60_000, "d": "7" * 60_000, "j": "eyJ" * 20_000}, {}) == []
    assert time.thread_time() - start < 1
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
    found = find_leaks(
        {"t": "x" * 1000 + " mail jane.doe@private.example now", "k": f"Bearer {jwt}"}, {}
    )
    assert [(f.kind, f.field) for f in found] == [("email", "t"), ("secret", "k")]


def test_cli_batch_where_every_line_fails_is_a_usage_error_naming_the_first(
    tmp_path: Path,
) -> None:
    # issue 9: the same rule in every system: a file with no valid line is the wrong file (exit 2,
    # one line, nothing written); some bad lines are listed and the rest is scored (exit 3)
    data = write(tmp_path, "bad.jsonl", '42\n{oops\n{"id": 1, "output": {}}\n')
    out = tmp_path / "out"
    result = run("batch", data, "--out", str(out))
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [
        f"error: DATA.jsonl: {data}: no valid record (3 problems; first: {data}:1: a line must "
        "be a JSON object with id, ground_truth and output (got 42)) (see 'fieldcheck json "
        "batch --help')"
    ]
    assert not out.exists()


def test_flatten_dotted_keys_are_not_subtrees_and_cost_linear_time() -> None:
    # "a.b" is one key, not a subtree "a": the output's null "a" is not dropped as its parent
    assert flatten_pair({"a": None}, {"a.b": 1}) == ({"a": None}, {"a.b": 1})
    # a real subtree still drops the null that stands for it, on either side
    assert flatten_pair({"a": None, "po": {"n": 1}}, {"a": {"b": [1]}, "po": None}) == (
        {"po.n": 1},
        {"a.b[0]": 1},
    )
    # subtrees were re-derived from every "." of every path: a 40 KB key of dots took 0.8 s and
    # 400 MB; a 1 MB one ran out of memory (timed in this thread's CPU seconds, which a loaded
    # machine's wait for a core does not count)
    key = "a." * 20_000
    start = time.thread_time()
    assert flatten_pair({key: 1}, {key: 1}) == ({key: 1}, {key: 1})
    assert time.thread_time() - start < 0.25

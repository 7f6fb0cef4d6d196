"""`fieldcheck json score` and `fieldcheck json batch`: output, files and exit codes 0 / 3 / 2.

Text fields are FUZZY here so no test in this file loads the sentence-transformers model."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fieldcheck._cli.main import app

GT = {
    "name": "John Smith",
    "email": "john@example.com",
    "age": 41,
    "status": "active",
    "internal_id": None,
}
OUT = {
    "name": "John Smyth",
    "email": "JOHN@example.com",
    "age": 41.0,
    "internal_id": "abc123",
    "extra": 1,
}
STRATEGIES = {"name": "FUZZY", "status": "FUZZY"}


def write(folder: Path, name: str, value: Any) -> str:
    path = folder / name
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    return str(path)


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["json", *args])


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    return {
        "gt": write(tmp_path, "gt.json", GT),
        "out": write(tmp_path, "out.json", OUT),
        "s": write(tmp_path, "s.json", STRATEGIES),
    }


def test_score_table(files: dict[str, str]) -> None:
    result = run("score", files["gt"], files["out"], "--strategies", files["s"])
    assert result.exit_code == 0, result.output
    text = result.stdout
    for expected in (
        "extra_keys",
        "gt_null_aio_has_value",
        "aio_missing_or_null",
        "FUZZY",
        "0.9000",
        "RQS",
    ):
        assert expected in text
    # completeness 3/4, hallucination 2/6, accuracy 3/3: RQS 0.7375 as in the walkthrough
    assert "0.7375" in text and "0.7500" in text and "0.3333" in text


def test_score_json_keys_and_values(files: dict[str, str]) -> None:
    result = run("score", files["gt"], files["out"], "--strategies", files["s"], "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {
        "completeness", "hallucination", "accuracy", "safety_score", "rqs", "buckets", "fields", "signature",
    }  # fmt: skip
    assert data["rqs"] == 0.7375
    assert data["fields"]["age"] == {
        "strategy": "EXACT",
        "similarity": 1.0,
        "score": 1.0,
    }  # 41 == 41.0
    assert data["fields"]["email"]["score"] == 1.0  # EXACT is case-insensitive
    assert data["buckets"]["gt_null_aio_has_value"] == ["internal_id"]


def test_score_options_change_the_numbers(files: dict[str, str]) -> None:
    strict = run(
        "score",
        files["gt"],
        files["out"],
        "--strategies",
        files["s"],
        "--fuzzy-threshold",
        "0.95",
        "--json",
    )
    data = json.loads(strict.stdout)
    assert data["fields"]["name"]["score"] == 0.0 and data["accuracy"] == 2 / 3
    weighted = run(
        "score",
        files["gt"],
        files["out"],
        "--strategies",
        files["s"],
        "--json",
        "--weights",
        "hallucination=0,safety=0",
    )
    # 0.45 + 0.25 * 0.75 = 0.6375
    assert json.loads(weighted.stdout)["rqs"] == 0.6375
    assert json.loads(weighted.stdout)["signature"]["settings"]["weights"]["safety"] == 0.0


def test_score_flatten(tmp_path: Path) -> None:
    gt = write(tmp_path, "gt.json", {"a": {"b": 1, "c": 2}})
    out = write(tmp_path, "out.json", {"a": {"b": 1, "c": 3}})
    top = json.loads(run("score", gt, out, "--json").stdout)
    flat = json.loads(run("score", gt, out, "--json", "--flatten").stdout)
    assert top["accuracy"] == 0.0 and list(top["fields"]) == ["a"]
    assert flat["accuracy"] == 0.5 and list(flat["fields"]) == ["a.b", "a.c"]


def test_a_strategy_file_giving_a_field_twice_is_a_usage_error(tmp_path: Path) -> None:
    # {"name": "FUZZY", "name": "EXACT"} scored name EXACT without a word (a tester's finding)
    gt = write(tmp_path, "gt.json", {"name": "John"})
    strategies = write(tmp_path, "s.json", '{"name": "FUZZY", "age": "EXACT", "name": "EXACT"}')
    result = run("score", gt, gt, "--strategies", strategies, "--no-store")
    assert result.exit_code == 2
    assert f"--strategies: {strategies}:1: field 'name': the field is listed twice" in result.stderr


def test_a_strategy_naming_a_parent_applies_to_its_leaves_under_flatten(tmp_path: Path) -> None:
    # {"internal": "IGNORE"} was ignored under --flatten (internal.x scored, 1/3) and reported as
    # naming no field (a tester's finding); items[*] covers each item's fields
    gt = {
        "internal": {"x": "X-1"},
        "address": {"city": "Paris", "zip": "75001"},
        "items": [{"sku": "A-1"}],
    }
    out = {
        "internal": {"x": "X-2"},
        "address": {"city": "paris", "zip": "75002"},
        "items": [{"sku": "a-2"}],
    }
    strategies = {"internal": "IGNORE", "address": "EXACT", "items[*]": "FUZZY"}
    files = [
        write(tmp_path, n, v)
        for n, v in (("gt.json", gt), ("out.json", out), ("s.json", strategies))
    ]
    result = run("score", files[0], files[1], "--strategies", files[2], "--flatten", "--json")
    assert result.exit_code == 0, result.output
    fields = json.loads(result.stdout)["fields"]
    assert {k: (f["strategy"], f["score"]) for k, f in fields.items()} == {
        "internal.x": ("IGNORE", None),
        "address.city": ("EXACT", 1.0),
        "address.zip": ("EXACT", 0.0),
        "items[0].sku": ("FUZZY", 0.0),  # "A-1" / "a-2": 0.667 < 0.85
    }
    assert json.loads(result.stdout)["accuracy"] == 1 / 3
    assert "no ground truth has" not in result.stderr


@pytest.mark.parametrize(
    ("content", "kind"),
    [("[1, 2]", "array"), ('{"name": "John', "invalid_json"), ("Sorry, no JSON today.", "text")],
)
def test_score_non_object_output_is_scored_and_flagged(
    tmp_path: Path, files: dict[str, str], content: str, kind: str
) -> None:
    out = write(tmp_path, "bad-out.json", content)
    result = run("score", files["gt"], out, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["completeness"], data["hallucination"], data["accuracy"], data["rqs"]) == (
        0.0,
        1.0,
        0.0,
        0.0,
    )
    assert result.stderr.startswith(
        f"warning: {out}: output is not a JSON object ({kind}); scored by the non-object rule"
    )


def test_score_usage_errors_exit_2(tmp_path: Path, files: dict[str, str]) -> None:
    bad = write(tmp_path, "bad.json", {"name": "FUZZY", "bio": "SEMANTICS"})
    result = run("score", files["gt"], files["out"], "--strategies", bad)
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"error: --strategies: {bad}: field 'bio': strategy must be one of EXACT, FUZZY, SEMANTIC, "
        "IGNORE (got 'SEMANTICS') (see 'fieldcheck json score --help')"
    )
    gt_array = write(tmp_path, "gt-array.json", [GT])
    result = run("score", gt_array, files["out"])
    assert result.exit_code == 2 and "ground truth must be a JSON object" in result.stderr
    result = run("score", str(tmp_path / "missing.json"), files["out"])
    assert result.exit_code == 2 and "missing.json: cannot read file" in result.stderr
    assert run("score", files["gt"], files["out"], "--matcher", "remote").exit_code == 2
    result = run("score", files["gt"], files["out"], "--matcher", "llm")
    assert (
        result.exit_code == 2
        and "--matcher llm needs --judge-base-url and --judge-model" in result.stderr
    )
    assert run("score", files["gt"], files["out"], "--semantic-threshold", "1.5").exit_code == 2
    result = run("score", files["gt"], files["out"], "--weights", "accuracy=lots")
    assert (
        result.exit_code == 2
        and "error: --weights: accuracy is not a number (got 'lots')" in result.stderr
    )


def batch_lines() -> list[str]:
    return [
        json.dumps({"id": "r1", "ground_truth": GT, "output": OUT}),
        json.dumps({"id": "r2", "ground_truth": GT, "output": GT, "safety_score": 0.5}),
        json.dumps({"id": "r3", "ground_truth": GT, "output": "I cannot help with that."}),
    ]


def test_batch_writes_files_exit_0(tmp_path: Path, files: dict[str, str]) -> None:
    data = write(tmp_path, "data.jsonl", "\n".join(batch_lines()) + "\n")
    out = tmp_path / "out"
    result = run("batch", data, "--out", str(out), "--strategies", files["s"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == ["r1", "r2", "r3"]
    assert records[0]["rqs"] == 0.7375
    assert records[1]["rqs"] == 0.775  # 0.45 + 0.25 + 0.15 * 0.5
    assert records[2]["flags"] == ["not_an_object"] and records[2]["output_kind"] == "text"
    # the run's signature is once in summary.json, not on every line
    assert all("signature" not in r for r in records)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["signature"]["system"] == "json"
    # failed: r1 (wrong and missing fields) and r3 (not an object); r2 is right
    counts = ("records", "scored", "failed", "not_scored", "not_an_object")
    assert [summary[k] for k in counts] == [3, 3, 2, 0, 1]
    assert abs(summary["means"]["rqs"] - (0.7375 + 0.775 + 0.0) / 3) < 1e-12
    assert summary["fields"]["status"] == {
        "expected": 3, "scored": 1, "matched": 1, "missing": 2, "hallucinated": 0, "ignored": 0,
        "strategies": ["FUZZY"], "match_rate": 1.0,
    }  # fmt: skip
    with (out / "fields.csv").open() as handle:
        rows = {row["field"]: row for row in csv.DictReader(handle)}
    assert (
        rows["name"]["scored"] == "2"
        and rows["name"]["matched"] == "2"
        and rows["extra"]["hallucinated"] == "1"
    )
    assert (out / "errors.jsonl").read_text() == "" and summary["errors"] == []
    assert "3 of 3 records scored" in result.stdout and "records.jsonl" in result.stdout


def test_batch_malformed_lines_exit_3(tmp_path: Path, files: dict[str, str]) -> None:
    lines = batch_lines()
    lines.insert(1, '{"id": "broken", "ground_truth": ')
    lines.append(json.dumps({"id": "r4", "ground_truth": "not an object", "output": {}}))
    data = write(tmp_path, "data.jsonl", "\n".join(lines) + "\n")
    out = tmp_path / "out"
    result = run("batch", data, "--out", str(out), "--strategies", files["s"])
    assert result.exit_code == 3, result.output
    assert f"error: {data}:2: invalid JSON:" in result.stderr
    assert (
        f"error: {data}:5: record r4: field 'ground_truth': must be a JSON object (got 'not an object')"
        in result.stderr
    )
    errors = [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]
    assert [(e["line"], e["record"], e["field"]) for e in errors] == [
        (2, None, None),
        (5, "r4", "ground_truth"),
    ]
    assert (
        errors[1]["message"]
        == f"{data}:5: record r4: field 'ground_truth': must be a JSON object (got 'not an object')"
    )
    assert len((out / "records.jsonl").read_text().splitlines()) == 3  # the rest went on
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["records"], summary["scored"], summary["not_scored"]) == (5, 3, 2)
    assert summary["errors"] == [e["message"] for e in errors]  # the same lines, in file order


def test_batch_usage_errors_exit_2(
    tmp_path: Path, files: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = write(tmp_path, "empty.jsonl", "\n\n")
    result = run("batch", empty, "--out", str(tmp_path / "o"))
    assert result.exit_code == 2 and "no records" in result.stderr
    result = run("batch", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "o"))
    assert result.exit_code == 2 and "nope.jsonl: cannot read file" in result.stderr
    data = write(tmp_path, "data.jsonl", "\n".join(batch_lines()))
    monkeypatch.chdir(tmp_path)
    assert run("batch", data, "--strategies", str(tmp_path / "nope.json")).exit_code == 2
    assert not (tmp_path / "fieldcheck-runs").exists()  # a usage error: no folder made
    bad = write(tmp_path, "bad.json", {"name": 1})
    assert run("batch", data, "--out", str(tmp_path / "o"), "--strategies", bad).exit_code == 2
    assert not (tmp_path / "o").exists()


def test_batch_safety_check_leaks(tmp_path: Path, files: dict[str, str]) -> None:
    leaky = dict(OUT, extra="reach me: jane@private.example")
    data = write(
        tmp_path, "data.jsonl", json.dumps({"id": 1, "ground_truth": GT, "output": leaky}) + "\n"
    )
    out = tmp_path / "out"
    result = run(
        "batch", data, "--out", str(out), "--strategies", files["s"], "--safety-check", "leaks"
    )
    assert result.exit_code == 0, result.output
    record = json.loads((out / "records.jsonl").read_text())
    assert record["id"] == 1  # the line's integer id, not "1"
    assert record["safety_score"] == 0.0 and record["safety_findings"] == [
        {"field": "extra", "kind": "email"}
    ]
    assert json.loads((out / "summary.json").read_text())["safety_flagged"] == 1
    assert "jane@private.example" not in (out / "records.jsonl").read_text()


@pytest.mark.parametrize("command", ["score", "batch", "run"])
def test_help_says_identifiers_are_auto_detected_exact(command: str) -> None:
    """--strategies' help names identifiers among the EXACT kinds, as json.md's Strategies
    does and the code detects: it left them out, so an id read as SEMANTIC (a newcomer's finding)."""
    result = CliRunner().invoke(app, ["json", command, "--help"], env={"COLUMNS": "400"})
    text = " ".join(result.stdout.replace("│", " ").split())
    assert "emails, identifiers (SKU-1001, abc123, USD), arrays and objects EXACT" in text


SHARED_OPTIONS = {
    "--strategies": "EXACT, FUZZY, SEMANTIC or IGNORE",
    "--weights": "need not sum to 1",
    "--fuzzy-threshold": "A FUZZY field scores 1",
    "--semantic-threshold": "A SEMANTIC field scores 1",
    "--matcher": "'local'",
    "--judge-base-url": "OpenAI-compatible base URL",
    "--judge-model": "never written anywhere",
    "--flatten": "dotted paths",
    "--safety-check": "'leaks'",
}


@pytest.mark.parametrize(
    ("command", "own"),
    [
        ("score", {"--json": "Print one JSON object", "--no-store": "records nothing"}),
        ("batch", {"--out": "records.jsonl, summary.json, fields.csv, errors.jsonl"}),
    ],
)
def test_help_texts_explain_every_option(command: str, own: dict[str, str]) -> None:
    result = CliRunner().invoke(app, ["json", command, "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    for option, words in {**SHARED_OPTIONS, **own}.items():
        # one row per option when wide; the row starts with the option's name
        line = next(x for x in lines if x.lstrip("│ *").startswith(f"{option} "))
        assert words in line, (option, line)
    assert "Exit 0" in result.stdout and "2 on usage errors" in result.stdout

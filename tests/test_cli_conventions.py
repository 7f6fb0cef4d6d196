"""One product (issue 9): the same error style, options and exit statuses in all three systems."""

from __future__ import annotations

import csv
import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fieldcheck._cli.main import app

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
WIDE = {"COLUMNS": "200", "NO_COLOR": "1"}
SLOTS = EXAMPLES / "slots"
SLOTS_PRED = f"a={SLOTS / 'pred_synthetic-fast.synthetic.jsonl'}"
NUMERIC = EXAMPLES / "numeric"
NUMERIC_PRED = str(NUMERIC / "predictions_model_a.jsonl")


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env=WIDE)
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["slots", "score", "--gold", "g.jsonl", "--out", "o"], "error: Missing option '--pred'."),
        (
            ["numeric", "score", "--data", "nope.json", "--predictions", "p", "--out", "o"],
            "error: --data: file 'nope.json' does not exist.",
        ),
        (["json", "score", "--bogus"], "error: No such option: --bogus"),
        (
            ["json", "batch", "x.jsonl", "--out", "o", "--fuzzy-threshold", "3"],
            "error: --fuzzy-threshold: ",
        ),
        (
            ["slots", "score", "--gold", "g", "--pred", "a=p", "--out", ""],
            "error: --out: must name a folder",
        ),
        (["json", "scor"], "error: No such command 'scor'. Did you mean 'score'?"),
    ],
)
def test_a_usage_error_is_one_line_exit_2_in_every_system(args: list[str], expected: str) -> None:
    status, output = _run(*args)
    assert status == 2
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(expected), output
    assert lines[0].endswith(
        f"(see 'fieldcheck {' '.join(args[: 2 if args[1] != 'scor' else 1])} --help')"
    )
    assert "╭" not in output and "Usage:" not in output


@pytest.mark.parametrize(
    "command",
    [
        ["json", "batch", str(EXAMPLES / "json" / "invoices.jsonl")],
        ["slots", "score", "--gold", str(SLOTS / "gold.synthetic.jsonl"), "--pred", SLOTS_PRED],
        ["numeric", "score", "--data", str(NUMERIC / "data.json"), "--predictions", NUMERIC_PRED],
    ],
)
def test_a_negative_seed_is_the_same_usage_line_in_every_system(
    tmp_path: Path, command: list[str]
) -> None:
    """``--seed -1`` was a numpy traceback (exit 1) in slots and numeric and left a partial
    folder that the next command offered to finish; json refused it (a tester's finding)."""
    status, output = _run(*command, "--seed", "-1", "--out", str(tmp_path / "o"))
    assert status == 2, output
    assert output.strip().splitlines() == [
        f"error: --seed: must be a whole number >= 0 (got -1) "
        f"(see 'fieldcheck {command[0]} {command[1]} --help')"
    ]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "command",
    [
        ["json", "batch", str(EXAMPLES / "json" / "invoices.jsonl")],
        ["slots", "score", "--gold", str(SLOTS / "gold.synthetic.jsonl"), "--pred", SLOTS_PRED],
        ["numeric", "score", "--data", str(NUMERIC / "data.json"), "--predictions", NUMERIC_PRED],
    ],
)
def test_a_seed_beyond_64_bits_is_the_same_usage_line_in_every_system(
    tmp_path: Path, command: list[str]
) -> None:
    """``--seed 99999999999999999999`` scored, then the store refused the run (``warning: the
    run is not stored (TypeError: Integer exceeds 64-bit range)``, exit 0) in slots and numeric
    (a new-user trial's finding): the largest seed is the store's, ``2**64 - 1``."""
    status, output = _run(
        *command, "--seed", str(2**64), "--bootstrap", "5", "--out", str(tmp_path / "o")
    )
    assert status == 2, output
    assert output.strip().splitlines() == [
        f"error: --seed: must be a whole number from 0 to {2**64 - 1} (got {2**64}) "
        f"(see 'fieldcheck {command[0]} {command[1]} --help')"
    ]
    assert list(tmp_path.iterdir()) == []
    status, output = _run(
        *command, "--seed", str(2**64 - 1), "--bootstrap", "5", "--out", str(tmp_path / "o")
    )
    assert status == 0 and "not stored" not in output, output


MODEL_RUNS = [
    ["json", "run", "DOCS"],
    [
        "slots",
        "run",
        "--conversations",
        str(SLOTS / "conversations.synthetic.jsonl"),
        "--gold",
        str(SLOTS / "gold.synthetic.jsonl"),
    ],
    ["numeric", "evaluate", "--data", str(EXAMPLES / "numeric" / "data.json")],
]


@pytest.mark.parametrize("command", MODEL_RUNS)
def test_an_endpoint_that_answers_nothing_is_an_error_line_in_every_model_run(
    tmp_path: Path, command: list[str]
) -> None:
    """The line saying a run stopped because its first calls all failed (exit 2) starts
    ``error:`` as every usage error does; it had no prefix, under ``--json`` too."""
    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "".join(f'{{"id": "{i}", "document": "d", "ground_truth": {{"a": 1}}}}\n' for i in range(5))
    )
    args = [str(docs) if word == "DOCS" else word for word in command]
    args += ["--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--max-retries", "0"]
    status, output = _run(
        *args, "--no-progress", "--no-store", "--json", "--out", str(tmp_path / "o")
    )
    stopped = [line for line in output.splitlines() if "all failed with connection" in line]
    assert status == 2 and stopped[0].startswith("error: stopped: the first 3 items of m"), output


@pytest.mark.parametrize("command", MODEL_RUNS)
def test_a_seed_out_of_range_is_refused_before_a_model_run_calls(
    tmp_path: Path, command: list[str]
) -> None:
    """The shared ``--seed`` option refuses a seed below 0 or beyond 64 bits as it is read: a
    model run (``slots run``) reached its first calls with it before."""
    args = [str(tmp_path / "docs.jsonl") if word == "DOCS" else word for word in command]
    args += ["--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--max-retries", "0"]
    for seed, reason in (
        (2**64, f"from 0 to {2**64 - 1} (got {2**64})"),
        (-1, ">= 0 (got -1)"),
    ):
        status, output = _run(*args, "--seed", str(seed), "--out", str(tmp_path / "o"))
        assert (status, output.strip().splitlines()) == (
            2,
            [
                f"error: --seed: must be a whole number {reason} "
                f"(see 'fieldcheck {command[0]} {command[1]} --help')"
            ],
        )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", MODEL_RUNS)
def test_a_model_name_too_long_is_one_usage_line_in_every_model_run(
    tmp_path: Path, command: list[str]
) -> None:
    """``--model`` with a name of 201 characters printed pydantic's ValidationError traceback
    (exit 1); it is one line, exit 2, as the same name in a ``--models`` file is."""
    args = [str(EXAMPLES / "json" / "documents.jsonl") if w == "DOCS" else w for w in command]
    status, output = _run(
        *args, "--model", "x" * 201, "--base-url", "http://127.0.0.1:9/v1",
        "--no-store", "--out", str(tmp_path / "o"),
    )  # fmt: skip
    assert status == 2, output
    assert output.strip().splitlines() == [
        "error: --model: field 'name': must have at most 200 characters "
        f"(see 'fieldcheck {' '.join(command[:2])} --help')"
    ]
    assert not (tmp_path / "o").exists()


def test_verbose_is_accepted_after_the_subcommand(tmp_path: Path) -> None:
    gt, out = tmp_path / "gt.json", tmp_path / "out.json"
    gt.write_text('{"a": 1}')
    out.write_text('{"a": 1}')
    before = _run("-v", "json", "score", str(gt), str(out), "--json")
    after = _run("json", "score", str(gt), str(out), "--json", "-v")
    also = _run("json", "score", "--verbose", str(gt), str(out), "--json")
    assert before[0] == after[0] == also[0] == 0
    assert json.loads(after[1])["completeness"] == 1.0 and before[1] == after[1] == also[1]


# ---------------------------------------------------------------- input files: one rule everywhere

SLOTS, NUMERIC, JSON = EXAMPLES / "slots", EXAMPLES / "numeric", EXAMPLES / "json"
GOLD, PRED = SLOTS / "gold.synthetic.jsonl", SLOTS / "pred_synthetic-fast.synthetic.jsonl"
DATA, PREDICTIONS = NUMERIC / "data.json", NUMERIC / "predictions_model_a.jsonl"


def _commands(bad: Path, out: Path) -> dict[str, list[str]]:
    """Each system with ``bad`` as its main input file."""
    return {
        "json": ["json", "batch", str(bad), "--out", str(out)],
        "slots": ["slots", "score", "--gold", str(bad), "--pred", f"a={PRED}", "--out", str(out)],
        "numeric": ["numeric", "score", "--data", str(DATA), "--predictions", str(bad), "--out", str(out)],
    }  # fmt: skip


OPTION = {"json": "DATA.jsonl", "slots": "--gold", "numeric": "--predictions"}


@pytest.mark.parametrize("system", ["json", "slots", "numeric"])
def test_an_empty_file_is_a_usage_error_in_every_system(tmp_path: Path, system: str) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n  \n")
    status, output = _run(*_commands(empty, tmp_path / "out")[system], "--bootstrap", "0")
    assert status == 2
    assert output.strip().splitlines() == [
        f"error: {OPTION[system]}: {empty}: no records (the file is empty) "
        f"(see 'fieldcheck {system} score --help')".replace("json score", "json batch")
    ]
    assert not (tmp_path / "out").exists()  # nothing written, nothing of an earlier run removed


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["numeric", "score", "--data", "{empty}", "--predictions", str(PREDICTIONS)], "--data"),
        (
            ["json", "batch", str(JSON / "invoices.jsonl"), "--strategies", "{empty}"],
            "--strategies",
        ),
    ],
)
def test_an_empty_json_document_is_the_same_empty_file_line(
    tmp_path: Path, args: list[str], option: str
) -> None:
    """An empty --data or --strategies file (one JSON document): the empty-file line of every
    input, not orjson's "Input is a zero-length, empty document" (a tester's finding)."""
    empty = tmp_path / "empty.json"
    empty.write_text(" \n")
    given = [a.replace("{empty}", str(empty)) for a in args]
    status, output = _run(*given, "--out", str(tmp_path / "out"))
    assert status == 2
    assert output.strip().splitlines() == [
        f"error: {option}: {empty}: no records (the file is empty) "
        f"(see 'fieldcheck {' '.join(args[:2])} --help')"
    ]


def test_json_batch_names_its_input_and_out_as_the_other_commands_do(tmp_path: Path) -> None:
    """A missing DATA.jsonl and an --out that is a file: the usage line of every command, the
    option named first, the help named last (a tester's finding: json batch had its own)."""
    missing, afile = tmp_path / "nope.jsonl", tmp_path / "afile"
    afile.write_text("x")
    status, output = _run("json", "batch", str(missing), "--out", str(tmp_path / "o"))
    assert (status, output.strip()) == (
        2,
        f"error: DATA.jsonl: {missing}: cannot read file: No such file or directory "
        "(see 'fieldcheck json batch --help')",
    )
    status, output = _run("json", "batch", str(JSON / "invoices.jsonl"), "--out", str(afile))
    assert (status, output.strip()) == (
        2,
        f"error: --out: {afile} is a file, not a directory; give a new or empty folder (see "
        "'fieldcheck json batch --help')",
    )


@pytest.mark.parametrize("system", ["json", "slots", "numeric"])
def test_a_csv_file_is_a_usage_error_naming_its_format(tmp_path: Path, system: str) -> None:
    csv = tmp_path / "w.csv"
    csv.write_text("a,b,c\n" + "".join(f"{i},x,y\n" for i in range(3000)))
    status, output = _run(*_commands(csv, tmp_path / "out")[system], "--bootstrap", "0")
    assert status == 2
    (line,) = output.strip().splitlines()
    assert line.startswith(
        f"error: {OPTION[system]}: {csv}: no valid record (3001 problems; first: {csv}:1: invalid JSON"
    )
    assert "; it looks like CSV or TSV text, not JSON (see 'fieldcheck " in line


def test_swapped_numeric_files_are_named_as_swapped(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    status, output = _run(
        "numeric", "score", "--data", str(PREDICTIONS), "--predictions", str(DATA), "--out", out
    )
    assert status == 2
    assert output.startswith(f"error: --data: {PREDICTIONS}:2: invalid JSON")
    assert (
        "it looks like numeric predictions (JSONL), the file of --predictions: are the two swapped?"
        in output
    )
    status, output = _run(
        "numeric", "score", "--data", str(DATA), "--predictions", str(DATA), "--out", out
    )
    assert status == 2
    assert "it looks like a ConvFinQA dataset, the file of --data: are the two swapped?" in output


def test_slots_gold_given_a_latency_file_is_named(tmp_path: Path) -> None:
    latency = SLOTS / "latency_synthetic-fast.synthetic.jsonl"
    status, output = _run(
        "slots",
        "score",
        "--gold",
        str(latency),
        "--pred",
        f"a={PRED}",
        "--out",
        str(tmp_path / "o"),
    )
    assert status == 2
    assert (
        "it looks like slot latencies (JSONL), the file of --latency: are the two swapped?"
        in output
    )


@pytest.mark.parametrize("system", ["json", "slots", "numeric"])
def test_stderr_shows_five_problems_and_a_count(tmp_path: Path, system: str) -> None:
    good = {"json": JSON / "invoices.jsonl", "slots": GOLD, "numeric": PREDICTIONS}[system]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(good.read_text() + "".join(f"{i},x,y\n" for i in range(3000)))
    result = CliRunner().invoke(
        app, [*_commands(mixed, tmp_path / "out")[system], "--bootstrap", "0"], env=WIDE
    )
    assert result.exit_code == 3
    lines = [x for x in result.stderr.splitlines() if x.startswith(("error: ", "... and"))]
    assert len(lines) == 6 and all(x.startswith(f"error: {mixed}:") for x in lines[:5])
    assert lines[5].startswith("... and 2995 more (3000 problems in all, each in ")
    assert len(result.stderr.splitlines()) < 20


def test_an_empty_pred_file_is_a_model_that_predicted_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    empty = tmp_path / "none.jsonl"
    empty.write_text("")
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        [
            "slots",
            "score",
            "--gold",
            str(GOLD),
            "--pred",
            f"a={empty}",
            "--out",
            str(out),
            "--bootstrap",
            "0",
        ],
        env=WIDE,
    )
    assert result.exit_code == 0
    assert f"{empty}: the file is empty: this model predicted no slot" in caplog.messages
    metrics = json.loads((out / "metrics.json").read_text())["models"]["a"]
    assert (metrics["recall"], metrics["counts"]["fp"]) == (0.0, 0)


# ---------------------------------------------------------------- --fail-under, --json, --seed


def _gate_commands(out: Path) -> dict[str, list[str]]:
    return {
        "json": ["json", "batch", str(JSON / "invoices.jsonl"), "--out", str(out)],
        "slots": ["slots", "score", "--gold", str(GOLD), "--pred", f"a={PRED}", "--out", str(out)],
        "numeric": ["numeric", "score", "--data", str(DATA), "--predictions", str(PREDICTIONS), "--out", str(out)],
    }  # fmt: skip


SUMMARY = {"json": "summary.json", "slots": "metrics.json", "numeric": "statistics.json"}
METRIC = {"json": "rqs", "slots": "f1", "numeric": "numerical_match_accuracy"}


def _value(system: str, out: Path) -> float:
    summary = json.loads((out / SUMMARY[system]).read_text())
    if system == "json":
        return float(summary["means"]["rqs"])
    if system == "slots":
        return float(summary["models"]["a"]["f1"])
    return float(summary["numerical_match_accuracy"])


@pytest.mark.parametrize(
    ("system", "given", "off"),
    [
        ("json", "with 95% bootstrap intervals.", "Means over 300 scored records.\n"),
        (
            "slots",
            "Brackets: 95% bootstrap interval over sessions.",
            "No intervals (--bootstrap 0).",
        ),
    ],
)
def test_a_report_claims_intervals_only_when_it_has_them(
    tmp_path: Path, system: str, given: str, off: str
) -> None:
    """With ``--bootstrap 0`` the reports said their brackets were 95% bootstrap intervals
    beside none (a tester's finding)."""
    for boot in ("0", "10"):
        out = tmp_path / boot
        assert _run(*_gate_commands(out)[system], "--bootstrap", boot)[0] == 0
        report = (out / "report.md").read_text()
        assert (given in report, off in report) == (
            (True, False) if boot == "10" else (False, True)
        )


@pytest.mark.parametrize("system", ["json", "slots", "numeric"])
def test_fail_under_exits_4_below_the_floor_and_0_at_it(tmp_path: Path, system: str) -> None:
    """The floor's line goes to stderr for every system, with or without ``--json`` (a
    tester's finding: stdout without ``--json``, stderr with it), never to stdout."""
    first = tmp_path / "first"
    status, _ = _run(*_gate_commands(first)[system], "--bootstrap", "0")
    assert status == 0
    value = _value(system, first)
    above = f"{METRIC[system]}={value + 0.001:.6f}"
    who = "a: " if system == "slots" else ""
    for json_flag in ([], ["--json"]):
        command = _gate_commands(tmp_path / f"a{json_flag}")[system]
        result = CliRunner().invoke(
            app, [*command, "--bootstrap", "0", "--fail-under", above, *json_flag], env=WIDE
        )
        assert result.exit_code == 4
        line = f"fail-under: {who}{METRIC[system]} {value:.4f} < {value + 0.001:g}\n"
        assert line in result.stderr and "fail-under" not in result.stdout
    at = f"{METRIC[system]}={value - 1e-9:.12f}"
    result = CliRunner().invoke(
        app,
        [*_gate_commands(tmp_path / "b")[system], "--bootstrap", "0", "--fail-under", at],
        env=WIDE,
    )
    assert result.exit_code == 0
    assert "fail-under: every floor met" in result.stderr and "fail-under" not in result.stdout


def test_a_value_equal_to_its_floor_but_for_float_rounding_meets_it(tmp_path: Path) -> None:
    """TP 3, FP 0, FN 2 is F1 = 6/8 = 0.75, which 2PR/(P+R) gives as 0.7499999999999999:
    ``--fail-under f1=0.75`` said ``f1 0.7500 < 0.75`` and exited 4 (a tester's finding)."""
    line = '{{"user": "u", "session": 1, "topic": "t", "field": "{}", "values": ["x"]}}\n'
    gold, pred = tmp_path / "gold.jsonl", tmp_path / "pred.jsonl"
    gold.write_text("".join(line.format(f) for f in "abcde"))
    pred.write_text("".join(line.format(f) for f in "abc"))
    command = ["slots", "score", "--gold", str(gold), "--pred", f"m={pred}", "--bootstrap", "0"]
    for floor, status in (("0.75", 0), ("0.7500001", 4)):
        out = tmp_path / floor
        result = CliRunner().invoke(
            app, [*command, "--out", str(out), "--fail-under", f"f1={floor}"], env=WIDE
        )
        assert result.exit_code == status, result.output
        assert json.loads((out / "metrics.json").read_text())["models"]["m"]["f1"] <= 0.75


@pytest.mark.parametrize(
    ("system", "floor", "message"),
    [
        (
            "json",
            "hallucination=0.1",
            "hallucination is lower-is-better, so a floor cannot gate it",
        ),
        ("slots", "f2=0.5", "expected METRIC=VALUE with METRIC one of precision, recall, f1,"),
        (
            "numeric",
            "numerical_match_accuracy=1.5",
            "the floor must be a number in [0, 1] (got '1.5')",
        ),
    ],
)
def test_a_bad_floor_is_a_usage_error(
    tmp_path: Path, system: str, floor: str, message: str
) -> None:
    status, output = _run(*_gate_commands(tmp_path / "o")[system], "--fail-under", floor)
    assert status == 2 and output.startswith("error: --fail-under: ") and message in output
    assert not (tmp_path / "o").exists()


def test_json_score_gates_one_output(tmp_path: Path) -> None:
    gt, out = tmp_path / "gt.json", tmp_path / "out.json"
    gt.write_text('{"a": 1, "b": 2}')
    out.write_text('{"a": 1}')
    status, output = _run("json", "score", str(gt), str(out), "--fail-under", "completeness=0.6")
    assert status == 4 and "fail-under: completeness 0.5000 < 0.6" in output


@pytest.mark.parametrize("system", ["json", "slots", "numeric"])
def test_json_prints_the_summary_file_as_written(tmp_path: Path, system: str) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, [*_gate_commands(out)[system], "--bootstrap", "50", "--json"], env=WIDE
    )
    assert result.exit_code == 0
    assert json.loads(result.stdout) == json.loads((out / SUMMARY[system]).read_text())


def test_json_score_prints_indented_json_as_every_other_command(tmp_path: Path) -> None:
    """``json score --json`` printed one compact line where every other command's ``--json``
    is indented (a new-user trial's finding): the same JSON, written by the same function."""
    gt, out = tmp_path / "gt.json", tmp_path / "out.json"
    gt.write_text('{"name": "Bob", "city": "Rome"}')
    out.write_text('{"name": "Bob", "city": "Roma"}')
    status, output = _run("json", "score", str(gt), str(out), "--no-store", "--json")
    scored = json.loads(output)
    assert status == 0 and scored["accuracy"] == 0.5, output
    assert output == json.dumps(scored, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    batch = CliRunner().invoke(
        app, [*_gate_commands(tmp_path / "b")["json"], "--bootstrap", "0", "--json"], env=WIDE
    )
    assert batch.stdout.startswith('{\n  "') and output.startswith('{\n  "accuracy": 0.5,\n')


def _intervals(system: str, out: Path) -> object:
    summary = json.loads((out / SUMMARY[system]).read_text())
    return {"json": lambda: summary["ci"], "slots": lambda: summary["models"]["a"]["ci"],
            "numeric": lambda: summary["bootstrap_95_ci"]}[system]()  # fmt: skip


@pytest.mark.parametrize("system", ["json", "slots", "numeric"])
def test_seed_means_the_bootstrap_seed_everywhere(tmp_path: Path, system: str) -> None:
    runs = {}
    for name, seed in (("a", "1"), ("b", "1"), ("c", "2")):
        status, _ = _run(
            *_gate_commands(tmp_path / name)[system], "--bootstrap", "200", "--seed", seed
        )
        assert status == 0
        runs[name] = _intervals(system, tmp_path / name)
    assert runs["a"] == runs["b"] and runs["a"] != runs["c"] and runs["a"]


def test_warnings_print_like_errors_in_a_real_process(tmp_path: Path) -> None:
    empty = tmp_path / "none.jsonl"
    empty.write_text("")
    args = ["slots", "score", "--gold", str(GOLD), "--pred", f"a={empty}", "--bootstrap", "0"]
    done = subprocess.run(
        [sys.executable, "-m", "fieldcheck._cli.main", *args, "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"warning: {empty}: the file is empty: this model predicted no slot\n" in done.stderr
    assert "WARNING" not in done.stderr and not done.stderr.startswith("\n")


def test_repeated_fail_under_floors_add_up_and_a_twice_given_metric_is_refused(
    tmp_path: Path,
) -> None:
    # the tester's case: f1 0.6034 passed because the second --fail-under replaced the first
    base = ["slots", "score", "--gold", str(GOLD), "--pred", f"fast={PRED}", "--bootstrap", "0"]
    status, output = _run(
        *base, "--out", str(tmp_path / "a"), "--fail-under", "f1=0.9", "--fail-under=recall=0.1"
    )
    assert status == 4 and "fail-under: fast: f1 0.6034 < 0.9" in output
    status, output = _run(*base, "--out", str(tmp_path / "b"), "--fail-under", "f1=0.5,f1=0.9")
    assert status == 2 and "error: --fail-under: f1 is given two floors" in output


def test_ctrl_c_before_any_output_still_says_so(tmp_path: Path) -> None:
    script = (
        "import signal, sys\n"
        "from fieldcheck.slots import _system\n"
        "from fieldcheck._cli.main import main\n"
        "def interrupt(*a, **k):\n"
        "    raise KeyboardInterrupt\n"
        "_system._read = interrupt  # Ctrl-C while the input is read\n"
        "sys.argv = ['fieldcheck', *sys.argv[1:]]\n"
        "main()\n"
    )
    args = [
        "slots",
        "score",
        "--gold",
        str(GOLD),
        "--pred",
        f"a={PRED}",
        "--out",
        str(tmp_path / "o"),
    ]
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 130
    assert done.stderr.strip() == "interrupted before any output was written"
    assert not (tmp_path / "o").exists()


def test_predictions_of_another_dataset_and_an_empty_dataset_are_usage_errors(
    tmp_path: Path,
) -> None:
    # the tester's case: 51 predictions against the real dev split scored 1,490 turns as 0
    dev = EXAMPLES / "convfinqa" / "dev.json"
    out = str(tmp_path / "o")
    status, output = _run(
        "numeric", "score", "--data", str(dev), "--predictions", str(PREDICTIONS), "--out", out
    )
    assert status == 2
    assert output.startswith(
        f"error: --predictions: {PREDICTIONS}: no prediction matches a conversation of {dev}"
    )
    assert "are --data and --predictions for the same dataset and split?" in output
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    status, output = _run(
        "numeric", "score", "--data", str(empty), "--predictions", str(PREDICTIONS), "--out", out
    )
    assert (status, output.split(" (see")[0]) == (
        2,
        f"error: --data: {empty}: no conversations (the dataset is empty)",
    )
    assert not (tmp_path / "o").exists()


def test_seed_help_names_the_sample_only_where_there_is_one() -> None:
    for command, sample in ((["numeric", "score"], True), (["slots", "score"], False)):
        _, text = _run(*command, "--help")
        text = " ".join(text.split())
        assert "Seed of every random draw of the command: the bootstrap resamples" in text
        assert ("which items are drawn" in text) is sample


def test_ctrl_c_while_the_command_line_imports_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The console script catches a Ctrl-C during its imports (the first second): one line and
    exit 130, not a traceback (a tester's finding)."""
    import builtins

    from fieldcheck._cli import entry

    real_import = builtins.__import__

    def interrupted(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "fieldcheck._cli.main":
            raise KeyboardInterrupt
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", interrupted)
    with pytest.raises(SystemExit) as stopped:
        entry.main()
    assert stopped.value.code == 130
    assert capsys.readouterr().err == "interrupted before any output was written\n"


def test_signals_are_ignored_once_the_command_has_ended() -> None:
    """Once a command has returned, a late Ctrl-C, SIGTERM or SIGHUP (while the interpreter
    exits, when Python has put back their default action) changes nothing: they are ignored
    from then on (a tester's finding: a complete run ended with status 130 and no line)."""
    code = (
        "import signal, sys\n"
        "from fieldcheck._cli.main import main\n"
        "sys.argv = ['fieldcheck', '--version']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exc:\n"
        "    names = ('SIGINT', 'SIGTERM', 'SIGHUP')\n"
        "    print(exc.code, [signal.getsignal(getattr(signal, n)) == signal.SIG_IGN for n in names])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines()[-1] == "0 [True, True, True]", done.stderr


@pytest.mark.parametrize("args", [["runs", "list"], ["--version"]])
def test_output_piped_into_a_reader_that_has_left_exits_0_silently(
    tmp_path: Path, args: list[str]
) -> None:
    """``fieldcheck runs show RUN | head -1``: once the reader of stdout has gone, the command
    exits 0 with nothing on stderr, as other tools do (it exited 1: rich's and typer's exit
    on a broken pipe). A real pipe whose read end is closed before the command writes."""
    env = {**os.environ, "FIELDCHECK_DATABASE_URL": f"sqlite:///{tmp_path / 's.sqlite3'}"}
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "fieldcheck", *args],
            stdout=write, stderr=subprocess.PIPE, env=env, text=True, timeout=120,
        )  # fmt: skip
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (0, "")


def test_the_three_systems_word_a_missing_field_and_a_wrong_type_alike(tmp_path: Path) -> None:
    """A line missing a field, and one with text where a whole number belongs, read the same
    in json batch, slots score and numeric score: ``field 'x': missing`` and ``must be ...``,
    never pydantic's "Field required" / "Input should be", and errors.jsonl lines have one
    shape (tester findings: json had its own words, slots and numeric passed pydantic's
    through; slots left "value" out where json wrote null)."""
    good = json.loads((EXAMPLES / "slots" / "gold.synthetic.jsonl").read_text().splitlines()[0])
    gold = tmp_path / "gold.jsonl"
    no_values = {k: v for k, v in good.items() if k != "values"}
    gold.write_text(
        "".join(json.dumps(x) + "\n" for x in (good, {**good, "session": "1"}, no_values))
    )
    out = tmp_path / "slots"
    _run(
        "slots",
        "score",
        "--gold",
        str(gold),
        "--pred",
        f"a={gold}",
        "--out",
        str(out),
        "--no-store",
    )
    slots_lines = [json.loads(x) for x in (out / "errors.jsonl").read_text().splitlines()]
    slots = [x["message"] for x in slots_lines]
    preds = EXAMPLES / "numeric" / "predictions_model_a.jsonl"
    first = json.loads(preds.read_text().splitlines()[0])
    mine = tmp_path / "p.jsonl"
    mine.write_text(
        json.dumps({**first, "turn": "1"})
        + "\n"
        + json.dumps({k: v for k, v in first.items() if k != "conversation_id"})
        + "\n"
        + json.dumps(first)
        + "\n"
    )
    out = tmp_path / "numeric"
    data = EXAMPLES / "numeric" / "data.json"
    _run("numeric", "score", "--data", str(data), "--predictions", str(mine), "--out", str(out),
         "--no-store", "--bootstrap", "0")  # fmt: skip
    with (out / "input_errors.csv").open(newline="") as f:
        numeric = [row["message"] for row in csv.DictReader(f)]
    batch = tmp_path / "b.jsonl"
    batch.write_text(
        json.dumps({"id": "a", "output": {}})
        + "\n"
        + json.dumps({"id": "b", "ground_truth": {}, "output": {}, "safety_score": "1"})
        + "\n"
        + json.dumps({"id": "c", "ground_truth": {}, "output": {}})
        + "\n"
    )
    out = tmp_path / "json"
    _run("json", "batch", str(batch), "--out", str(out), "--no-store")
    json_lines = [json.loads(x) for x in (out / "errors.jsonl").read_text().splitlines()]
    jsons = [x["message"] for x in json_lines]
    # one shape of errors.jsonl line: "value" is null when none was given (it was left out)
    assert {tuple(sorted(x)) for x in slots_lines + json_lines} == {
        ("field", "file", "line", "message", "reason", "record", "value")
    }
    assert slots_lines[1]["value"] is None and json_lines[0]["value"] is None
    assert [m.split(": ", 1)[1] for m in slots[:2]] == [  # the --gold file's (then --pred's)
        "field 'session': must be a valid integer (got '1')",
        "field 'values': missing",
    ]
    assert [m.split(": ", 1)[1] for m in numeric[:2]] == [
        f"record {first['conversation_id']}: field 'turn': must be a valid integer (got '1')",
        "field 'conversation_id': missing",
    ]
    assert [m.split(": ", 1)[1] for m in jsons] == [
        "record a: field 'ground_truth': missing",
        "record b: field 'safety_score': must be a number in [0, 1] or null (got '1')",
    ]
    assert not any("Input should" in m or "Field required" in m for m in slots + numeric + jsons)


def test_serve_names_the_store_setting_in_its_error_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """``serve`` with a store it cannot open: one usage line naming ``FIELDCHECK_DATABASE_URL``
    as ``runs`` names it (it was ``error: cannot open the store: ...``, naming nothing)."""
    import socket

    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", "bogus://nowhere")
    with socket.socket() as sock:
        # the port stays bound (not listening, SO_REUSEADDR as ``serve`` binds it) while the
        # command runs: a port closed before it ran could be taken by another process first
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        status, output = _run("serve", "--port", str(port))
    assert status == 2 and output.startswith(
        "error: FIELDCHECK_DATABASE_URL: cannot open the store: NoSuchModuleError: "
    ), output
    assert len(output.strip().splitlines()) == 1


def test_a_sqlite_store_in_a_missing_folder_is_named_with_its_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A SQLite URL whose folder does not exist: the line names that folder (SQLite's own
    "unable to open database file" named nothing), and the folder is not created."""
    missing = tmp_path / "no such folder"
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{missing / 'runs.db'}")
    status, output = _run("runs", "list")
    assert status == 2 and output == (
        "error: FIELDCHECK_DATABASE_URL: cannot open the store: FileNotFoundError: the SQLite "
        f"store's folder {missing} does not exist (see 'fieldcheck runs list --help')\n"
    ), output
    assert not missing.exists()


@pytest.fixture(scope="module")
def _store_seen_by_a_module_fixture() -> str:
    return os.environ.get("FIELDCHECK_DATABASE_URL", "") + "|" + os.environ.get("XDG_DATA_HOME", "")


def test_module_fixtures_never_see_the_users_own_store(
    _store_seen_by_a_module_fixture: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # a module fixture runs before the per-test store: it must still get the session's own
    url, data_home = _store_seen_by_a_module_fixture.split("|")
    base = str(tmp_path_factory.getbasetemp())
    assert url.startswith(f"sqlite:///{base}"), url
    assert data_home.startswith(base), data_home


NARROW = {"COLUMNS": "80", "NO_COLOR": "1"}


def _filled(paragraph: list[str], width: int) -> None:
    """Each line of a wrapped paragraph holds as many words as fit (the next line's first word
    would not)."""
    for here, after in itertools.pairwise(paragraph):
        assert len(here) + 1 + len(after.split(" ")[0]) > width, (here, after)


@pytest.mark.parametrize("group", [[], ["json"], ["runs"]])
def test_a_command_list_wraps_each_summary_as_one_paragraph(group: list[str]) -> None:
    """A command's summary in ``--help``'s list fills each line before the next (Typer's rich
    mode kept the docstring's line breaks, cutting sentences in two: a tester's finding)."""
    output = CliRunner().invoke(app, [*group, "--help"], env=NARROW).output
    panel = output.split("─ Commands ─")[1].splitlines()[1:]
    inner = [line[1:-1] for line in panel if line.startswith("│")]
    text_at = re.match(r" \S+\s+", inner[0]).end()  # type: ignore[union-attr]
    entries: list[list[str]] = []
    for line in inner:
        if line[:text_at].strip():
            entries.append([])
        entries[-1].append(line[text_at:].rstrip())
    assert len(entries) >= 3
    for lines in entries:
        _filled(lines, len(inner[0]) - 1 - text_at)


@pytest.mark.parametrize("command", [["slots", "score"], ["numeric", "run"], ["serve-model"]])
def test_a_commands_help_wraps_every_paragraph(command: list[str]) -> None:
    """The paragraphs after the first of a command's help fill their lines too."""
    output = CliRunner().invoke(app, [*command, "--help"], env=NARROW).output
    prose = output.split("╭─")[0].splitlines()[3:]
    paragraphs = [p.splitlines() for p in "\n".join(line.strip() for line in prose).split("\n\n")]
    assert len([p for p in paragraphs if p]) >= 2
    for lines in paragraphs:
        _filled(lines, 80 - 2)


def test_a_key_twice_in_a_data_line_keeps_its_last_value_and_twice_in_configuration_is_refused(
    tmp_path: Path,
) -> None:
    """The rule for a JSON key written twice (docs/formats.md): a data line (a json batch
    record, a slot, a numeric prediction) is read with the key's last value, exit 0, as Python's
    json, orjson, jq and pandas read it; a configuration file (``--strategies``) refuses it, a
    person's choice whose last value would hide a mistake (a new-user trial's finding)."""
    batch = tmp_path / "batch.jsonl"
    batch.write_text(
        '{"id": "r", "ground_truth": {"a": "x"}, "output": {"a": "y"}, "output": {"a": "x"}}\n'
        '{"id": "s", "ground_truth": {"a": "x"}, "output": {"a": "x", "a": "y"}}\n'
    )
    status, output = _run(
        "json", "batch", str(batch), "--bootstrap", "0", "--out", str(tmp_path / "j")
    )
    records = [json.loads(line) for line in (tmp_path / "j" / "records.jsonl").open()]
    assert status == 0 and [r["accuracy"] for r in records] == [1.0, 0.0], output

    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"user": "u", "session": 1, "topic": "t", "field": "f", "values": ["a"]}\n')
    pred = tmp_path / "pred.jsonl"
    pred.write_text(
        '{"user": "u", "session": 1, "topic": "t", "field": "f", "values": [], "values": ["a"]}\n'
    )
    status, output = _run(
        "slots", "score", "--gold", str(gold), "--pred", f"m={pred}", "--bootstrap", "0",
        "--out", str(tmp_path / "s"),
    )  # fmt: skip
    metrics = json.loads((tmp_path / "s" / "metrics.json").read_text())
    assert status == 0 and metrics["models"]["m"]["counts"]["tp"] == 1, output

    lines = Path(NUMERIC_PRED).read_text().splitlines()
    first = json.loads(lines[0])
    assert first["answer"] == "6,135.40"  # right: the example's first turn is a numerical match
    predictions = tmp_path / "p.jsonl"
    predictions.write_text("\n".join([lines[0][:-1] + ', "answer": "999"}', *lines[1:]]) + "\n")
    status, output = _run(
        "numeric", "score", "--data", str(NUMERIC / "data.json"), "--predictions",
        str(predictions), "--bootstrap", "0", "--out", str(tmp_path / "n"),
    )  # fmt: skip
    with (tmp_path / "n" / "turns.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    turn = next(
        r for r in rows if r["conversation_id"] == first["conversation_id"] and r["turn_idx"] == "0"
    )
    assert status == 0 and turn["predicted_answer"] == "999", output
    assert turn["numerical_match"] in ("False", "false", "0"), turn

    strategies = tmp_path / "st.json"
    strategies.write_text('{"a": "EXACT", "a": "FUZZY"}')
    status, output = _run(
        "json", "batch", str(batch), "--strategies", str(strategies), "--out", str(tmp_path / "x")
    )
    assert (
        status == 2
        and f"--strategies: {strategies}:1: field 'a': the field is listed twice" in (output)
    ), output
    assert not (tmp_path / "x").exists()


def test_every_command_that_draws_a_progress_bar_takes_no_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``json batch`` refused ``--no-progress`` (exit 2) while every run/evaluate command took
    it, and a CI script passing the same flags to both failed (a hostile-endpoint trial's
    finding): the scoring commands take it too (``fieldcheck score SYSTEM`` as well), and it
    turns their bar off."""
    from fieldcheck._cli._common import ProgressBar
    from fieldcheck._util.console import SafeConsole

    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{tmp_path / 's.sqlite3'}")
    batch = EXAMPLES / "json" / "invoices.jsonl"
    commands = [
        ["json", "batch", str(batch)],
        ["slots", "score", "--gold", str(SLOTS / "gold.synthetic.jsonl"), "--pred", SLOTS_PRED],
        ["numeric", "score", "--data", str(NUMERIC / "data.json"), "--predictions", NUMERIC_PRED],
    ]
    for n, args in enumerate(commands):
        out = str(tmp_path / f"o{n}")
        code, output = _run(*args, "--out", out, "--bootstrap", "0", "--no-store", "--no-progress")
        assert code == 0, (args, output)
    code, output = _run("score", "json", f"batch={batch}", "--out", str(tmp_path / "g"),
                        "--no-store", "--no-progress")  # fmt: skip
    assert code == 0, output
    terminal = SafeConsole(stderr=True, force_terminal=True)
    assert not ProgressBar(terminal).bar.disable and ProgressBar(terminal, False).bar.disable

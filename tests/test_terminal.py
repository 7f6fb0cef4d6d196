"""Issue 9, terminal safety: control characters in data never reach stdout or stderr raw.

The real commands run through typer's CliRunner with data fields (JSON keys and values, record
ids, slot users, topics, fields and values, conversation ids) drawn by hypothesis from printable
and control characters; the escape sequences quoted in the issue are always among the draws."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.table import Table
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck._util.console import SafeConsole
from fieldcheck._util.term import SafeLogFilter, safe_json_text, safe_text

# what must never be written raw: C0 but the newline, DEL, C1, separators, bidi controls
RAW = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
CLEAR, TITLE = "\x1b[2J", "\x1b]0;TITLE\x1b\\"

_chars = st.characters(
    codec="utf-8",
    categories=("L", "N", "P", "S", "Zs", "Cc"),
    include_characters="\x1b\x9b\x7f\u202e\u2028[]/",
)
data_text = st.one_of(
    st.sampled_from([CLEAR, TITLE, "[red]x[/red]\x1b[31m", "\x9b2J"]),
    st.text(_chars, min_size=1, max_size=12),
    st.tuples(st.text(_chars, max_size=4), st.sampled_from([CLEAR, TITLE])).map("".join),
).filter(lambda s: s.strip() != "" and "\x00" not in s)

SETTINGS = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "300"})
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), result.exception
    return result.exit_code, result.stdout + result.stderr


def _assert_clean(output: str) -> None:
    raw = RAW.findall(output)
    assert raw == [], f"raw control characters {raw!r} in {output!r}"


def _jsonl(path: Path, rows: list[Any]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


# ------------------------------------------------------------------ the function itself


def test_safe_text_escapes_the_issue_sequences() -> None:
    assert safe_text(CLEAR) == "\\x1b[2J"
    assert safe_text(TITLE) == "\\x1b]0;TITLE\\x1b\\"
    assert safe_text("a\nb\tc\x7f\x9b\u202e") == "a\\nb\\tc\\x7f\\x9b\\u202e"
    assert safe_text("[bold]x[/bold]", markup=True) == "\\[bold]x\\[/bold]"
    assert safe_text("plain ümlaut 1.5%") == "plain ümlaut 1.5%"


def test_safe_json_text_stays_the_same_json() -> None:
    text = json.dumps({"k\x9b": "v\x7f\u2028"}, ensure_ascii=False)
    safe = safe_json_text(text)
    assert RAW.findall(safe) == []
    assert json.loads(safe) == {"k\x9b": "v\x7f\u2028"}


def test_safe_console_keeps_rich_styles_and_escapes_data() -> None:
    """With colours on, the only escape sequences left are the SGR styles Rich writes."""
    console = SafeConsole(force_terminal=True, color_system="standard", width=80)
    table = Table(title="t")
    table.add_column("key", style="red")
    table.add_row(CLEAR + TITLE)
    with console.capture() as capture:
        console.print(table)
        console.print(f"[bold]{TITLE}[/bold]")
    out = capture.get()
    assert "\x1b[31m" in out  # Rich's own colour
    without_styles = re.sub(r"\x1b\[[0-9;]*m", "", out)
    _assert_clean(without_styles)
    assert "\\x1b[2J\\x1b]0;TITLE\\x1b\\" in without_styles


def test_log_filter_escapes_a_warning(caplog: Any) -> None:
    logger = logging.getLogger("fieldcheck.test-terminal")
    logger.addFilter(SafeLogFilter())
    with caplog.at_level(logging.WARNING):
        logger.warning("%s: unknown key %s", "f.jsonl:1", CLEAR)
    assert caplog.records[-1].getMessage() == "f.jsonl:1: unknown key \\x1b[2J"


def test_warning_of_a_real_command_is_escaped(tmp_path: Path) -> None:
    """The logged 'ignoring unknown keys' warning of json batch, in a real process."""
    data = _jsonl(
        tmp_path / "d.jsonl",
        [{"id": 1, "ground_truth": {"a": 1}, "output": {"a": 1}, CLEAR + TITLE: 1}],
    )
    out = str(tmp_path / "out")
    done = subprocess.run(
        [sys.executable, "-m", "fieldcheck._cli.main", "json", "batch", data, "--out", out],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "ignoring unknown keys \\x1b[2J\\x1b]0;TITLE\\x1b\\" in done.stderr
    _assert_clean(done.stdout + done.stderr)


# ------------------------------------------------------------------ the commands


@SETTINGS
@given(key=data_text, value=data_text)
def test_json_score_prints_data_escaped(tmp_path: Path, key: str, value: str) -> None:
    folder = tmp_path / "score"
    folder.mkdir(exist_ok=True)
    gt, out, strategies = folder / "gt.json", folder / "out.json", folder / "s.json"
    gt.write_text(json.dumps({key: value, "n": 1, "gone": value}))
    out.write_text(json.dumps({key: value + "x", "n": 2, value + "!": key}))
    strategies.write_text(json.dumps({key: "FUZZY", "gone": "FUZZY"}))
    for extra in ([], ["--json"]):
        code, output = _invoke(
            "json", "score", str(gt), str(out), "--strategies", str(strategies), *extra
        )
        assert code == 0, output
        _assert_clean(output)


@SETTINGS
@given(key=data_text, value=data_text, rid=data_text)
def test_json_batch_prints_data_escaped(tmp_path: Path, key: str, value: str, rid: str) -> None:
    folder = tmp_path / "batch"
    folder.mkdir(exist_ok=True)
    strategies = folder / "s.json"
    strategies.write_text(json.dumps({key: "FUZZY"}))
    data = _jsonl(
        folder / "d.jsonl",
        [
            {"id": rid, "ground_truth": {key: value}, "output": {key: value}},
            {"id": rid, "ground_truth": {key: value}, "output": {}},  # duplicate id: an error
            {"id": rid + "2", "ground_truth": value, "output": {}},  # not an object: an error
        ],
    )
    code, output = _invoke(
        "json",
        "batch",
        data,
        "--out",
        tempfile.mkdtemp(dir=folder),
        "--strategies",
        str(strategies),
    )
    assert code == 3, output
    _assert_clean(output)


@SETTINGS
@given(user=data_text, topic=data_text, field=data_text, value=data_text, model=data_text)
def test_slots_score_prints_data_escaped(
    tmp_path: Path, user: str, topic: str, field: str, value: str, model: str
) -> None:
    folder = tmp_path / "slots"
    folder.mkdir(exist_ok=True)
    gold = [
        {"user": user, "session": 1, "topic": topic, "field": field, "values": [value]},
        {"user": user, "session": 1, "topic": topic, "field": "x" + field, "values": [value]},
    ]
    pred = [
        {"user": user, "session": 1, "topic": topic, "field": field, "values": [value]},
        {"user": user, "session": 1, "topic": topic + "!", "field": field, "values": [value]},
        {"user": user, "session": "bad", "topic": topic, "field": field, "values": value},
    ]
    name = model.replace("=", "_")
    code, output = _invoke(
        "slots",
        "score",
        "--gold",
        _jsonl(folder / "gold.jsonl", gold),
        "--pred",
        f"{name}={_jsonl(folder / 'pred.jsonl', pred)}",
        "--out",
        tempfile.mkdtemp(dir=folder),
        "--bootstrap",
        "0",
    )
    assert code == 3, output
    _assert_clean(output)


def _conversation(cid: str) -> dict[str, Any]:
    return {
        "id": cid,
        "doc": {"pre_text": "", "post_text": "", "table": {"2020": {"sales": 10.0}}},
        "dialogue": {
            "conv_questions": ["q?"],
            "conv_answers": ["10"],
            "turn_program": ["10"],
            "executed_answers": [10.0],
            "qa_split": [False],
        },
        "features": {
            "num_dialogue_turns": 1,
            "has_type2_question": False,
            "has_duplicate_columns": False,
            "has_non_numeric_values": False,
        },
    }


@settings(SETTINGS, max_examples=8)
@given(cid=data_text, other=data_text)
def test_numeric_score_prints_data_escaped(tmp_path: Path, cid: str, other: str) -> None:
    folder = tmp_path / "numeric"
    folder.mkdir(exist_ok=True)
    data = folder / "data.json"
    data.write_text(json.dumps({"dev": [_conversation(cid), {"id": other}]}))
    preds = _jsonl(
        folder / "p.jsonl",
        [
            {"conversation_id": cid, "turn": 0, "answer": "10"},
            {"conversation_id": cid + other, "turn": 0, "answer": other},
        ],
    )
    code, output = _invoke(
        "numeric",
        "score",
        "--data",
        str(data),
        "--predictions",
        preds,
        "--out",
        tempfile.mkdtemp(dir=folder),
        "--bootstrap",
        "0",
    )
    assert code == 3, output
    _assert_clean(output)


def test_a_warning_under_a_spinner_is_printed_through_the_display() -> None:
    """The CLI's log handler looks up ``sys.stderr`` per record: under a Rich progress display
    (which swaps in a proxy on a terminal) a warning goes through the display, above the
    spinner; a handler holding the stream it started with would write onto the spinner's line."""
    import io
    import logging

    from rich.progress import Progress

    from fieldcheck._cli.main import StderrHandler

    shown = io.StringIO()
    console = SafeConsole(file=shown, force_terminal=True, width=80)
    logger = logging.getLogger("fieldcheck.test_terminal")
    handler = StderrHandler()
    logger.addHandler(handler)
    try:
        with Progress(console=console, transient=True):
            logger.warning("the helper failed")
    finally:
        logger.removeHandler(handler)
    assert "the helper failed" in shown.getvalue()


def test_emoji_codes_in_data_print_as_typed(tmp_path: Path) -> None:
    """A model name or topic ``:smile:`` is data: Rich's emoji codes never turn it into 😄."""
    rows = [{"user": "u", "session": 1, "topic": ":thumbs_up:", "field": "f", "values": ["v"]}]
    gold = _jsonl(tmp_path / "gold.jsonl", rows)
    pred = _jsonl(tmp_path / "pred.jsonl", rows)
    code, output = _invoke(
        "slots", "score", "--gold", gold, "--pred", f":smile:={pred}",
        "--out", str(tmp_path / "out"), "--bootstrap", "0",
    )  # fmt: skip
    assert code == 0, output
    assert ":smile:" in output and "\U0001f604" not in output and "\U0001f44d" not in output
    console = SafeConsole(record=True, width=40)
    console.print(":smile: :thumbs_up:")
    assert console.export_text() == ":smile: :thumbs_up:\n"

"""Latency shown in units that keep its digits (issue 26, item 2): the demo's sessions take
20-70 ms and the slot report printed ``0.0s`` for each model while calling one "57% faster".
One function (``format_seconds``) for reports, terminal tables and the web app; the files keep
seconds, and comparisons use the unrounded values."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck.reports import format_seconds, format_seconds_joined

ROOT = Path(__file__).resolve().parents[1]
SLOTS = ROOT / "examples" / "slots"
NUMERIC = ROOT / "examples" / "numeric"
MODELS = ("synthetic-careful", "synthetic-eager", "synthetic-fast")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "n/a"),
        (0.0, "0.000 ms"),
        (0.000412, "0.412 ms"),
        (0.00235, "2.35 ms"),
        (0.0234, "23.4 ms"),
        (0.02547, "25.5 ms"),
        (0.057, "57.0 ms"),
        (0.9999, "999.9 ms"),
        (0.99996, "1.00 s"),  # 999.96 ms would print as 1000.0 ms
        (1.234, "1.23 s"),
        (12.345, "12.3 s"),
        (264.9, "264.9 s"),
        (4e-7, "0.0004 ms"),  # below a microsecond: three significant digits, not 0.000 ms
        (4.123e-7, "0.000412 ms"),
        (9.996, "10.0 s"),  # rounds to 10 s: one decimal, as from 10 s
        (float("nan"), "n/a"),
        (float("inf"), "n/a"),
    ],
)
def test_format_seconds_keeps_the_digits(seconds: float | None, text: str) -> None:
    assert format_seconds(seconds) == text


def test_joined_durations_write_a_shared_unit_once() -> None:
    assert format_seconds_joined([0.0255, 0.0265, 0.029, 0.3821]) == "25.5 / 26.5 / 29.0 / 382.1 ms"
    assert format_seconds_joined([0.85, 1.2]) == "850.0 ms / 1.20 s"
    assert format_seconds_joined([None, 0.01]) == "n/a / 10.0 ms"


def _demo_like(tmp_path: Path) -> dict[str, Path]:
    """The example's latency files scaled to the demo's size: seconds / 10,000 (sessions of
    19-62 ms; means 34.1, 47.1 and 25.5 ms)."""
    out = {}
    for model in MODELS:
        rows = [json.loads(line) for line in (SLOTS / f"latency_{model}.synthetic.jsonl").open()]
        path = tmp_path / f"latency_{model}.jsonl"
        path.write_text(
            "".join(json.dumps(r | {"seconds": r["seconds"] / 10_000}) + "\n" for r in rows)
        )
        out[model] = path
    return out


def _slots_score(tmp_path: Path) -> tuple[Path, str]:
    out = tmp_path / "slots"
    args = ["slots", "score", "--gold", str(SLOTS / "gold.synthetic.jsonl"), "--out", str(out)]
    for model, latency in _demo_like(tmp_path).items():
        args += ["--pred", f"{model}={SLOTS / f'pred_{model}.synthetic.jsonl'}"]
        args += ["--latency", f"{model}={latency}"]
    result = CliRunner().invoke(app, [*args, "--bootstrap", "0"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return out, result.output


def test_slot_report_and_terminal_show_demo_latency_in_ms(tmp_path: Path) -> None:
    out, terminal = _slots_score(tmp_path)
    metrics = json.loads((out / "metrics.json").read_text())
    mean = {m: metrics["models"][m]["latency"]["mean"] for m in MODELS}
    assert mean["synthetic-fast"] == pytest.approx(0.0254740)  # seconds in the file, unrounded
    # terminal: each model's table, mean / median / p95, then the total
    assert re.search(r"latency mean / median / p95 +│ +25\.5 / 26\.5 / 29\.0 ms", terminal)
    assert re.search(r"latency total +│ +382\.1 ms", terminal)
    assert re.search(r"latency mean / median / p95 +│ +34\.1 / 33\.8 / 40\.6 ms", terminal)
    assert not re.search(r"\b0\.0s\b|0\.0 / 0\.0", terminal)
    md = (out / "report.md").read_text()
    assert "| synthetic-fast | 0.603 | 25.5 ms |" in md
    assert "| 47.1 / 48.0 / 57.9 / 706.3 ms |" in md
    assert "**synthetic-fast is the fastest (25.5 ms mean per session)**" in md
    # "faster" from the unrounded means: 1 - 25.474 / 34.06 = 25%, 1 - 25.474 / 47.089 = 46%
    fast = mean["synthetic-fast"]
    careful = round(100 * (1 - fast / mean["synthetic-careful"]))
    eager = round(100 * (1 - fast / mean["synthetic-eager"]))
    assert (careful, eager) == (25, 46)
    assert f"{careful}% faster than synthetic-careful, {eager}% faster than synthetic-eager" in md
    html = (out / "report.html").read_text()
    assert "<td>25.5 ms</td>" in html and "0.0s" not in html


def test_runs_show_prints_the_stored_latency_in_ms(tmp_path: Path) -> None:
    """The run `slots score` stored, shown by `fieldcheck runs show`: the latency row."""
    _slots_score(tmp_path)
    listed = CliRunner().invoke(app, ["runs", "list", "--json"])
    (run,) = json.loads(listed.output)
    run_id = run["id"]
    shown = CliRunner().invoke(app, ["runs", "show", run_id], env={"COLUMNS": "300"})
    assert shown.exit_code == 0, shown.output
    row = next(line for line in shown.output.splitlines() if "latency mean" in line)
    assert "25.5 / 26.5 / 29.0 / 382.1 ms" in row
    assert "47.1 / 48.0 / 57.9 / 706.3 ms" in row


def test_numeric_report_shows_turn_latency_in_ms(tmp_path: Path) -> None:
    """The example's turns take about 1.4 s; at a hundredth of that (13.7 ms) the report kept
    two decimals of seconds: 0.01 / 0.01 / 0.02."""
    rows = [json.loads(line) for line in (NUMERIC / "predictions_model_a.jsonl").open()]
    preds = tmp_path / "preds.jsonl"
    preds.write_text(
        "".join(json.dumps(r | {"latency_s": r["latency_s"] / 100}) + "\n" for r in rows)
    )
    out = tmp_path / "numeric"
    result = CliRunner().invoke(
        app,
        [
            "numeric",
            "score",
            "--data",
            str(NUMERIC / "data.json"),
            "--predictions",
            str(preds),
            "--out",
            str(out),
            "--bootstrap",
            "0",
        ],
    )
    assert result.exit_code == 0, result.output
    latency = json.loads((out / "statistics.json").read_text())["latency_s"]
    assert latency["mean"] == pytest.approx(0.0137, abs=5e-5)
    expected = format_seconds_joined([latency[k] for k in ("mean", "median", "p95")])
    assert expected == "13.7 / 13.3 / 19.2 ms"
    assert f"| Latency per turn, mean / median / p95 | {expected} |" in (
        (out / "report.md").read_text()
    )


def test_json_run_comparison_table_shows_latency_in_ms() -> None:
    from fieldcheck._cli.json_cmd import print_comparison

    console = Console(record=True, width=200)
    row = {
        "model": "m",
        "with_output": 3,
        "records": 3,
        "call_errors": 0,
        "failed": 0,
        "completeness": 1.0,
        "hallucination": 0.0,
        "accuracy": 1.0,
        "rqs": 1.0,
        "latency_s_mean": 0.0234,
    }
    print_comparison(console, [row, row | {"model": "n", "latency_s_mean": None}])
    text = console.export_text()
    assert "latency" in text and "23.4 ms" in text

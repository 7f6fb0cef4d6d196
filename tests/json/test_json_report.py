"""report.md, report.html and plots of a JSON batch (issue 9, "Reports and gating"): content from
hand-checked batches, escaping of data, the plots, and what a batch with nothing scored writes."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck.jsoneval import (
    BatchRecord,
    BatchSummary,
    FieldSummary,
    RecordError,
    evaluate_batch,
)
from fieldcheck.jsoneval._report import (
    PLOT_FIELDS,
    fields_by_match_rate,
    match_rate_title,
    plotted_fields,
)

from .conftest import write_outputs

EVIL = "<img src=x onerror=alert(1)>"
PNG = b"\x89PNG\r\n\x1a\n"
BATCH_FILES = [
    "errors.jsonl",
    "fields.csv",
    "plot_field_match_rate.png",
    "plot_score_distribution.png",
    "records.jsonl",
    "report.html",
    "report.md",
    "summary.json",
]


def _records() -> list[BatchRecord]:
    """Three records; fields a (always right), b (right once), EVIL (never right)."""
    gt = {"a": 1, "b": 2, EVIL: 5}
    return [
        BatchRecord(id="r1", ground_truth=gt, output={"a": 1, "b": 2, EVIL: 6}),
        BatchRecord(id=EVIL, ground_truth=gt, output={"a": 1, "b": 3, EVIL: 6}),
        BatchRecord(id="r3", ground_truth=gt, output={"a": 1, EVIL: 7, "x": 1}),
    ]


def _md_row(text: str, first: str) -> list[str]:
    return next(
        [c.strip() for c in line.strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith(f"| {first} |")
    )


def test_report_files_tables_and_plots(tmp_path: Path, table_matchers: dict[str, Any]) -> None:
    batch = write_outputs(tmp_path / "out", _records(), matchers=table_matchers, bootstrap=200)
    paths = batch.paths
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == BATCH_FILES
    assert paths["report_md"] == tmp_path / "out" / "report.md"
    assert paths["report_html"] == tmp_path / "out" / "report.html"
    for key in ("plot_field_match_rate", "plot_score_distribution"):
        assert paths[key].read_bytes().startswith(PNG)
    text = paths["report_md"].read_text()
    assert text.startswith("# JSON evaluation\n\nSignature: `json|bootstrap:200|")
    # r1: comp 1, acc 2/3, RQS 0.45*2/3 + 0.25 + 0.15 = 0.7
    # r2: comp 1, acc 1/3, RQS 0.15 + 0.25 + 0.15 = 0.55
    # r3: comp 2/3, acc 1/2 (a right, EVIL wrong), hall 1/4 (x), RQS 0.225 + 1/6 + 0.15 - 0.0375
    #     = 0.50416..; mean RQS (0.7 + 0.55 + 0.5041667) / 3 = 0.5847
    ci = batch.summary.ci["rqs"]
    assert _md_row(text, "RQS") == ["RQS", "0.585", f"[{ci.low:.3f}, {ci.high:.3f}]"]
    assert "Means over 3 scored records, with 95% bootstrap intervals." in text
    # every record failed (a field not matched in each), none not scored
    assert (
        "- records: 3\n- scored: 3\n- failed: 3\n- not scored: 0\n- not an object: 0\n"
        "- safety leaks: 0"
    ) in text
    # fields, the lowest match rate first; x was never scored (n/a, last)
    evil_md = r"\<img src=x onerror=alert(1)\>"
    assert _md_row(text, evil_md) == [evil_md, "EXACT", "3", "3", "0", "0.000", "0", "0"]
    assert _md_row(text, "b") == ["b", "EXACT", "3", "2", "1", "0.500", "1", "0"]
    assert _md_row(text, "a") == ["a", "EXACT", "3", "3", "3", "1.000", "0", "0"]
    assert _md_row(text, "x") == ["x", "", "0", "0", "0", "n/a", "0", "1"]
    order = [text.index(f"| {name} |") for name in (evil_md, "b", "a", "x")]
    assert order == sorted(order)
    # worst records, the lowest RQS first, with the fields that did not match
    assert _md_row(text, "r3") == ["r3", evil_md, "0.504", "0.667", "0.250", "0.500"]
    assert _md_row(text, evil_md + " | " + evil_md + ", b")[:3] == [
        evil_md,
        evil_md + ", b",
        "0.550",
    ]
    assert text.index("| r3 |") < text.index(f"| {evil_md} | {evil_md}, b |") < text.index("| r1 |")
    assert "![plot\\_field\\_match\\_rate](plot_field_match_rate.png)" in text
    assert "Weights used: w\\_accuracy=0.45, w\\_completeness=0.25" in text
    assert "`rqs = (w_accuracy × accuracy) + (w_completeness × completeness)" in text
    assert "fuzzy\\_threshold = 0.85 in this run" in text
    assert "Input problems" not in text  # no errors, no section


def test_data_is_escaped_in_markdown_and_html(
    tmp_path: Path, table_matchers: dict[str, Any]
) -> None:
    error = RecordError(record=EVIL, reason="bad", message=f"data.jsonl:4: record {EVIL}: bad")
    paths = write_outputs(tmp_path, _records(), matchers=table_matchers, prior_errors=[error]).paths
    page = paths["report_html"].read_text()
    text = paths["report_md"].read_text()
    assert EVIL not in page and EVIL not in text
    assert page.count(html.escape(EVIL)) >= 4  # field row, id, unmatched fields, input problem
    assert "- data.jsonl:4: record " + r"\<img src=x onerror=alert(1)\>" + ": bad" in text


def test_input_problems_show_twenty_and_a_count(
    tmp_path: Path, table_matchers: dict[str, Any]
) -> None:
    errors = [RecordError(line=i, reason="bad", message=f"f.jsonl:{i}: bad") for i in range(25)]
    batch = write_outputs(tmp_path, _records(), matchers=table_matchers, prior_errors=errors)
    text = batch.paths["report_md"].read_text()
    assert "- f.jsonl:19: bad\n- 5 more in errors.jsonl\n" in text
    assert "f.jsonl:20:" not in text
    assert "- failed: 3\n- not scored: 25\n" in text


def test_worst_records_are_the_ten_lowest(tmp_path: Path, table_matchers: dict[str, Any]) -> None:
    # record i has i of 12 fields right: the 10 lowest RQS are records 0..9, lowest first
    gt = {f"f{j:02d}": j for j in range(12)}
    records = [
        BatchRecord(id=f"id{i:02d}", ground_truth=gt, output={k: v + (j >= i) for j, (k, v) in enumerate(gt.items())})
        for i in range(12)
    ]  # fmt: skip
    text = write_outputs(tmp_path, records, matchers=table_matchers).paths["report_md"].read_text()
    rows = [
        line.split(" | ")[0][2:]
        for line in text.splitlines()
        if line.startswith(("| id0", "| id1"))
    ]
    assert rows == [f"id{i:02d}" for i in range(10)]
    assert "The 10 lowest RQS." in text


def test_nothing_scored_writes_no_plot_and_says_so(tmp_path: Path) -> None:
    error = RecordError(line=1, reason="missing", message="f.jsonl:1: field 'output': missing")
    paths = write_outputs(tmp_path / "out", [], prior_errors=[error]).paths
    assert "plot_field_match_rate" not in paths and "plot_score_distribution" not in paths
    assert not list((tmp_path / "out").glob("*.png"))
    text = paths["report_md"].read_text()
    assert "No record was scored: no means, intervals or plots." in text
    assert "No field was scored: no match-rate plot." in text
    assert "- f.jsonl:1: field 'output': missing" in text


def test_only_unscored_fields_give_no_match_rate_plot(
    tmp_path: Path, table_matchers: dict[str, Any]
) -> None:
    records = [BatchRecord(id=1, ground_truth={"a": 1}, output="not json")]
    paths = write_outputs(tmp_path, records, matchers=table_matchers).paths
    assert sorted(k for k in paths if k.startswith("plot_")) == ["plot_score_distribution"]
    text = paths["report_md"].read_text()
    assert "No field was scored: no match-rate plot." in text
    assert "| 1 | (not an object: text) | 0.000 | 0.000 | 1.000 | 0.000 |" in text


def _summary(fields: dict[str, FieldSummary], batch: Any) -> BatchSummary:
    return batch.summary.model_copy(update={"fields": fields})


def test_match_rate_plot_shows_the_thirty_lowest(table_matchers: dict[str, Any]) -> None:
    batch = evaluate_batch(_records(), matchers=table_matchers)
    # field k matched k of 40 times; k=35..39 are the 5 best, left out
    fields = {f"f{k:02d}": FieldSummary(expected=40, scored=40, matched=k) for k in range(40)}
    fields["never"] = FieldSummary(expected=3, missing=3)
    summary = _summary(dict(sorted(fields.items(), reverse=True)), batch)
    shown, left_out = plotted_fields(summary)
    assert [name for name, _ in shown] == [f"f{k:02d}" for k in range(PLOT_FIELDS)]
    assert left_out == 10
    assert match_rate_title(len(shown), left_out) == (
        "Match rate per field (the 30 lowest; 10 more not shown)"
    )
    assert match_rate_title(4, 0) == "Match rate per field"
    assert fields_by_match_rate(summary)[-1][0] == "never"


def test_cli_batch_writes_the_report(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(
        '{"id": 1, "ground_truth": {"n": 1, "s": "SKU-1"}, "output": {"n": 1, "s": "SKU-2"}}\n'
    )
    result = CliRunner().invoke(app, ["json", "batch", str(data), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        [*BATCH_FILES, "run.json"]
    )
    text = (tmp_path / "out" / "report.md").read_text()
    assert "| s | EXACT | 1 | 1 | 0 | 0.000 | 0 | 0 |" in text  # SKU-1 is an identifier: EXACT

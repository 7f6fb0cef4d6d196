"""`fieldcheck slots score` end to end, outputs and their safety, usage errors, the demo."""

from __future__ import annotations

import csv
import importlib.util
import json
import logging
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from slots_helpers import slot
from tests.report_html import embedded_pngs, external_refs
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck._cli.slots_cmd import EXAMPLES

Jsonl = Callable[[str, list[Any]], Path]
MODEL_KEYS = {
    "precision",
    "recall",
    "f1",
    "exact_match_rate",
    "token_precision",
    "token_recall",
    "token_f1",
    "bleu1",
    "llm_judge",
    "latency",
    "extra_slots",
    "extra_values",
    "per_topic",
    "counts",
    "ci",
    "sessions_not_scored",  # {} for plain files: only `slots run` leaves sessions out
}
GOLD = [
    slot("u1", 1, "basic_info", "name", "Alice"),
    slot("u1", 1, "interests", "hobbies", "chess"),
    slot("u1", 2, "mental_state", "mood", "tired"),
]
PRED_A = [
    slot("u1", 1, "basic_info", "name", "Alice"),
    slot("u1", 2, "mental_state", "mood", "calm"),
]
PRED_B = [*GOLD, slot("u1", 2, "interests", "dream_job", "surgeon", "pilot")]


def _invoke(*args: str) -> Any:
    # wide, so that Rich does not wrap long paths inside the error box
    return CliRunner().invoke(app, ["slots", "score", *args], env={"COLUMNS": "400"})


def _files(jsonl: Jsonl) -> dict[str, Path]:
    return {
        "gold": jsonl("gold.jsonl", GOLD),
        "a": jsonl("a.jsonl", PRED_A),
        "b": jsonl("b.jsonl", PRED_B),
        "lat": jsonl(
            "lat.jsonl",
            [
                {"user": "u1", "session": 1, "seconds": 2.0},
                {"user": "u1", "session": 2, "seconds": 4.0},
            ],
        ),
    }


def test_score_writes_every_output(jsonl: Jsonl, tmp_path: Path) -> None:
    f, out = _files(jsonl), tmp_path / "out"
    result = _invoke(
        "--gold", str(f["gold"]), "--pred", f"a={f['a']}", "--pred", f"b={f['b']}",
        "--latency", f"b={f['lat']}", "--bootstrap", "200", "--out", str(out), "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data == json.loads((out / "metrics.json").read_text())
    assert set(data) == {"models", "paired_f1", "signature", "complete"}  # complete: issue 9
    assert list(data["models"]) == ["a", "b"]
    for model in data["models"].values():
        assert set(model) == MODEL_KEYS and model["sessions_not_scored"] == {}
        assert set(model["counts"]) == {"tp", "fp", "fn", "gold_slots", "sessions"}
        assert set(model["per_topic"]["basic_info"]) == {
            "precision", "recall", "f1", "exact_match_rate", "extra_slots", "extra_values",
        }  # fmt: skip
    a, b = data["models"]["a"], data["models"]["b"]
    assert a["counts"] == {"tp": 2, "fp": 0, "fn": 1, "gold_slots": 3, "sessions": 2}
    assert a["latency"] is None and a["llm_judge"] is None
    assert b["latency"] == {"mean": 3.0, "median": 3.0, "p95": 2.0, "total": 6.0}
    assert (b["extra_slots"], b["extra_values"]) == (1, 2)
    assert (
        data["signature"]["system"] == "slots" and data["signature"]["settings"]["bootstrap"] == 200
    )
    assert data["paired_f1"][0]["model_a"] == "a" and data["paired_f1"][0]["p_value"] is not None
    assert data["paired_f1"][0]["sessions"] == 2  # every gold session
    # a Rich table per model and the spec's per-topic printout lines go to the console (stderr
    # with --json)
    assert re.search(r"│ tp / fp / fn\s+│\s+2 / 0 / 1 │", result.stderr)  # model a's table
    assert "  basic_info           P=1.000 R=1.000 F1=1.000" in result.stderr
    assert "  interests            P=0.000 R=0.000 F1=0.000" in result.stderr
    for name in ("metrics.csv", "per_topic.csv", "report.md", "report.html", "errors.jsonl",
                 "plot_prf1.png", "plot_topic_f1_heatmap.png", "plot_latency.png",
                 "plot_extra_slots_by_topic.png"):  # fmt: skip
        assert (out / name).exists(), name
    assert (out / "plot_prf1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.DictReader((out / "per_topic.csv").open()))
    assert len(rows) == 2 * 3 and {r["topic"] for r in rows} == {
        "basic_info",
        "interests",
        "mental_state",
    }
    metrics = list(csv.DictReader((out / "metrics.csv").open()))
    assert [r["model"] for r in metrics] == ["a", "b"] and metrics[0]["llm_judge"] == ""
    report = (out / "report.md").read_text()
    assert "## Results Summary" in report and "### Key findings" in report


def test_a_topic_only_another_model_invented_has_no_row_for_this_model(
    jsonl: Jsonl, tmp_path: Path
) -> None:
    # y invents "interests"; x has no gold and no prediction there, so no P/R/F1 0.000 for x
    # (it had one in the terminal, per_topic.csv, metrics.json and the report: a tester's finding)
    gold = [slot("u1", 1, "basic_info", "name", "Bob")]
    x, y = jsonl("x.jsonl", gold), jsonl("y.jsonl", [*gold, slot("u1", 1, "interests", "m", "z")])
    out = tmp_path / "out"
    args = ["--gold", str(jsonl("g.jsonl", gold)), "--pred", f"x={x}", "--pred", f"y={y}"]
    result = _invoke(*args, "--bootstrap", "0", "--out", str(out))
    assert result.exit_code == 0, result.output
    read = csv.DictReader((out / "per_topic.csv").read_text().splitlines())
    rows = [(r["model"], r["topic"], r["f1"]) for r in read]
    assert rows == [
        ("x", "basic_info", "1.0"),
        ("y", "basic_info", "1.0"),
        ("y", "interests", "0.0"),
    ]
    models = json.loads((out / "metrics.json").read_text())["models"]
    assert list(models["x"]["per_topic"]) == ["basic_info"]
    assert list(models["y"]["per_topic"]) == ["basic_info", "interests"]
    assert result.output.count("interests            P=0.000 R=0.000 F1=0.000") == 1
    assert "| x | interests |" not in (out / "report.md").read_text()


def test_hostile_model_names_are_escaped(jsonl: Jsonl, tmp_path: Path) -> None:
    f, out = _files(jsonl), tmp_path / "out"
    evil = "<script>alert(1)</script>"
    formula = "@SUM(A1)+cmd"  # NAME=FILE splits at the first '=', so a name cannot hold one
    hostile_pred = [*PRED_B, slot("u1", 1, "<img src=x onerror=alert(2)>", "f", "<b>v</b>")]
    result = _invoke(
        "--gold", str(f["gold"]), "--pred", f"{evil}={f['a']}",
        "--pred", f"{formula}={jsonl('h.jsonl', hostile_pred)}", "--bootstrap", "0", "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    page = (out / "report.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(2)&gt;" in page
    md = (out / "report.md").read_text()
    assert "\\<script\\>" in md and "<script>" not in md
    cells = [r["model"] for r in csv.DictReader((out / "metrics.csv").open())]
    assert cells[1] == "'" + formula


def test_input_errors_exit_3_and_are_listed(jsonl: Jsonl, tmp_path: Path) -> None:
    f, out = _files(jsonl), tmp_path / "out"
    bad = jsonl("bad.jsonl", [*PRED_A, '{"user": "u1", "session": 1}', PRED_A[0]])
    result = _invoke(
        "--gold", str(f["gold"]), "--pred", f"a={bad}", "--bootstrap", "0", "--out", str(out)
    )
    assert result.exit_code == 3
    errors = [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]
    assert [(e["line"], e["field"]) for e in errors] == [(3, "topic"), (4, "field")]
    assert "duplicate slot" in errors[1]["reason"]
    assert f"{bad}:3: field 'topic'" in result.output
    assert json.loads((out / "metrics.json").read_text())["models"]["a"]["counts"]["tp"] == 2


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--latency", "nobody=lat.jsonl"], "unknown model 'nobody'"),
        (["--judge", "ghost=x.jsonl"], "unknown model 'ghost'"),
        (["--pred", "no-equals-sign"], "expected NAME=FILE"),
        (["--pred", "a=b.jsonl"], "model names must be unique"),
        (
            ["--tp", "sometimes"],
            "--tp: 'sometimes' is not one of 'presence', 'exact', 'fuzzy', 'semantic'",
        ),
        (["--judge-model", "m"], "give both --judge-base-url and --judge-model"),
    ],
)
def test_usage_errors_exit_2(jsonl: Jsonl, tmp_path: Path, extra: list[str], message: str) -> None:
    f = _files(jsonl)
    result = _invoke(
        "--gold", str(f["gold"]), "--pred", f"a={f['a']}", "--out", str(tmp_path / "o"), *extra
    )
    assert result.exit_code == 2
    assert message in " ".join(result.output.replace("│", " ").split())


def test_predictions_of_no_gold_session_are_a_usage_error(
    jsonl: Jsonl, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A --pred file that shares no session with the gold (another dataset's predictions) is a
    usage error naming both files and the first session of each, before anything is written, as
    numeric's "no prediction matches" is (a new user's finding: F1 0.000 and exit 0). A partial
    overlap still scores, with its warning."""
    f = _files(jsonl)
    other = jsonl("u7.jsonl", [{**g, "user": "u7"} for g in GOLD])
    out = tmp_path / "o"
    result = _invoke("--gold", str(other), "--pred", f"a={f['a']}", "--out", str(out))
    assert result.exit_code == 2, result.output
    assert " ".join(result.stderr.split()).startswith(
        f"error: --pred: {f['a']}: no session of model 'a' is a session of {other} (first "
        "prediction: u1/1; first gold session: u7/1): are --gold and --pred for the same users "
        "and sessions?"
    ), result.stderr
    assert not out.exists()
    partial = jsonl("partial.jsonl", [*PRED_A[:1], {**PRED_A[1], "user": "u7"}])
    result = _invoke("--gold", str(f["gold"]), "--pred", f"a={partial}", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "model 'a': 1 session(s) not in the gold file (u7/2)" in caplog.text


def test_out_that_is_a_file_is_a_usage_error(jsonl: Jsonl, tmp_path: Path) -> None:
    f = _files(jsonl)
    a_file = tmp_path / "taken"
    a_file.write_text("not a directory")
    for out, message in [
        (a_file, f"{a_file} is a file, not a directory"),
        (a_file / "below", "cannot create directory"),
    ]:
        result = _invoke("--gold", str(f["gold"]), "--pred", f"a={f['a']}", "--out", str(out))
        assert result.exit_code == 2, result.output
        assert message in " ".join(result.output.replace("│", " ").split())
        assert "Traceback" not in result.output
    assert a_file.read_text() == "not a directory"


def test_output_file_that_cannot_be_written_exits_1(jsonl: Jsonl, tmp_path: Path) -> None:
    from fieldcheck.reports import RunFolder

    f, out = _files(jsonl), tmp_path / "out"
    # an unfinished run of the same command, continued, with a directory where a file goes
    given = [("gold", f["gold"]), ("pred:a", f["a"])]
    partial = RunFolder.open(out, command="slots score", inputs=given, models=["a"]).path
    (partial / "metrics.json").mkdir()
    result = _invoke(
        "--gold", str(f["gold"]), "--pred", f"a={f['a']}", "--bootstrap", "0", "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 1  # not the usage status: the command was right (decisions.md)
    text = " ".join(result.output.replace("│", " ").split())
    assert text.startswith("error: --out: cannot write ")
    assert len(result.output.strip().splitlines()) == 1  # one line, no usage block or box
    assert f"{partial / 'metrics.json'}: Is a directory" in text
    assert not out.exists()


def test_model_names_with_rich_markup_spaces_and_slashes(jsonl: Jsonl, tmp_path: Path) -> None:
    f, out = _files(jsonl), tmp_path / "out"
    result = _invoke(
        "--gold", str(f["gold"]), "--pred", f"[/bold]x={f['a']}", "--pred", f"my model/v2={f['b']}",
        "--latency", f"my model/v2={f['lat']}", "--bootstrap", "0", "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "[/bold]x" in result.output  # printed as text, not parsed as a closing tag
    assert list(json.loads((out / "metrics.json").read_text())["models"]) == [
        "[/bold]x",
        "my model/v2",
    ]
    # plot files have fixed names, so a model name never becomes a path
    assert sorted(p.name for p in out.glob("*.png")) == [
        "plot_extra_slots_by_topic.png",
        "plot_latency.png",
        "plot_prf1.png",
        "plot_topic_f1_heatmap.png",
    ]


def test_help_explains_every_option_and_the_exit_statuses() -> None:
    result = CliRunner().invoke(app, ["slots", "score", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    text = " ".join(result.output.replace("│", " ").split())
    for option in ("--gold", "--pred", "--out", "--latency", "--judge", "--judge-base-url",
                   "--judge-model", "--tp", "--threshold", "--bootstrap", "--seed", "--json"):  # fmt: skip
        assert option in text, option
    assert "presence|exact|fuzzy|semantic" in text
    assert "3 when some lines were invalid" in text and "2 on usage errors" in text
    assert "one of the --pred names" in text and "absent, never 0" in text


def test_unreadable_file_is_a_usage_error(jsonl: Jsonl, tmp_path: Path) -> None:
    f = _files(jsonl)
    result = _invoke(
        "--gold",
        str(f["gold"]),
        "--pred",
        f"a={tmp_path / 'missing.jsonl'}",
        "--out",
        str(tmp_path / "o"),
    )
    assert result.exit_code == 2 and "cannot read file" in result.output


def test_the_bundled_example_is_fast_and_complete(tmp_path: Path) -> None:
    given = ["--gold", str(EXAMPLES / "gold.synthetic.jsonl")]
    for kind in ("pred", "latency", "judge"):
        for m in ("synthetic-careful", "synthetic-fast", "synthetic-eager"):
            given += [f"--{kind}", f"{m}={EXAMPLES / f'{kind}_{m}.synthetic.jsonl'}"]
    start = time.perf_counter()
    result = CliRunner().invoke(app, ["slots", "score", *given, "--out", str(tmp_path / "demo")])
    assert result.exit_code == 0, result.output
    assert time.perf_counter() - start < 30
    data = json.loads((tmp_path / "demo" / "metrics.json").read_text())
    assert set(data["models"]) == {"synthetic-careful", "synthetic-fast", "synthetic-eager"}
    assert all(
        m["counts"]["sessions"] == 15 and m["llm_judge"] is not None
        for m in data["models"].values()
    )
    assert "report.html" in result.output


def test_example_generator_is_deterministic(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "slots_example_generate", EXAMPLES / "generate.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.build(tmp_path)
    bundled = sorted(p.name for p in EXAMPLES.glob("*.jsonl"))
    assert bundled == sorted(p.name for p in tmp_path.glob("*.jsonl")) and len(bundled) == 11
    assert all("synthetic" in name for name in bundled)
    for name in bundled:
        assert (tmp_path / name).read_bytes() == (EXAMPLES / name).read_bytes(), name
    gold = [
        json.loads(line) for line in (EXAMPLES / "gold.synthetic.jsonl").read_text().splitlines()
    ]
    assert {(g["user"], g["session"]) for g in gold} == {
        (u, s) for u in ("u1", "u2", "u3") for s in range(1, 6)
    }
    assert {g["topic"] for g in gold} == {"basic_info", "interests", "mental_state"}


def test_judge_endpoint_from_the_command_line(
    jsonl: Jsonl, tmp_path: Path, chat_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIELDCHECK_JUDGE_API_KEY", "sk-judge-secret")
    server = chat_server(lambda _request: '{"score": 0.25}')
    f, out = _files(jsonl), tmp_path / "out"
    judge_file = jsonl(
        "judge.jsonl",
        [{"user": "u1", "session": 1, "topic": "basic_info", "field": "name", "score": 1.0}],
    )
    result = _invoke(
        "--gold", str(f["gold"]), "--pred", f"a={f['a']}", "--pred", f"b={f['b']}", "--judge", f"a={judge_file}",
        "--judge-base-url", server.base_url, "--judge-model", "judge-x", "--bootstrap", "0", "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    models = json.loads((out / "metrics.json").read_text())["models"]
    # a: file wins; name 1.0, mood predicted but unscored (left out), hobbies missed 0 -> 1.0 / 2
    assert models["a"]["llm_judge"] == 0.5
    # b: the endpoint scores its 3 predicted gold slots 0.25 each; the extra slot is not judged
    assert models["b"]["llm_judge"] == 0.25 and len(server.requests) == 3
    assert "OPENAI_API_KEY" not in (out / "report.md").read_text()
    # the stored settings name the judge's endpoint and model, never its key
    from fieldcheck.store import Store

    run_id = result.output.split("stored as run ", 1)[1].split(":", 1)[0]
    store = Store()
    run = store.get_run(run_id)
    store.close()
    assert run is not None and run.settings == {
        "tp": "presence",
        "threshold": None,
        "bootstrap": 0,
        "seed": 0,
        "judge_base_url": server.base_url,
        "judge_model": "judge-x",
    }
    assert "sk-judge-secret" not in json.dumps(run.settings)


def test_rescore_keeps_a_judge_models_scores_and_signature(
    jsonl: Jsonl, tmp_path: Path, chat_server: Any
) -> None:
    # a's slots are judged by a file, b's by the judge model; the items keep both
    server = chat_server(lambda _request: '{"score": 0.25}')
    f = _files(jsonl)
    judge_file = jsonl(
        "judge.jsonl",
        [{"user": "u1", "session": 1, "topic": "basic_info", "field": "name", "score": 1.0}],
    )
    result = _invoke(
        "--gold", str(f["gold"]), "--pred", f"a={f['a']}", "--pred", f"b={f['b']}", "--judge", f"a={judge_file}",
        "--judge-base-url", server.base_url, "--judge-model", "judge-x", "--bootstrap", "0",
        "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    asked = len(server.requests)
    from fieldcheck.runs import rescore
    from fieldcheck.store import Store

    store = Store()
    parent = store.get_run(result.output.split("stored as run ", 1)[1].split(":", 1)[0])
    assert parent is not None and parent.metrics is not None
    child = rescore(store, parent.id)
    store.close()
    assert child.metrics is not None
    judged = {name: m["llm_judge"] for name, m in child.metrics["models"].items()}
    assert judged == {"a": 0.5, "b": 0.25}  # as the run had them, not null
    assert judged == {name: m["llm_judge"] for name, m in parent.metrics["models"].items()}
    assert (
        json.loads(child.signature)["settings"]["judge"]
        == ("a=file;b=llm:judge-x:slot-v2")
        == json.loads(parent.signature)["settings"]["judge"]
    )
    assert len(server.requests) == asked  # no judge asked again


def test_plot_legends_never_hide_a_bar(
    jsonl: Jsonl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from matplotlib.figure import Figure

    seen: dict[str, tuple[int, int]] = {}
    original = Figure.savefig

    def check(fig: Any, path: Path, **options: Any) -> None:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            legend = ax.get_legend()
            if legend is None:
                continue
            box = legend.get_window_extent(renderer)
            bars = [p for p in ax.patches if p.get_height() > 0]
            hidden = [p for p in bars if box.overlaps(p.get_window_extent(renderer))]
            seen[path.name] = (len(bars), len(hidden))
        original(fig, path, **options)

    monkeypatch.setattr(Figure, "savefig", check)  # as each plot is saved, laid out
    f = _files(jsonl)
    # tall bars on the right, where an inside legend would sit
    many = [*PRED_B, *(slot("u1", 2, "mental_state", f"x{i}", "v") for i in range(9))]
    result = _invoke(
        "--gold", str(f["gold"]), "--pred", f"a={f['a']}", "--pred", f"b={jsonl('m.jsonl', many)}",
        "--bootstrap", "0", "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert set(seen) == {"plot_prf1.png", "plot_extra_slots_by_topic.png"}
    assert all(bars > 0 and hidden == 0 for bars, hidden in seen.values()), seen


def test_report_html_has_summary_findings_tables_and_plots(jsonl: Jsonl, tmp_path: Path) -> None:
    f, out = _files(jsonl), tmp_path / "out"
    result = _invoke(
        "--gold", str(f["gold"]), "--pred", f"a={f['a']}", "--pred", f"b={f['b']}",
        "--latency", f"a={f['lat']}", "--latency", f"b={f['lat']}", "--bootstrap", "50", "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    page = (out / "report.html").read_text()
    summary = page.split("<h2>Results Summary</h2>")[1].split("</table>")[0]
    assert (
        "<th>Model</th><th>F1</th><th>Latency</th><th>Strengths</th><th>Weaknesses</th>" in summary
    )
    # b finds all 3 gold slots plus 1 extra: P 0.75, R 1, F1 6/7 = 0.857; a: P 1, R 2/3, F1 0.8
    assert (
        "<tr><td><strong>b</strong></td><td><strong>0.857</strong></td><td>3.00 s</td>" in summary
    )
    assert "<strong>Best overall</strong>" in summary
    findings = page.split("<h3>Key findings</h3>")[1].split("<h2>")[0]
    assert "<strong>b is the best overall (F1 0.857)</strong>" in findings
    assert "7% better F1 than the next best, a (0.800)" in findings  # (6/7 - 0.8) / 0.8
    assert "Topic difficulty ranking" in findings and "F1 differences" in findings
    assert "<ul></ul>" not in page
    embedded = embedded_pngs(page)  # report.html is one file: each plot's PNG bytes inside it
    assert external_refs(page) == []
    for key, name in (("prf1", "plot_prf1.png"), ("topic_f1", "plot_topic_f1_heatmap.png"),
                      ("latency", "plot_latency.png"), ("extra", "plot_extra_slots_by_topic.png")):  # fmt: skip
        assert (
            embedded[key] == (out / name).read_bytes()
            and f"]({name})" in (out / "report.md").read_text()
        )
    assert "<h2>Metrics</h2>" in page and "<h2>Per topic</h2>" in page


def test_report_has_the_shared_report_layout(jsonl: Jsonl, tmp_path: Path) -> None:
    """slots' report is built on ``reports.Report`` as json's and numeric's are: its sections in
    the shared order (input problems, then plots, then the glossary, last), a paragraph on one
    line, the signature breakable after its separators (docs/decisions.md)."""
    f, out = _files(jsonl), tmp_path / "out"
    stray = jsonl("s.jsonl", [*PRED_B, slot("u9", 1, "t", "f", "x")])  # a session not in the gold
    result = _invoke(
        "--gold", str(f["gold"]), "--pred", f"a={f['a']}", "--pred", f"b={stray}",
        "--latency", f"a={f['lat']}", "--latency", f"b={f['lat']}", "--bootstrap", "0", "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    md = (out / "report.md").read_text()
    assert re.findall(r"^#+ .*", md, re.M) == [
        "# Slot extraction benchmark",
        "## Results Summary",
        "### Key findings",
        "## Metrics",
        "## Per topic",
        "## Input problems",
        "## Plots",
        "## Glossary",
    ]
    assert (
        "\n| a | 0.800 | 3.00 s | highest precision (1.00), fewest hallucinations (0 extra slots) "
        "| Lowest recall (0.67) |\n| **b** | **0.857** | 3.00 s | **Best overall**, highest recall "
        "(1.00), best F1 on interests | Lowest precision (0.75), most hallucinations (1 extra "
        "slots) |\n\nLatency is the mean time per session (ms below a second). The rules that "
        "write Strengths, Weaknesses and Key findings are listed in docs/slots.md.\n\n### Key"
    ) in md
    assert "\n1. **b is the best overall (F1 0.857)**\n   - 7% better F1 than the next best" in md
    assert "\n   - a - b: -0.057 (p = n/a)\n\n## Metrics\n" in md
    assert (
        "s.jsonl:5: model 'b': 1 session(s) not in the gold file (u9/1)"
        in md.split("## Input problems\n\n- warning: ")[1].split("\n")[0]
    )
    assert md.endswith(
        "- **95% interval** `percentile bootstrap over sessions`: seeded (--seed), --bootstrap "
        "resamples; paired p-values resample both models' sessions together\n"
    )
    page = (out / "report.html").read_text()
    assert re.findall(r"<h[1-3]>([^<]*)</h[1-3]>", page) == [
        "Slot extraction benchmark", "Results Summary", "Key findings", "Metrics", "Per topic",
        "Input problems", "Plots", "Glossary",
    ]  # fmt: skip
    assert "<p>Signature: <code>slots|<wbr>bootstrap:0|<wbr>canonicalize:" in page
    assert "<tr><td><strong>b</strong></td><td><strong>0.857</strong></td><td>3.00 s</td>" in page
    assert "<ol><li><strong>b is the best overall (F1 0.857)</strong><ul><li>7% better F1" in page


def test_hostile_users_topics_fields_and_values_are_escaped(jsonl: Jsonl, tmp_path: Path) -> None:
    f, out = _files(jsonl), tmp_path / "out"
    topic = '=HYPERLINK("http://x")\r\n## <i>owned</i> | ~~x~~'
    hostile = [
        *PRED_A,
        slot("u1", 2, topic, "<img src=x onerror=alert(1)>", "<script>v</script>"),
        slot("<script>alert(3)</script>", 1, "t", "f", "x"),  # a session not in the gold
        slot("u1", 1, "basic_info", "name", "dup"),  # duplicate of line 1
    ]
    result = _invoke(
        "--gold", str(f["gold"]), "--pred", f"a={jsonl('h.jsonl', hostile)}", "--bootstrap", "0",
        "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 3  # the duplicate is an input error; everything is still written
    page = (out / "report.html").read_text()
    for raw in ("<script>", "<img src=x", "<i>owned"):
        assert raw not in page
    assert "&lt;script&gt;alert(3)&lt;/script&gt;" in page  # in the unknown-session warning
    report = (out / "report.md").read_text()
    assert "<script>" not in report and "<i>" not in report
    assert "\n## " not in report.replace("\n## Results", "").replace("\n## Metrics", "").replace(
        "\n## Per topic", ""
    ).replace("\n## Plots", "").replace("\n## Input problems", "").replace("\n## Glossary", "")
    assert "\\~\\~x\\~\\~" in report and "\\| \\~" in report
    assert "\r" not in report  # a line break in a value cannot end a table row
    cells = {r["topic"] for r in csv.DictReader((out / "per_topic.csv").open(newline=""))}
    assert "'" + topic in cells  # a formula cell is neutralised


def test_judge_failures_exit_3_and_are_listed(
    jsonl: Jsonl, tmp_path: Path, chat_server: Any
) -> None:
    server = chat_server(lambda request: "1.5")  # outside [0, 1]: a judge error, not a score
    f, out = _files(jsonl), tmp_path / "out"
    result = _invoke(
        "--gold", str(f["gold"]), "--pred", f"a={f['a']}", "--judge-base-url", server.base_url,
        "--judge-model", "j", "--bootstrap", "0", "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 3
    errors = [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]
    # the judge's failures, not the prediction file's: no file, line or field is blamed
    assert [(e["file"], e["line"], e["field"], e["record"]) for e in errors] == [
        (None, None, None, "u1/1 basic_info/name"),
        (None, None, None, "u1/2 mental_state/mood"),
    ]
    assert all(e["reason"].startswith("the judge failed on model 'a': ") for e in errors)
    assert json.loads((out / "metrics.json").read_text())["models"]["a"]["llm_judge"] is None


def test_judge_failures_are_said_once_and_the_summary_counts_them(
    jsonl: Jsonl, tmp_path: Path, chat_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Each judge failure was said twice (`N judge call(s) failed` and `N predicted gold slot(s)
    have no score from the judge`), and the Results Summary ranked a judge score whose failed
    slots were left out with no word of them (a new-user trial)."""
    server = chat_server(lambda request: "1.5" if "calm" in json.dumps(request) else "0.9")
    f, out = _files(jsonl), tmp_path / "out"
    with caplog.at_level(logging.WARNING, logger="fieldcheck"):
        result = _invoke(
            "--gold", str(f["gold"]), "--pred", f"a={f['a']}", "--pred", f"b={f['b']}",
            "--judge-base-url", server.base_url, "--judge-model", "j", "--bootstrap", "0",
            "--out", str(out),
        )  # fmt: skip
    assert result.exit_code == 3, result.output
    models = json.loads((out / "metrics.json").read_text())["models"]
    # a: name 0.9, mood's call failed (left out), hobbies missed (0): 0.45; b: 0.9 each
    assert (models["a"]["llm_judge"], models["b"]["llm_judge"]) == (0.45, 0.9)
    judge_lines = [r.getMessage() for r in caplog.records if "judge" in r.getMessage()]
    assert judge_lines == [
        "model 'a': 1 judge call(s) failed; those predicted gold slots have no judge score, "
        "the judge mean leaves them out"
    ]
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "lowest LLM judge score (0.45; 1 judge call(s) failed, left out)" in report
    assert "highest LLM judge score (0.90)" in report


def test_plot_labels_are_short_single_lines_without_mathtext() -> None:
    from fieldcheck.reports._document import label as _label

    assert _label("a$b\nc") == "a\\$b c"
    long = _label("M" * 500)
    assert len(long) == 24 and long.endswith("\u2026")


def test_report_has_the_spec_glossary(jsonl: Jsonl, tmp_path: Path) -> None:
    f = _files(jsonl)
    out = tmp_path / "out"
    result = _invoke(
        "--gold", str(f["gold"]), "--pred", f"a={f['a']}", "--bootstrap", "0", "--out", str(out)
    )
    assert result.exit_code in (0, 3), result.output
    md_text = (out / "report.md").read_text()
    page = (out / "report.html").read_text()
    assert "## Glossary" in md_text and "<h2>Glossary</h2>" in page
    assert "- **F1** `F1 = 2 × (Precision × Recall) / (Precision + Recall)`" in md_text
    assert "<dt>BLEU-1</dt><dd><code>BLEU-1 = Precision × Brevity Penalty</code>" in page
    # exact match is over all gold slots (the trial read "over the predicted gold slots")
    assert "canonicalisation, over all gold slots, missed ones included (spec 4)" in md_text


def test_reading_the_files_shows_progress_on_a_terminal_only(tmp_path: Path) -> None:
    import io

    from fieldcheck._cli._common import ProgressBar
    from fieldcheck._util.console import SafeConsole
    from fieldcheck.slots import SYSTEM

    gold = tmp_path / "gold.jsonl"
    gold.write_text(json.dumps(slot("u", 1, "t", "f", "v")) + "\n")
    given = [("gold", gold), ("pred:a", gold)]
    for terminal, shown in ((True, "reading 2 slot file(s)"), (False, "")):
        seen = io.StringIO()
        bar = ProgressBar(SafeConsole(file=seen, force_terminal=terminal))
        with (
            bar.bar,
            SYSTEM.prepare(
                given, {}, beside=tmp_path / "out", progress=bar.callback, extras={}
            ) as read,
        ):
            assert [read.gold.path, *(m.predictions.path for m in read.models)] == [gold, gold]
            bar.bar.refresh()
        assert shown in seen.getvalue() and (terminal or seen.getvalue() == "")


def test_scratch_files_that_cannot_be_written_are_one_line_exit_1(tmp_path: Path) -> None:
    """A full disk while the inputs are split into the scratch folder's bucket files (a tester's
    finding: a 69-line traceback): one line naming the bucket file, exit 1, nothing left. The
    disk is filled for real by a file-size limit on the command's process (RLIMIT_FSIZE, with
    SIGXFSZ ignored so that write() fails with EFBIG), on inputs big enough for buckets (9 MB)."""
    import resource
    import signal
    import subprocess
    import sys

    line = (
        '{{"user": "u{}", "session": 1, "topic": "basic_info", "field": "f{}", "values": ["v"]}}\n'
    )
    gold = tmp_path / "gold.jsonl"
    with gold.open("w") as f:
        f.writelines(line.format(i // 3, i) for i in range(120_000))
    assert gold.stat().st_size > 9 << 20  # two buckets (8 MiB each)
    cap = 2 << 20

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))

    out = tmp_path / "out"
    command = [sys.executable, "-m", "fieldcheck._cli.main", "slots", "score"]
    command += ["--gold", str(gold), "--pred", f"a={gold}", "--out", str(out), "--no-store"]
    done = subprocess.run(
        command, capture_output=True, text=True, preexec_fn=limited, timeout=120, check=False
    )
    assert done.returncode == 1, done.stderr
    [message] = done.stderr.strip().splitlines()
    assert message.startswith(f"error: --out: cannot write the run's scratch file {tmp_path}/")
    assert re.search(r"/\.fieldcheck-scratch-\w+/bucket\d\.bin: File too large$", message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gold.jsonl"]  # no scratch left


def test_a_scratch_folder_removed_while_running_is_one_line_exit_1(tmp_path: Path) -> None:
    """The scratch folder removed while the run goes on (a tester's finding: the second
    scorer's warning came before the error, two lines): one line, exit 1. The last --pred is a
    named pipe, so the folder is removed for sure while the inputs are split; three 9 MB slot
    files make 4 buckets, enough for a second scorer."""
    import errno
    import os
    import shutil
    import subprocess
    import sys

    line = (
        '{{"user": "u{}", "session": 1, "topic": "basic_info", "field": "f{}", "values": ["v"]}}\n'
    )
    gold = tmp_path / "gold.jsonl"
    with gold.open("w") as f:
        f.writelines(line.format(i // 3, i) for i in range(120_000))
    pipe = tmp_path / "pipe.jsonl"
    os.mkfifo(pipe)
    command = [sys.executable, "-m", "fieldcheck._cli.main", "slots", "score", "--gold", str(gold)]
    command += ["--pred", f"a={gold}", "--pred", f"b={gold}", "--pred", f"c={pipe}"]
    command += ["--out", str(tmp_path / "out"), "--no-store"]
    run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:  # until the run reads the pipe: the bucket files are open by then
            assert run.poll() is None and time.monotonic() < deadline, "the pipe was never read"
            try:
                fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError as exc:
                assert exc.errno == errno.ENXIO  # no reader yet
                time.sleep(0.01)
        [scratch] = tmp_path.glob(".fieldcheck-scratch-*")
        shutil.rmtree(scratch)
        os.write(fd, line.format(0, 0).encode())
        os.close(fd)
        _, stderr = run.communicate(timeout=120)
    finally:
        run.kill()
        run.wait()
    assert run.returncode == 1, stderr
    assert stderr.splitlines() == [
        f"error: --out: cannot read the run's scratch file {scratch}: No such file or directory "
        "(was its folder removed?)"
    ]

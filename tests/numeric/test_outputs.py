"""The command on the bundled example: every output file, formula safety, the spec's pandas snippets."""

from __future__ import annotations

import csv
import importlib.util
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
from fieldcheck.numeric import ERROR_COLUMNS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "numeric"

OUTPUT_FILES = (
    "summary.csv",
    "turns.csv",
    "validation.csv",
    "errors.csv",
    "statistics.json",
    "accuracy_by_turn.png",
    "input_errors.csv",
    "report.md",
    "report.html",
    "plot_match_types.png",
    "plot_failure_modes.png",
    "plot_operations_vs_accuracy.png",
)


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("numeric") / "model_b"
    result = CliRunner().invoke(
        app,
        [
            "numeric",
            "score",
            "--data",
            str(EXAMPLES / "data.json"),
            "--predictions",
            str(EXAMPLES / "predictions_model_b.jsonl"),
            "--out",
            str(out),
            "--price-in",
            "3",
            "--price-out",
            "15",
            "--bootstrap",
            "100",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "numerical match" in result.output
    return out


def test_every_output_file(out_dir: Path) -> None:
    for name in OUTPUT_FILES:
        assert (out_dir / name).is_file(), name
    traces = sorted(p.name for p in (out_dir / "traces").iterdir())
    assert len(traces) == 12 and "Single_EX00_2023_page_10.pdf.json" in traces
    stats = json.loads((out_dir / "statistics.json").read_text())
    for key in (
        "soft_match_accuracy",
        "unit_agnostic_accuracy",
        "sign_agnostic_accuracy",
        "avg_logic_recall",
        "cost_per_correct_answer",
        "accuracy_by_turn_number",
        "avg_operations_by_turn",
        "numerical_match_accuracy",
        "general_match_accuracy",
        "conversation_success_rate",
        "total_input_tokens",
        "total_output_tokens",
        "bootstrap_95_ci",
        "signature",
        "cost_per_correct_answer_usd",
    ):
        assert key in stats, key
    # cost per correct answer: all tokens / successful conversations
    assert stats["cost_per_correct_answer"] == pytest.approx(
        stats["total_tokens"] / stats["num_successful_conversations"]
    )
    with (out_dir / "errors.csv").open() as handle:
        assert next(csv.reader(handle)) == list(ERROR_COLUMNS)
    with (out_dir / "turns.csv").open() as handle:
        turns = list(csv.DictReader(handle))
    assert len(turns) == stats["num_turns"] == 51
    for column in (
        "soft_match",
        "unit_agnostic_match",
        "sign_agnostic_match",
        "logic_recall",
        "operations_per_turn",
        "ground_truth_program",
        "numerical_match",
        "failure_mode",
    ):
        assert column in turns[0]


def test_formula_cells_are_neutralised(out_dir: Path) -> None:
    with (out_dir / "turns.csv").open() as handle:
        answers = [row["predicted_answer"] for row in csv.DictReader(handle)]
    hostile = [a for a in answers if "HYPERLINK" in a]
    assert hostile == ['\'=HYPERLINK("http://example.invalid")']
    assert not any(a.startswith(("=", "+", "@")) for a in answers)


def _analysis_snippets(spec: str) -> str:
    section = spec.split("## Analysis Workflows", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) == 3
    return "\n".join(blocks)


def test_spec_analysis_snippets_run_unchanged(out_dir: Path, shared_dir: Path) -> None:
    code = _analysis_snippets((shared_dir / "spec" / "numeric-qa-evaluation.md").read_text())
    checks = (
        "\nprint('OPS', turns.groupby('operations_per_turn')['numerical_match'].mean().to_dict())"
        "\nprint('TYPES', errors['error_type'].value_counts().to_dict())"
        "\nprint('TURNS', turn_nums)\n"
    )
    script = out_dir / "analysis.py"
    script.write_text(code + checks)
    env = {**os.environ, "MPLBACKEND": "Agg"}
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=out_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    stats = json.loads((out_dir / "statistics.json").read_text())
    assert f"TURNS {sorted(stats['accuracy_by_turn_number'])}" in done.stdout
    assert "TYPES {" in done.stdout and "'TimeoutError'" in done.stdout


def test_the_bundled_examples_run(tmp_path: Path) -> None:
    for model in ("model_a", "model_b"):
        predictions = EXAMPLES / f"predictions_{model}.jsonl"
        args = ["--data", str(EXAMPLES / "data.json"), "--predictions", str(predictions)]
        result = CliRunner().invoke(
            app, ["numeric", "score", *args, "--bootstrap", "200", "--out", str(tmp_path / model)]
        )
        assert result.exit_code == 0, result.output
    for model in ("model_a", "model_b"):
        assert (tmp_path / model / "statistics.json").is_file()
    a = json.loads((tmp_path / "model_a" / "statistics.json").read_text())
    b = json.loads((tmp_path / "model_b" / "statistics.json").read_text())
    assert a["numerical_match_accuracy"] > b["numerical_match_accuracy"]


def test_example_files_are_what_the_generator_writes() -> None:
    spec = importlib.util.spec_from_file_location(
        "numeric_example_generate", EXAMPLES / "generate.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, text in module.build().items():
        assert (EXAMPLES / name).read_text(encoding="utf-8") == text, name


@pytest.mark.parametrize(
    ("predictions", "perfect"), [("predictions_model_b.jsonl", False), ("gold", True)]
)
def test_plot_files_names_the_plots_write_plots_writes(
    tmp_path: Path, predictions: str, perfect: bool
) -> None:
    """``plot_files`` (what a Ctrl-C line names as not written) is the set ``write_plots``
    writes: all four with failures and plans; when every answer is right, and no answer has a
    plan, neither the failure-modes plot nor the operations plot."""
    from fieldcheck.numeric import load_convfinqa, load_predictions, score_to_folder
    from fieldcheck.numeric._report import plot_files, write_plots

    data = load_convfinqa(EXAMPLES / "data.json")
    path = tmp_path / "p.jsonl"
    if predictions == "gold":
        rows = [
            {"conversation_id": c.id, "turn": i, "answer": str(a)}
            for c in data.conversations
            for i, a in enumerate(t.executed_answer for t in c.turns)
        ]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        path = EXAMPLES / predictions
    result = score_to_folder(data, load_predictions(path), tmp_path / "out", bootstrap=0)
    written = sorted(p.name for p in write_plots(result, tmp_path / "plots").values())
    assert sorted(plot_files(result)) == written
    assert len(written) == (2 if perfect else 4), written


def test_the_failure_modes_plot_counts_in_whole_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its y axis counts failed turns: whole-number ticks, never 0.25 of a turn (a new user's
    finding: 0.25 ... 2.00 for counts of 1 and 2)."""
    from fieldcheck.numeric import load_convfinqa, load_predictions, score_to_folder
    from fieldcheck.numeric._report import write_plots
    from fieldcheck.reports._document import pyplot

    plt = pyplot()
    kept: list[Any] = []
    monkeypatch.setattr(plt, "close", kept.append)  # each figure read once it is drawn
    data = load_convfinqa(EXAMPLES / "data.json")
    rows = [
        {"conversation_id": c.id, "turn": i, "answer": str(t.executed_answer)}
        for c in data.conversations
        for i, t in enumerate(c.turns)
    ]
    for row in rows[:3]:
        row["answer"] = "-123456789"  # three wrong turns: counts of 1 and 2 or one of 3
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = score_to_folder(data, load_predictions(path), tmp_path / "out", bootstrap=0)
    modes = result.statistics["failure_modes"]
    assert sum(modes.values()) == 3, modes
    write_plots(result, tmp_path / "plots")
    *_, fig = [f for f in kept if f.axes and f.axes[0].get_title().startswith("Failure modes")]
    ticks = [t for t in fig.axes[0].get_yticks() if 0 <= t <= max(modes.values())]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks
    assert [b.get_height() for b in fig.axes[0].patches] == sorted(modes.values(), reverse=True)
    monkeypatch.undo()
    for f in kept:
        plt.close(f)


@pytest.mark.parametrize(
    ("option", "named"),
    [
        ({"price_in": -1.0, "price_out": 0.6}, "price_in"),
        ({"price_in": 0.1, "price_out": float("nan")}, "price_out"),
        ({"bootstrap": -1}, "bootstrap"),
        ({"seed": -1}, "seed"),
        ({"sample_size": 0}, "sample_size"),
    ],
)
def test_score_to_folder_refuses_a_bad_number_naming_it(
    tmp_path: Path, option: dict[str, Any], named: str
) -> None:
    """A price of -1 wrote a negative total cost, NaN a null one, sample_size=0 scored every
    turn (a trial's finding): each is a ValueError naming it, before any file is written."""
    from fieldcheck.numeric import load_convfinqa, load_predictions, score_to_folder

    examples = Path(__file__).parents[2] / "examples" / "numeric"
    data = load_convfinqa(examples / "data.json", split="dev")
    preds = load_predictions(examples / "predictions_model_b.jsonl")
    with pytest.raises(ValueError, match=f"^{named} must be"):
        score_to_folder(data, preds, tmp_path / "out", **option)
    assert not (tmp_path / "out").exists()


def test_the_signature_names_the_sample_load_convfinqa_kept(tmp_path: Path) -> None:
    """``load_convfinqa(..., sample_size=3)`` then ``score_to_folder`` signed 3 of the 12
    conversations "sample_size: all", the signature of the whole split (a new-user trial's
    finding): the library's sample now labels its result, as ``--sample-size`` does."""
    from fieldcheck.numeric import load_convfinqa, load_predictions, score_to_folder

    preds = load_predictions(EXAMPLES / "predictions_model_b.jsonl")
    for (size, seed), label in (((3, None), (3, "first")), ((2, 7), (2, 7)), ((50, 7), None)):
        data = load_convfinqa(EXAMPLES / "data.json", sample_size=size, seed=seed)
        out = tmp_path / f"{size}-{seed}"
        settings = score_to_folder(data, preds, out, bootstrap=0).signature.settings
        got = (settings["sample_size"], settings["sample_seed"])
        assert got == (label or ("all", "first")), got
        assert len(data.conversation_ids()) == (size if label else 12)
    sampled = load_convfinqa(EXAMPLES / "data.json", sample_size=3)
    with pytest.raises(ValueError, match=r"loaded with \(sample_size, seed\) \(3, None\)"):
        score_to_folder(sampled, preds, tmp_path / "y", sample_size=5)
    assert not (tmp_path / "y").exists()

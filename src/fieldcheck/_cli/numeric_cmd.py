"""`fieldcheck numeric ...`: score ConvFinQA predictions (thin shell: parse, call, format)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from fieldcheck._cli._common import EXIT_FAILED, out_dir
from fieldcheck._util.errors import InputError
from fieldcheck.numeric import (
    LoadResult,
    NumericResult,
    PredictionsResult,
    load_convfinqa,
    load_predictions,
    score_numeric,
    write_outputs,
)

app = typer.Typer(
    help="ConvFinQA numeric QA: score a model's per-turn answers and plans.", no_args_is_help=True
)

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "numeric"
EXAMPLE_MODELS = ("model_a", "model_b")

_SHOWN = (
    ("numerical_match_accuracy", "numerical match"),
    ("soft_match_accuracy", "soft match"),
    ("unit_agnostic_accuracy", "unit-agnostic"),
    ("sign_agnostic_accuracy", "sign-agnostic"),
    ("general_match_accuracy", "general match"),
    ("avg_logic_recall", "logic recall"),
    ("avg_logic_precision", "logic precision"),
    ("avg_logic_order_score", "logic order (LCS)"),
    ("conversation_success_rate", "conversation success"),
)


def run_score(
    data: Path,
    predictions: Path,
    out: Path,
    *,
    split: str | None = None,
    sample_size: int | None = None,
    seed: int | None = None,
    price_in: float | None = None,
    price_out: float | None = None,
    bootstrap: int = 1000,
    console: Console | None = None,
    show_progress: bool = True,
) -> NumericResult:
    """Load, score, write; raises InputError when a file itself cannot be read."""
    loaded: LoadResult = load_convfinqa(data, split=split, sample_size=sample_size, seed=seed)
    preds: PredictionsResult = load_predictions(predictions)
    total = len(loaded.conversations)
    with Progress(
        TextColumn("scoring"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not show_progress,
        transient=True,
    ) as bar:
        task = bar.add_task("score", total=total)
        result = score_numeric(
            loaded,
            preds,
            price_in=price_in,
            price_out=price_out,
            bootstrap=bootstrap,
            sample_size=sample_size,
            sample_seed=seed,
            progress=lambda n: bar.update(task, completed=n),
        )
    write_outputs(result, out, conversations=loaded.conversations)
    return result


def _fmt(value: Any) -> str:
    if value is None:
        return "absent"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def show_result(
    result: NumericResult, out: Path, console: Console, *, title: str = "numeric QA"
) -> None:
    """A Rich table of the headline statistics, the problems found, and where the files are."""
    stats = result.statistics
    ci = stats.get("bootstrap_95_ci") or {}
    table = Table(title=title, header_style="bold")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("95% CI", justify="right")
    for key, label in _SHOWN:
        interval = ci.get(key)
        table.add_row(
            label,
            _fmt(stats.get(key)),
            "" if not interval else f"[{interval['low']:.3f}, {interval['high']:.3f}]",
        )
    table.add_row("avg operations per turn", _fmt(stats.get("avg_operations_per_turn")), "")
    table.add_row(
        "tokens (in / out)", f"{stats['total_input_tokens']} / {stats['total_output_tokens']}", ""
    )
    table.add_row(
        "cost per correct answer (tokens)", _fmt(stats.get("cost_per_correct_answer")), ""
    )
    if "cost_per_correct_answer_usd" in stats:
        usd = stats.get("cost_per_correct_answer_usd")
        table.add_row(
            "cost per correct answer (USD)", "absent" if usd is None else f"{usd:.4g}", ""
        )
    table.add_row(
        "failure modes",
        ", ".join(f"{k}={v}" for k, v in stats["failure_modes"].items()) or "none",
        "",
    )
    table.add_row(
        "conversations / turns", f"{stats['num_conversations']} / {stats['num_turns']}", ""
    )
    console.print(table)
    if result.input_errors:
        problems = Console(stderr=True)
        problems.print(
            f"[yellow]{len(result.input_errors)} input problem(s), all in input_errors.csv; first:[/yellow]"
        )
        for error in result.input_errors[:5]:
            problems.print("  " + error.one_line(), markup=False, highlight=False, soft_wrap=True)
    console.print(f"signature: {result.signature.format()}", markup=False, highlight=False)
    console.print(
        f"outputs in {out}/ (summary.csv, turns.csv, errors.csv, statistics.json, ...)",
        markup=False,
    )


@app.command("score")
def score_command(
    data: Annotated[
        Path,
        typer.Option(
            "--data",
            exists=True,
            dir_okay=False,
            readable=True,
            help="ConvFinQA file: the derived {'train','dev'} format or the original list format.",
        ),
    ],
    predictions: Annotated[
        Path,
        typer.Option(
            "--predictions",
            exists=True,
            dir_okay=False,
            readable=True,
            help="Predictions JSONL, one line per (conversation_id, turn); see docs/formats.md.",
        ),
    ],
    out: Annotated[
        Path,
        typer.Option("--out", file_okay=False, help="Directory for every output file (created)."),
    ],
    split: Annotated[
        str | None,
        typer.Option(
            "--split",
            help="Split to score in the derived format (default 'dev'); only a label for the original format.",
        ),
    ] = None,
    sample_size: Annotated[
        int | None,
        typer.Option(
            "--sample-size",
            min=1,
            help="Score only N conversations: the first N, or a random N with --seed.",
        ),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed",
            help="Draw the --sample-size conversations at random with this seed (kept in file "
            "order); needs --sample-size.",
        ),
    ] = None,
    price_in: Annotated[
        float | None,
        typer.Option(
            "--price-in",
            min=0.0,
            help="USD per 1M input tokens (with --price-out) for dollar costs.",
        ),
    ] = None,
    price_out: Annotated[
        float | None,
        typer.Option("--price-out", min=0.0, help="USD per 1M output tokens (with --price-in)."),
    ] = None,
    bootstrap: Annotated[
        int,
        typer.Option(
            "--bootstrap",
            min=0,
            help="Bootstrap resamples of conversations for 95% intervals (0: none).",
        ),
    ] = 1000,
) -> None:
    """Score predictions against a ConvFinQA dataset and write every output file.

    Files in --out: summary.csv, turns.csv, validation.csv, errors.csv,
    input_errors.csv, statistics.json, traces/, accuracy_by_turn.png.

    Exit status: 0 every turn scored; 3 some input failed (the rest is
    scored and written; the failures are in input_errors.csv); 2 usage
    error (bad option, unreadable file, unknown split).
    """
    if (price_in is None) != (price_out is None):
        raise typer.BadParameter(
            "give --price-in and --price-out together", param_hint="--price-in/--price-out"
        )
    if seed is not None and sample_size is None:
        raise typer.BadParameter(
            "--seed only chooses the sample of --sample-size", param_hint="--seed"
        )
    out_dir(out)
    console = Console()
    try:
        result = run_score(
            data,
            predictions,
            out,
            split=split,
            sample_size=sample_size,
            seed=seed,
            price_in=price_in,
            price_out=price_out,
            bootstrap=bootstrap,
            console=console,
        )
    except InputError as exc:
        raise typer.BadParameter(exc.one_line()) from None
    except OSError as exc:  # an output file cannot be written
        raise typer.BadParameter(
            f"cannot write {exc.filename}: {exc.strerror}", param_hint="--out"
        ) from None
    show_result(result, out, console)
    if not result.conversations or result.input_errors:
        raise typer.Exit(EXIT_FAILED)


def run_demo(out_dir: Path) -> int:
    """``make demo``: score the bundled example predictions of two models; print a summary."""
    console = Console()
    data = EXAMPLES / "data.json"
    if not data.exists():
        console.print(f"[red]example data missing: {data}[/red]")
        return 1
    rows = []
    for model in EXAMPLE_MODELS:
        target = out_dir / model
        result = run_score(
            data,
            EXAMPLES / f"predictions_{model}.jsonl",
            target,
            bootstrap=200,
            console=console,
            show_progress=False,
        )
        rows.append((model, result, target))
    table = Table(title="ConvFinQA-style example (synthetic data)", header_style="bold")
    table.add_column("metric")
    for model, _, _ in rows:
        table.add_column(model, justify="right")
    for key, label in (*_SHOWN, ("cost_per_correct_answer", "tokens per successful conversation")):
        table.add_row(label, *(_fmt(result.statistics.get(key)) for _, result, _ in rows))
    console.print(table)
    for model, result, target in rows:
        modes = ", ".join(f"{k}={v}" for k, v in result.statistics["failure_modes"].items())
        console.print(f"{model}: failure modes {modes or 'none'}; files in {target}/", markup=False)
    return 0

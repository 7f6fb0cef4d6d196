"""`fieldcheck numeric ...`: run the plan-and-execute agent on ConvFinQA and score predictions
(thin shell: parse, call, format)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from fieldcheck import core
from fieldcheck._cli._common import (
    EXIT_FAILED,
    EXIT_OK,
    option,
    out_option,
    score_and_exit,
    scoring_options,
    shared,
    show_input_problems,
)
from fieldcheck._cli._record import grid, say, store_help, stored_line
from fieldcheck._cli._runopts import (
    MODEL_OPTIONS,
    PRICE_OPTIONS,
    PROGRESS_OPTIONS,
    make_runner,
    run_and_exit,
    run_models,
    store_line,
)
from fieldcheck._cli.main import COMMANDS
from fieldcheck._util.console import SafeConsole
from fieldcheck.numeric import (
    GATED,
    PROMPT_ID,
    AgentRun,
    NumericResult,
    NumericSettings,
    estimated_note,
)
from fieldcheck.reports import OutputFolder, Scored
from fieldcheck.runner import ModelSpec, Runner

app = typer.Typer(help=COMMANDS["numeric_cmd"], no_args_is_help=True, add_completion=False)

SCORING = scoring_options("conversations", GATED, sample=True)
DATA_OPTIONS = {
    "data": option(
        Path,
        ...,
        "--data",
        exists=True,
        dir_okay=False,
        readable=True,
        help="ConvFinQA file: the derived {'train','dev'} format or the original list format "
        "(the real dev split: examples/convfinqa/dev.json).",
    ),
    "split": option(
        str | None,
        None,
        "--split",
        help="Split of the derived format (default 'dev'); only a label for the original format.",
    ),
    "sample_size": option(
        int | None,
        None,
        "--sample-size",
        min=1,
        help="Only N conversations, drawn at random with --seed (kept in file order).",
    ),
}

_SHOWN = tuple(
    zip(
        GATED,
        (
            "numerical match",
            "soft match",
            "unit-agnostic",
            "sign-agnostic",
            "general match",
            "logic recall",
            "logic precision",
            "logic order (LCS)",
            "conversation success",
        ),
        strict=True,
    )
)


def _settings(**options: Any) -> dict[str, Any]:
    """The run's stored settings out of a command's options (the others ignored)."""
    return NumericSettings(
        **{k: v for k, v in options.items() if k in NumericSettings.model_fields}
    ).model_dump()


def _fmt(value: Any) -> str:
    if value is None:
        return "absent"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _tokens(value: float | None) -> str:
    """A token count (a mean may be fractional): whole tokens with thousands separators."""
    return "absent" if value is None else f"{value:,.0f}"


def call_errors_text(stats: dict[str, Any]) -> str:
    """``"2 (server_error=1, timeout=1)"``: turns not scored because their model call failed."""
    kinds = stats.get("turns_not_scored_call_errors") or {}
    total = stats.get("num_turns_not_scored_call_errors", 0)
    if not total:
        return "0"
    return f"{total} (" + ", ".join(f"{k}={v}" for k, v in kinds.items()) + ")"


def show_result(
    scored: Scored, out: Path | OutputFolder, console: Console, *, title: str = "numeric QA"
) -> None:
    """A Rich table of the headline statistics (none, never a 0.000, when nothing was scored),
    the problems found, and where the files are."""
    result: NumericResult = scored.result
    stats = result.statistics
    ci = stats.get("bootstrap_95_ci") or {}
    nothing = bool(stats.get("nothing_scored"))
    table = grid(
        title + (": NOTHING SCORED" if nothing else ""), "metric", right=("value", "95% CI")
    )
    for key, label in () if nothing else _SHOWN:
        interval = ci.get(key)
        table.add_row(
            label,
            _fmt(stats.get(key)),
            "" if not interval else f"[{interval['low']:.3f}, {interval['high']:.3f}]",
        )
    if not nothing:
        table.add_row("avg operations per turn", _fmt(stats.get("avg_operations_per_turn")), "")
    note = estimated_note(stats)  # some turns' tokens are characters / 4
    table.add_row(
        "tokens (in / out)" + note,
        f"{stats['total_input_tokens']:,} / {stats['total_output_tokens']:,}",
        "",
    )
    if not nothing:
        table.add_row(
            "cost per correct answer: tokens per successful conversation" + note,
            _tokens(stats.get("cost_per_correct_answer")),
            "",
        )
        table.add_row(
            "tokens per correct turn" + note, _tokens(stats.get("tokens_per_correct_turn")), ""
        )
    if "cost_per_correct_answer_usd" in stats and not nothing:
        usd = stats.get("cost_per_correct_answer_usd")
        table.add_row(
            "cost per correct answer: USD per successful conversation" + note,
            "absent" if usd is None else f"{usd:.4g}",
            "",
        )
    table.add_row(
        "failure modes",
        ", ".join(f"{k}={v}" for k, v in stats["failure_modes"].items()) or "none",
        "",
    )
    table.add_row(
        "conversations / turns", f"{stats['num_conversations']} / {stats['num_turns']}", ""
    )
    table.add_row("scored turns", str(stats["num_scored_turns"]), "")
    if not nothing:
        table.add_row("failed turns (not a numerical match)", str(stats["num_failed_turns"]), "")
    table.add_row("turns not scored: call errors", call_errors_text(stats), "")
    console.print(table)
    if nothing:
        console.print(
            f"[bold red]{stats.get('nothing_scored_reason') or 'nothing was scored'}[/bold red]"
        )
    problems = SafeConsole(stderr=True)
    show_input_problems(problems, scored)
    # turns without a gold answer are never scored, predicted or not: not counted here
    missing, no_gold = result.tallies.missing_gold, stats.get("num_turns_not_scored_no_gold") or 0
    turns = stats["num_turns"] - no_gold
    if missing and missing * 2 >= turns:  # predictions of a part of the data, scored against all
        which = " with a gold answer" if no_gold else ""
        say(
            problems,
            f"warning: {missing:,} of {turns:,} turns{which} have no prediction and count as "
            "failures; to score predictions of some conversations only, give the --sample-size "
            "and --seed they were made with",
        )
    say(console, f"signature: {result.signature.format()}")
    say(
        console,
        f"report: {out}/report.html (also report.md, summary.csv, turns.csv, errors.csv, "
        "statistics.json, traces/ and plots)",
    )


@app.command("score")
@shared(DATA_OPTIONS, PRICE_OPTIONS, PROGRESS_OPTIONS, SCORING)
def score_command(
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
    out: Annotated[Path | None, out_option("Directory for every output file.")] = None,
    **options: Any,
) -> None:
    """Score predictions against a ConvFinQA dataset and write every output file.

    Files in --out: summary.csv, turns.csv, validation.csv, errors.csv,
    input_errors.csv, statistics.json, traces/, report.md, report.html and
    plots (accuracy_by_turn.png, plot_match_types.png, and when there is
    something to draw plot_failure_modes.png, plot_operations_vs_accuracy.png).

    A turn whose prediction has a call error (error.type rate_limited,
    server_error, timeout, connection, bad_request, context_length or bad_response) is not scored: it is
    listed in turns.csv (not_scored) and counted in statistics.json
    (turns_not_scored_call_errors), never a wrong answer nor an errors.csv row.

    Exit status: 0 every turn scored; 3 some input failed (the rest is
    scored and written; the failures are in input_errors.csv) or some turn
    was not scored because of a call error; 4 a --fail-under floor not met;
    2 usage error (bad option, unreadable file or one with no valid line,
    unknown split); 1 an output could not be written part-way (a full disk);
    130 Ctrl-C.
    """
    inputs = [("data", options["data"]), ("predictions", predictions)]
    score_and_exit(
        "numeric", inputs, _settings(**options), options, _show, out=out, label=predictions.stem
    )


def _show(outcome: core.Outcome, console: Console, errors: Console) -> None:
    stored_line(console, core.stored_line(outcome.run_id))
    show_result(outcome.scored, outcome.destination, console)


CONVFINQA_DEV = Path(__file__).resolve().parents[3] / "examples" / "convfinqa" / "dev.json"


def run_line(run: AgentRun) -> str:
    """The model's run: id, resumed items, calls and cache hits, error types."""
    handle = run.handle
    errors = " ".join(f"{k}={v}" for k, v in sorted(run.errors.items())) or "none"
    resumed = f", {handle.resumed_items} resumed" if handle.resumed_items else ""
    guessed = handle.tokens_estimated
    estimated = (
        f"; tokens of {guessed} turns estimated (characters / 4: the endpoint sent no usable "
        "usage; in predictions.jsonl tokens_estimated)"
        if guessed
        else ""
    )
    return (
        f"{run.spec.name}: run {handle.id} ({handle.done} turns{resumed}); "
        f"turn errors: {errors}{estimated}"
    )


EVALUATE_HELP = "\n\n".join(
    (
        "Run a model as a plan-and-execute agent on ConvFinQA conversations, then score it.",
        "Per turn the model gets the document (text and the table as Markdown), the earlier "
        "questions with its own earlier answers, and the question, and replies with a JSON plan "
        f"of extract and compute steps (prompt {PROMPT_ID}, shown in docs/numeric.md 'Running a "
        "model'). The validator checks the plan (schema, operations, arguments, #k references, "
        "values in the document, table cells, that it runs); a failed plan gets one repair round "
        "with the validator's messages. The answer is computed by the safe program engine, "
        "never eval.",
        "Writes predictions.jsonl (with several models: in --out/NAME/) and every output file of "
        "'numeric score'. Running the same command again resumes an unfinished run: finished "
        "turns are not called again.",
        "A turn whose model call failed (rate_limited, server_error, timeout, connection, "
        "bad_request, context_length, bad_response) is not scored, never a wrong answer: listed in "
        "turns.csv (not_scored, not an errors.csv row), "
        "counted in the table and in statistics.json (turns_not_scored_call_errors).",
        "Exit status: 0 every turn scored; 3 some input failed (see input_errors.csv) or some "
        "turn hit a call error (nothing scored at all when every call failed); 4 a --fail-under "
        "floor not met; 2 usage error; 1 an output could not be written part-way; 130 Ctrl-C "
        "(finished turns are stored).",
        store_help(),
    )
)


# ``run``, as json and slots name theirs (a tester typed it): the same command, listed as such
@app.command(
    "run", help="The same as 'evaluate' (as json and slots name theirs).\n\n" + EVALUATE_HELP
)
@app.command("evaluate", help=EVALUATE_HELP)
@shared(DATA_OPTIONS, MODEL_OPTIONS, PRICE_OPTIONS, SCORING)
def evaluate_command(
    out: Annotated[
        Path | None, out_option("Directory for predictions.jsonl and every output file.")
    ] = None,
    **options: Any,
) -> None:
    # the prices are the models' (their specs), not the scoring's
    settings = _settings(**{**options, "price_in": None, "price_out": None})
    run_and_exit("numeric", [("data", options["data"])], settings, options, _show_models, out=out)


def _show_models(ran: core.Ran, runner: Runner, console: Console, errors: Console) -> None:
    """Each model's stored run, then its table, problems and run line; the store."""
    models = list(zip(ran.calls, ran.outcomes, strict=True))
    for _, outcome in models:
        stored_line(console, core.stored_line(outcome.run_id))
    for run, outcome in models:
        title = f"numeric QA: {run.spec.name}"
        show_result(outcome.scored, outcome.destination, console, title=title)
        say(console, run_line(run))
    say(console, store_line(runner))


def run_model_demo(base_url: str, out_dir: Path, models: list[str], *, console: Console) -> int:
    """``make demo``: the agent on 30 conversations of the real dev split (seed 0) for each
    synthetic model at ``base_url``; outputs in ``out_dir/<model>/``; a comparison table."""
    if not CONVFINQA_DEV.exists():
        console.print(f"[red]ConvFinQA dev split missing: {CONVFINQA_DEV}[/red]")
        return 1
    specs = [ModelSpec(name=m, model=m, base_url=base_url) for m in models]
    runner = make_runner(concurrency=16, timeout=30.0, max_retries=2)
    ran = run_models(
        "numeric evaluate",
        [("data", CONVFINQA_DEV)],
        _settings(sample_size=30, bootstrap=200),
        specs,
        runner,
        out_dir,
        errors=SafeConsole(stderr=True),
    )
    for outcome in ran.outcomes:
        stored_line(console, core.stored_line(outcome.run_id))
    results = [o.scored.result for o in ran.outcomes]
    title = "ConvFinQA dev (30 conversations, seed 0): plan-and-execute agent"
    table = grid(title, "metric", right=[r.spec.name for r in ran.calls])
    for key, label in (
        *_SHOWN,
        ("cost_per_correct_answer", "cost per correct answer: tokens per successful conversation"),
        ("tokens_per_correct_turn", "tokens per correct turn"),
        ("num_failed_turns", "failed turns (not a numerical match)"),
    ):
        table.add_row(label, *(_fmt(r.statistics.get(key)) for r in results))
    table.add_row(
        "turns not scored: call errors", *(call_errors_text(r.statistics) for r in results)
    )
    table.add_row(
        "turns with errors",
        *(" ".join(f"{k}={v}" for k, v in sorted(r.errors.items())) or "none" for r in ran.calls),
    )
    table.add_row("failed validation checks", *(str(r.tallies.failed_checks) for r in results))
    console.print(table)
    for run, outcome in zip(ran.calls, ran.outcomes, strict=True):
        say(console, run_line(run) + f"; files in {outcome.destination}/")
    say(console, store_line(runner))
    return EXIT_FAILED if any(r.failures for r in ran.calls) else EXIT_OK

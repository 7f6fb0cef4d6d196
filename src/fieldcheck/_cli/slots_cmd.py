"""`fieldcheck slots ...`: run models over conversations with a slot memory, and score slot
extraction predictions of several models (thin shell)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

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
    JUDGE_OPTIONS,
    MODEL_OPTIONS,
    PRICE_OPTIONS,
    PROGRESS_OPTIONS,
    make_runner,
    run_and_exit,
    run_models,
)
from fieldcheck._cli.main import COMMANDS
from fieldcheck._util.term import safe_text
from fieldcheck.reports import Scored, format_pvalue, format_seconds, format_seconds_joined
from fieldcheck.runner import ModelSpec, Runner
from fieldcheck.slots import (
    METRIC_COLUMNS,
    PROMPT_ID,
    Extraction,
    ModelScore,
    SlotsRun,
    TPMode,
    topic_lines,
)

app = typer.Typer(help=COMMANDS["slots_cmd"], no_args_is_help=True, add_completion=False)

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "slots"
# the metrics --fail-under gates (higher is better), named as in metrics.json
SCORING = scoring_options("sessions", METRIC_COLUMNS)
TP_OPTIONS = {
    "tp": option(
        TPMode,
        "presence",
        "--tp",
        help="When a predicted gold slot is a true positive: presence (any value, the spec's "
        "rule), exact (canonicalised value sets equal), fuzzy (rapidfuzz >= threshold) or "
        "semantic (MiniLM cosine >= threshold). With a value check a present-but-wrong slot "
        "is an FP and an FN.",
    ),
    "threshold": option(
        float | None,
        None,
        "--threshold",
        min=0.0,
        max=1.0,
        help="Similarity threshold in [0,1] for --tp fuzzy|semantic (default 0.8); "
        "ignored, with a warning, by presence and exact.",
    ),
}


def _pairs(values: list[str], option: str) -> list[tuple[str, Path]]:
    out = []
    for raw in values:
        name, sep, path = raw.partition("=")
        if not sep or not name.strip() or not path:
            raise typer.BadParameter(f"expected NAME=FILE, got {raw!r}", param_hint=option)
        out.append((name.strip(), Path(path)))
    return out


def _model_table(score: ModelScore) -> Table:
    r = score.result
    table = grid(Text(safe_text(score.name)), "metric", right=("value", "95% CI"))  # no markup

    for name in METRIC_COLUMNS:  # an interval where the result has one (CI_METRICS)
        value, ci = getattr(r, name), r.ci.get(name)
        table.add_row(
            name,
            "absent" if value is None else f"{value:.3f}",
            "" if ci is None else f"[{ci.low:.3f}, {ci.high:.3f}]",
        )
    if r.latency is None:
        table.add_row("latency", "absent", "")
    else:
        lat = r.latency
        table.add_row(
            "latency mean / median / p95",
            format_seconds_joined([lat.mean, lat.median, lat.p95]),
            "",
        )
        table.add_row("latency total", format_seconds(lat.total), "")
    table.add_row("extra_slots / extra_values", f"{r.extra_slots} / {r.extra_values}", "")
    c = r.counts
    table.add_row("tp / fp / fn", f"{c.tp} / {c.fp} / {c.fn}", "")
    table.add_row("gold slots / sessions", f"{c.gold_slots} / {c.sessions}", "")
    if score.not_scored:
        reasons = " ".join(f"{k}={v}" for k, v in r.sessions_not_scored.items())
        table.add_row("sessions not scored (call errors)", f"{score.not_scored} ({reasons})", "")
    return table


def show_run(outcome: Scored, console: Console, problems: Console) -> None:
    """Rich tables per model and the spec's per-topic lines on ``console``; input errors on
    ``problems``; then the output files."""
    run: SlotsRun = outcome.result
    files = outcome.files
    unscored = {u.name: u for u in run.unscored}
    scored = {m.name: m for m in run.models}
    for name in run.names or list(scored):
        if name in unscored:
            u = unscored[name]
            reasons = ", ".join(f"{k}={v}" for k, v in u.sessions_not_scored.items())
            console.print(
                Text(
                    f"{name}: nothing scored: the call failed for all {u.not_scored} "
                    f"session(s) ({reasons}); no metrics",
                    style="red",
                ),
                soft_wrap=True,
            )
            continue
        m = scored[name]
        console.print(_model_table(m))
        say(console, "Per topic:")
        for line in topic_lines(m.result):
            say(console, safe_text(line))
    for p in run.paired_f1:
        common = ""
        if p.sessions != scored[p.model_a].sessions or p.sessions != scored[p.model_b].sessions:
            common = f" on the {p.sessions} session(s) both were scored on"
        say(
            console,
            f"F1 {p.model_a} - {p.model_b}: {p.difference:+.3f}{common} "
            f"(paired bootstrap {format_pvalue(p.p_value)})",
        )
    # run.warnings were logged on the 'fieldcheck' logger as they arose; not printed twice
    show_input_problems(problems, outcome)
    say(
        console,
        f"Report: {files['report.html']} (also report.md, metrics.json, metrics.csv, per_topic.csv)",
    )


@app.command("score")
@shared(TP_OPTIONS, JUDGE_OPTIONS, PROGRESS_OPTIONS, SCORING)
def score(
    gold: Annotated[
        Path,
        typer.Option(
            "--gold",
            help="Gold slots, JSONL: one {user, session, topic, field, values} per line. Its "
            "sessions (user, session) are the ones scored; values [] means 'nothing to extract'.",
        ),
    ],
    pred: Annotated[
        list[str],
        typer.Option(
            "--pred",
            metavar="NAME=FILE",
            help="NAME=FILE: a model's predicted slots (same format as --gold). Repeat for each "
            "model; NAME ends at the first '=' and names the model in every output.",
        ),
    ],
    out: Annotated[
        Path | None,
        out_option(
            "Output directory: metrics.json, metrics.csv, per_topic.csv, errors.jsonl, "
            "report.md/html, plot_*.png."
        ),
    ] = None,
    latency: Annotated[
        list[str] | None,
        typer.Option(
            "--latency",
            metavar="NAME=FILE",
            help="NAME=FILE: seconds per session of model NAME (one of the --pred names), JSONL "
            "{user, session, seconds >= 0}. Gives mean, median, p95 and total latency.",
        ),
    ] = None,
    judge: Annotated[
        list[str] | None,
        typer.Option(
            "--judge",
            metavar="NAME=FILE",
            help="NAME=FILE: precomputed judge scores of model NAME (one of the --pred names), "
            "JSONL {user, session, topic, field, score in [0,1]}. Wins over --judge-base-url.",
        ),
    ] = None,
    judge_base_url: Annotated[
        str | None,
        typer.Option(
            "--judge-base-url",
            help="OpenAI-compatible endpoint of a judge model (with --judge-model), asked to "
            "score every predicted gold slot of models without --judge (prompt slot-v2, cached). "
            "Key from FIELDCHECK_JUDGE_API_KEY or OPENAI_API_KEY. Without a judge the LLM judge "
            "score is absent, never 0.",
        ),
    ] = None,
    judge_model: Annotated[
        str | None,
        typer.Option(
            "--judge-model", help="Judge model name at --judge-base-url (both or neither)."
        ),
    ] = None,
    **options: Any,
) -> None:
    """Score one or more models' predicted slots against gold slots and write the report.

    Exit status: 0 when every input line was valid; 3 when some lines were invalid or a judge
    call failed (the rest is scored, every output is written, each failure is in
    DIR/errors.jsonl); 4 when a --fail-under floor is not met; 2 on usage errors (bad option,
    unknown model name, unreadable file or one with no valid line, unusable --out); 1 when an
    output could not be written part-way (a full disk); 130 on Ctrl-C.
    """
    preds = _pairs(pred, "--pred")
    names = [n for n, _ in preds]
    given = [
        ("gold", gold),
        *((f"pred:{n}", p) for n, p in preds),
        *((f"latency:{n}", p) for n, p in _pairs(latency or [], "--latency")),
        *((f"judge:{n}", p) for n, p in _pairs(judge or [], "--judge")),
    ]
    settings = _settings(options, judge_base_url, judge_model)
    label, model = "-".join(names), ", ".join(names)
    score_and_exit(
        "slots", given, settings, options, _show, out=out, label=label, model=model, models=names
    )


def _show(outcome: core.Outcome, console: Console, errors: Console) -> None:
    stored_line(console, core.stored_line(outcome.run_id))
    show_run(outcome.scored, console, errors)


def _settings(
    options: dict[str, Any], judge_base_url: str | None = None, judge_model: str | None = None
) -> dict[str, Any]:
    """The run's stored settings (what ``runs rescore`` reads back) out of the command's
    options; a judge model's endpoint and name only when one is asked (never its key)."""
    settings = {k: options[k] for k in ("tp", "threshold", "bootstrap", "seed")}
    judge = {"judge_base_url": judge_base_url, "judge_model": judge_model}
    return settings | judge if judge_base_url or judge_model else settings


def runs_table(extractions: Sequence[Extraction]) -> Table:
    """Per model: sessions, session errors by type, not scored, resumed and cached, tokens
    (fits 80 columns)."""
    table = Table(title="Model runs", show_header=True, header_style="bold")
    table.add_column("model", overflow="fold")
    for col in ("sessions", "session\nerrors"):
        table.add_column(col, justify="right")
    table.add_column("errors", no_wrap=True)
    table.add_column("not\nscored\n(call\nerrors)", justify="right", no_wrap=True)
    table.add_column("resumed\n/ cached", justify="right", no_wrap=True)
    table.add_column("tokens\nin / out", justify="right", no_wrap=True)
    for ex in extractions:
        errors = Counter(s.error_type for s in ex.failed if s.error_type)
        table.add_row(
            Text(ex.model),
            str(len(ex.sessions)),
            str(len(ex.failed)),
            Text("\n".join(f"{k}={v}" for k, v in sorted(errors.items())) or "-"),
            str(len(ex.not_scored())),
            f"{ex.resumed_items} / {sum(s.cached for s in ex.sessions)}",
            f"{sum(s.input_tokens for s in ex.sessions):,} /\n"
            f"{sum(s.output_tokens for s in ex.sessions):,}"
            + (f"\n({ex.tokens_estimated} est.)" if ex.tokens_estimated else ""),
        )
    return table


RUN_HELP = f"""Run one or more models over conversations with a slot memory, then score them.

For each user, sessions in order: the model gets the session and the user's memory and replies
with the slots the session states (prompt {PROMPT_ID}, docs/slots.md "Running models"); they
update the memory and are the session's prediction. Writes DIR/pred_NAME.jsonl,
latency_NAME.jsonl, memory_NAME.jsonl, session_errors.jsonl, runs.json and the report of
'slots score'. Running the same command again resumes: finished sessions are not called again.

A session whose call failed (rate_limited, server_error, timeout, connection, bad_request,
context_length, bad_response) is not scored for that model: its gold slots are not counted as missed; the tables, metrics.json and
the report say how many sessions were not scored and why (a model with none scored has no
metrics). An invalid reply is the model's failure: its gold slots count as missed.

Exit status: 0 when every call was answered and every input line was valid (an invalid reply is
scored, listed in DIR/session_errors.jsonl); 3 when some session's call failed (not scored,
listed there too; its memory is unchanged), some judge call failed (listed in DIR/errors.jsonl)
or some gold line was invalid; 4 when a --fail-under floor is not met; 2 on usage
errors; 1 when an output could not be written part-way; 130 on Ctrl-C (what finished is stored).

{store_help()}"""


@app.command("run", help=RUN_HELP)
@shared(MODEL_OPTIONS, PRICE_OPTIONS, TP_OPTIONS, SCORING)
def run(
    conversations: Annotated[
        Path,
        typer.Option(
            "--conversations",
            metavar="FILE",
            help="Conversations JSONL: one session per line, {user, session, turns: [{role, "
            "content}]}; each user's sessions run in session order.",
        ),
    ],
    gold: Annotated[
        Path,
        typer.Option(
            "--gold",
            metavar="FILE",
            help="Gold slots JSONL, one {user, session, topic, field, values} per line: the "
            "slots each session states.",
        ),
    ],
    out: Annotated[Path | None, out_option("Output directory.")] = None,
    judge_base_url: Annotated[
        str | None,
        typer.Option(
            "--judge-base-url",
            help="Endpoint of the judge model (default: --base-url). Key from "
            "FIELDCHECK_JUDGE_API_KEY or OPENAI_API_KEY.",
        ),
    ] = None,
    judge_model: Annotated[
        str | None,
        typer.Option(
            "--judge-model",
            help="Judge model (prompt slot-v2, cached) that scores every predicted gold slot; "
            "without it the LLM judge score is absent, never 0.",
        ),
    ] = None,
    **options: Any,
) -> None:
    if judge_base_url and not judge_model:
        raise typer.BadParameter("--judge-base-url needs --judge-model", param_hint="--judge-model")
    judge_url = judge_base_url or options["base_url"]
    if judge_model and not judge_url:
        raise typer.BadParameter(
            "--judge-model needs --judge-base-url (or --base-url)", param_hint="--judge-base-url"
        )
    judge = (judge_url, judge_model) if judge_model else (None, None)
    inputs = [("conversations", conversations), ("gold", gold)]
    names = {"conversations": "--conversations", "gold": "--gold"}
    settings = _settings(options, *judge)
    run_and_exit(
        "slots", inputs, settings, options, _show_models, out=out, names=names, say_store=True
    )


def _show_models(ran: core.Ran, runner: Runner, console: Console, err: Console) -> None:
    """The run's stored line and tables, the models' calls, what failed."""
    outcome, extractions = ran.outcomes[0], ran.calls
    scored = outcome.scored.result
    stored_line(err, core.stored_line(outcome.run_id))
    show_run(outcome.scored, console, err)
    console.print(runs_table(extractions))
    failed = sum(len(ex.failed) for ex in extractions)
    if failed:
        calls = sum(len(ex.not_scored()) for ex in extractions)
        say(
            err,
            f"{failed} session error(s); listed in {outcome.destination / 'session_errors.jsonl'} "
            "(memory unchanged): "
            f"{failed - calls} invalid repl(ies), slots missed; {calls} call error(s), not scored",
            style="red",
        )
    for u in scored.unscored:
        err.print(
            Text(
                f"{u.name}: nothing scored: every gold session's call failed; check --base-url, "
                "the model name and the server",
                style="red",
            ),
            soft_wrap=True,
        )


def run_model_demo(base_url: str, out_dir: Path, models: list[str], *, console: Console) -> int:
    """``make demo``: the synthetic models over the bundled conversations, a line each; 0 when
    the run finished (invalid replies are part of the demo), else 3."""
    conversations_path = EXAMPLES / "conversations.synthetic.jsonl"
    gold = EXAMPLES / "gold.synthetic.jsonl"
    if not conversations_path.exists() or not gold.exists():
        say(console, f"slots demo: example data not found in {EXAMPLES}", style="red")
        return EXIT_FAILED
    specs = [ModelSpec(name=m, model=m, base_url=base_url) for m in models]
    inputs = [("conversations", conversations_path), ("gold", gold)]
    settings = _settings({"tp": "presence", "threshold": None, "bootstrap": 200, "seed": 0})
    runner = make_runner()
    ran = run_models("slots run", inputs, settings, specs, runner, out_dir, errors=console)
    outcome, extractions = ran.outcomes[0], ran.calls
    scored, files = outcome.scored.result, outcome.files
    stored_line(console, core.stored_line(outcome.run_id))
    table = Table(  # no box: the latency column fits an 80-column terminal
        title="slots run (synthetic models, examples/slots)",
        header_style="bold",
        box=None,
        pad_edge=False,
    )
    table.add_column("model", min_width=17, overflow="fold")
    for col in ("P", "R", "F1", "exact", "extra\nslots", "session\nerrors", "latency"):
        table.add_column(col, justify="right")
    results = {m.name: m.result for m in scored.models}
    for ex in extractions:
        errors = Counter(s.error_type for s in ex.failed if s.error_type)
        failed = " ".join(f"{k}={v}" for k, v in sorted(errors.items())) or "0"
        r = results.get(ex.model)
        if r is None:  # every call failed: nothing scored, no numbers
            table.add_row(Text(ex.model), "not scored", "-", "-", "-", "-", failed, "n/a")
            continue
        table.add_row(
            Text(ex.model),
            f"{r.precision:.3f}",
            f"{r.recall:.3f}",
            f"{r.f1:.3f}",
            f"{r.exact_match_rate:.3f}",
            str(r.extra_slots),
            failed,
            format_seconds(r.latency.mean if r.latency is not None else None),
        )
    console.print(table)
    say(console, f"  report: {files['report.html']}")
    infra = sum(1 for ex in extractions for s in ex.failed if s.error_type != "invalid_reply")
    return EXIT_FAILED if infra or scored.errors else EXIT_OK

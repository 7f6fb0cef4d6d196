"""`fieldcheck slots ...`: score slot extraction predictions of several models (thin shell)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from fieldcheck._cli._common import EXIT_FAILED, EXIT_OK, out_dir
from fieldcheck._util.errors import InputError
from fieldcheck._util.jsonio import dumps
from fieldcheck.reports import format_pvalue
from fieldcheck.slots import (
    ModelInput,
    SlotsRun,
    TPMode,
    load_judge_scores,
    load_latencies,
    load_slots,
    score_models,
    topic_lines,
    write_outputs,
)

app = typer.Typer(
    help="Slot extraction benchmark: score models' slots against gold slots.", no_args_is_help=True
)

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "slots"
EXAMPLE_MODELS = ("synthetic-careful", "synthetic-fast", "synthetic-eager")


def _pairs(values: list[str], option: str) -> list[tuple[str, Path]]:
    out = []
    for raw in values:
        name, sep, path = raw.partition("=")
        if not sep or not name.strip() or not path:
            raise typer.BadParameter(f"expected NAME=FILE, got {raw!r}", param_hint=option)
        out.append((name.strip(), Path(path)))
    return out


def _checked_names(
    pairs: list[tuple[str, Path]], models: list[str], option: str
) -> dict[str, Path]:
    seen: dict[str, Path] = {}
    for name, path in pairs:
        if name not in models:
            raise typer.BadParameter(
                f"unknown model {name!r}; models given with --pred: {', '.join(models)}",
                param_hint=option,
            )
        if name in seen:
            raise typer.BadParameter(f"model {name!r} given twice", param_hint=option)
        seen[name] = path
    return seen


def _load(loader: Any, path: Path, option: str) -> Any:
    try:
        return loader(path)
    except InputError as exc:  # the file itself cannot be read
        raise typer.BadParameter(exc.one_line(), param_hint=option) from None


def _model_table(name: str, run: SlotsRun) -> Table:
    score = next(m for m in run.models if m.name == name)
    r = score.result
    table = Table(title=Text(name), show_header=True, header_style="bold")  # no markup
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("95% CI", justify="right")

    def row(label: str, value: float | None, ci_key: str | None = None) -> None:
        ci = r.ci.get(ci_key) if ci_key else None
        table.add_row(
            label,
            "absent" if value is None else f"{value:.3f}",
            "" if ci is None else f"[{ci.low:.3f}, {ci.high:.3f}]",
        )

    row("precision", r.precision, "precision")
    row("recall", r.recall, "recall")
    row("f1", r.f1, "f1")
    row("exact_match_rate", r.exact_match_rate, "exact_match_rate")
    row("token_precision", r.token_precision)
    row("token_recall", r.token_recall)
    row("token_f1", r.token_f1, "token_f1")
    row("bleu1", r.bleu1)
    row("llm_judge", r.llm_judge)
    if r.latency is None:
        table.add_row("latency", "absent", "")
    else:
        lat = r.latency
        table.add_row(
            "latency mean/median/p95/total (s)",
            f"{lat.mean:.1f} / {lat.median:.1f} / {lat.p95:.1f} / {lat.total:.1f}",
            "",
        )
    table.add_row("extra_slots / extra_values", f"{r.extra_slots} / {r.extra_values}", "")
    c = r.counts
    table.add_row("tp / fp / fn", f"{c.tp} / {c.fp} / {c.fn}", "")
    table.add_row("gold slots / sessions", f"{c.gold_slots} / {c.sessions}", "")
    return table


def show_run(
    run: SlotsRun, files: dict[str, Path], console: Console, problems: Console | None = None
) -> None:
    """Rich tables per model and the spec's per-topic lines on ``console``; input errors on
    ``problems`` (stderr by default); then the output files."""
    problems = problems or Console(stderr=True)
    for m in run.models:
        console.print(_model_table(m.name, run))
        console.print("Per topic:", markup=False, soft_wrap=True)
        for line in topic_lines(m.result):
            console.print(line, markup=False, soft_wrap=True, highlight=False)
    for p in run.paired_f1:
        console.print(
            f"F1 {p.model_a} - {p.model_b}: {p.difference:+.3f} "
            f"(paired bootstrap {format_pvalue(p.p_value)})",
            markup=False,
            soft_wrap=True,
        )
    # run.warnings were logged on the 'fieldcheck' logger as they arose; not printed twice
    for e in run.errors[:20]:
        problems.print(f"error: {e.one_line()}", style="red", markup=False, soft_wrap=True)
    if len(run.errors) > 20:
        problems.print(
            f"... {len(run.errors) - 20} more errors in {files['errors.jsonl']}",
            markup=False,
            soft_wrap=True,
        )
    console.print(
        f"Report: {files['report.html']} (also report.md, metrics.json, metrics.csv, per_topic.csv)",
        markup=False,
        soft_wrap=True,
    )


def score_files(
    gold: Path,
    preds: dict[str, Path],
    latencies: dict[str, Path],
    judges: dict[str, Path],
    *,
    out: Path,
    tp: TPMode = "presence",
    threshold: float | None = None,
    judge_base_url: str | None = None,
    judge_model: str | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    console: Console,
) -> tuple[SlotsRun, dict[str, Path]]:
    """Load, score and write; shared by the command and ``run_demo``."""
    gold_file = _load(load_slots, gold, "--gold")
    models = [
        ModelInput(
            name,
            _load(load_slots, path, "--pred"),
            _load(load_latencies, latencies[name], "--latency") if name in latencies else None,
            _load(load_judge_scores, judges[name], "--judge") if name in judges else None,
        )
        for name, path in preds.items()
    ]
    judge = None
    if judge_base_url and judge_model:
        from fieldcheck.matchers import DiskCache, LLMJudge

        judge = LLMJudge(model=judge_model, base_url=judge_base_url, kind="slot", cache=DiskCache())
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("loading", total=None)
        run = score_models(
            gold_file,
            models,
            tp=tp,
            threshold=threshold,
            judge=judge,
            bootstrap=bootstrap,
            seed=seed,
            progress=lambda text: progress.update(task, description=text),
        )
        progress.update(task, description="writing report and plots")
        try:
            files = write_outputs(run, out)
        except OSError as exc:
            raise typer.BadParameter(
                f"cannot write {exc.filename or out}: {exc.strerror or exc}", param_hint="--out"
            ) from None
    return run, files


@app.command("score")
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
        Path,
        typer.Option(
            "--out",
            help="Output directory (created if missing; files in it are overwritten): "
            "metrics.json, metrics.csv, per_topic.csv, errors.jsonl, report.md/html, plot_*.png.",
        ),
    ],
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
            "score every predicted gold slot of models without --judge (prompt slot-v1, cached). "
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
    tp: Annotated[
        TPMode,
        typer.Option(
            "--tp",
            help="When a predicted gold slot is a true positive: presence (any value, the spec's "
            "rule), exact (canonicalised value sets equal), fuzzy (rapidfuzz >= threshold) or "
            "semantic (MiniLM cosine >= threshold). With a value check a present-but-wrong slot "
            "is an FP and an FN.",
        ),
    ] = "presence",
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            min=0.0,
            max=1.0,
            help="Similarity threshold in [0,1] for --tp fuzzy|semantic (default 0.8); "
            "ignored, with a warning, by presence and exact.",
        ),
    ] = None,
    bootstrap: Annotated[
        int,
        typer.Option(
            "--bootstrap",
            min=0,
            help="Bootstrap resamples of sessions for the 95% intervals (P, R, F1, exact match, "
            "token F1) and the paired F1 p-values (0: none; cost grows with sessions x N).",
        ),
    ] = 1000,
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of the bootstrap (same seed, same intervals).")
    ] = 0,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", metavar="", help="Print metrics.json on stdout (tables go to stderr)."
        ),
    ] = False,
) -> None:
    """Score one or more models' predicted slots against gold slots and write the report.

    Exit status: 0 when every input line was valid; 3 when some lines were invalid or a judge
    call failed (the rest is scored, every output is written, each failure is in
    DIR/errors.jsonl); 2 on usage errors (bad option, unknown model name, unreadable file,
    unusable --out).
    """
    if bool(judge_base_url) != bool(judge_model):
        raise typer.BadParameter(
            "give both --judge-base-url and --judge-model, or neither", param_hint="--judge-model"
        )
    pred_pairs = _pairs(pred, "--pred")
    names = [n for n, _ in pred_pairs]
    if len(set(names)) != len(names):
        raise typer.BadParameter(
            f"model names must be unique (got {', '.join(names)})", param_hint="--pred"
        )
    lat = _checked_names(_pairs(latency or [], "--latency"), names, "--latency")
    jud = _checked_names(_pairs(judge or [], "--judge"), names, "--judge")
    out_dir(out)
    console = Console(stderr=as_json)
    run, files = score_files(
        gold,
        dict(pred_pairs),
        lat,
        jud,
        out=out,
        tp=tp,
        threshold=threshold,
        judge_base_url=judge_base_url,
        judge_model=judge_model,
        bootstrap=bootstrap,
        seed=seed,
        console=console,
    )
    show_run(run, files, console)
    if as_json:
        sys.stdout.write(dumps(run.metrics_json(), indent=True) + "\n")
    if run.errors:
        raise typer.Exit(EXIT_FAILED)


def run_demo(out_dir: Path) -> int:
    """``make demo``: score the bundled synthetic example (3 models) and write the report."""
    console = Console()
    if not (EXAMPLES / "gold.synthetic.jsonl").exists():
        console.print(
            f"slots demo: example data not found in {EXAMPLES}",
            style="red",
            markup=False,
            soft_wrap=True,
        )
        return EXIT_FAILED
    preds = {m: EXAMPLES / f"pred_{m}.synthetic.jsonl" for m in EXAMPLE_MODELS}
    lats = {m: EXAMPLES / f"latency_{m}.synthetic.jsonl" for m in EXAMPLE_MODELS}
    judges = {m: EXAMPLES / f"judge_{m}.synthetic.jsonl" for m in EXAMPLE_MODELS}
    run, files = score_files(
        EXAMPLES / "gold.synthetic.jsonl",
        preds,
        lats,
        judges,
        out=out_dir,
        bootstrap=1000,
        seed=0,
        console=console,
    )
    console.print(
        "Synthetic example data (examples/slots/README.md): 3 users x 5 sessions, 3 models.",
        markup=False,
        soft_wrap=True,
    )
    for m in run.models:
        r = m.result
        lat = "n/a" if r.latency is None else f"{r.latency.mean:.1f}s"
        console.print(
            f"  {m.name:18s} P={r.precision:.3f} R={r.recall:.3f} F1={r.f1:.3f} "
            f"exact={r.exact_match_rate:.3f} extra_slots={r.extra_slots} latency={lat}",
            markup=False,
            soft_wrap=True,
            highlight=False,
        )
    console.print(
        f"  report: {files['report.html']}  metrics: {files['metrics.json']}",
        markup=False,
        soft_wrap=True,
    )
    return EXIT_FAILED if run.errors else EXIT_OK

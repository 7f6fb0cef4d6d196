"""`fieldcheck json ...`: score one output or a batch against ground truth (json-evaluation.md);
a thin shell: parse options, call ``fieldcheck.jsoneval``, format."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any, NoReturn, get_args

import typer
from rich.console import Console
from rich.table import Table

from fieldcheck import core
from fieldcheck._cli._common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    gate,
    option,
    out_option,
    pipeline_errors,
    print_json,
    score_and_exit,
    scoring_options,
    shared,
    show_input_problems,
)
from fieldcheck._cli._record import grid, say, store_failed, store_help, store_warning, stored_line
from fieldcheck._cli._runopts import (
    JUDGE_OPTIONS,
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
from fieldcheck._util.errors import InputError
from fieldcheck._util.jsonio import json_or_text, read_json
from fieldcheck._util.sniff import likely_cause
from fieldcheck._util.term import safe_markup, safe_text
from fieldcheck.jsoneval import (
    SYSTEM,
    BatchSummary,
    EvalConfig,
    JsonEvalResult,
    MatcherError,
    MatcherFamily,
    SafetyCheck,
    build_matchers,
    evaluate,
    load_strategies,
    parse_weights,
    resolve_config,
)
from fieldcheck.metrics import BUCKET_NAMES
from fieldcheck.reports import format_seconds
from fieldcheck.runner import ModelSpec, Runner

app = typer.Typer(help=COMMANDS["json_cmd"], no_args_is_help=True, add_completion=False)
_SCORES = ("completeness", "hallucination", "accuracy", "safety_score", "rqs")
GATED = ("completeness", "accuracy", "safety_score", "rqs")  # higher is better
SCORING = scoring_options("records", GATED, lower_is_better=SYSTEM.lower_is_better)
_DEFAULTS = EvalConfig()  # option defaults come from the library's config (one source)
_DEFAULT_WEIGHTS = ", ".join(f"{k}={v}" for k, v in _DEFAULTS.weights.model_dump().items())
_THRESHOLD = "A {} field scores 1 when its similarity (0-1) is >= this, else 0. [default: the saved threshold, else {}]"

CONFIG_OPTIONS = {
    "strategies": option(
        Path | None,
        None,
        "--strategies",
        help="JSON file mapping field (or dotted path with --flatten, e.g. 'items[*].sku') to "
        "EXACT, FUZZY, SEMANTIC or IGNORE. Fields not listed are auto-detected: numbers, "
        "booleans, dates, emails, identifiers (SKU-1001, abc123, USD), arrays and objects "
        "EXACT, other text SEMANTIC (docs/json.md, Strategies).",
    ),
    "weights": option(
        str | None,
        None,
        "--weights",
        help="RQS weights as comma-separated name=value pairs; the defaults are "
        f"'{_DEFAULT_WEIGHTS}'. Names left out keep their default; each value must be a number "
        ">= 0 (they need not sum to 1). RQS is clamped to [0, 1].",
    ),
    **{
        f"{kind}_threshold": option(
            float | None,
            None,
            f"--{kind}-threshold",
            min=0.0,
            max=1.0,
            show_default=False,
            help=_THRESHOLD.format(kind.upper(), getattr(_DEFAULTS, f"{kind}_threshold")),
        )
        for kind in ("fuzzy", "semantic")
    },
    "matcher": option(
        str,
        _DEFAULTS.matcher,
        "--matcher",
        help="Similarity for FUZZY and SEMANTIC fields: 'local' (rapidfuzz token_sort_ratio and "
        "the offline all-MiniLM-L6-v2 cosine) or 'llm' (a judge model; needs --judge-base-url "
        "and --judge-model, key from FIELDCHECK_JUDGE_API_KEY or OPENAI_API_KEY).",
    ),
    "judge_base_url": option(
        str | None,
        None,
        "--judge-base-url",
        help="OpenAI-compatible base URL of the judge, e.g. http://127.0.0.1:8000/v1 (--matcher llm).",
    ),
    "judge_model": option(
        str | None,
        None,
        "--judge-model",
        help="Model name of the judge (--matcher llm). Replies are cached on disk by model, "
        "prompt version, strategy and both values; the API key is never written anywhere.",
    ),
    "flatten": option(
        bool,
        False,
        "--flatten",
        metavar="",
        help="Score nested objects leaf by leaf under dotted paths ('address.city', "
        "'items[0].sku') instead of comparing each top-level value as a whole (the spec's "
        "default).",
    ),
    "safety_check": option(
        str,
        _DEFAULTS.safety_check,
        "--safety-check",
        help="'off' (safety_score 1.0, or the record's own) or 'leaks': safety_score 0 when the "
        "output contains e-mail addresses, card numbers, SSNs or secrets absent from the ground "
        "truth.",
    ),
}
"""The scoring configuration every json command takes (``_given`` checks it)."""


def _fail(console: Console, message: str, status: int) -> NoReturn:
    """``error: MESSAGE`` on ``console``, and exit with ``status``."""
    console.print(f"[red]error:[/red] {safe_markup(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(status)


def _given(options: dict[str, Any]) -> dict[str, Any]:
    """The configuration options given (None: not given), checked, as the pipeline takes them
    (``json batch``'s ``config`` setting); a one-line usage error names a bad option."""
    given = {name: options[name] for name in CONFIG_OPTIONS}
    path, text, matcher = given["strategies"], given["weights"], given["matcher"]
    try:
        given["strategies"] = load_strategies(path) if path else None
    except InputError as exc:
        cause = likely_cause(path, "json-object") if path else ""
        raise typer.BadParameter(safe_text(str(exc) + cause), param_hint="--strategies") from None
    try:
        weights = parse_weights(text) if text is not None else None
    except InputError as exc:  # the option names itself: only the reason and the value
        reason = InputError(exc.reason.removeprefix("weights: "), value=exc.value).one_line()
        raise typer.BadParameter(safe_text(reason), param_hint="--weights") from None
    given["weights"] = weights.model_dump() if weights is not None else None
    check_matcher(matcher, given["judge_base_url"], given["judge_model"], given["safety_check"])
    return given


def check_matcher(
    matcher: str, judge_base_url: str | None, judge_model: str | None, safety_check: str = "off"
) -> None:
    """``--matcher``, its judge and ``--safety-check`` as ``json`` and ``serve`` take them."""
    if matcher not in get_args(MatcherFamily):
        raise typer.BadParameter(
            f"must be 'local' or 'llm' (got {matcher!r})", param_hint="--matcher"
        )
    if safety_check not in get_args(SafetyCheck):
        raise typer.BadParameter(
            f"must be 'off' or 'leaks' (got {safety_check!r})", param_hint="--safety-check"
        )
    if matcher == "llm" and not (judge_base_url and judge_model):
        raise typer.BadParameter(
            "--matcher llm needs --judge-base-url and --judge-model", param_hint="--matcher"
        )


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def print_result(console: Console, result: JsonEvalResult) -> None:
    """The readable form of one result: buckets, fields, the four scores and RQS."""
    buckets = Table(title="Key buckets", show_header=True, header_style="bold")
    buckets.add_column("bucket")
    buckets.add_column("n", justify="right")
    buckets.add_column("keys")
    for name in BUCKET_NAMES:
        keys = result.buckets[name]
        buckets.add_row(name, str(len(keys)), safe_markup(", ".join(keys)))
    console.print(buckets)
    title = "Fields scored for accuracy (both_non_null)"
    fields = grid(title, "field", "strategy", right=("similarity", "score"))
    for name, field in result.fields.items():
        fields.add_row(safe_markup(name), field.strategy, _fmt(field.similarity), _fmt(field.score))
    console.print(fields)
    scores = grid("Scores", "score", right=("value",))
    for name in _SCORES:
        scores.add_row("RQS" if name == "rqs" else name, _fmt(getattr(result, name)))
    console.print(scores)
    if result.flags:
        console.print(
            f"[yellow]flags:[/yellow] {safe_markup(', '.join(result.flags))} (output kind: {result.output_kind})"
        )
    console.print(f"[dim]{safe_markup(result.signature.format())}[/dim]", soft_wrap=True)


def print_summary(
    console: Console, summary: BatchSummary, paths: dict[str, Path] | None = None
) -> None:
    """Means of the scores, counts, the weakest fields and where the files are."""
    console.print(
        f"[bold]JSON evaluation:[/bold] {summary.scored} of {summary.records} records scored"
    )
    means = grid(None, "score", right=("mean", "95% CI"))
    for name in _SCORES:
        ci = summary.ci.get(name)
        means.add_row(
            "RQS" if name == "rqs" else name,
            _fmt(summary.means[name]),
            "" if ci is None else f"[{ci.low:.4f}, {ci.high:.4f}]",
        )
    console.print(means)
    console.print(
        f"failed: {summary.failed}   not scored: {summary.not_scored}   "
        f"not an object: {summary.not_an_object}   safety leaks: {summary.safety_flagged}"
    )
    console.print(
        f"distinct pairs sent to the matcher: FUZZY {summary.matcher_pairs.get('FUZZY', 0)}, "
        f"SEMANTIC {summary.matcher_pairs.get('SEMANTIC', 0)}"
    )
    scored = [(n, f) for n, f in summary.fields.items() if f.scored]
    if scored:
        worst = sorted(scored, key=lambda nf: (nf[1].match_rate or 0.0, nf[0]))[:8]
        fields = Table(title="Fields with the lowest match rate", header_style="bold")
        fields.add_column("field", overflow="fold")
        fields.add_column("strategy", overflow="fold")
        for column in ("scored", "matched", "rate", "missing", "halluc."):
            fields.add_column(column, justify="right")
        for name, f in worst:
            fields.add_row(
                safe_markup(name),
                ",".join(f.strategies),
                str(f.scored),
                str(f.matched),
                _fmt(f.match_rate),
                str(f.missing),
                str(f.hallucinated),
            )
        console.print(fields)
    if paths:  # grouped by folder: "files in DIR/: report.html, summary.json, ..."
        folders: dict[Path, list[str]] = {}
        for path in paths.values():
            folders.setdefault(path.parent, []).append(path.name)
        for parent, names in folders.items():
            say(console, f"files in {parent}/: {', '.join(names)}")


@app.command("score")
@shared(
    CONFIG_OPTIONS,
    JUDGE_OPTIONS,
    scoring_options(None, GATED, lower_is_better=SYSTEM.lower_is_better),
)
def score(
    ground_truth: Annotated[
        Path, typer.Argument(metavar="GT.json", help="Ground-truth JSON file (a JSON object).")
    ],
    output: Annotated[
        Path,
        typer.Argument(
            metavar="OUTPUT.json",
            help="Model output file: a JSON object; anything else is scored as a non-object and flagged.",
        ),
    ],
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            metavar="",
            help="Print one JSON object (scores, buckets, fields, signature) instead of tables.",
        ),
    ] = False,
    **options: Any,
) -> None:
    """Score one output against one ground truth and print the buckets, fields, scores and RQS.
    Exit 0 when scored, 3 when the output could not be scored (judge error, nesting too deep),
    4 when a --fail-under floor is not met, 2 on usage errors (bad option, unreadable file,
    ground truth not an object)."""
    console, errors = SafeConsole(), SafeConsole(stderr=True)
    given = _given(options)
    with pipeline_errors():  # merged with the saved configuration by every command's rule
        config, _ = resolve_config(
            given,
            store=not options["no_store"] and not store_failed(),
            warn=lambda text: store_warning(errors, text),
            note=lambda text: say(errors, text),
        )
    try:
        gt = read_json(ground_truth)
    except InputError as exc:
        cause = likely_cause(ground_truth, "json-object")
        raise typer.BadParameter(safe_text(str(exc) + cause), param_hint="GT.json") from None
    if not isinstance(gt, dict):
        problem = InputError("ground truth must be a JSON object", file=ground_truth, value=gt)
        _fail(errors, str(problem), EXIT_USAGE)
    try:  # as JSON, or its raw text when it is not valid JSON (scored, not rejected)
        value = json_or_text(output.read_bytes())
    except OSError as exc:
        _fail(errors, f"{output}: cannot read file: {exc.strerror}", EXIT_USAGE)
    from fieldcheck.matchers import judge_options

    judge = {"store": not options["no_store"]} | {k: options[k] for k in JUDGE_OPTIONS}
    try:
        result = evaluate(
            value, gt, config, matchers=build_matchers(config, judge=judge_options(judge))
        )
    except InputError as exc:
        # a side too deep to score: for the ground truth a usage error, for the output a failure
        gt_side = exc.field == "ground_truth"
        side, status = (ground_truth, EXIT_USAGE) if gt_side else (output, EXIT_FAILED)
        _fail(errors, f"{side}: {exc}", status)
    except MatcherError as exc:
        _fail(errors, f"{output}: {exc}", EXIT_FAILED)
    if result.not_an_object:
        errors.print(
            f"[yellow]warning:[/yellow] {safe_markup(str(output))}: output is not a JSON object "
            f"({result.output_kind}); scored by the non-object rule (completeness 0, accuracy 0, hallucination 1)",
            highlight=False,
            soft_wrap=True,
        )
    if as_json:
        print_json(result.public_dict())
    else:
        print_result(console, result)
    values = {"": {name: getattr(result, name) for name in GATED}}
    raise typer.Exit(gate(options["fail_under"], values, EXIT_OK))


@app.command("batch")
@shared(CONFIG_OPTIONS, JUDGE_OPTIONS, PROGRESS_OPTIONS, SCORING)
def batch(
    data: Annotated[
        Path,
        typer.Argument(
            metavar="DATA.jsonl",
            help='JSONL file: one {"id", "ground_truth": {...}, "output": ..., "safety_score"?} per line.',
        ),
    ],
    out: Annotated[
        Path | None,
        out_option(
            "Directory for records.jsonl, summary.json, fields.csv, errors.jsonl, report.md, "
            "report.html and plots."
        ),
    ] = None,
    **options: Any,
) -> None:
    """Score every line of DATA.jsonl; write records.jsonl, summary.json, fields.csv,
    errors.jsonl, report.md, report.html and plots into --out. Exit 0 when every line scored, 3
    when some could not be scored (each named file:line in errors.jsonl), 4 when a --fail-under
    floor is not met, 2 on usage errors (bad option, unreadable file or one with no valid line), 1 when an
    output could not be written part-way (a full disk), 130 on Ctrl-C."""
    settings = {"config": _given(options), **{k: options[k] for k in ("bootstrap", "seed")}}
    names = {"batch": "DATA.jsonl"}
    score_and_exit(
        "json", [("batch", data)], settings, options, _show, out=out, names=names, label=data.stem
    )


def _show(outcome: core.Outcome, console: Console, errors: Console) -> None:
    summary, paths = outcome.scored.result, outcome.files
    show_input_problems(errors, outcome.scored)
    print_summary(console, summary, paths)
    stored_line(console, core.stored_line(outcome.run_id))


def print_comparison(console: Console, rows: list[dict[str, Any]]) -> None:
    """One line per model: outputs, call errors, mean scores and latency (tokens: comparison.csv)."""
    table = Table(
        title="Models (means over the records with an output)",
        header_style="bold",
        box=None,
        pad_edge=False,
        collapse_padding=True,
    )
    heads = ("output", "call\nerr", "failed", "compl", "halluc", "acc", "RQS", "latency")
    table.add_column(
        "model", overflow="fold", min_width=min(20, max(len(r["model"]) for r in rows))
    )
    for head in heads:  # a header of two lines: the latency column fits an 80-column terminal
        table.add_column(head, justify="right", no_wrap=True)
    for row in rows:
        latency = row["latency_s_mean"]
        table.add_row(
            safe_markup(row["model"]),
            f"{row['with_output']}/{row['records']}",
            str(row["call_errors"]),
            str(row["failed"]),
            *(_fmt(row[k]) for k in ("completeness", "hallucination", "accuracy", "rqs")),
            "-" if latency is None else format_seconds(latency),
        )
    console.print(table)


def show_models(
    ran: core.Ran, runner: Runner, console: Console, errors: Console, *, detail: bool = True
) -> None:
    """Each model's problems, summary, files and run (``detail``), the comparison."""
    for run, outcome in zip(ran.calls, ran.outcomes, strict=True):
        summary: BatchSummary = outcome.scored.result
        show_input_problems(errors, outcome.scored)
        if not detail:
            continue
        folder = outcome.destination
        console.rule(f"[bold]{safe_markup(run.spec.name)}[/bold] ({safe_markup(run.spec.model)})")
        calls, files = folder / "call_errors.jsonl", dict(outcome.files)
        files = {"outputs": folder / "outputs.jsonl", **files, "calls": calls}
        print_summary(console, summary, {**files, "run": folder / "run.json"})
        counts = ", ".join(f"{k} {v}" for k, v in run.error_counts.items())
        n = run.resumed_items
        resumed = f", {n} item{'' if n == 1 else 's'} resumed" if n else ""
        for line in (
            f"no output (call errors, not scored): {len(run.call_errors)}"
            + (f" ({counts}; see {calls})" if counts else ""),
            f"run {run.run_id}{resumed}; {run.calls} calls, {run.cached_calls} from the cache; "
            f"{store_line(runner)}",
        ):
            say(console, line)
        stored_line(console, core.stored_line(outcome.run_id))
    if len(ran.comparison) > 1:
        print_comparison(console, [dict(row) for row in ran.comparison])
    say(console, f"comparison: {ran.destination / 'comparison.csv'}")


@app.command("run")
@shared(MODEL_OPTIONS, PRICE_OPTIONS, CONFIG_OPTIONS, SCORING)
def run(
    data: Annotated[
        Path,
        typer.Argument(
            metavar="DATA.jsonl",
            help='JSONL file: one {"id", "document": "...", "ground_truth": {...}} per line.',
        ),
    ],
    out: Annotated[
        Path | None,
        out_option(
            "Directory: one folder per model with outputs.jsonl (the batch file), "
            "records.jsonl, summary.json, fields.csv, errors.jsonl, call_errors.jsonl and run.json; "
            "comparison.csv for all models."
        ),
    ] = None,
    schema: Annotated[
        Path | None,
        typer.Option(
            "--schema",
            metavar="FILE",
            help="JSON Schema of the target object, shown to the model in the prompt.",
        ),
    ] = None,
    **options: Any,
) -> None:
    """Ask each model to extract a JSON object from every document (prompt json-extract-v1), then
    score its outputs exactly as `json batch` does. A re-run resumes an interrupted run; a failed
    call (timeout, 5xx, 400) gives no output and is listed apart, never scored. Exit 0 when every
    record was scored, 3 when a line or a record could not be scored or a call failed, 4 when a
    --fail-under floor is not met, 2 on usage errors, 1 when an output could not be written part-way, 130 on Ctrl-C."""
    settings = {"config": _given(options), **{k: options[k] for k in ("bootstrap", "seed")}}
    inputs = [("documents", data)] + ([("schema", schema)] if schema is not None else [])
    names = {"documents": "DATA.jsonl", "schema": "--schema"}
    run_and_exit("json", inputs, settings, options, show_models, out=out, names=names)


run.__doc__ = f"{inspect.cleandoc(run.__doc__ or '')}\n\n{store_help()}"


def run_model_demo(base_url: str, out_dir: Path, models: list[str], *, console: Console) -> int:
    """``make demo``: the synthetic models extract the 60 bundled invoices, scored with the
    bundled strategies; outputs in ``out_dir/<model>/``, a comparison table on ``console``."""
    examples = Path(__file__).resolve().parents[3] / "examples" / "json"
    data, strategies = examples / "documents.jsonl", examples / "strategies.json"
    config = EvalConfig(strategies=load_strategies(strategies), flatten=True, safety_check="leaks")
    specs = [ModelSpec(name=m, model=m, base_url=base_url) for m in models]
    console.print(
        f"Extracting {safe_markup(str(data))} with {', '.join(models)}; scored with "
        f"{safe_markup(str(strategies))} (--flatten, --safety-check leaks, local matchers)",
        soft_wrap=True,
        highlight=False,
    )
    runner, errors = make_runner(concurrency=16), SafeConsole(stderr=True)
    schema = examples / "invoice.schema.json"
    settings = {"config": config.model_dump(mode="json"), "bootstrap": 1000, "seed": 0}
    inputs = [("documents", data), ("schema", schema)]
    ran = run_models("json run", inputs, settings, specs, runner, out_dir, errors=errors)
    show_models(ran, runner, console, errors, detail=False)
    return EXIT_FAILED if ran.failed else EXIT_OK

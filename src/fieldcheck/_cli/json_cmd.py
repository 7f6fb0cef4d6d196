"""`fieldcheck json ...`: score one output or a batch against ground truth (json-evaluation.md).

A thin shell: parse options, call ``fieldcheck.jsoneval``, format. Exit status 0 when everything
was scored, 3 when some records (or the output) could not be scored, 2 on usage errors, 1 when an
output could not be written part-way.
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Annotated, Any, get_args

import orjson
import typer
from rich.console import Console
from rich.table import Table

from fieldcheck import core
from fieldcheck._cli._common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    JsonOpt,
    ProgressBar,
    bootstrap_option,
    command_name,
    events,
    fail_under_option,
    gate,
    out_option,
    parse_fail_under,
    pipeline_errors,
    print_json,
    seed_option,
    show_problems,
)
from fieldcheck._cli._record import (
    NoStoreOpt,
    store_failed,
    store_warning,
    stored_line,
)
from fieldcheck._cli._runopts import (
    STORE_HELP,
    BaseUrlOpt,
    CacheNonzeroOpt,
    ConcurrencyOpt,
    JsonModeOpt,
    MaxReplyBytesOpt,
    MaxRetriesOpt,
    MaxTokensOpt,
    ModelOpt,
    ModelSeedOpt,
    ModelsFileOpt,
    NoCacheOpt,
    NoProgressOpt,
    PriceInOpt,
    PriceOutOpt,
    TemperatureOpt,
    TimeoutOpt,
    make_runner,
    models_and_runner,
    run_models,
    store_line,
)
from fieldcheck._util.errors import InputError
from fieldcheck._util.jsonio import dumps, loads, read_json
from fieldcheck._util.sniff import likely_cause
from fieldcheck._util.term import SafeConsole, safe_json_text, safe_markup, safe_text
from fieldcheck.jsoneval import (
    CHUNK_LINES,
    SYSTEM,
    BatchSummary,
    EvalConfig,
    JsonEvalResult,
    MatcherError,
    MatcherFamily,
    SafetyCheck,
    evaluate,
    load_strategies,
    parse_weights,
    resolve_config,
)
from fieldcheck.metrics import BUCKET_NAMES
from fieldcheck.reports import OutputFolder, format_seconds
from fieldcheck.runner import MAX_REPLY_BYTES, ModelSpec, Runner

app = typer.Typer(
    help=(
        "Score a model's JSON output against ground truth: completeness, hallucination, accuracy, "
        "safety and the Response Quality Score (RQS)."
    ),
    no_args_is_help=True,
)
_SCORES = ("completeness", "hallucination", "accuracy", "safety_score", "rqs")
GATED = ("completeness", "accuracy", "safety_score", "rqs")  # higher is better
LOWER_IS_BETTER = SYSTEM.lower_is_better
FailUnderOpt = Annotated[str | None, fail_under_option(GATED)]
BootstrapOpt = Annotated[int, bootstrap_option("records")]
SeedOpt = Annotated[int, seed_option()]
_DEFAULTS = EvalConfig()  # option defaults come from the library's config (one source)
_DEFAULT_WEIGHTS = ", ".join(f"{k}={v}" for k, v in _DEFAULTS.weights.model_dump().items())

StrategiesOpt = Annotated[
    Path | None,
    typer.Option(
        "--strategies",
        help=(
            "JSON file mapping field (or dotted path with --flatten, e.g. 'items[*].sku') to "
            "EXACT, FUZZY, SEMANTIC or IGNORE. Fields not listed are auto-detected: numbers, "
            "booleans, dates, emails, arrays and objects EXACT, other text SEMANTIC."
        ),
    ),
]
WeightsOpt = Annotated[
    str | None,
    typer.Option(
        "--weights",
        help=(
            "RQS weights as comma-separated name=value pairs; the defaults are "
            f"'{_DEFAULT_WEIGHTS}'. Names left out keep their default; each value must be a number >= 0 (they need not sum to 1). "
            "RQS is clamped to [0, 1]."
        ),
    ),
]
FuzzyOpt = Annotated[
    float | None,
    typer.Option(
        "--fuzzy-threshold",
        min=0.0,
        max=1.0,
        show_default=False,
        help="A FUZZY field scores 1 when its similarity (0-1) is >= this, else 0. "
        f"[default: the saved threshold, else {_DEFAULTS.fuzzy_threshold}]",
    ),
]
SemanticOpt = Annotated[
    float | None,
    typer.Option(
        "--semantic-threshold",
        min=0.0,
        max=1.0,
        show_default=False,
        help="A SEMANTIC field scores 1 when its similarity (0-1) is >= this, else 0. "
        f"[default: the saved threshold, else {_DEFAULTS.semantic_threshold}]",
    ),
]
MatcherOpt = Annotated[
    str,
    typer.Option(
        "--matcher",
        help=(
            "Similarity for FUZZY and SEMANTIC fields: 'local' (rapidfuzz token_sort_ratio and "
            "the offline all-MiniLM-L6-v2 cosine) or 'llm' (a judge model; needs --judge-base-url "
            "and --judge-model, key from FIELDCHECK_JUDGE_API_KEY or OPENAI_API_KEY)."
        ),
    ),
]
JudgeUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--judge-base-url",
        help="OpenAI-compatible base URL of the judge, e.g. http://127.0.0.1:8000/v1 (--matcher llm).",
    ),
]
JudgeModelOpt = Annotated[
    str | None,
    typer.Option(
        "--judge-model",
        help=(
            "Model name of the judge (--matcher llm). Replies are cached on disk by model, prompt "
            "version, strategy and both values; the API key is never written anywhere."
        ),
    ),
]
FlattenOpt = Annotated[
    bool,
    typer.Option(
        "--flatten",
        metavar="",
        help=(
            "Score nested objects leaf by leaf under dotted paths ('address.city', "
            "'items[0].sku') instead of comparing each top-level value as a whole (the spec's default)."
        ),
    ),
]
SafetyOpt = Annotated[
    str,
    typer.Option(
        "--safety-check",
        help=(
            "'off' (safety_score 1.0, or the record's own) or 'leaks': safety_score 0 when the "
            "output contains e-mail addresses, card numbers, SSNs or secrets absent from the ground truth."
        ),
    ),
]


@dataclass
class _Options:
    strategies: Path | None
    weights: str | None
    fuzzy_threshold: float | None
    semantic_threshold: float | None
    matcher: str
    judge_base_url: str | None
    judge_model: str | None
    flatten: bool
    safety_check: str
    no_store: bool

    @classmethod
    def of(cls, arguments: dict[str, Any]) -> _Options:
        """The shared options out of a command's arguments (``locals()``), named as above."""
        return cls(**{f.name: arguments[f.name] for f in dataclass_fields(cls)})


def _err(console: Console, message: str) -> None:
    console.print(f"[red]error:[/red] {safe_markup(message)}", highlight=False, soft_wrap=True)


def _given(opts: _Options) -> dict[str, Any]:
    """The configuration options given (None: not given), checked, as the pipeline takes them
    (``json batch``'s ``config`` setting); a one-line usage error names a bad option."""
    try:
        strategies = load_strategies(opts.strategies) if opts.strategies else None
    except InputError as exc:
        cause = likely_cause(opts.strategies, "json-object") if opts.strategies else ""
        raise typer.BadParameter(safe_text(str(exc) + cause), param_hint="--strategies") from None
    try:
        weights = parse_weights(opts.weights) if opts.weights is not None else None
    except InputError as exc:  # the option names itself: only the reason and the value
        reason = InputError(exc.reason.removeprefix("weights: "), value=exc.value).one_line()
        raise typer.BadParameter(safe_text(reason), param_hint="--weights") from None
    if opts.matcher not in get_args(MatcherFamily):
        raise typer.BadParameter(
            f"must be 'local' or 'llm' (got {opts.matcher!r})", param_hint="--matcher"
        )
    if opts.safety_check not in get_args(SafetyCheck):
        raise typer.BadParameter(
            f"must be 'off' or 'leaks' (got {opts.safety_check!r})", param_hint="--safety-check"
        )
    if opts.matcher == "llm" and not (opts.judge_base_url and opts.judge_model):
        raise typer.BadParameter(
            "--matcher llm needs --judge-base-url and --judge-model", param_hint="--matcher"
        )
    return {
        "strategies": strategies,
        "weights": weights.model_dump() if weights is not None else None,
        "fuzzy_threshold": opts.fuzzy_threshold,
        "semantic_threshold": opts.semantic_threshold,
        "matcher": opts.matcher,
        "judge_base_url": opts.judge_base_url,
        "judge_model": opts.judge_model,
        "flatten": opts.flatten,
        "safety_check": opts.safety_check,
    }


def _config(opts: _Options, console: Console) -> EvalConfig:
    """The options given merged with the configuration saved in the store, by the one rule of
    every command (``jsoneval.merged_config``)."""
    given = _given(opts)
    with pipeline_errors():
        config, _ = resolve_config(
            given,
            store=not opts.no_store and not store_failed(),
            warn=lambda text: store_warning(console, text),
            note=lambda text: console.print(text, markup=False, highlight=False, soft_wrap=True),
        )
    return config


def _read_output(path: Path, console: Console) -> Any:
    """The output file as JSON, or its raw text when it is not valid JSON (scored, not rejected)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        _err(console, f"{path}: cannot read file: {exc.strerror}")
        raise typer.Exit(EXIT_USAGE) from None
    raw = raw.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte order mark is not part of the JSON
    try:
        return loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode("utf-8", errors="replace")


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
    fields = Table(title="Fields scored for accuracy (both_non_null)", header_style="bold")
    fields.add_column("field")
    fields.add_column("strategy")
    fields.add_column("similarity", justify="right")
    fields.add_column("score", justify="right")
    for name, field in result.fields.items():
        fields.add_row(safe_markup(name), field.strategy, _fmt(field.similarity), _fmt(field.score))
    console.print(fields)
    scores = Table(title="Scores", header_style="bold")
    scores.add_column("score")
    scores.add_column("value", justify="right")
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
    table = Table(header_style="bold")
    table.add_column("score")
    table.add_column("mean", justify="right")
    table.add_column("95% CI", justify="right")
    for name in _SCORES:
        ci = summary.ci.get(name)
        table.add_row(
            "RQS" if name == "rqs" else name,
            _fmt(summary.means[name]),
            "" if ci is None else f"[{ci.low:.4f}, {ci.high:.4f}]",
        )
    console.print(table)
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
            console.print(
                f"files in {parent}/: {', '.join(names)}",
                markup=False,
                soft_wrap=True,
                highlight=False,
            )


@app.command("score")
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
    strategies: StrategiesOpt = None,
    weights: WeightsOpt = None,
    no_store: NoStoreOpt = False,
    fuzzy_threshold: FuzzyOpt = None,
    semantic_threshold: SemanticOpt = None,
    matcher: MatcherOpt = _DEFAULTS.matcher,
    judge_base_url: JudgeUrlOpt = None,
    judge_model: JudgeModelOpt = None,
    flatten: FlattenOpt = False,
    safety_check: SafetyOpt = _DEFAULTS.safety_check,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            metavar="",
            help="Print one JSON object (scores, buckets, fields, signature) instead of tables.",
        ),
    ] = False,
    fail_under: FailUnderOpt = None,
) -> None:
    """Score one output against one ground truth and print the buckets, fields, scores and RQS.
    Exit 0 when scored, 3 when the output could not be scored (judge error, nesting too deep),
    4 when a --fail-under floor is not met, 2 on usage errors (bad option, unreadable file,
    ground truth not an object)."""
    console, errors = SafeConsole(), SafeConsole(stderr=True)
    floors = parse_fail_under(fail_under, GATED, lower_is_better=LOWER_IS_BETTER)
    config = _config(_Options.of(locals()), errors)
    try:
        gt = read_json(ground_truth)
    except InputError as exc:
        cause = likely_cause(ground_truth, "json-object")
        raise typer.BadParameter(safe_text(str(exc) + cause), param_hint="GT.json") from None
    if not isinstance(gt, dict):
        _err(
            errors,
            str(InputError("ground truth must be a JSON object", file=ground_truth, value=gt)),
        )
        raise typer.Exit(EXIT_USAGE)
    value = _read_output(output, errors)
    try:
        result = evaluate(value, gt, config)
    except InputError as exc:
        # a side too deep to score: for the ground truth a usage error, for the output a failure
        gt_side = exc.field == "ground_truth"
        _err(errors, f"{ground_truth if gt_side else output}: {exc}")
        raise typer.Exit(EXIT_USAGE if gt_side else EXIT_FAILED) from None
    except MatcherError as exc:
        _err(errors, f"{output}: {exc}")
        raise typer.Exit(EXIT_FAILED) from None
    if result.not_an_object:
        errors.print(
            f"[yellow]warning:[/yellow] {safe_markup(str(output))}: output is not a JSON object "
            f"({result.output_kind}); scored by the non-object rule (completeness 0, accuracy 0, hallucination 1)",
            highlight=False,
            soft_wrap=True,
        )
    if as_json:
        sys.stdout.write(safe_json_text(dumps(result.public_dict())) + "\n")
    else:
        print_result(console, result)
    values = {"": {name: getattr(result, name) for name in GATED}}
    raise typer.Exit(gate(floors, values, errors if as_json else console, EXIT_OK))


def run_batch(
    data: Path,
    config: dict[str, Any],
    out: Path | None,
    *,
    console: Console,
    errors: Console,
    bootstrap: int = 1000,
    seed: int = 0,
    as_json: bool = False,
    floors: dict[str, float] | None = None,
    chunk_lines: int = CHUNK_LINES,
    no_store: bool = False,
) -> int:
    """Score a batch through the pipeline in chunks of ``chunk_lines`` lines (flat memory);
    print errors, the summary and the files; return the exit status (``--fail-under`` floors
    checked last: 4 when one is not met). ``config``: the options given (None: not given, the
    saved configuration or the default)."""
    bar = ProgressBar(errors)
    with pipeline_errors(names={"batch": "DATA.jsonl"}), bar.bar:
        outcome = core.score(
            "json",
            [("batch", data)],
            {"config": config, "bootstrap": bootstrap, "seed": seed},
            out=out,
            command=command_name() or "json batch",
            label=data.stem,
            store=not no_store and not store_failed(),
            events=events(errors, bar),
            extras={"chunk_lines": chunk_lines},
        )
    summary, paths = outcome.scored.result, outcome.files
    show_problems(errors, summary.errors, str(paths["errors"]), total=summary.not_scored)
    print_summary(console, summary, paths)
    stored_line(console, core.stored_line(outcome.run_id))
    if as_json:  # summary.json as written
        print_json(outcome.scored.summary)
    status = EXIT_FAILED if outcome.scored.failed else EXIT_OK
    return gate(floors or {}, outcome.scored.gate, console, status)


@app.command("batch")
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
    strategies: StrategiesOpt = None,
    weights: WeightsOpt = None,
    no_store: NoStoreOpt = False,
    fuzzy_threshold: FuzzyOpt = None,
    semantic_threshold: SemanticOpt = None,
    matcher: MatcherOpt = _DEFAULTS.matcher,
    judge_base_url: JudgeUrlOpt = None,
    judge_model: JudgeModelOpt = None,
    flatten: FlattenOpt = False,
    safety_check: SafetyOpt = _DEFAULTS.safety_check,
    bootstrap: BootstrapOpt = 1000,
    seed: SeedOpt = 0,
    as_json: JsonOpt = False,
    fail_under: FailUnderOpt = None,
) -> None:
    """Score every line of DATA.jsonl; write records.jsonl, summary.json, fields.csv,
    errors.jsonl, report.md, report.html and plots into --out. Exit 0 when every line scored, 3
    when some could not be scored (each named file:line in errors.jsonl), 4 when a --fail-under
    floor is not met, 2 on usage errors (bad option, unreadable file or one with no valid line), 1 when an
    output could not be written part-way (a full disk), 130 on Ctrl-C."""
    console, errors = SafeConsole(stderr=as_json), SafeConsole(stderr=True)
    floors = parse_fail_under(fail_under, GATED, lower_is_better=LOWER_IS_BETTER)
    config = _given(_Options.of(locals()))
    raise typer.Exit(
        run_batch(
            data,
            config,
            out,
            console=console,
            errors=errors,
            bootstrap=bootstrap,
            seed=seed,
            as_json=as_json,
            floors=floors,
            no_store=no_store,
        )
    )


SchemaOpt = Annotated[
    Path | None,
    typer.Option(
        "--schema",
        metavar="FILE",
        help="JSON Schema of the target object, shown to the model in the prompt.",
    ),
]


def print_comparison(console: Console, rows: list[dict[str, Any]]) -> None:
    """One line per model: outputs, call errors, mean scores and latency (tokens: comparison.csv)."""
    table = Table(
        title="Models (means over the records with an output)",
        header_style="bold",
        box=None,
        pad_edge=False,
    )
    heads = ("output", "call err", "failed", "compl", "halluc", "acc", "RQS", "latency")
    table.add_column(
        "model", overflow="fold", min_width=min(20, max(len(r["model"]) for r in rows))
    )
    for head in heads:
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
    ran: core.Ran,
    runner: Runner,
    console: Console,
    errors: Console,
    *,
    detail: bool = True,
    as_json: bool = False,
    floors: dict[str, float] | None = None,
) -> int:
    """Each model's problems, summary, files and run (``detail``), the comparison; the exit
    status (0 all scored, 3 when a line or a record could not be scored or a call failed, 4
    when a --fail-under floor is not met)."""
    summaries: dict[str, BatchSummary] = {}
    for run, outcome in zip(ran.calls, ran.outcomes, strict=True):
        summary: BatchSummary = outcome.scored.result
        summaries[run.spec.name] = summary
        show_problems(
            errors, summary.errors, str(outcome.files["errors"]), total=summary.not_scored
        )
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
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        stored_line(console, core.stored_line(outcome.run_id))
    if len(ran.comparison) > 1:
        print_comparison(console, [dict(row) for row in ran.comparison])
    console.print(
        f"comparison: {ran.destination / 'comparison.csv'}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    if as_json:  # summary.json as written; {"models": {name: ...}} for several models
        print_json(
            {n: {**b.to_json(), "complete": True} for n, b in summaries.items()}, models=True
        )
    values = {name: dict(summary.means) for name, summary in summaries.items()}
    return gate(floors or {}, values, console, EXIT_FAILED if ran.failed else EXIT_OK)


def _run(
    data: Path,
    schema: Path | None,
    specs: list[ModelSpec],
    runner: Runner,
    config: dict[str, Any],
    bootstrap: int,
    seed: int,
    out: Path | OutputFolder | None,
    errors: Console,
    no_progress: bool = False,
    no_store: bool = False,
) -> core.Ran:
    """``json run``: each model extracts every document (resumable), its outputs scored as
    ``json batch`` scores them, into ``out/<model>/``. ``config``: the options given."""
    return run_models(
        "json",
        [("documents", data)] + ([("schema", schema)] if schema is not None else []),
        {"config": config, "bootstrap": bootstrap, "seed": seed},
        specs,
        runner,
        out,
        command="json run",
        errors=errors,
        names={"documents": "DATA.jsonl", "schema": "--schema"},
        show_progress=not no_progress,
        store=not no_store,
    )


@app.command("run")
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
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    models_file: ModelsFileOpt = None,
    schema: SchemaOpt = None,
    concurrency: ConcurrencyOpt = 8,
    timeout: TimeoutOpt = 60.0,
    max_retries: MaxRetriesOpt = 3,
    max_reply_bytes: MaxReplyBytesOpt = MAX_REPLY_BYTES,
    temperature: TemperatureOpt = 0.0,
    max_tokens: MaxTokensOpt = None,
    model_seed: ModelSeedOpt = None,
    json_mode: JsonModeOpt = False,
    no_cache: NoCacheOpt = False,
    cache_nonzero_temperature: CacheNonzeroOpt = False,
    price_in: PriceInOpt = None,
    price_out: PriceOutOpt = None,
    no_progress: NoProgressOpt = False,
    strategies: StrategiesOpt = None,
    weights: WeightsOpt = None,
    no_store: NoStoreOpt = False,
    fuzzy_threshold: FuzzyOpt = None,
    semantic_threshold: SemanticOpt = None,
    matcher: MatcherOpt = _DEFAULTS.matcher,
    judge_base_url: JudgeUrlOpt = None,
    judge_model: JudgeModelOpt = None,
    flatten: FlattenOpt = False,
    safety_check: SafetyOpt = _DEFAULTS.safety_check,
    bootstrap: BootstrapOpt = 1000,
    seed: SeedOpt = 0,
    as_json: JsonOpt = False,
    fail_under: FailUnderOpt = None,
) -> None:
    """Ask each model to extract a JSON object from every document (prompt json-extract-v1), then
    score its outputs exactly as `json batch` does. A re-run resumes an interrupted run; a failed
    call (timeout, 5xx, 400) gives no output and is listed apart, never scored. Exit 0 when every
    record was scored, 3 when a line or a record could not be scored or a call failed, 4 when a
    --fail-under floor is not met, 2 on usage errors, 1 when an output could not be written part-way, 130 on Ctrl-C."""
    console, errors = SafeConsole(stderr=as_json), SafeConsole(stderr=True)
    floors = parse_fail_under(fail_under, GATED, lower_is_better=LOWER_IS_BETTER)
    config = _given(_Options.of(locals()))
    specs, runner = models_and_runner(locals())
    ran = _run(
        data, schema, specs, runner, config, bootstrap, seed, out, errors, no_progress, no_store
    )
    status = show_models(ran, runner, console, errors, as_json=as_json, floors=floors)
    raise typer.Exit(status)


run.__doc__ = f"{inspect.cleandoc(run.__doc__ or '')}\n\n{STORE_HELP}"


def run_model_demo(base_url: str, out_dir: Path, models: list[str], *, console: Console) -> int:
    """``make demo``: the synthetic models extract the 60 bundled invoices (with the invoice schema)
    and are scored with the bundled strategies (--flatten, --safety-check leaks); outputs in
    ``out_dir/<model>/``, a comparison table on ``console``."""
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
    config_given = config.model_dump(mode="json")
    ran = _run(
        data, schema, specs, runner, config_given, 1000, 0, OutputFolder.of(out_dir), errors, True
    )
    return show_models(ran, runner, console, errors, detail=False)


def run_demo(out_dir: Path) -> int:
    """``make demo``: the batch on the bundled invoice example (flattened, with its strategy config)."""
    from fieldcheck.jsoneval import bundled_example

    console = SafeConsole()
    data, strategies = bundled_example(out_dir.parent / f"{out_dir.name}-input")
    config = EvalConfig(strategies=load_strategies(strategies), flatten=True, safety_check="leaks")
    console.print(
        f"Scoring {safe_markup(str(data))} with {safe_markup(str(strategies))} "
        "(--flatten, --safety-check leaks, local matchers)",
        soft_wrap=True,
        highlight=False,
    )
    given = config.model_dump(mode="json")
    return run_batch(data, given, out_dir, console=console, errors=SafeConsole(stderr=True))

"""`fieldcheck json ...`: score one output or a batch against ground truth (json-evaluation.md).

A thin shell: parse options, call ``fieldcheck.jsoneval``, format. Exit status 0 when everything
was scored, 3 when some records (or the output) could not be scored, 2 on usage errors.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Annotated, Any, get_args

import orjson
import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from fieldcheck._cli._common import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from fieldcheck._util.errors import InputError
from fieldcheck._util.jsonio import dumps, read_json
from fieldcheck.jsoneval import (
    BatchSummary,
    EvalConfig,
    JsonEvalResult,
    MatcherError,
    MatcherFamily,
    SafetyCheck,
    evaluate,
    evaluate_batch,
    load_strategies,
    parse_weights,
    read_batch,
    record_error,
    write_batch_outputs,
)
from fieldcheck.metrics._json_fields import BUCKET_NAMES

app = typer.Typer(
    help=(
        "Score a model's JSON output against ground truth: completeness, hallucination, accuracy, "
        "safety and the Response Quality Score (RQS)."
    ),
    no_args_is_help=True,
)
_SCORES = ("completeness", "hallucination", "accuracy", "safety_score", "rqs")
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
    float,
    typer.Option(
        "--fuzzy-threshold",
        min=0.0,
        max=1.0,
        help="A FUZZY field scores 1 when its similarity (0-1) is >= this, else 0.",
    ),
]
SemanticOpt = Annotated[
    float,
    typer.Option(
        "--semantic-threshold",
        min=0.0,
        max=1.0,
        help="A SEMANTIC field scores 1 when its similarity (0-1) is >= this, else 0.",
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
    fuzzy_threshold: float
    semantic_threshold: float
    matcher: str
    judge_base_url: str | None
    judge_model: str | None
    flatten: bool
    safety_check: str

    @classmethod
    def of(cls, arguments: dict[str, Any]) -> _Options:
        """The shared options out of a command's arguments (``locals()``), named as above."""
        return cls(**{f.name: arguments[f.name] for f in dataclass_fields(cls)})


def _err(console: Console, message: str) -> None:
    console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)


def _config(opts: _Options, console: Console) -> EvalConfig:
    """Options -> EvalConfig, or exit 2 with one line saying what is wrong."""
    try:
        strategies = load_strategies(opts.strategies) if opts.strategies else {}
        weights = parse_weights(opts.weights) if opts.weights is not None else None
        if opts.matcher not in get_args(MatcherFamily):
            raise InputError("--matcher must be 'local' or 'llm'", value=opts.matcher)
        if opts.safety_check not in get_args(SafetyCheck):
            raise InputError("--safety-check must be 'off' or 'leaks'", value=opts.safety_check)
        if opts.matcher == "llm" and not (opts.judge_base_url and opts.judge_model):
            raise InputError("--matcher llm needs --judge-base-url and --judge-model")
        settings: dict[str, Any] = {
            "strategies": strategies,
            "fuzzy_threshold": opts.fuzzy_threshold,
            "semantic_threshold": opts.semantic_threshold,
            "matcher": opts.matcher,
            "judge_base_url": opts.judge_base_url,
            "judge_model": opts.judge_model,
            "flatten": opts.flatten,
            "safety_check": opts.safety_check,
        }
        if weights is not None:
            settings["weights"] = weights
        return EvalConfig.model_validate(settings)
    except InputError as exc:
        _err(console, str(exc))
    except ValidationError as exc:
        first = exc.errors()[0]
        _err(console, f"{'.'.join(map(str, first['loc']))}: {first['msg']}")
    raise typer.Exit(EXIT_USAGE)


def _read_output(path: Path, console: Console) -> Any:
    """The output file as JSON, or its raw text when it is not valid JSON (scored, not rejected)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        _err(console, f"{path}: cannot read file: {exc.strerror}")
        raise typer.Exit(EXIT_USAGE) from None
    raw = raw.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte order mark is not part of the JSON
    try:
        return orjson.loads(raw)
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
        buckets.add_row(name, str(len(keys)), escape(", ".join(keys)))
    console.print(buckets)
    fields = Table(title="Fields scored for accuracy (both_non_null)", header_style="bold")
    fields.add_column("field")
    fields.add_column("strategy")
    fields.add_column("similarity", justify="right")
    fields.add_column("score", justify="right")
    for name, field in result.fields.items():
        fields.add_row(escape(name), field.strategy, _fmt(field.similarity), _fmt(field.score))
    console.print(fields)
    scores = Table(title="Scores", header_style="bold")
    scores.add_column("score")
    scores.add_column("value", justify="right")
    for name in _SCORES:
        scores.add_row("RQS" if name == "rqs" else name, _fmt(getattr(result, name)))
    console.print(scores)
    if result.flags:
        console.print(
            f"[yellow]flags:[/yellow] {escape(', '.join(result.flags))} (output kind: {result.output_kind})"
        )
    console.print(f"[dim]{escape(result.signature.format())}[/dim]", soft_wrap=True)


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
    for name in _SCORES:
        table.add_row("RQS" if name == "rqs" else name, _fmt(summary.means[name]))
    console.print(table)
    console.print(
        f"failed: {summary.failed}   not an object: {summary.not_an_object}   "
        f"safety leaks: {summary.safety_flagged}"
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
                escape(name),
                ",".join(f.strategies),
                str(f.scored),
                str(f.matched),
                _fmt(f.match_rate),
                str(f.missing),
                str(f.hallucinated),
            )
        console.print(fields)
    if paths:
        for name, path in paths.items():
            console.print(f"{name:>8}: {escape(str(path))}", soft_wrap=True, highlight=False)


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
    fuzzy_threshold: FuzzyOpt = _DEFAULTS.fuzzy_threshold,
    semantic_threshold: SemanticOpt = _DEFAULTS.semantic_threshold,
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
) -> None:
    """Score one output against one ground truth and print the buckets, fields, scores and RQS.
    Exit 0 when scored, 3 when the output could not be scored (judge error, nesting too deep),
    2 on usage errors (bad option, unreadable file, ground truth not an object)."""
    console, errors = Console(), Console(stderr=True)
    config = _config(_Options.of(locals()), errors)
    try:
        gt = read_json(ground_truth)
    except InputError as exc:
        _err(errors, str(exc))
        raise typer.Exit(EXIT_USAGE) from None
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
            f"[yellow]warning:[/yellow] {escape(str(output))}: output is not a JSON object "
            f"({result.output_kind}); scored by the non-object rule (completeness 0, accuracy 0, hallucination 1)",
            highlight=False,
            soft_wrap=True,
        )
    if as_json:
        sys.stdout.write(dumps(result.public_dict()) + "\n")
    else:
        print_result(console, result)


def run_batch(
    data: Path, config: EvalConfig, out: Path, *, console: Console, errors: Console
) -> int:
    """Read, score and write a batch; print errors, the summary and the files; return the exit status."""
    if out.exists() and not out.is_dir():
        _err(errors, f"{out}: --out must be a directory (it is a file)")
        return EXIT_USAGE
    try:
        records, read_errors = read_batch(data)
    except InputError as exc:
        _err(errors, str(exc))
        return EXIT_USAGE
    for problem in read_errors:
        _err(errors, str(problem))
    if not records and not read_errors:
        _err(errors, f"{data}: no records (the file is empty)")
        return EXIT_USAGE
    with Progress(
        TextColumn("{task.description:<10}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=errors,
        transient=True,
    ) as bar:
        tasks: dict[str, Any] = {}

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total or 1)
            bar.update(tasks[phase], completed=done if total else 1, total=total or 1)

        batch = evaluate_batch(
            records,
            config,
            errors=[record_error(e) for e in read_errors],
            progress=progress,
            source=str(data),
        )
    for failure in batch.errors[len(read_errors) :]:
        _err(errors, failure.message)
    try:
        paths = write_batch_outputs(out, batch)
    except OSError as exc:
        _err(errors, f"{exc.filename or out}: cannot write the outputs: {exc.strerror}")
        return EXIT_USAGE
    print_summary(console, batch.summary, paths)
    return EXIT_FAILED if batch.errors else EXIT_OK


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
        Path,
        typer.Option(
            "--out", help="Directory for records.jsonl, summary.json, fields.csv, errors.jsonl."
        ),
    ],
    strategies: StrategiesOpt = None,
    weights: WeightsOpt = None,
    fuzzy_threshold: FuzzyOpt = _DEFAULTS.fuzzy_threshold,
    semantic_threshold: SemanticOpt = _DEFAULTS.semantic_threshold,
    matcher: MatcherOpt = _DEFAULTS.matcher,
    judge_base_url: JudgeUrlOpt = None,
    judge_model: JudgeModelOpt = None,
    flatten: FlattenOpt = False,
    safety_check: SafetyOpt = _DEFAULTS.safety_check,
) -> None:
    """Score every line of DATA.jsonl; write the four output files into --out. Exit 0 when every line
    scored, 3 when some failed (each named file:line in errors.jsonl), 2 on usage errors."""
    console, errors = Console(), Console(stderr=True)
    config = _config(_Options.of(locals()), errors)
    raise typer.Exit(run_batch(data, config, out, console=console, errors=errors))


def run_demo(out_dir: Path) -> int:
    """``make demo``: the batch on the bundled invoice example (flattened, with its strategy config)."""
    from fieldcheck.jsoneval._example import bundled_example

    console = Console()
    data, strategies = bundled_example(out_dir / "input")
    config = EvalConfig(strategies=load_strategies(strategies), flatten=True, safety_check="leaks")
    console.print(
        f"Scoring {escape(str(data))} with {escape(str(strategies))} "
        "(--flatten, --safety-check leaks, local matchers)",
        soft_wrap=True,
        highlight=False,
    )
    return run_batch(data, config, out_dir, console=console, errors=Console(stderr=True))

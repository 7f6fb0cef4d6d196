"""``fieldcheck runs``: list, show, compare, export, re-score, import and delete the scored runs
in the store (docs/runs.md). Thin: parse, call ``fieldcheck.runs`` and the store, print."""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer
from rich.table import Table

from fieldcheck._cli._common import (
    EXIT_FAILED,
    EXIT_OK,
    F,
    FieldcheckGroup,
    pipeline_errors,
    print_json,
    show_problems,
)
from fieldcheck._cli._record import grid, say
from fieldcheck._cli.main import COMMANDS
from fieldcheck._util.console import SafeConsole
from fieldcheck._util.errors import InputError, UsageProblem, exception_line
from fieldcheck._util.jsonio import dumps
from fieldcheck._util.term import safe_json_text, safe_lines, safe_text

if TYPE_CHECKING:
    from fieldcheck.store import RunInfo

app = typer.Typer(
    cls=FieldcheckGroup, help=COMMANDS["runs_cmd"], no_args_is_help=True, add_completion=False
)

JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print machine output only (JSON) on stdout.")
]
RunArg = Annotated[str, typer.Argument(metavar="RUN", help="A run id or its unique prefix.")]


def _database_errors(command: F) -> F:
    """A command whose database fails midway (read-only, gone, unreachable): one line naming
    ``FIELDCHECK_DATABASE_URL`` (exit 2), never a traceback; a ``UsageProblem`` its usage line."""

    @functools.wraps(command)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        from sqlalchemy.exc import SQLAlchemyError

        from fieldcheck.store import ARTIFACTS_ENV, DATABASE_ENV, ItemsMissing

        try:
            with pipeline_errors():
                return command(*args, **kwargs)
        except ItemsMissing as exc:
            raise typer.BadParameter(safe_text(str(exc)), param_hint=ARTIFACTS_ENV) from None
        except SQLAlchemyError as exc:
            first = (str(exc.orig if hasattr(exc, "orig") else exc).splitlines() or [""])[0]
            raise typer.BadParameter(
                safe_text(f"the store failed: {type(exc).__name__}: {first[:200]}"),
                param_hint=DATABASE_ENV,
            ) from None

    return cast(F, guarded)


def _command(name: str) -> Callable[[F], F]:
    """A ``runs`` command, its database errors one line (``_database_errors``)."""
    return lambda command: app.command(name)(_database_errors(command))


def _store() -> Any:
    """The store, or a one-line usage error naming ``FIELDCHECK_DATABASE_URL`` (exit 2)."""
    from fieldcheck.store import DATABASE_ENV, Store

    try:
        return Store()
    except Exception as exc:  # a bad URL, an unreachable, unreadable or read-only database
        raise UsageProblem(f"cannot open the store: {exception_line(exc)}", DATABASE_ENV) from None


def _run(store: Any, ref: str) -> Any:
    from fieldcheck.store import MIN_PREFIX, AmbiguousRunError

    try:
        run = store.find_run(ref)
    except AmbiguousRunError as exc:
        raise UsageProblem(f"{exc}: give more of the id", "RUN") from None
    if run is None:
        short = (
            f" (a prefix needs at least {MIN_PREFIX} characters)" if len(ref) < MIN_PREFIX else ""
        )
        raise UsageProblem(
            f"no run {ref!r} in the store{short} ('fieldcheck runs list' lists them)", "RUN"
        )
    return run


def _console() -> SafeConsole:
    return SafeConsole(highlight=False)


@_command("list")
def list_command(
    system: Annotated[
        str | None,
        typer.Option(
            "--system", help="Only runs of this system (json, slots, numeric or one registered)."
        ),
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="Only runs of this model.")] = None,
    dataset: Annotated[
        str | None,
        typer.Option("--dataset", help="Only runs whose dataset file name holds this text."),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="DATE",
            help="Only runs started at or after this ISO 8601 date or time (2026-11-30, "
            "2026-11-30T12:00; UTC unless it names a zone).",
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option("--until", metavar="DATE", help="Only runs started before this, as --since."),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="At most this many runs, the newest.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the runs, newest first, with the filters of GET /api/runs. Exit 0; 2 on a bad
    option."""
    from fieldcheck import core

    if system is not None and core.find(system) is None:
        known = ", ".join(core.names())
        raise UsageProblem(f"must be one of {known} (got {system!r})", "--system")
    from fieldcheck.runs import format_count

    store = _store()
    filters = {
        "system": system,
        "model": model,
        "dataset_contains": dataset or None,
        "since": _time(since, "--since"),
        "until": _time(until, "--until"),
    }
    runs = store.list_runs(**filters, newest_first=True, limit=limit)
    summaries = [_summary(r) for r in runs]
    if as_json:
        print_json(summaries)
        return
    if not runs and not any(filters.values()):  # say where it looked: a new user's first run
        # may be in another store (make demo keeps its own)
        from fieldcheck.store import DATABASE_ENV, describe_url

        say(_console(), f"0 runs in {safe_text(describe_url(store.url))} ({DATABASE_ENV} chooses)")
        return
    # no box, minutes, a parent column only when a run has one: a row fits 80 columns
    table = Table(header_style="bold", box=None, pad_edge=False, collapse_padding=True)
    parents = any(s["parent_id"] for s in summaries)
    heads = ("id", "system", "kind", "model", "status", "started (UTC)", "items")
    for head in (*heads, "parent") if parents else heads:
        table.add_column(
            head,
            overflow="fold",
            no_wrap=head != "model",
            justify="right" if head == "items" else "left",
        )
    console = _console()
    for s in summaries:
        named = [s[key] for key in ("id", "system", "kind", "model", "status")]
        if not console.is_terminal and len(named[3]) > LIST_MODEL_CHARS:  # cut in its middle
            named[3] = named[3][: LIST_MODEL_CHARS - 13] + "…" + named[3][-12:]
        started = s["started_at"][:16].replace("T", " ")
        cells = [*named, started, format_count(s["n_done"], s["n_items"])]
        table.add_row(*(safe_text(v) for v in cells + ([s["parent_id"] or ""] if parents else [])))
    if not console.is_terminal:  # a pipe or a file: a run a line (Rich's 80 columns folded them)
        unbounded = console.options.update_width(10**6)
        console.width = max(console.width, console.measure(table, options=unbounded).maximum)
    console.print(table)
    total = store.count_runs(**filters) if limit is not None else len(runs)
    say(console, f"{len(runs)} run(s)" if total == len(runs) else f"{len(runs)} of {total} runs")


LIST_MODEL_CHARS = 60
"""A piped ``runs list``'s model cell: a longer one is cut in its middle, as a compare warning
cuts a setting's value (a 2,000-character name made every line as wide)."""


def _time(text: str | None, option: str) -> datetime | None:
    """An ISO 8601 date or time option (the store takes one with no zone as UTC)."""
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        message = f"must be an ISO 8601 date or time, e.g. 2026-11-30T12:00 (got {text!r})"
        raise UsageProblem(message, option) from None


_SUMMARY = "id system kind model status started_at n_items n_done n_errors parent_id out_dir"


def _summary(run: Any) -> dict[str, Any]:
    """A run as ``runs list --json`` and ``runs import --json`` print it."""
    data = run.public_dict()
    return {key: data[key] for key in _SUMMARY.split()}


@_command("show")
def show_command(
    run: RunArg,
    items: Annotated[
        int,
        typer.Option(
            "--items",
            min=0,
            metavar="N",
            help="Also show its first N items: each one's verdicts and, in a run with model "
            "calls, its call (prompt, raw reply, tokens, latency, attempts, error).",
        ),
    ] = 0,
    item: Annotated[
        str | None,
        typer.Option(
            "--item",
            metavar="KEY",
            help="Only this item's whole story (the item page's): its verdicts (json: per "
            "field; slots: per slot; numeric: question, table, plan, checks, matches) and its "
            "model call.",
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="With --item: the model's item, where several have KEY."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """A run: what it scored (inputs and their sha256), its settings, signature, metrics with
    their 95% intervals, item counts, its parent (a re-score's) and, with --items, its first
    items; with --item KEY, that item's story instead. Exit 0; 2 for an unknown RUN or KEY."""
    store = _store()
    info = _run(store, run)
    if item is not None:
        _show_item(store, info, item, model, as_json=as_json)
        return
    data = info.public_dict()
    shown = [i.public_dict() for i in store.page_items(info.id, limit=items)] if items else []
    from fieldcheck.runs import compare_runs, format_items, item_counts

    counts, journal = item_counts(store, info)
    data.update(counts)
    if as_json:
        print_json({**data, "items": shown} if items else data)
        return
    console = _console()
    for key in ("id", "system", "kind", "model", "status", "started_at", "parent_id", "out_dir"):
        say(console, f"{key}: {safe_text(data[key] or '')}")
    shown_counts = format_items(
        info,
        failed=data["failed_items"],
        not_scored=data["not_scored_items"],
        noun=False,
        in_flight=journal,
    )
    say(console, f"items: {shown_counts}")
    for entry in data["inputs"]:
        say(
            console,
            f"input {safe_text(entry['name'])}: {safe_text(entry['path'])} "
            f"sha256:{safe_text(entry['sha256'])}",
        )
    for name, value in _settings_lines(data["settings"]):
        say(console, f"setting {safe_text(name)}: {safe_text(value)}")
    say(console, f"signature: {safe_text(data['signature'])}")
    _print_comparison(compare_runs([info]), console)
    for item in shown:
        say(console, safe_json_text(dumps(item)))


def _show_item(store: Any, info: Any, key: str, model: str | None, *, as_json: bool) -> None:
    """``runs show RUN --item KEY``: the item page's story (``runs.item_story``) as its route
    gives it (``--json``) or as Rich tables, every value escaped."""
    from rich.text import Text

    from fieldcheck.runs import item_story, show_value

    try:
        story = item_story(store, info, key, model)
    except KeyError:
        which = f" of model {model!r}" if model is not None else ""
        raise UsageProblem(f"no item {key!r}{which} in run {info.id}", "--item") from None
    if as_json:
        print_json(story)
        return
    console = _console()

    def cell(value: Any) -> Text:
        return Text(safe_text(show_value(value)))

    head = f"{story['run']['item']} {story['key']}: {story['verdict']}"
    say(console, safe_text(head + (f" ({story['error_type']})" if story["error_type"] else "")))
    say(
        console,
        safe_text(f"run {info.id} ({story['run']['title']}), model {story['model'] or info.model}"),
    )
    for section in story["sections"]:
        console.rule(Text(safe_text(section["title"])), style="dim")
        for block in section["blocks"]:
            if block["kind"] in ("text", "code"):
                say(console, safe_text(block["label"]) + ":", style="bold")
                text = "\n".join(safe_text(line) for line in block["text"].split("\n"))
                say(console, text)
                continue
            if block["kind"] == "values":
                console.print(_pairs_table(block["rows"], cell))
                continue
            table = Table(header_style="bold")
            for name in block["columns"]:
                table.add_column(Text(safe_text(name)), overflow="fold")
            for row in block["rows"]:
                table.add_row(*map(cell, row))
            if _fits(block["columns"], block["rows"], console.width):
                console.print(table)
                continue
            first, *others = block["columns"]
            for head, *values in block["rows"]:  # too wide side by side: a row at a time
                say(console, safe_text(f"{first}: {show_value(head)}"), style="bold")
                console.print(_pairs_table(list(zip(others, values, strict=True)), cell))


def _fits(columns: list[str], rows: list[list[Any]], width: int) -> bool:
    """Whether a table's columns fit ``width`` side by side with no word broken: each as wide
    as its longest word (heading included, up to 24 characters), with Rich's borders."""
    from fieldcheck.runs import show_value

    needed = 1
    for i, name in enumerate(columns):
        texts = [name, *(show_value(row[i]) for row in rows)]
        needed += 3 + min(24, max(len(word) for text in texts for word in [*text.split(), ""]))
    return needed <= width


def _pairs_table(rows: list[Any], cell: Callable[[Any], Any]) -> Table:
    """``(label, value)`` rows as two columns: the labels whole (up to 24 characters wide),
    each value wrapped at spaces and folded within longer words, as the item page wraps them."""
    table = Table(show_header=False)
    widest = max((len(str(label)) for label, _ in rows), default=0)
    table.add_column(min_width=min(widest, 24), overflow="fold")
    table.add_column(overflow="fold")
    for label, value in rows:
        table.add_row(cell(label), cell(value))
    return table


_SETTINGS_SHOWN = 5


def _settings_lines(settings: Any, prefix: str = "") -> list[tuple[str, str]]:
    """A run's settings as short (name, value) lines: keys dotted (``config.fuzzy_threshold``),
    a deeper object the first few ``a=EXACT`` and a count, null settings left out."""
    lines = []
    for key, value in (settings or {}).items():
        if value is None:
            continue
        name = f"{prefix}{key}"
        if isinstance(value, dict) and not prefix:
            lines.extend(_settings_lines(value, f"{name}."))
        elif isinstance(value, dict):
            pairs = [f"{k}={_plain(v)}" for k, v in value.items()]
            more = len(pairs) - _SETTINGS_SHOWN
            shown = ", ".join(pairs[:_SETTINGS_SHOWN]) + (f" and {more} more" if more > 0 else "")
            lines.append((name, shown or "{}"))
        else:
            lines.append((name, _plain(value)))
    return lines


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else dumps(value)


def _print_comparison(table: dict[str, Any], console: SafeConsole) -> None:
    from fieldcheck.runs import format_cell, format_latency, format_number

    labels = [safe_text(c["label"]) for c in table["columns"]]
    metrics = grid("Metrics (95% interval)", "metric", *labels)
    for row in table["metrics"]:
        metrics.add_row(row["name"], *(format_cell(v) for v in row["values"]))
    if any(table.get("latency") or []):
        per = table["item"]
        metrics.add_row(
            f"latency mean / median / p95 / total per {per}",
            *(format_latency(lat) for lat in table["latency"]),
        )
    console.print(metrics)
    for extra in table["tables"]:
        rows = grid(extra["title"], extra["row_label"], *labels)
        for row in extra["rows"]:
            rows.add_row(safe_text(row["name"]), *(format_number(v) for v in row["values"]))
        console.print(rows)
    if table["paired_f1"]:
        heads = ("run", "model a", "model b", "F1 a - F1 b", "p-value", "sessions")
        paired = grid("Paired bootstrap of F1 (slots)", *heads)
        for p in table["paired_f1"]:
            paired.add_row(
                safe_text(p["run"][:8]),
                safe_text(p["model_a"]),
                safe_text(p["model_b"]),
                format_number(p["difference"]),
                format_number(p["p_value"]),
                str(p["sessions"]),
            )
        console.print(paired)


@_command("compare")
def compare_command(
    runs: Annotated[
        list[str],
        typer.Argument(
            metavar="RUN...", help="Runs of one system (one slots run: its models compared)."
        ),
    ],
    differ: Annotated[
        bool,
        typer.Option("--differ", help="List the items the runs disagree on (docs/runs.md)."),
    ] = False,
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=100_000, help="At most this many items listed.")
    ] = 50,
    as_json: JsonOpt = False,
) -> None:
    """Runs of one system side by side: each metric with its 95% interval, the per-field match
    rates (json), per-topic F1 and the paired F1 p-values stored with each run (slots), accuracy
    and operations by turn (numeric); the paired difference of the headline metric and its
    p-value; a warning when the datasets or signature settings differ; with --differ, the items
    they disagree on. Exit 0; 2 for an unknown RUN or runs of mixed systems."""
    from fieldcheck.runs import compare

    store = _store()
    infos = [_run(store, ref) for ref in runs]
    try:
        table = compare(store, infos, differ=True if differ else None, limit=limit)
    except InputError as exc:
        raise typer.BadParameter(exc.one_line(), param_hint="RUN") from None
    if as_json:
        print_json(table)
        return
    console = _console()
    for warning in table["warnings"]:
        console.print(f"warning: {safe_text(warning['message'])}", markup=False)
    _print_comparison(table, console)
    _print_paired(table, console)
    if table["note"]:
        console.print(safe_text(table["note"]), markup=False)
    if table["matrix"] is not None:
        _print_matrix(table, console)


def _print_paired(table: dict[str, Any], console: SafeConsole) -> None:
    from fieldcheck.runs import format_number

    if not table["paired"]:
        return
    heads = ("a", "b", f"{table['item']}s", "a", "b", "a - b", "p-value")
    found = grid(f"Paired difference of {table['paired'][0]['metric']} (bootstrap)", *heads)
    for p in table["paired"]:
        diff = p["difference"]
        found.add_row(
            safe_text(p["a"]),
            safe_text(p["b"]),
            str(p["items"]),
            format_number(p["estimate_a"]),
            format_number(p["estimate_b"]),
            "-" if diff is None else f"{diff:+.4f}",
            format_number(p["p_value"]),
        )
    console.print(found)


def _print_matrix(table: dict[str, Any], console: SafeConsole) -> None:
    """The items the runs disagree on: a row each, a cell per column (right, wrong, not scored
    or missing, then the compared value, each of its lines (a slot) on its own, cut to 60
    characters)."""
    matrix = table["matrix"]
    title = f"{matrix['differing']} of {matrix['items']} {table['item']}s differ" + (
        f" (first {len(matrix['rows'])})" if matrix["next_offset"] is not None else ""
    )
    found = grid(title, table["item"], *(safe_text(c["label"]) for c in table["columns"]))
    for column in found.columns:  # a long key or value folds whole rather than cut with "..."
        column.overflow = "fold"
    for row in matrix["rows"]:
        cells = []
        for cell in row["cells"]:
            if cell["key"] is None:
                cells.append("missing")
                continue
            right = {True: "right", False: "wrong"}.get(cell["right"], "not scored")
            lines = [] if cell["value"] is None else cell["value"].split("\n")
            cut = [safe_text(v[:60] + ("..." if len(v) > 60 else "")) for v in lines]
            cells.append("\n".join([right, *cut]) if len(cut) > 1 else " ".join([right, *cut]))
        found.add_row(safe_text(row["key"]), *cells)
    console.print(found)


@_command("export")
def export_command(
    run: RunArg,
    fmt: Annotated[
        str, typer.Option("--format", metavar="csv|jsonl|parquet", help="csv, jsonl or parquet.")
    ] = "csv",
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", metavar="FILE", help="Write here (default: stdout; parquet needs a file)."
        ),
    ] = None,
) -> None:
    """A run's items, one a row (CSV, formula-like text cells neutralised with a leading '; or
    Parquet, typed, for pandas and polars) or a line (JSONL): key, seq (its order), failed,
    model, turn, error_type and the item's result. Exit 0; 2 for an unknown RUN, a bad
    --format, parquet without --out, an --out that exists (an empty file is taken) or
    an unwritable --out."""
    from fieldcheck.runs import iter_export, write_parquet
    from fieldcheck.store import ItemsMissing

    if fmt not in ("csv", "jsonl", "parquet"):
        raise UsageProblem(f"must be csv, jsonl or parquet (got {fmt!r})", "--format")
    if fmt == "parquet" and out is None:
        raise UsageProblem("parquet is written to a file: give --out FILE", "--out")
    store = _store()
    info = _run(store, run)
    if out is None:  # a terminal is shown control characters escaped; a pipe gets the bytes
        shown = (safe_json_text if fmt == "jsonl" else safe_lines) if sys.stdout.isatty() else None
        for block in iter_export(store, info.id, fmt):  # type: ignore[arg-type]
            sys.stdout.buffer.write(shown(block.decode()).encode() if shown else block)
        sys.stdout.flush()
        return
    _refuse_a_file(out)
    # a name no other file has (a fixed "FILE.part" could be a user's): only ours is removed
    tmp: Path | None = None
    try:
        handle, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".part", dir=out.parent)
        os.close(handle)
        tmp = Path(name)
        mask = os.umask(0)
        os.umask(mask)
        tmp.chmod(0o666 & ~mask)  # as open() makes a file (mkstemp's is the owner's alone)
        if fmt == "parquet":
            write_parquet(store, info.id, tmp)
        else:
            with tmp.open("wb") as part:
                for block in iter_export(store, info.id, fmt):  # type: ignore[arg-type]
                    part.write(block)
        _refuse_a_file(out)  # another process may have made it meanwhile
        tmp.replace(out)
    except ItemsMissing:
        raise
    except OSError as exc:
        raise UsageProblem(f"cannot write {out}: {exc.strerror or exc}", "--out") from None
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def _refuse_a_file(out: Path) -> None:
    """``--out FILE`` must not exist or be empty: fieldcheck never replaces a file it did not
    make (one usage line, exit 2)."""
    if out.is_dir() or (out.exists() and (not out.is_file() or out.stat().st_size)):
        raise UsageProblem(f"{out} exists and is not an empty file: give a new name", "--out")


@_command("rescore")
def rescore_command(
    run: RunArg,
    strategies: Annotated[
        Path | None,
        typer.Option(
            "--strategies",
            metavar="FILE",
            help="json runs: a field strategy config (JSON field -> EXACT|FUZZY|SEMANTIC|IGNORE).",
        ),
    ] = None,
    weights: Annotated[
        str | None,
        typer.Option(
            "--weights",
            metavar="NAME=V,...",
            help="json runs: RQS weights, e.g. accuracy=0.5,completeness=0.3.",
        ),
    ] = None,
    fuzzy_threshold: Annotated[
        float | None,
        typer.Option("--fuzzy-threshold", min=0.0, max=1.0, help="json runs: the FUZZY threshold."),
    ] = None,
    semantic_threshold: Annotated[
        float | None,
        typer.Option(
            "--semantic-threshold", min=0.0, max=1.0, help="json runs: the SEMANTIC threshold."
        ),
    ] = None,
    tp: Annotated[
        str | None,
        typer.Option("--tp", help="slot runs: presence, exact, fuzzy or semantic."),
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold", min=0.0, max=1.0, help="slot runs: threshold of --tp fuzzy|semantic."
        ),
    ] = None,
    bootstrap: Annotated[
        int | None,
        typer.Option("--bootstrap", min=0, help="Resamples (default: the run's)."),
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", min=0, help="Seed (default: the run's).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Score a stored json or slot run again under a new configuration, from the raw values
    its items keep (no model is asked again; a json run scored with --matcher llm asks its judge
    for the pairs its cache lacks), and store the result as a new run whose parent is RUN.
    Numeric runs cannot be re-scored: their turns keep plan and answer, but numeric scoring
    takes no option a re-score could change, so it has none; numeric score on the run's
    predictions.jsonl scores it again.
    Exit 0; 3 when a record RUN scored could not be scored again (a judge error: each named); 2
    for an unknown RUN, a bad option, or a run that cannot be re-scored."""
    from fieldcheck.jsoneval import load_strategies, parse_weights
    from fieldcheck.runs import compare_runs, rescore

    store = _store()
    info = _run(store, run)
    try:
        mapping = load_strategies(strategies) if strategies is not None else None
    except InputError as exc:
        raise typer.BadParameter(exc.one_line(), param_hint="--strategies") from None
    try:
        rqs = parse_weights(weights) if weights is not None else None
    except InputError as exc:
        raise typer.BadParameter(exc.one_line(), param_hint="--weights") from None
    if tp is not None and tp not in ("presence", "exact", "fuzzy", "semantic"):
        raise UsageProblem(f"must be presence, exact, fuzzy or semantic (got {tp!r})", "--tp")
    thresholds = {"fuzzy_threshold": fuzzy_threshold, "semantic_threshold": semantic_threshold}
    try:
        child = rescore(
            store,
            info.id,
            strategies=mapping,
            weights=rqs,
            thresholds={k: v for k, v in thresholds.items() if v is not None} or None,
            tp=tp,
            threshold=threshold,
            bootstrap=bootstrap,
            seed=seed,
        )
    except InputError as exc:
        raise typer.BadParameter(exc.one_line(), param_hint="RUN") from None
    failed, total = _new_problems(info, child)
    show_problems(SafeConsole(stderr=True), failed, f"the items of run {child.id}", total=total)
    if as_json:
        print_json(child.public_dict())
    else:
        console = _console()
        say(console, f"re-scored {info.id} as {child.id}")
        _print_comparison(compare_runs([info, child]), console)
    raise typer.Exit(EXIT_FAILED if total else EXIT_OK)


def _new_problems(parent: RunInfo, child: RunInfo) -> tuple[list[str], int]:
    """The first messages of the records ``child`` could not score that ``parent`` scored (a
    judge error), and how many (its metrics' ``errors`` and ``not_scored`` less the parent's,
    which carries them again)."""
    old, new = parent.metrics or {}, child.metrics or {}
    count = int(new.get("not_scored") or 0) - int(old.get("not_scored") or 0)
    carried = Counter(old.get("errors") or [])
    first: list[str] = []
    for message in new.get("errors") or []:
        if carried[message]:
            carried[message] -= 1
        else:
            first.append(message)
    return first, max(count, 0)


@_command("import")
def import_command(
    folder: Annotated[
        Path, typer.Argument(metavar="DIR", help="A finished output folder of any system.")
    ],
    inputs: Annotated[
        list[str] | None,
        typer.Option(
            "--input",
            metavar="NAME=FILE",
            help="A file it was scored from: batch=FILE (json: makes it re-scorable), "
            "gold=FILE and pred:NAME=FILE of every model it scored (slots: stores the sessions). "
            "Repeat.",
        ),
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="The model's name.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Store a finished output folder (json batch, slots score, numeric score) as a run, for
    folders of older runs. Exit 0; 2 when DIR is not an output folder or an --input is bad."""
    from fieldcheck.runs import record_folder

    pairs: list[tuple[str, str | Path]] = []
    for text in inputs or []:
        name, sep, path = text.partition("=")
        if not sep or not name or not Path(path).is_file():
            raise UsageProblem(
                f"expected NAME=FILE with an existing file (got {text!r})", "--input"
            )
        pairs.append((name, path))
    if not folder.is_dir():
        raise UsageProblem(f"{folder}: not a folder", "DIR")
    try:
        run = record_folder(_store(), folder, inputs=pairs, model=model)
    except InputError as exc:
        raise typer.BadParameter(exc.one_line(), param_hint="DIR") from None
    if as_json:
        print_json(_summary(run))
        return
    none = (
        ": none in the folder's files, nor an input to read them from (--input, or unchanged "
        "where its run.json names it); to store them, delete this run and import the folder "
        "again with its inputs"
        if not run.n_items
        else ""
    )
    say(
        _console(),
        f"stored {safe_text(folder)} as run {run.id} ({run.system}, {run.n_items} items{none})",
    )


@_command("delete")
def delete_command(run: RunArg) -> None:
    """Delete a run and its items from the store (its output folder stays). Exit 0; 2 for an
    unknown RUN or a run with re-scores (named: delete them first)."""
    from fieldcheck.store import ARTIFACTS_ENV, RunHasChildren

    store = _store()
    info = _run(store, run)
    try:
        store.delete_run(info.id)
    except RunHasChildren as exc:
        raise UsageProblem(str(exc), "RUN") from None
    except PermissionError as exc:
        raise UsageProblem(str(exc), ARTIFACTS_ENV) from None
    say(_console(), f"deleted run {info.id}")

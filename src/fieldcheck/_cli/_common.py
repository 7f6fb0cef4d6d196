"""What every command shares: exit statuses (docs/cli.md), the one-line usage error, ``-v``
anywhere, the ``--out`` option, the shared options and how input problems are shown."""

from __future__ import annotations

import inspect
import math
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from typer._click import exceptions as click  # typer vendors Click (pinned in requirements.lock)
from typer._click.globals import get_current_context
from typer.core import TyperGroup

from fieldcheck._cli._record import NoStoreOpt, forget_store_warnings, say, store_failed
from fieldcheck._util.console import SafeConsole
from fieldcheck._util.errors import (
    MAX_SEED,
    CannotWrite,
    InputError,
    Interrupted,
    UsageProblem,
    whole_number,
)
from fieldcheck._util.jsonio import dumps
from fieldcheck._util.term import install_log_filter, safe_json_text, safe_text

if TYPE_CHECKING:
    from fieldcheck import core
    from fieldcheck.core import Events, Progress
    from fieldcheck.reports import Scored

install_log_filter()  # warnings quote data: control characters escaped (issue 9)

EXIT_OK = 0
EXIT_WRITE = 1
EXIT_USAGE = 2
EXIT_FAILED = 3
EXIT_GATE = 4
EXIT_INTERRUPTED = 130

_RUNNING: list[Callable[[], None]] = []  # while run_async's loop runs: how to interrupt it


def interrupt_running_loop() -> bool:
    """Ctrl-C into ``run_async``'s loop as asyncio's SIGINT handler would (for SIGTERM and SIGHUP
    when SIGINT is ignored): the first cancels the run, a later one raises; False with no loop."""
    if not _RUNNING:
        return False
    _RUNNING[-1]()
    return True


_GLOBAL_FLAGS = frozenset({"-v", "--verbose"})


def usage_line(exc: click.ClickException) -> str:
    """A usage error as one line: ``error: --data: <reason> (see 'fieldcheck numeric score
    --help')``; control characters from the data escaped."""
    if isinstance(exc, click.BadParameter) and not isinstance(exc, click.MissingParameter):
        hint: Any = exc.param_hint
        if hint is None and exc.param is not None:
            hint = exc.param.opts or [(exc.param.name or "").upper()]
        if isinstance(hint, list | tuple):
            hint = " / ".join(str(h) for h in hint)
        reason = exc.message.removeprefix("Value error, ")  # typer's check of a Literal
        message = f"{hint}: {reason}" if hint else reason
    else:
        message = exc.format_message()
    ctx = getattr(exc, "ctx", None)
    see = f" (see '{ctx.command_path} --help')" if isinstance(exc, click.UsageError) and ctx else ""
    return "error: " + safe_text(" ".join(message.split())) + see


class OutputFailed(click.ClickException):
    """The outputs could not be written part-way (a full disk): one line, exit 1, not the usage
    status (the command was right)."""

    exit_code = EXIT_WRITE


_FINISHED: list[Path] = []  # the folders the command finished: what a later Ctrl-C left
_INTERRUPT_REPORTED: set[bool] = set()  # non-empty once a line said what Ctrl-C left
_FLOORS = "--fail-under"  # repeats add up (Click would keep only the last)


def _global_flags_first(words: list[str]) -> list[str]:
    end = words.index("--") if "--" in words else len(words)
    flags = [w for w in words[:end] if w in _GLOBAL_FLAGS]
    return flags + [w for w in words[:end] if w not in _GLOBAL_FLAGS] + words[end:]


def _merge_repeated(words: list[str]) -> list[str]:
    """``--fail-under f1=0.7 --fail-under recall=0.5`` -> one ``--fail-under f1=0.7,recall=0.5``:
    a second floor must never silently replace the first (a CI gate that passes a bad model)."""
    end = words.index("--") if "--" in words else len(words)
    rest: list[str] = []
    values: list[str] = []
    at: int | None = None
    i = 0
    while i < end:
        word = words[i]
        if word == _FLOORS and i + 1 < end:
            values.append(words[i + 1])
            i += 2
        elif word.startswith(_FLOORS + "="):
            values.append(word.split("=", 1)[1])
            i += 1
        else:
            rest.append(word)
            i += 1
            continue
        at = len(rest) if at is None else at
    if at is not None:
        rest[at:at] = [_FLOORS, ",".join(values)]
    return rest + words[end:]


def _flowing_help(command: Any) -> None:
    """Each paragraph of a command's help, and of its subcommands', on one line for Rich to wrap:
    Typer's rich mode keeps a docstring's line breaks in the commands list and after the first
    paragraph, cutting sentences in two."""
    if command.help:
        paragraphs = inspect.cleandoc(command.help).split("\n\n")
        command.help = "\n\n".join(" ".join(p.split()) for p in paragraphs)
    for sub in getattr(command, "commands", {}).values():
        _flowing_help(sub)


class FieldcheckGroup(TyperGroup):
    """The root command: ``-v`` accepted anywhere on the line, a usage error one line on stderr
    with exit 2, not Click's usage block (issue 9: one error style)."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        words = _merge_repeated(_global_flags_first(list(sys.argv[1:] if args is None else args)))
        _INTERRUPT_REPORTED.clear()
        _FINISHED.clear()
        try:
            status = super().main(words, prog_name, complete_var, standalone_mode=False, **extra)
        except click.NoArgsIsHelpError as exc:
            exc.show()
            status = exc.exit_code
        except click.ClickException as exc:
            typer.echo(usage_line(exc), err=True)
            status = exc.exit_code
        except typer.Abort:
            typer.echo("error: aborted", err=True)
            status = 1
        finally:
            forget_store_warnings()
        if status == EXIT_INTERRUPTED and not _INTERRUPT_REPORTED:
            if _FINISHED:  # a Ctrl-C while the command printed or stored
                done = ", ".join(str(f) for f in dict.fromkeys(_FINISHED))
                typer.echo(safe_text(f"interrupted once every file was written: {done}"), err=True)
            else:
                typer.echo("interrupted before any output was written", err=True)
        if not standalone_mode:
            return status
        sys.exit(status if isinstance(status, int) else 0)


def _parse_out(value: Any) -> Path:
    """``--out``: a folder path; the empty string is a usage error (not the current folder)."""
    if isinstance(value, Path):
        return value
    if not str(value).strip():
        raise typer.BadParameter(
            "must name a folder (without --out, a new one under fieldcheck-runs/)"
        )
    return Path(value)


OUT_HELP = (
    " A new or empty folder (default: a new one under fieldcheck-runs/); the run writes it as "
    "DIR.fieldcheck-partial and renames it to DIR when complete."
)


def out_option(help: str) -> Any:
    """The ``--out`` option of every command (same checks everywhere; see ``out_dir``)."""
    return typer.Option("--out", parser=_parse_out, metavar="DIR", help=help + OUT_HELP)


def command_name() -> str | None:
    """The running command without the program's name (``numeric score``); None outside one."""
    names = []
    context = get_current_context(silent=True)
    while context is not None and context.parent is not None:  # the root is the program
        names.append(context.info_name or "")
        context = context.parent
    return " ".join(reversed(names)) or None


def interrupt_reported() -> None:
    """Called by what said what a Ctrl-C left (else the root command prints a generic line)."""
    _INTERRUPT_REPORTED.add(True)


SHOWN_PROBLEMS = 5


def show_problems(
    console: Any,
    errors: Sequence[InputError | str],
    listed_in: str,
    *,
    total: int | None = None,
) -> None:
    """The first few input problems and how many more are in ``listed_in`` (issue 9); ``total``:
    the count when ``errors`` holds only the first ones (issue 26)."""
    count = max(len(errors), total or 0)
    for error in errors[:SHOWN_PROBLEMS]:
        text = error if isinstance(error, str) else error.one_line()
        say(console, f"error: {safe_text(text)}", style="red")
    if count > SHOWN_PROBLEMS:
        say(
            console,
            f"... and {count - SHOWN_PROBLEMS} more ({count} problems in all, "
            f"each in {safe_text(listed_in)})",
        )


def show_input_problems(console: Any, scored: Scored) -> None:
    """The input problems of a scored run (``Scored.problems``), as every scoring command shows
    them: ``fieldcheck score SYSTEM`` and each system's own commands (one path)."""
    found = scored.problems
    if found is not None:
        listed_in = scored.files.get(found.listed_in, found.listed_in)
        show_problems(console, found.errors, str(listed_in), total=found.total)


Options = dict[str, tuple[Any, Any]]
"""Options several commands share: parameter name -> (its ``Annotated`` type, its default)."""
F = TypeVar("F", bound=Callable[..., Any])


def option(kind: Any, default: Any, *names: str, **settings: Any) -> tuple[Any, Any]:
    """One entry of ``Options``: a ``typer.Option`` of type ``kind``."""
    return Annotated[kind, typer.Option(*names, **settings)], default


def shared(*groups: Options) -> Callable[[F], F]:
    """Add the options of ``groups`` to a command's signature after its own (declared once for
    every command); the command gets them in ``**options``."""

    def add(command: F) -> F:
        own = inspect.signature(command, eval_str=True).parameters.values()
        added = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=kind, default=value)
            for group in groups
            for name, (kind, value) in group.items()
        ]
        kept = [p for p in own if p.kind is not inspect.Parameter.VAR_KEYWORD]
        command.__signature__ = inspect.Signature(kept + added)  # type: ignore[attr-defined]
        return command

    return add


JSON_HELP = "Print the run's summary file as JSON on stdout (tables go to stderr)."
JsonOpt = Annotated[bool, typer.Option("--json", metavar="", help=JSON_HELP)]


def scoring_options(
    unit: str | None,
    metrics: Sequence[str],
    *,
    sample: bool = False,
    lower_is_better: Sequence[str] = (),
) -> Options:
    """``--bootstrap`` (resamples of ``unit``), ``--seed``, ``--json``, then (``unit`` None:
    these alone) ``--fail-under`` (floors of ``metrics``, exit 4) and ``--no-store``."""
    what = "the bootstrap resamples" + (
        " and, with --sample-size, which items are drawn" if sample else ""
    )
    floors = typer.Option(
        "--fail-under",
        metavar="METRIC=VALUE[,...]",
        callback=lambda text: parse_fail_under(text, metrics, lower_is_better=lower_is_better),
        help="Exit 4 when a metric is below its floor, printing which (every model must meet "
        "every floor; an absent metric fails). Use it to gate CI on a model. Metrics: "
        + ", ".join(metrics)
        + ".",
    )
    last: Options = {
        "fail_under": (Annotated[str | None, floors], None),
        "no_store": (NoStoreOpt, False),
    }
    if unit is None:  # json score: one pair, recorded nowhere
        text = "Do not read the configuration saved in the store (this command records nothing)."
        return {**last, "no_store": option(bool, False, "--no-store", metavar="", help=text)}
    resamples = f"Bootstrap resamples of {unit} for the 95% intervals (0: no intervals)."
    seed = f"Seed of every random draw of the command: {what}. Same seed, same numbers."
    return {
        "bootstrap": (Annotated[int, typer.Option("--bootstrap", min=0, help=resamples)], 1000),
        "seed": (Annotated[int, typer.Option("--seed", callback=_seed, help=seed)], 0),
        "as_json": (JsonOpt, False),
        **last,
    }


def _seed(value: int) -> int:
    """``--seed``, checked as every system checks it, before a model run's first call."""
    try:
        return whole_number(value, "--seed", MAX_SEED)
    except UsageProblem as exc:
        raise typer.BadParameter(exc.message) from None


def parse_fail_under(
    text: str | None, metrics: Sequence[str], *, lower_is_better: Sequence[str] = ()
) -> dict[str, float]:
    """``"f1=0.7,recall=0.6"`` -> floors; a usage error names the bad part."""
    if text is None:
        return {}

    def bad(message: str) -> typer.BadParameter:
        return typer.BadParameter(message, param_hint="--fail-under")

    floors: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        name, sep, value = part.partition("=")
        name = name.strip()
        if name in floors:
            raise bad(f"{name} is given two floors; give each metric once")
        if name in lower_is_better:
            raise bad(
                f"{name} is lower-is-better, so a floor cannot gate it; gate one of: "
                + ", ".join(metrics)
            )
        if not sep or name not in metrics:
            raise bad(
                f"expected METRIC=VALUE with METRIC one of {', '.join(metrics)} (got {part!r})"
            )
        try:
            floor = float(value)
        except ValueError:
            floor = float("nan")
        if not 0.0 <= floor <= 1.0:
            raise bad(f"{name}: the floor must be a number in [0, 1] (got {value.strip()!r})")
        floors[name] = floor
    return floors


def _at(value: float, floor: float) -> bool:
    """``value`` is ``floor`` but for float rounding: F1 = 2PR/(P+R) of TP 3, FN 2 is
    0.7499999999999999, which a floor of 0.75 must pass."""
    return math.isclose(value, floor, rel_tol=1e-9, abs_tol=1e-12)


def gate(floors: dict[str, float], values: dict[str, dict[str, float | None]], status: int) -> int:
    """Check ``values`` (model, or ``""``, -> metric -> value) against ``floors``, a line per
    miss (or one saying all were met) on stderr: 4 on a miss, else ``status``."""
    if not floors:
        return status
    console = SafeConsole(stderr=True, highlight=False)
    misses = []
    for model, metrics in values.items():
        for name, floor in floors.items():
            value = metrics.get(name)
            if value is None or (value < floor and not _at(value, floor)):
                who = f"{model}: " if model else ""
                shown = "absent" if value is None else f"{value:.4f}"
                misses.append(f"{who}{name} {shown} < {floor:g}")
    wanted = ", ".join(f"{k} >= {v:g}" for k, v in floors.items())
    if misses:
        for miss in misses:
            say(console, f"fail-under: {safe_text(miss)}", style="red")
        return EXIT_GATE
    say(console, f"fail-under: every floor met ({wanted})")
    return status


class Throttle:
    """A progress callback passed on at most every ``interval`` seconds per phase (and always
    at a phase's start, end and its unknown-length steps): ``ProgressBar``'s, here (imported from
    json's stream, it cost numeric and slots ~0.05 s and rapidfuzz)."""

    def __init__(self, progress: Progress, interval: float = 0.25) -> None:
        self.progress, self.interval = progress, interval
        self._last: dict[str, float] = {}

    def __call__(self, phase: str, done: int, total: int) -> None:
        now = time.monotonic()
        last = self._last.get(phase)
        if last is None or done in (0, total) or now - last >= self.interval:
            self._last[phase] = now
            self.progress(phase, done, total)


class ProgressBar:
    """A transient progress bar on ``errors`` (only on a terminal), updated a few times a
    second; ``callback`` is the pipeline's ``core.Progress``."""

    def __init__(self, errors: Any, shown: bool = True) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.bar = Progress(
            TextColumn("{task.description:<10}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=errors,
            transient=True,
            disable=not (shown and errors.is_terminal),  # in a log, a final bar is noise
        )
        self.tasks: dict[str, Any] = {}
        self.callback = Throttle(self._update)

    def __enter__(self) -> ProgressBar:
        """Shown from the first progress on (a model run's own bars come first), until exit."""
        return self

    def __exit__(self, *_: object) -> None:
        self.bar.stop()

    def _update(self, phase: str, done: int, total: int) -> None:
        bar, tasks = self.bar, self.tasks
        if not bar.live.is_started:
            bar.start()
        if phase not in tasks:
            for task in tasks.values():  # a new phase ends the one of unknown length
                if bar.tasks[task].total is None:
                    bar.update(task, total=1, completed=1)
            tasks[phase] = bar.add_task(phase, total=total or None)
        bar.update(tasks[phase], completed=done, total=total or None)


def events(errors: Any, progress: ProgressBar | None = None) -> Events:
    """The pipeline's ``Events`` for a command: warnings and notes on ``errors`` (stderr),
    progress on ``progress``'s bar, every folder put in place remembered for a late Ctrl-C."""

    from fieldcheck._cli._record import store_warning
    from fieldcheck.core import Events

    return Events(
        warn=lambda text: store_warning(errors, text),
        note=lambda text: typer.echo(safe_text(text), err=True),
        progress=progress.callback if progress is not None else None,
        finished=_FINISHED.append,
    )


@contextmanager
def pipeline_errors(
    param: str | None = None, names: dict[str, str] | None = None
) -> Iterator[None]:
    """Around a pipeline call: ``UsageProblem`` the usage line (``names``: the command's names
    of input roles), ``CannotWrite`` exit 1, ``Interrupted`` its line and 130."""
    try:
        yield
    except UsageProblem as exc:
        hint = (names or {}).get(exc.param or "", exc.param) or param
        raise typer.BadParameter(safe_text(exc.message), param_hint=hint) from None
    except CannotWrite as exc:
        raise OutputFailed(str(exc)) from None
    except Interrupted as exc:
        typer.echo(safe_text(exc.line), err=True)
        interrupt_reported()
        raise typer.Exit(EXIT_INTERRUPTED) from None


def score_and_exit(
    system: str,
    inputs: core.Inputs,
    settings: Any,
    options: dict[str, Any],
    show: Callable[[core.Outcome, SafeConsole, SafeConsole], None],
    *,
    out: Path | None,
    names: dict[str, str] | None = None,
    **given: Any,
) -> NoReturn:
    """A scoring command once its options are read: ``core.score`` (usage problems as
    ``pipeline_errors`` says them, a progress bar, the store unless ``--no-store`` or unusable),
    ``show`` on stdout (stderr under ``--json``) and stderr, and exit as ``finish`` says."""
    from fieldcheck import core

    console, errors = SafeConsole(stderr=options["as_json"]), SafeConsole(stderr=True)
    bar = ProgressBar(errors, not options.get("no_progress"))
    with pipeline_errors(names=names), bar.bar:
        outcome = core.score(
            system,
            inputs,
            settings,
            out=out,
            command=command_name() or system,
            store=not options["no_store"] and not store_failed(),
            events=events(errors, bar),
            extras={k: options[k] for k in ("timeout", "concurrency") if k in options},  # judge's
            **given,
        )
    show(outcome, console, errors)
    scored = outcome.scored
    raise typer.Exit(finish(scored, options["fail_under"], options["as_json"], scored.failed))


def finish(scored: Any, floors: dict[str, float], as_json: bool, failed: bool) -> int:
    """The end of a scoring command: with ``--json`` the summary file as written on stdout;
    the exit status (3 when ``failed``, 4 when a floor is not met)."""
    if as_json:
        print_json(scored.summary)
    return gate(floors, scored.gate, EXIT_FAILED if failed else EXIT_OK)


def finish_run(ran: core.Ran, floors: dict[str, float], as_json: bool) -> int:
    """``finish`` for a model run: of its one outcome when its system runs the models
    ``together``, else of each model's (``--json``: one's summary, several ``{"models": ...}``)."""
    from fieldcheck import core

    system = core.get(ran.outcomes[0].system)
    if isinstance(system, core.Runs) and system.together:
        return finish(ran.outcomes[0].scored, floors, as_json, ran.failed)
    outcomes = {run.spec.name: o.scored for run, o in zip(ran.calls, ran.outcomes, strict=True)}
    if as_json:
        summaries = {name: scored.summary for name, scored in outcomes.items()}
        print_json(summaries.popitem()[1] if len(summaries) == 1 else {"models": summaries})
    values = {name: scored.gate[""] for name, scored in outcomes.items()}
    return gate(floors, values, EXIT_FAILED if ran.failed else EXIT_OK)


def print_json(value: Any) -> None:
    """``--json``: a result file as written, on stdout (control characters escaped)."""
    sys.stdout.write(safe_json_text(dumps(value, indent=True)) + "\n")

"""``fieldcheck``: the root command; each evaluation system registers its own sub-command group."""

from __future__ import annotations

import _thread
import logging
import os
import signal
import sys
import threading
from importlib import import_module
from typing import Any

import typer
from typer.core import TyperCommand

from fieldcheck._cli._common import FieldcheckGroup, _flowing_help, interrupt_running_loop
from fieldcheck._cli._record import store_help
from fieldcheck._version import __version__

# Each command's module (``serve_model_cmd``: ``fieldcheck serve-model``, its ``app``), imported
# only when that command runs or shows its own help, and its summary in the root's list (the first
# paragraph of its help, most read from here; tests/test_lazy_cli.py): ``--help`` imports none.
COMMANDS = {
    "score_cmd": (
        "Score input files with any registered system, as POST /api/score/SYSTEM does: prints "
        "its headline metrics with their 95% intervals and the stored run. Exit 0 when every "
        "input scored, 3 when some could not be (listed in the output folder), 4 when a "
        "--fail-under floor is not met, 2 on usage errors, 1 when an output could not be "
        "written, 130 on Ctrl-C."
    ),
    "serve_model_cmd": (
        "Serve synthetic models (labelled synthetic in every reply) at http://HOST:PORT/v1."
    ),
    "serve_cmd": (
        "Serve the API (OpenAPI at /openapi.json) and the pages at http://HOST:PORT/. The saved "
        "configuration lives in the store (FIELDCHECK_DATABASE_URL or the default SQLite "
        "file). Stop with Ctrl-C. Exit 2 on usage errors (a bad option, a non-loopback --host "
        "without a token, a --data-root that is not a folder)."
    ),
    "view_cmd": (
        "Look at runs: without --bundle, serve the pages (as 'fieldcheck serve') and print the "
        "address of the run's page (of Compare for several runs, of Runs for none). With "
        "--bundle DIR, write the Runs, run, item and Compare pages of the runs as files (DIR is "
        "written beside it and renamed into place when complete). Exit 2 on usage errors (an "
        "unknown run, a DIR that holds files, a run whose items file is gone), 1 when DIR "
        "cannot be written (its partial folder removed), 130 on Ctrl-C while writing it; "
        "serving ends on Ctrl-C with 0."
    ),
    "json_cmd": (
        "Score a model's JSON output against ground truth: completeness, hallucination, "
        "accuracy, safety and the Response Quality Score (RQS)."
    ),
    "slots_cmd": "Slot extraction benchmark: score models' slots against gold slots.",
    "numeric_cmd": (
        "ConvFinQA numeric QA: run a model's plan-and-execute agent, score per-turn answers and "
        "plans."
    ),
    "runs_cmd": (
        "The scored runs in the store (FIELDCHECK_DATABASE_URL or the default SQLite file): "
        "list, show, compare, export, re-score, import an output folder, delete. RUN is a run "
        "id or its unique prefix."
    ),
}


ROOT_HELP = (
    "Score how well language models extract structured information and answer numeric "
    "questions. Systems: 'json' (JSON output vs ground truth), 'slots' (slot extraction "
    "benchmark), 'numeric' (ConvFinQA numeric QA); 'score SYSTEM ROLE=FILE...' scores any of "
    "them (and any system added to the registry). "
)


class RootGroup(FieldcheckGroup):
    """``fieldcheck``: its list of commands from ``COMMANDS``; a command's module imported when
    it is used (its help, its run), so each command loads only what it needs."""

    listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return [module.removesuffix("_cmd").replace("_", "-") for module in COMMANDS]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        module = cmd_name.replace("-", "_") + "_cmd"
        if cmd_name in self.commands or module not in COMMANDS or "_" in cmd_name:
            return self.commands.get(cmd_name)
        if self.listing:
            return TyperCommand(cmd_name, help=COMMANDS[module])
        command = typer.main.get_command(import_module(f"fieldcheck._cli.{module}").app)
        command.name = cmd_name
        _flowing_help(command)
        self.commands[cmd_name] = command
        return command

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False

    @property  # type: ignore[override]
    def help(self) -> str:  # not at start-up: store_help parses the store's URL (SQLAlchemy)
        return ROOT_HELP + store_help()

    @help.setter
    def help(self, value: Any) -> None:
        pass

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        known = self.commands
        names = self.list_commands(ctx)
        if args and args[0] not in names:  # Typer's "Did you mean" reads self.commands' names
            self.commands = {**dict.fromkeys(names, TyperCommand("")), **known}
        try:
            return super().resolve_command(ctx, args)
        finally:
            self.commands = known


app = typer.Typer(
    name="fieldcheck",
    cls=RootGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class _LowerLevelFormatter(logging.Formatter):
    """``warning: ...`` like ``error: ...``: one style for every message on stderr."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return super().formatMessage(record).replace(record.levelname, record.levelname.lower(), 1)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"fieldcheck {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        metavar="",
        callback=_version_callback,
        is_eager=True,
        help="Print the version and exit.",
    ),
    verbose: bool = typer.Option(
        False,
        "--verbose",
        "-v",
        metavar="",
        help="Log details on stderr (accepted anywhere on the line).",
    ),
) -> None:
    handler = StderrHandler()
    handler.setFormatter(_LowerLevelFormatter("%(levelname)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    # -v: fieldcheck's own details; libraries' INFO lines (matplotlib's units) stay out
    logging.getLogger("fieldcheck").setLevel(logging.INFO if verbose else logging.NOTSET)


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes each record to ``sys.stderr`` as it is then (under a Rich progress display, its
    proxy: a warning is printed above the spinner)."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def _as_ctrl_c(signum: int, frame: Any) -> None:
    """SIGTERM and SIGHUP take Ctrl-C's path: the SIGINT handler in effect (asyncio's in a model
    run), else ``interrupt_running_loop``, else a KeyboardInterrupt (docs/running.md)."""
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler) and handler is not _as_ctrl_c:
        handler(signal.SIGINT, frame)
        return
    if interrupt_running_loop():
        return
    raise KeyboardInterrupt


def _unraisable(info: Any) -> None:
    """``sys.unraisablehook``: a Ctrl-C whose KeyboardInterrupt was raised in a callback Python
    cannot raise from (a weakref callback, a ``__del__``) was printed as "Exception ignored in
    ..." with a traceback and lost, so the command went on to exit 0 (a tester's finding): it is
    delivered again, silently, from a thread once this hook has returned (one dropped again
    comes back here)."""
    if info.exc_type is KeyboardInterrupt:
        again = threading.Timer(0.01, _thread.interrupt_main)
        again.daemon = True
        again.start()
    else:
        sys.__unraisablehook__(info)


def main() -> None:
    # SIGTERM (timeout, a CI job cancelled) and SIGHUP (the terminal closed) stop a command as
    # Ctrl-C does: temporary files and folders removed, the run marked interrupted, exit 130
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) == signal.SIG_DFL:
            signal.signal(sig, _as_ctrl_c)
    sys.unraisablehook = _unraisable
    try:
        app()
    except KeyboardInterrupt:  # outside a model run (which prints its own line): while scoring
        typer.echo(
            "interrupted: the output folder may be incomplete; model replies already stored are "
            "kept, so the same command finishes from the store and the cache",
            err=True,
        )
        raise SystemExit(130) from None
    except SystemExit as end:  # typer's and rich's exit 1 when the output's reader has left
        if not isinstance(end.__context__, BrokenPipeError):  # (``| head``): 0, as other tools
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush
        raise SystemExit(0) from None
    finally:
        _ignore_late_signals()


def _ignore_late_signals() -> None:
    """The command has ended: a Ctrl-C from now on changes nothing (at exit, Python's default
    action ended a complete run with status 130 and no line)."""
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, signal.SIG_IGN)


if __name__ == "__main__":
    main()

"""``fieldcheck``: the root command; each evaluation system registers its own sub-command group."""

from __future__ import annotations

import _thread
import logging
import signal
import sys
import threading
from typing import Any

import typer

from fieldcheck._cli import (
    json_cmd,
    numeric_cmd,
    runs_cmd,
    score_cmd,
    serve_cmd,
    serve_model_cmd,
    slots_cmd,
    view_cmd,
)
from fieldcheck._cli._common import FieldcheckGroup
from fieldcheck._cli._runopts import STORE_HELP, interrupt_running_loop
from fieldcheck._version import __version__

app = typer.Typer(
    name="fieldcheck",
    cls=FieldcheckGroup,
    help=(
        "Score how well language models extract structured information and answer numeric "
        "questions. Systems: 'json' (JSON output vs ground truth), 'slots' (slot extraction "
        "benchmark), 'numeric' (ConvFinQA numeric QA); 'score SYSTEM ROLE=FILE...' scores any of "
        "them (and any system added to the registry). " + STORE_HELP
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(json_cmd.app, name="json")
app.add_typer(slots_cmd.app, name="slots")
app.add_typer(numeric_cmd.app, name="numeric")
app.add_typer(runs_cmd.app, name="runs")
app.command("score", cls=score_cmd.ScoreCommand)(score_cmd.score_command)
app.command("serve-model")(serve_model_cmd.serve_model_command)
app.command("serve")(serve_cmd.serve_command)
app.command("view")(view_cmd.view_command)


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

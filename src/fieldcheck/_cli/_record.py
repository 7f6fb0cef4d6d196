"""The store as the commands see it (issue 11, docs/runs.md): ``--no-store``, the one warning of
an unusable store; and how every command prints a plain line (``say``) and a table (``grid``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from fieldcheck._util.errors import exception_line
from fieldcheck._util.term import safe_text
from fieldcheck.store import DATABASE_ENV, database_url, default_database_path, describe_url

NO_STORE_HELP = (
    f"Do not record this run in the store (${DATABASE_ENV} or the default SQLite file), and do "
    "not read the configuration saved there; a model run then neither caches replies nor "
    "resumes. The output files are the same either way."
)
NoStoreOpt = Annotated[bool, typer.Option("--no-store", metavar="", help=NO_STORE_HELP)]


def store_help() -> str:
    """Where runs are kept (the store's URL parsed: SQLAlchemy), said in help texts."""
    now = os.environ.get(DATABASE_ENV)
    where = f"now {describe_url(now)}" if now else f"default {default_database_path()}"
    return (
        f"Runs and cached replies are kept in the store: ${DATABASE_ENV} (any SQLAlchemy URL; "
        f"{where}). The API key is read from $FIELDCHECK_API_KEY or $OPENAI_API_KEY (or the "
        "variable a --models entry names) and never written anywhere."
    )


def say(console: Console, text: str, **style: Any) -> None:
    """One line of plain text on ``console``: no markup, no highlighting, not wrapped."""
    console.print(text, markup=False, highlight=False, soft_wrap=True, **style)


def grid(title: Any, *left: str, right: Sequence[str] = ()) -> Table:
    """A table with a bold header: the ``left`` columns, then the right-justified ``right``."""
    grid = Table(title=title, header_style="bold")
    for name in left:
        grid.add_column(name)
    for name in right:
        grid.add_column(name, justify="right")
    return grid


# The store URLs this process already warned about (one warning per command, not one per use).
_FAILED: set[str] = set()


def store_failed() -> bool:
    """Whether this command already found the store unusable (and said so)."""
    return database_url() in _FAILED


def forget_store_warnings() -> None:
    """A command has ended: the next one (in this process, as tests run them) warns again."""
    _FAILED.clear()


def store_warning(errors: Console, text: str) -> None:
    """A store warning of the pipeline, on ``errors``, said once (``store_failed``)."""
    _FAILED.add(database_url())
    say(errors, safe_text(text))


def runner_store_unavailable(exc: BaseException) -> None:
    """The one warning of a model run whose store cannot be opened or written."""
    _give_up_store(
        f"the store cannot be used ({exception_line(exc)}): replies are not cached or read from the "
        "cache, the run cannot be resumed and is not stored"
    )


def runner_store_failed(exc: BaseException) -> None:
    """The one warning of a model run whose store stopped working mid-run."""
    _give_up_store(
        f"the store stopped working ({exception_line(exc)}): the run goes on without it; its replies "
        "from now on are not cached, it cannot be resumed and is not stored"
    )


def _give_up_store(what: str) -> None:
    """``warning: WHAT; its files are complete`` on stderr, once (``store_failed``)."""
    _FAILED.add(database_url())
    typer.echo(safe_text(f"warning: {what}; its files are complete"), err=True)


def stored_line(console: Console, line: str | None) -> None:
    """Print ``finish_recorder``'s line (not in ``--json`` mode: stdout is the JSON)."""
    if line is not None:
        say(console, line)

"""What every command shares: exit statuses, the one-line usage error, ``-v`` anywhere, the
``--out`` folder check and how input problems are shown.

Exit statuses: 0 everything scored, 2 usage error, 3 some input failed (the rest was scored and
every output written; the failures are listed in the output folder), 4 a ``--fail-under`` floor
was not met, 130 interrupted.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from typer._click import exceptions as click  # typer vendors Click (pinned in requirements.lock)
from typer.core import TyperGroup

from fieldcheck._util.term import install_log_filter, safe_text
from fieldcheck.reports._outdir import OutputFolder, OutputFolderError

install_log_filter()  # warnings quote data: control characters escaped (issue 9)

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_FAILED = 3
EXIT_GATE = 4
EXIT_INTERRUPTED = 130

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
        message = f"{hint}: {exc.message}" if hint else exc.message
    else:
        message = exc.format_message()
    ctx = getattr(exc, "ctx", None)
    see = f" (see '{ctx.command_path} --help')" if isinstance(exc, click.UsageError) and ctx else ""
    return "error: " + safe_text(" ".join(message.split())) + see


class FieldcheckGroup(TyperGroup):
    """The root command: ``-v``/``--verbose`` is accepted anywhere on the line (it is moved
    before the sub-command), and a usage error is one line on stderr, exit 2, instead of
    Click's usage block and box (issue 9: one error style)."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        words = list(sys.argv[1:] if args is None else args)
        end = words.index("--") if "--" in words else len(words)
        flags = [w for w in words[:end] if w in _GLOBAL_FLAGS]
        words = flags + [w for w in words[:end] if w not in _GLOBAL_FLAGS] + words[end:]
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
        if not standalone_mode:
            return status
        sys.exit(status if isinstance(status, int) else 0)


FORCE_HELP = (
    "Write into an --out folder that holds files fieldcheck did not write (they are kept; "
    "fieldcheck's own files from an earlier run are always replaced)."
)
ForceOpt = Annotated[bool, typer.Option("--force", metavar="", help=FORCE_HELP)]


def _parse_out(value: Any) -> Path:
    """``--out``: a folder path; the empty string is a usage error (not the current folder)."""
    if isinstance(value, Path):
        return value
    if not str(value).strip():
        raise typer.BadParameter("must name a folder (use '.' for the current one)")
    return Path(value)


def out_option(help: str) -> Any:
    """The ``--out`` option of every command (same checks everywhere; see ``out_dir``)."""
    return typer.Option("--out", parser=_parse_out, metavar="DIR", help=help)


def out_dir(out: Path | str, *, force: bool = False) -> OutputFolder:
    """Prepare ``--out`` before any work, so a bad folder is a usage error, not a late traceback:
    created if missing; the files an earlier run listed in its manifest removed; a folder
    holding other files refused unless ``--force`` (reports/_outdir.py)."""
    if not str(out).strip():
        raise typer.BadParameter(
            "must name a folder (use '.' for the current one)", param_hint="--out"
        )
    try:
        return OutputFolder.prepare(out, force=force)
    except OutputFolderError as exc:
        raise typer.BadParameter(safe_text(exc), param_hint="--out") from None


@contextmanager
def writing(folder: OutputFolder) -> Iterator[OutputFolder]:
    """Around the work that fills ``folder``: on Ctrl-C one line says what was and was not
    written (exit 130). The command marks the folder complete itself (``folder.finish()``)
    once every file is written."""
    try:
        yield folder
    except KeyboardInterrupt:
        typer.echo(safe_text(folder.interrupted_line()), err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None

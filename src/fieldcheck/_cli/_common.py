"""What every command shares: exit statuses and the ``--out`` folder check.

Exit statuses: 0 everything scored, 2 usage error, 3 some input failed (the rest was scored and
every output written; the failures are listed in the output folder).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from fieldcheck._util.term import install_log_filter, safe_text
from fieldcheck.reports._outdir import OutputFolder, OutputFolderError

install_log_filter()  # warnings quote data: control characters escaped (issue 9)

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_FAILED = 3
EXIT_INTERRUPTED = 130


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

"""What every command shares: exit statuses and the ``--out`` folder check.

Exit statuses: 0 everything scored, 2 usage error, 3 some input failed (the rest was scored and
every output written; the failures are listed in the output folder).
"""

from __future__ import annotations

from pathlib import Path

import typer

from fieldcheck._util.term import install_log_filter

install_log_filter()  # warnings quote data: control characters escaped (issue 9)

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_FAILED = 3


def out_dir(out: Path) -> Path:
    """Create ``--out`` before any work, so a bad path is a usage error, not a late traceback."""
    if out.exists() and not out.is_dir():
        raise typer.BadParameter(f"{out} is a file, not a directory", param_hint="--out")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise typer.BadParameter(
            f"cannot create directory {out}: {exc.strerror or exc}", param_hint="--out"
        ) from None
    return out

"""`fieldcheck slots ...` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="slots evaluation.", no_args_is_help=True)

"""`fieldcheck numeric ...` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="numeric evaluation.", no_args_is_help=True)

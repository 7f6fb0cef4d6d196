"""`fieldcheck json ...` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="json evaluation.", no_args_is_help=True)

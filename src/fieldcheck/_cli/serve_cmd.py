"""`fieldcheck serve`: the HTTP API and the web pages (Configuration, Test evaluation) on uvicorn."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Annotated

import typer

from fieldcheck._cli.main import COMMANDS
from fieldcheck._util.errors import exception_line
from fieldcheck._util.term import safe_text
from fieldcheck.store import DATABASE_ENV

app = typer.Typer(add_completion=False)  # its one command, which fieldcheck._cli.main loads


@app.command("serve", help=COMMANDS["serve_cmd"])
def serve_command(
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Address to bind. Loopback by default; any other address needs "
            "FIELDCHECK_API_TOKEN, which every request must then send as a bearer token.",
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="Port to listen on.")
    ] = 8000,
    data_root: Annotated[
        Path | None,
        typer.Option(
            "--data-root",
            metavar="DIR",
            help="The only folder the API reads and writes: POST /api/json/batch-path reads batch "
            "files from it, and each scoring call keeps its uploads and run folder under its "
            "fieldcheck-runs/ (default: none; batch-path and /api/score refused).",
        ),
    ] = None,
    matcher: Annotated[
        str,
        typer.Option(
            "--matcher",
            help="Similarity for FUZZY and SEMANTIC fields, as 'fieldcheck json score': "
            "'local' or 'llm' (needs --judge-base-url and --judge-model).",
        ),
    ] = "local",
    judge_base_url: Annotated[
        str | None,
        typer.Option(
            "--judge-base-url", help="OpenAI-compatible base URL of the judge (--matcher llm)."
        ),
    ] = None,
    judge_model: Annotated[
        str | None, typer.Option("--judge-model", help="Model name of the judge (--matcher llm).")
    ] = None,
    max_upload_mb: Annotated[
        float,
        typer.Option("--max-upload-mb", min=0.001, help="Largest upload accepted (413 beyond)."),
    ] = 50.0,
    max_json_mb: Annotated[
        float,
        typer.Option("--max-json-mb", min=0.001, help="Largest JSON request body (413 beyond)."),
    ] = 1.0,
) -> None:
    from fieldcheck._cli.json_cmd import check_matcher
    from fieldcheck.api import MB, ApiSettings, check_binding, create_app

    check_matcher(matcher, judge_base_url, judge_model)
    if data_root is not None and not data_root.is_dir():
        raise typer.BadParameter(safe_text(f"{data_root}: not a folder"), param_hint="--data-root")
    settings = ApiSettings.from_env(
        host=host,
        port=port,
        data_root=data_root.resolve() if data_root is not None else None,
        matcher=matcher,
        judge_base_url=judge_base_url,
        judge_model=judge_model,
        max_upload_bytes=int(max_upload_mb * MB),
        max_json_bytes=int(max_json_mb * MB),
    )
    try:
        check_binding(settings.host, settings.token)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--host") from None
    import uvicorn

    check_port(host, port)
    try:
        app = create_app(settings)
    except Exception as exc:  # the store cannot be opened: one line, never a traceback
        reason = f"cannot open the store: {exception_line(exc)}"
        raise typer.BadParameter(safe_text(reason), param_hint=DATABASE_ENV) from None
    from fieldcheck.store import database_url, unshared_artifacts

    if warning := unshared_artifacts(settings.database_url or database_url()):
        typer.echo(f"warning: {safe_text(warning)}", err=True)
    typer.echo(
        f"serving fieldcheck at http://{shown_address(host, port)}/ (API schema: /openapi.json); "
        "Ctrl-C stops",
        err=True,
    )
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


def shown_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def check_port(host: str, port: int) -> None:
    """A usage error naming ``--port`` when the server could not listen on ``host:port``:
    checked before the app starts, not uvicorn's log line and exit 3."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            reason = f"{shown_address(host, port)} cannot be used: {exc.strerror or exc}"
            raise typer.BadParameter(reason, param_hint="--port") from None

"""`fieldcheck serve-model`: synthetic example models behind an OpenAI-compatible endpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(add_completion=False)  # its one command, which fieldcheck._cli.main loads


@app.command("serve-model")
def serve_model_command(
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="Port to listen on.")
    ] = 8001,
    host: Annotated[
        str, typer.Option("--host", help="Address to bind; loopback by default.")
    ] = "127.0.0.1",
    latency_ms: Annotated[
        float,
        typer.Option(
            "--latency-ms",
            min=0.0,
            help="Mean added latency per reply in ms (synthetic-eager x1.4, synthetic-fast x0.4).",
        ),
    ] = 0.0,
    responses: Annotated[
        Path | None,
        typer.Option(
            "--responses",
            exists=True,
            file_okay=False,
            metavar="DIR",
            help="Folder of the gold data the synthetic models answer from (default: the "
            "examples/ folder of this installation).",
        ),
    ] = None,
    fail_rate: Annotated[
        str,
        typer.Option(
            "--fail-rate",
            metavar="STATUS=RATE,...",
            help="Inject faults, e.g. 429=0.1,500=0.05 (statuses 429, 500, 502, 503).",
        ),
    ] = "",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the fault injection.")] = 0,
) -> None:
    """Serve synthetic models (labelled synthetic in every reply) at http://HOST:PORT/v1.

    Models: synthetic-careful, synthetic-eager, synthetic-fast. They answer fieldcheck's slot
    memory, ConvFinQA plan, JSON extraction and judge prompts from the bundled gold data with
    seeded, documented error rates (docs/running.md), so every pipeline runs with no model and
    no network. Replies are deterministic per (model, request). Stop with Ctrl-C.
    """
    from fieldcheck._util.term import safe_text
    from fieldcheck.serve_model import EXAMPLES, SYNTHETIC_MODELS, create_app, parse_fail_rates

    try:
        rates = parse_fail_rates(fail_rate)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--fail-rate") from None
    import uvicorn

    from fieldcheck._cli.serve_cmd import check_port

    check_port(host, port)  # before the line saying it serves (the docs start it in the background)
    app = create_app(responses_dir=responses, latency_ms=latency_ms, fail_rates=rates, seed=seed)
    extras = []
    if latency_ms:
        extras.append(f"latency ~{latency_ms:g} ms")
    if rates:
        extras.append("faults " + ",".join(f"{k}={v:g}" for k, v in rates.items()))
    typer.echo(
        f"serving synthetic models {', '.join(SYNTHETIC_MODELS)} at http://{host}:{port}/v1"
        + (f" ({'; '.join(extras)})" if extras else "")
        + "; Ctrl-C stops",
        err=True,
    )
    if missing := [r.missing for r in app.state.serve.responders if r.missing]:
        typer.echo(
            f"warning: {safe_text(responses or EXAMPLES)} has no data for {'; '.join(missing)}: "
            "their every request gets a naive reply (scores near 0 that are no model's)",
            err=True,
        )
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)

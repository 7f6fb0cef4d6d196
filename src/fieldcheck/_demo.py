"""``make demo``: the three systems run end to end through the real runner against serve-model's
synthetic models, into a new ``demo-out/<UTC time>-<id>/`` and the store beside it (a second demo is
served from the cache and overwrites nothing)."""

from __future__ import annotations

import functools
import importlib
import os
import secrets
import shlex
import socket
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import typer
from rich.console import Console

from fieldcheck.serve_model import SYNTHETIC_MODELS, BackgroundServer, create_app, free_port
from fieldcheck.store import DATABASE_ENV, Store, describe_url

# The cache is keyed on the endpoint too, so the demo's server keeps one port when it can.
DEMO_PORT = 18437

PARTS = [
    ("Slot extraction benchmark", "fieldcheck._cli.slots_cmd", "slots"),
    ("Numeric QA (ConvFinQA dev, 30 conversations)", "fieldcheck._cli.numeric_cmd", "numeric"),
    ("JSON extraction", "fieldcheck._cli.json_cmd", "json"),
]


def main(root: Path = Path("demo-out")) -> int:
    console = Console()
    say = functools.partial(console.print, markup=False, highlight=False)
    root.mkdir(parents=True, exist_ok=True)
    runs = root / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(2)}"
    if not os.environ.get(DATABASE_ENV):
        os.environ[DATABASE_ENV] = f"sqlite:///{(root / 'fieldcheck.sqlite3').resolve()}"
    store = Store()
    models = list(SYNTHETIC_MODELS)
    status = 0
    start_all = time.perf_counter()
    app = create_app(latency_ms=20)
    port = DEMO_PORT if _port_free(DEMO_PORT) else free_port()
    if port != DEMO_PORT:
        console.print(
            f"port {DEMO_PORT} is busy: serve-model on {port}, so the cache of an "
            "earlier demo does not apply",
            markup=False,
        )
    with BackgroundServer(app, port=port) as server:
        say(
            f"serve-model: synthetic models {', '.join(models)} at {server.base_url} "
            "(every number below is from synthetic models, not real ones)"
        )
        for title, module_name, sub in PARTS:
            run_model_demo = importlib.import_module(module_name).run_model_demo
            console.rule(f"[bold]{title}")
            start = time.perf_counter()
            try:
                code = run_model_demo(server.base_url, runs / sub, models, console=console)
            except (typer.Exit, KeyboardInterrupt) as exc:  # Ctrl-C: its line is printed
                say(
                    "make demo stopped; `make demo` again starts anew in another folder, the "
                    "model calls made so far answered from the cache"
                )
                return getattr(exc, "exit_code", 130)
            status = max(status, int(code or 0))
            console.print(
                f"[dim]{title}: {time.perf_counter() - start:.1f}s, outputs in {runs / sub}[/dim]"
            )
        requests = app.state.serve.requests
    stored = store.list_runs()
    # The demo's own runs are those of its folder: others may share the store meanwhile.
    made = [r for r in stored if _under(r.out_dir, runs)]
    parts = [r for r in store.list_runs(kind="calls") if _under(r.out_dir, runs)]
    called = [r for r in made if r.kind == "run"] + parts  # each model's calls
    journal = [item for run in called for item in store.journal(run.id)]
    calls, cached = sum(i.calls for i in journal), sum(i.cached_calls for i in journal)
    console.rule("[bold]Done")
    if calls and cached == calls:
        source = f"all {calls} model calls were served from the cache"
    elif cached:
        source = f"{cached} of {calls} model calls were served from the cache"
    else:
        source = f"{calls} model calls, none from the cache (a second `make demo` will be)"
    say(
        f"{len(made)} runs, {len(called)} model runs (a slots run holds one per model), in "
        f"{time.perf_counter() - start_all:.1f}s; {source}; serve-model "
        f"answered {requests} requests."
    )
    say(f"store: {describe_url(store.url)}")
    say(
        f"outputs: {runs}/slots (report.md, report.html, plots), {runs}/numeric/<model> "
        f"(summary.csv, turns.csv, validation.csv, errors.csv, statistics.json, traces/), "
        f"{runs}/json/<model> (records.jsonl, summary.json, fields.csv)"
    )
    say(
        f"the store holds {len(stored)} runs ({len(made)} begun by this demo); to browse and "
        "compare them (http://127.0.0.1:8000/runs):"
    )
    say(f"  {serve_command(store.url)}", soft_wrap=True)
    return status


def serve_command(url: str) -> str:
    """The shell command that serves the demo's store: with its URL when it is the demo's own
    SQLite file or another URL without a password; a URL with one is never printed."""
    from sqlalchemy.engine import make_url

    venv = Path(".venv/bin/fieldcheck")
    program = str(venv) if venv.exists() else "fieldcheck"
    if make_url(url).password:
        return f"{program} serve   # with the same {DATABASE_ENV} as this demo"
    return f"{DATABASE_ENV}={shlex.quote(url)} {program} serve"


def _under(out_dir: str | None, folder: Path) -> bool:
    return out_dir is not None and Path(out_dir).is_relative_to(folder.resolve())


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


if __name__ == "__main__":
    sys.exit(main())

"""`fieldcheck view`: the viewer of some runs (issue 28), served, or with ``--bundle DIR`` written
as a static site (docs/runs.md "A portable bundle")."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer

from fieldcheck._cli._common import OutputFailed, ProgressBar
from fieldcheck._cli.main import COMMANDS
from fieldcheck._cli.runs_cmd import _database_errors, _run, _store
from fieldcheck._cli.serve_cmd import check_port, serve_command, shown_address
from fieldcheck._util.console import SafeConsole
from fieldcheck._util.errors import UsageProblem
from fieldcheck.core import Interrupted

MAX_ITEMS = 1000
COMPARE_ALL = 20  # without --compare: the most runs of one system compared pair by pair


app = typer.Typer(add_completion=False)  # its one command, which fieldcheck._cli.main loads


@app.command("view", help=COMMANDS["view_cmd"])
@_database_errors
def view_command(
    runs: Annotated[
        list[str] | None,
        typer.Argument(metavar="RUN", help="Run ids or their unique prefixes.", show_default=False),
    ] = None,
    bundle: Annotated[
        Path | None,
        typer.Option(
            "--bundle",
            metavar="DIR",
            help="Write the runs' pages into DIR (new or empty) as a static site: open "
            "DIR/index.html in a browser, no server or network needed.",
        ),
    ] = None,
    max_items: Annotated[
        int,
        typer.Option(
            "--max-items",
            min=1,
            help="--bundle: the items of each run the bundle holds (its first ones: table rows, "
            "item pages, compared items); the page says when a run has more.",
        ),
    ] = MAX_ITEMS,
    compare: Annotated[
        str | None,
        typer.Option(
            "--compare",
            metavar="all|first|none",
            help="--bundle: the Compare pages of runs of one system: all (each pair, and all of "
            "them), first (each run with the first named) or none. Default: all up to "
            f"{COMPARE_ALL} runs of a system, first above (said when written).",
            show_default=False,
        ),
    ] = None,
    no_progress: Annotated[
        bool, typer.Option("--no-progress", help="--bundle: no progress bar.")
    ] = False,
    host: Annotated[str, typer.Option("--host", help="Without --bundle: as serve's.")] = (
        "127.0.0.1"
    ),
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="Without --bundle: as serve's.")
    ] = 8000,
) -> None:
    store = _store()
    found = list({r.id: r for r in (_run(store, ref) for ref in runs or ())}.values())
    if bundle is None:
        path = "/runs" if not found else f"/runs/{found[0].id}"
        if len({r.system for r in found}) > 1:
            raise UsageProblem(
                "runs of different systems cannot be compared: view them one at a time, or "
                "all of them with --bundle",
                "RUN",
            )
        if len(found) > 1:
            path = "/compare?runs=" + quote(",".join(r.id for r in found), safe=",")
        check_port(host, port)  # before the address is printed
        typer.echo(f"open http://{shown_address(host, port)}{path}")
        serve_command(host=host, port=port)
        return
    if compare not in (None, "all", "first", "none"):
        raise UsageProblem(f"must be all, first or none (got {compare!r})", "--compare")
    if not found:
        raise UsageProblem("give the runs to put in the bundle", "RUN")
    from fieldcheck.store import ItemsMissing  # not at the top: SQLAlchemy's ~0.4 s on --help

    for run in found:  # before anything is written
        try:
            store.items_file(run.id)
        except ItemsMissing as exc:
            raise UsageProblem(str(exc), "RUN") from None
    _write(bundle, found, max_items, compare, not no_progress)


def _write(dest: Path, runs: list[Any], max_items: int, compare: str | None, bar: bool) -> None:
    from fieldcheck.api import ApiSettings, create_app, write_bundle
    from fieldcheck.reports import FolderError, RunFolder

    try:
        folder = RunFolder.open(dest, command="view --bundle", system="view")
    except FolderError as exc:
        raise UsageProblem(str(exc), "--bundle") from None
    try:
        ctx = create_app(ApiSettings()).state.fieldcheck
        with ProgressBar(SafeConsole(stderr=True), bar) as progress:
            held = write_bundle(
                ctx,
                folder,
                runs,
                max_items=max_items,
                compare=compare or COMPARE_ALL,
                progress=progress.callback,
            )
        folder.finish()
    except KeyboardInterrupt:  # said as a scoring command's (``pipeline_errors``, around it)
        raise Interrupted(folder.interrupted_line()) from None
    except OSError as exc:
        if not folder.resumed:  # this process made the partial folder: nothing to resume
            shutil.rmtree(folder.path, ignore_errors=True)
        raise OutputFailed(f"cannot write the bundle: {exc}") from None
    counts = [(held["runs"], "run"), (held["items"], "item page"), (held["compares"], "comparison")]
    said = ", ".join(f"{n} {noun}{'' if n == 1 else 's'}" for n, noun in counts)
    if held["bounded_runs"]:
        typer.echo(
            f"compared each run with the first of its system: {held['bounded_runs']} runs would "
            f"make {held['bounded_pages']} pages; --compare all to make them all",
            err=True,
        )
    typer.echo(f"wrote {dest / 'index.html'}: {said}")

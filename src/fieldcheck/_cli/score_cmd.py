"""``fieldcheck score SYSTEM ROLE=FILE...``: any registered system scored through ``core.score``,
the command-line twin of ``POST /api/score/{system}``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from typer.core import TyperCommand

from fieldcheck import core
from fieldcheck._cli._common import (
    JsonOpt,
    ProgressBar,
    events,
    finish,
    out_option,
    parse_fail_under,
    pipeline_errors,
    show_input_problems,
)
from fieldcheck._cli._record import NoStoreOpt, grid, say, stored_line
from fieldcheck._cli.main import COMMANDS
from fieldcheck._util.console import SafeConsole
from fieldcheck._util.errors import UsageProblem
from fieldcheck._util.term import safe_text


def systems_help() -> str:
    """Each registered system with its input roles (read when ``--help`` is asked)."""
    lines = ["Systems and their inputs (ROLE=FILE):"]
    for name in core.names():
        try:
            system = core.get(name)
        except KeyError as exc:  # a package declares a system that cannot be loaded
            lines.append(f"{name}: {exc.args[0]}")
            continue
        roles = "; ".join(f"{role}: {what}" for role, what in getattr(system, "inputs", ()))
        lines.append(f"{name} ({system.title}): {roles}")
    return "\n\n".join(lines)


class ScoreCommand(TyperCommand):
    """The command whose help lists the systems registered when it is asked for."""

    @property  # type: ignore[override]
    def epilog(self) -> str:
        return systems_help()

    @epilog.setter
    def epilog(self, value: Any) -> None:
        pass


def _settings(text: str | None) -> dict[str, Any]:
    """``--settings``: a JSON object, given inline or as ``@FILE``."""
    if text is None or not text.startswith("@"):
        return core.read_settings(text)
    try:
        return core.read_settings(Path(text[1:]).read_bytes())
    except OSError as exc:
        raise UsageProblem(f"cannot read {text[1:]}: {exc.strerror or exc}") from None


def _inputs(system: core.System, given: list[str]) -> list[tuple[str, Path]]:
    """``ROLE=FILE`` words as (role, path), checked against the system's roles."""
    inputs = []
    for word in given:
        role, sep, file = word.partition("=")
        if not sep or not role or not file:
            raise UsageProblem(f"expected ROLE=FILE (got {word!r})", "ROLE=FILE")
        inputs.append((role, file))
    core.check_roles(system, [role for role, _ in inputs])  # a wrong role before a wrong file
    for role, file in inputs:
        if not Path(file).is_file():
            raise UsageProblem(f"{file}: no such file", role)
    return [(role, Path(file)) for role, file in inputs]


def _table(system: core.System, label: str, scored: Any) -> Table:
    """The headline metrics with their 95% intervals, a column per model."""
    from fieldcheck.runs import format_cell

    columns = system.columns(label, scored.metrics, scored.intervals)
    models = [safe_text(model) or system.name for model, _, _ in columns]
    table = grid(f"{system.title} (95% interval)", "metric", *models)
    for name in system.headline:
        cells = [
            {**(system.interval(i, name) or {}), "estimate": system.estimate(m, name)}
            for _, m, i in columns
        ]
        table.add_row(name, *(format_cell(cell) for cell in cells))
    return table


app = typer.Typer(add_completion=False)  # its one command, which fieldcheck._cli.main loads


@app.command("score", cls=ScoreCommand, help=COMMANDS["score_cmd"])
def score_command(
    system: Annotated[
        str, typer.Argument(metavar="SYSTEM", help="The system: json, slots, numeric, ...")
    ],
    files: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="ROLE=FILE...",
            help="The system's input files by role (batch=data.jsonl; gold=g.jsonl "
            "pred:gpt=p.jsonl; data=convfinqa.json predictions=p.jsonl).",
        ),
    ] = None,
    settings: Annotated[
        str | None,
        typer.Option(
            "--settings",
            metavar="JSON|@FILE",
            help="The system's stored settings as a JSON object (what 'runs show' prints, "
            "e.g. '{\"bootstrap\": 0}'), inline or @FILE; settings left out take the "
            "configuration saved in the store, then their defaults.",
        ),
    ] = None,
    out: Annotated[Path | None, out_option("Directory for the system's output files.")] = None,
    no_store: NoStoreOpt = False,
    as_json: JsonOpt = False,
    fail_under: Annotated[
        str | None,
        typer.Option(
            "--fail-under",
            metavar="METRIC=VALUE[,...]",
            help="Exit 4 when a headline metric of the system is below its floor (every model "
            "must meet every floor).",
        ),
    ] = None,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar.")] = False,
) -> None:
    console, errors = SafeConsole(stderr=as_json), SafeConsole(stderr=True)
    with pipeline_errors():
        try:
            found = core.get(system)
        except KeyError as exc:
            raise UsageProblem(exc.args[0], "SYSTEM") from None
        floors = parse_fail_under(
            fail_under,
            getattr(found, "gated", found.headline),
            lower_is_better=getattr(found, "lower_is_better", ()),
        )
        given = _inputs(found, files or [])
        with pipeline_errors("--settings"):
            stored = _settings(settings)
        label, models = core.model_label(found, given)
        bar = ProgressBar(errors, not no_progress)
        with bar.bar:
            try:
                outcome = core.score(
                    found.name,
                    given,
                    stored,
                    out=out,
                    command=f"score {found.name}",
                    label=label,
                    models=models,
                    store=not no_store,
                    events=events(errors, bar),
                )
            except UsageProblem as exc:  # a setting by its key in --settings, an input by its role
                message, name, setting = core.renamed(found, stored, exc, own=("--out",))
                hint = name + (" (in --settings)" if setting else "")
                raise UsageProblem(message, hint) from None
    scored = outcome.scored
    show_input_problems(errors, scored)
    console.print(_table(found, label, scored))
    for path in scored.files.values():
        say(console, safe_text(path))
    stored_line(console, core.stored_line(outcome.run_id))
    raise typer.Exit(finish(scored, floors, as_json, scored.failed))

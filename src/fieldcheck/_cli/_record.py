"""Recording a scored run in the store (issue 11, docs/runs.md): the ``--no-store`` option and
the recorder every scoring command opens. The files on disk come first: a store that cannot be
opened or written is one warning on stderr, and the command goes on with the same exit status."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from fieldcheck._util.term import safe_text
from fieldcheck.reports import OutputFolder
from fieldcheck.store import DATABASE_ENV

if TYPE_CHECKING:
    from fieldcheck.store import RunRecorder

NO_STORE_HELP = (
    f"Do not record this run in the store (${DATABASE_ENV} or the default SQLite file), and do "
    "not read the configuration saved there; a model run then neither caches replies nor "
    "resumes. The output files are the same either way."
)
NoStoreOpt = Annotated[bool, typer.Option("--no-store", metavar="", help=NO_STORE_HELP)]


# The store URLs this process already warned about (one warning per command, not one per use).
_FAILED: set[str] = set()


def store_failed() -> bool:
    """Whether this command already found the store unusable (and said so)."""
    from fieldcheck.store import database_url

    return database_url() in _FAILED


def forget_store_warnings() -> None:
    """A command has ended: the next one (in this process, as tests run them) warns again."""
    _FAILED.clear()


def store_unavailable(errors: Console, exc: BaseException) -> None:
    """The one warning of a command whose store cannot be opened: neither the saved
    configuration nor the run's record, and ``open_recorder`` then stays silent."""
    from fieldcheck.store import database_url

    _FAILED.add(database_url())
    errors.print(
        safe_text(
            f"warning: the store cannot be used ({_reason(exc)}): the saved configuration is "
            "not read and the run is not stored; its files are complete"
        ),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def store_warning(errors: Console, text: str) -> None:
    """A store warning of the pipeline, on ``errors``: the store is not used again by this
    command (``store_failed``), so the warning is said once."""
    from fieldcheck.store import database_url

    _FAILED.add(database_url())
    errors.print(safe_text(text), markup=False, highlight=False, soft_wrap=True)


def runner_store_unavailable(exc: BaseException) -> None:
    """The one warning of a model run whose store cannot be opened or written: it runs
    without one, and ``open_recorder`` then stays silent."""
    _give_up_store(
        f"the store cannot be used ({_reason(exc)}): replies are not cached or read from the "
        "cache, the run cannot be resumed and is not stored"
    )


def runner_store_failed(exc: BaseException) -> None:
    """The one warning of a model run whose store stopped working mid-run (a full disk, a
    file made read-only): it goes on without it."""
    _give_up_store(
        f"the store stopped working ({_reason(exc)}): the run goes on without it; its replies "
        "from now on are not cached, it cannot be resumed and is not stored"
    )


def _give_up_store(what: str) -> None:
    """``warning: WHAT; its files are complete`` on stderr, and the store is not used again
    by this command (``store_failed``)."""
    from fieldcheck.store import database_url

    _FAILED.add(database_url())
    typer.echo(safe_text(f"warning: {what}; its files are complete"), err=True)


def _reason(exc: BaseException) -> str:
    """``Type: first line`` of an error; of a database error, the database's own error (not
    SQLAlchemy's wrapping, which may start with a note on autoflush)."""
    inner = getattr(exc, "orig", None)
    if isinstance(inner, BaseException):
        exc = inner
    first = (str(exc).splitlines() or [""])[0][:200]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def open_recorder(
    no_store: bool,
    errors: Console,
    *,
    system: str,
    inputs: Sequence[tuple[str, str | Path]],
    settings: Mapping[str, Any],
    out: str | Path,
    model: str = "",
    task: str = "score",
    run_id: str | None = None,
    calls: Mapping[str, Any] | None = None,
    parts: Sequence[str] = (),
) -> RunRecorder | None:
    """The run's recorder, or None with ``--no-store`` or when the store cannot be opened
    (then one warning). The signature is given to ``finish``, once known. After a model run:
    ``run_id`` the runner's run, scored into, ``calls`` its items' calls (``item_calls``),
    ``parts`` the runs of its other models (``RunRecorder.open``)."""
    if no_store:
        return None
    from fieldcheck.store import database_url

    if database_url() in _FAILED:
        return None

    def warn(exc: BaseException) -> None:
        errors.print(
            safe_text(f"warning: the run is not stored ({_reason(exc)}); its files are complete"),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )

    try:
        from fieldcheck.store import RunRecorder

        return RunRecorder.open(
            None,
            system=system,
            inputs=inputs,
            settings=settings,
            signature="",
            out=out,
            model=model,
            task=task,
            on_error=warn,
            run_id=run_id,
            calls=calls,
            parts=parts,
        )
    except Exception as exc:  # a bad URL, an unreachable or read-only database
        warn(exc)
        return None


@contextmanager
def recording(recorder: RunRecorder | None) -> Iterator[RunRecorder | None]:
    """Around the scoring: an exception or Ctrl-C marks the run ``interrupted`` in the store
    (its items so far stay) before the command reports it."""
    if recorder is None:
        yield None
        return
    with recorder:
        yield recorder


def finish_recorder(
    recorder: RunRecorder | None,
    *,
    metrics: Mapping[str, Any] | None,
    intervals: Mapping[str, Any] | None,
    signature: Any,
    folder: OutputFolder | Path | None = None,
) -> str | None:
    """Finish the run in the store; the line saying where it is (None when not stored).
    ``folder``: the run's folder (or a model's subfolder), given the run's id and signature for
    its run.json and, when whole, finished first (``finish``), so a run whose folder cannot be
    put in place is stored ``failed``, never ``finished``."""
    if recorder is None:
        return None
    if isinstance(folder, OutputFolder):
        from fieldcheck._cli._common import finish  # _common imports this module

        folder.note(run_id=recorder.id)
        if folder.prefix:
            folder.note(signature=signature)
        else:
            finish(folder, signature=signature)
    run = recorder.finish(metrics=metrics, intervals=intervals, signature=signature)
    if recorder.broken:
        return None
    return f"stored as run {run.id}: fieldcheck runs show {run.id}"


def stored_line(console: Console, line: str | None) -> None:
    """Print ``finish_recorder``'s line (not in ``--json`` mode: stdout is the JSON)."""
    if line is not None:
        console.print(line, markup=False, highlight=False, soft_wrap=True)

"""The one pipeline (ARCHITECTURE.md "One evaluation, one path"): read the inputs, score, write
the run folder, record in the store. Every command and API route that scores calls ``score``."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fieldcheck._util.errors import CannotWrite, UsageProblem, exception_line
from fieldcheck._util.errors import Interrupted as Interrupted  # core's name for it
from fieldcheck.core._figures import list_figures
from fieldcheck.core._registry import get
from fieldcheck.reports import (
    RUNS_DIR,
    FolderError,
    RunFolder,
    Scored,
    check_destination,
    interrupts_deferred,
)

if TYPE_CHECKING:
    from fieldcheck._util.executor import Executor
    from fieldcheck.store import RunRecorder, Store

Inputs = Sequence[tuple[str, Path]]
"""A run's input files by role (``batch``, ``gold``, ``pred:NAME``...)."""


def _quiet(_: str) -> None:
    return None


@dataclass
class Events:
    """How the pipeline talks to its caller: ``warn`` and ``note`` one line each, ``progress``
    (``core.Progress``), ``finished`` a folder put in place."""

    warn: Callable[[str], None] = _quiet
    note: Callable[[str], None] = _quiet
    progress: Callable[[str, int, int], None] | None = None
    finished: Callable[[Path], None] = field(default=lambda _: None)


@dataclass
class Into:
    """A model run the scores go into (one run per evaluation): the runner's run ``run_id``,
    its items' calls by key, and the runs of its other models (``parts``)."""

    run_id: str
    calls: Mapping[str, Any] | None = None
    parts: Sequence[str] = ()


@dataclass
class Outcome:
    """A scored run: what the system gave (``scored``; its files already at their place in
    ``destination``), and the store's run id (None when not stored)."""

    system: str
    scored: Scored
    destination: Path
    run_id: str | None

    @property
    def files(self) -> dict[str, Path]:
        return self.scored.files


def open_folder(
    out: Path | RunFolder | None,
    *,
    command: str,
    inputs: Inputs,
    label: str,
    models: Sequence[str],
    events: Events,
    system: str,
    settings: Mapping[str, Any] | None = None,
) -> RunFolder:
    """The run's folder before any work: ``out`` when it is one (a model run's), else opened
    (``UsageProblem`` for an unusable ``out``; ``None``: a new folder under ``fieldcheck-runs/``
    named by ``label``, said by ``events.note``)."""
    if isinstance(out, RunFolder):
        return out
    try:
        folder = RunFolder.open(
            out,
            command=command,
            inputs=inputs,
            label=label,
            models=models,
            system=system,
            settings=settings,
        )
    except FolderError as exc:
        raise UsageProblem(str(exc), "--out") from None
    if out is None:
        events.note(f"no --out: the outputs go to {folder.destination}")
    return folder


def finish_run(
    folder: RunFolder,
    recorder: RunRecorder | None,
    scored: Scored,
    events: Events,
) -> str | None:
    """Put the folder in place, then finish the stored run (so a folder that cannot be placed
    leaves it ``failed``; Ctrl-C waits for both); the run id, or None when not stored."""
    with interrupts_deferred():
        folder.note(signature=scored.signature)
        if not folder.prefix:
            finish_folder(folder, events)
        if recorder is None:
            return None
        run = recorder.finish(
            metrics=scored.metrics,
            intervals=scored.intervals,
            signature=scored.signature,
            figures=list_figures(
                recorder.run.system, recorder.run.model, scored.metrics, scored.intervals
            ),
        )
        return None if recorder.broken else str(run.id)


def finish_folder(folder: RunFolder, events: Events | None = None) -> None:
    """Put a whole run folder in place (run.json says complete); ``CannotWrite`` when it cannot
    be (a full disk, the destination filled meanwhile)."""
    with writing(folder):
        folder.finish()
    if events is not None and not folder.prefix:
        events.finished(folder.destination)


NO_CACHE_NOTE = ", which calls every model again: --no-cache kept no reply"
"""What continuing a model run interrupted under ``--no-cache`` costs (``writing``'s note)."""
NO_STORE_NOTE = ", which calls every model again: without the store no reply was kept"
"""What continuing a model run interrupted without the store (``--no-store``) costs."""


@contextmanager
def writing(folder: RunFolder, note: str = "") -> Iterator[None]:
    """Around the work that fills ``folder``: Ctrl-C becomes ``Interrupted`` (``note``: what
    going on costs), an output that cannot be written ``CannotWrite`` naming it; a usage problem
    (exit 2, nothing written) removes the folder if this process made it and wrote nothing else
    in it but its run.json."""
    try:
        yield
    except UsageProblem:
        folder.discard()
        raise
    except KeyboardInterrupt:
        from fieldcheck._util.executor import exit_without_collecting

        exit_without_collecting()
        raise Interrupted(folder.interrupted_line(note)) from None
    except OSError as exc:
        shown = exc.filename or folder.destination
        raise CannotWrite(f"--out: cannot write {shown}: {exc.strerror or exc}") from None


def score(
    system: str,
    inputs: Inputs,
    settings: Mapping[str, Any],
    *,
    out: Path | RunFolder | None,
    command: str,
    label: str = "",
    model: str | None = None,
    models: Sequence[str] = (),
    store: bool | Store = True,
    into: Into | None = None,
    events: Events | None = None,
    extras: Mapping[str, Any] | None = None,
    executor: Executor | None = None,
) -> Outcome:
    """Score ``inputs`` with ``system`` under ``settings`` into ``out`` (a path, None: a new
    folder, or a model run's) and ``store`` (a ``Store``, True the default, False none); raises
    ``UsageProblem`` before anything is written, ``Interrupted``, ``CannotWrite``."""
    found = get(system)
    database = None if isinstance(store, bool) else store
    events = events or Events()
    beside = out.destination if isinstance(out, RunFolder) else out or RUNS_DIR / "new"
    try:  # before the long read of the inputs: an unusable --out is said at once
        if out is not None and not isinstance(out, RunFolder):
            check_destination(out)
    except FolderError as exc:
        raise UsageProblem(str(exc), "--out") from None
    given = {"store": store, "warn": events.warn, "note": events.note, **(extras or {})}
    with found.prepare(
        inputs, settings, beside=Path(beside), progress=events.progress, extras=given
    ) as read:
        settings = getattr(read, "settings", settings)  # with the saved configuration merged
        store = store and getattr(read, "store", True)  # False: the store could not be read
        folder = open_folder(
            out,
            command=command,
            inputs=inputs,
            label=label,
            models=models,
            events=events,
            system=found.name,
            settings=dict(settings),  # a resume with other settings would mix two runs' files
        )
        folder.note(settings=dict(settings))  # what ``runs import`` re-scores with
        recorder = None
        if store:  # None when the store cannot be opened (said once by ``warn``)

            def failed(exc: BaseException) -> None:
                line = exception_line(exc)
                events.warn(f"warning: the run is not stored ({line}); its files are complete")

            try:
                from fieldcheck.store import RunRecorder

                recorder = RunRecorder.open(
                    database,
                    system=found.name,
                    inputs=inputs,
                    settings=settings,
                    signature="",
                    out=folder.destination,
                    model=label if model is None else model,
                    task="score" if into is None else "run",
                    on_error=failed,
                    run_id=into.run_id if into else None,
                    calls=into.calls if into else None,
                    parts=into.parts if into else (),
                    # the runs of the unfinished folder this scoring continues
                    resume=folder.earlier_runs if into is None else (),
                    placed=folder.placed,  # a model run's replies, written in the partial folder
                    # run.json's, taken just now (a model run's folder hashed its replies earlier)
                    digests=None if isinstance(out, RunFolder) else folder.digests,
                )
            except Exception as exc:  # a bad URL, an unreachable or read-only database
                failed(exc)
        # an exception or Ctrl-C marks the stored run interrupted (its items so far stay)
        with writing(folder), recorder if recorder is not None else nullcontext():
            if recorder is not None:
                folder.note(run_id=recorder.id)  # what a resume of the folder finishes
            scored = found.score(
                read,
                folder,
                settings,
                recorder=recorder,
                progress=events.progress,
                executor=executor,
            )
            run_id = finish_run(folder, recorder, scored, events)
    if not folder.prefix:
        scored.files = {k: folder.placed(p) for k, p in scored.files.items()}
    return Outcome(found.name, scored, folder.destination, run_id)


def stored_line(run_id: str | None) -> str | None:
    """The line saying where a stored run is."""
    return None if run_id is None else f"stored as run {run_id}: fieldcheck runs show {run_id}"

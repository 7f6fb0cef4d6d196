"""``record_folder``: store a finished output folder of any system as a scored run (``runs
import``); its system (``core.Imports``) reads it back, this module stores it."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from fieldcheck import core
from fieldcheck._util.errors import InputError, UsageProblem
from fieldcheck._util.jsonio import dumps, loads
from fieldcheck._util.paths import unique_filenames
from fieldcheck.store import AlreadyStored, RunInfo, RunRecorder, Store, sha256_file

_SUMMARIES = ("summary.json", "metrics.json", "statistics.json")


def _run_folders(folder: Path) -> str:
    """The run folders directly inside ``folder`` (a several-model run's), listed; '' if none."""
    held = sorted(folder.iterdir()) if folder.is_dir() else []
    return ", ".join(str(p) for p in held if any((p / s).is_file() for s in _SUMMARIES))


def system_of(folder: Path) -> str:
    """``json``, ``slots`` or ``numeric``: run.json's system, or, without one, told by the files
    of the folder; InputError for a folder that is not complete or not fieldcheck's."""
    info = _run_json(folder)
    if isinstance(info.get("system"), str):
        if info.get("complete") is not True:
            raise InputError(
                "the run is not complete (its run.json says complete: false); run its command "
                "again to finish it",
                file=folder,
            )
        name = str(info["system"])
        summary = getattr(core.find(name), "summary_file", None)
        if summary and not (folder / summary).is_file() and not _run_folders(folder):
            raise InputError(
                f"not a {name} run, as its run.json says (no {summary}); nothing was stored",
                file=folder,
            )
        return name
    if (folder / "summary.json").is_file() and (folder / "records.jsonl").is_file():
        return "json"
    if (folder / "metrics.json").is_file():
        return "slots"
    if (folder / "statistics.json").is_file() and (folder / "turns.csv").is_file():
        return "numeric"
    raise InputError(
        "not an output folder of fieldcheck (no summary.json + records.jsonl, metrics.json, or "
        "statistics.json + turns.csv)",
        file=folder,
    )


def _run_json(folder: Path) -> dict[str, Any]:
    """The folder's run.json object ({} when there is none)."""
    info = loads((folder / "run.json").read_bytes()) if (folder / "run.json").is_file() else {}
    return info if isinstance(info, dict) else {}


def record_folder(
    store: Store,
    out_dir: str | Path,
    *,
    inputs: Sequence[tuple[str, str | Path]] = (),
    model: str | None = None,
) -> RunInfo:
    """Store the finished output folder ``out_dir`` (scored from ``inputs``, docs/runs.md) as a
    scored run; InputError naming the run already stored from it, unless ``model`` differs."""
    folder = Path(out_dir)
    try:
        name = system_of(folder)
    except InputError as exc:  # a folder written in place (make demo's) has no run.json
        if not (listed := _run_folders(folder)):
            raise
        raise exc.replace(reason=f"{exc.reason}; import each run folder in it: {listed}") from None
    _check_given(folder, inputs)
    inputs = [*inputs, *_named_inputs(folder, {role for role, _ in inputs})]
    if not any((folder / s).is_file() for s in _SUMMARIES) and (listed := _run_folders(folder)):
        # json run's and a several-model run's folder: one run per model inside
        raise InputError(
            f"holds a run per model; import each model's folder: {listed}", file=folder
        )
    system = core.find(name)
    if not isinstance(system, core.Imports):
        raise InputError(f"{name} runs cannot be imported", file=folder)
    if system.row_file:
        _check_whole(folder / system.row_file)
    for run in _stored_runs(store, folder, name):
        if model in (None, run.model):
            raise _already(run, folder)
    model, inputs, stored, signature, write = system.import_folder(
        folder, inputs, model=model or _recorded_model(folder, system)
    )
    try:
        recorder = RunRecorder.open(
            store,
            system=name,
            inputs=inputs,
            settings=stored,
            signature=signature,
            out=folder,
            model=model,
            task="import",
            key=_identity(folder, system, model),
            origin=next((r for r in _run_json(folder).get("runs") or () if _id(r)), None),
        )
    except AlreadyStored as exc:  # stored, or being stored by another import at this moment
        raise _already(exc.run, folder) from None
    try:
        with recorder:
            metrics, intervals = write(recorder)
            figures = core.list_figures(name, model, metrics, intervals)
            return recorder.finish(metrics=metrics, intervals=intervals, figures=figures)
    except BaseException:  # nothing stored: not a failed run of no items (a tester's finding)
        with contextlib.suppress(Exception):
            store.delete_run(recorder.id)
        raise


def _check_whole(rows: Path) -> None:
    """InputError naming a row file (records.jsonl, turns.csv) whose last line has no end: cut
    mid-line, half written (a tester's finding: its cut row was dropped, the rest stored)."""
    if not rows.is_file() or not rows.stat().st_size:
        return
    with rows.open("rb") as handle:
        handle.seek(-1, 2)
        if handle.read(1) == b"\n":
            return
        handle.seek(0)
        lines = sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b""))
    raise InputError(
        "cut mid-line (its last line has no end: a half-written file?); nothing was stored",
        file=rows,
        line=lines + 1,
    )


def _already(run: RunInfo, folder: Path) -> InputError:
    return InputError(
        f"already stored as run {run.id} (fieldcheck runs show {run.id}); give "
        "--model to store it under another name, or delete that run first",
        file=folder,
    )


def _stored_runs(store: Store, folder: Path, system: str) -> Iterator[RunInfo]:
    """The finished runs of ``system`` the store holds from ``folder``: stored from its path,
    or named by its run.json's runs (a copy of a folder stored before)."""
    yield from store.runs_of_folder(folder, system=system)
    for run_id in _run_json(folder).get("runs") or ():
        run = store.get_run(run_id) if _id(run_id) else None
        if run is not None and run.system == system and run.status == "finished":
            yield run


def _id(value: Any) -> bool:
    """Whether ``value`` (of a folder's run.json) can be a run's id."""
    return isinstance(value, str) and 0 < len(value) <= 32


def _identity(folder: Path, system: core.Imports, model: str) -> str:
    """What an imported run is (docs/decisions.md): its system, model and summary file's
    sha256 (its metrics and signature), whatever the folder's path or run.json."""
    summary = sha256_file(folder / system.summary_file)
    name = getattr(system, "name", "")
    return hashlib.sha256(dumps(["import", name, model, summary]).encode()).hexdigest()


def _recorded_model(folder: Path, system: core.System) -> str | None:
    """The model a folder's command stored its run under, by its run.json (a model's subfolder:
    its parent's): its models, else ``core.model_label`` of its inputs; None without one."""
    info = _run_json(folder)
    if not info:
        models = [str(m) for m in _run_json(folder.parent).get("models") or ()]
        return {sub: model for model, sub in unique_filenames(models).items()}.get(folder.name)
    if models := [str(m) for m in info.get("models") or ()]:
        return ", ".join(models)
    given = [e for e in info.get("inputs") or () if isinstance(e, dict) and e.get("role")]
    inputs = [(str(e["role"]), Path(str(e.get("path") or ""))) for e in given]
    return core.model_label(system, inputs)[0] if inputs else None


def _check_given(folder: Path, inputs: Sequence[tuple[str, str | Path]]) -> None:
    """``UsageProblem`` (``--input``) for a given input whose file is not the one run.json
    names under its role (another sha256): its items would contradict the folder's metrics;
    or whose role run.json does not name (the run scored no such input)."""
    named = {
        str(e["role"]): e.get("sha256")
        for e in _run_json(folder).get("inputs") or []
        if isinstance(e, dict) and e.get("role")
    }
    for role, path in inputs:
        if named and role not in named:  # it was ignored: the run scored no such input
            raise UsageProblem(
                f"{role}={path}: {folder / 'run.json'} names no input {role} (it names "
                f"{', '.join(sorted(named))}); nothing was stored",
                "--input",
            )
        if isinstance(named.get(role), str) and sha256_file(path) != named[role]:
            raise UsageProblem(
                f"{role}={path}: its sha256 differs from the run's {role} in {folder / 'run.json'}"
                " (not the file the run was scored from); nothing was stored",
                "--input",
            )


def _named_inputs(folder: Path, given: set[str]) -> Iterator[tuple[str, Path]]:
    """The inputs run.json names (role, path) that were not given, where the path still holds
    the file it scored (same sha256): a slots folder's sessions are read back from them."""
    for entry in _run_json(folder).get("inputs") or []:
        if not isinstance(entry, dict) or not entry.get("role") or entry["role"] in given:
            continue
        role, path = str(entry["role"]), Path(str(entry.get("path") or ""))
        if path.is_file() and sha256_file(path) == entry.get("sha256"):
            yield role, path

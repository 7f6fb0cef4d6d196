"""A run's folder (ARCHITECTURE.md "A run, its folder, its items"; docs/formats.md "Output
folders"): written beside its destination, renamed into place when complete, never over a file."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import socket
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from fieldcheck._util.digest import sha256_file
from fieldcheck._util.errors import place, shown_text
from fieldcheck._util.executor import pid_alive
from fieldcheck._util.jsonio import dumps
from fieldcheck._util.paths import safe_filename
from fieldcheck._version import __version__
from fieldcheck.store import FAILED, ItemColumn, Pairing, item_value

if TYPE_CHECKING:
    from fieldcheck.store import RunRecorder

PARTIAL = ".fieldcheck-partial"
RUN_JSON = "run.json"
OLD_MANIFEST = ".fieldcheck-manifest.jsonl"  # an older fieldcheck's folder, written in place
RUNS_DIR = Path("fieldcheck-runs")
_SHOWN = 5

Input = tuple[str, str | os.PathLike[str]] | str | os.PathLike[str]


class FolderError(Exception):
    """``--out`` cannot be used (it holds files, is a file or a link, or is in the way of
    another run's unfinished folder): a usage error, raised before anything is written."""


def _described(inputs: Iterable[Input]) -> list[dict[str, Any]]:
    """``[{role?, path, sha256}]``: a given input is ``(role, path)`` or a path; sha256 None for
    what is no regular file (a pipe, read once) or is gone."""
    found = []
    for given in inputs:
        role, path = given if isinstance(given, tuple) else (None, given)
        entry: dict[str, Any] = {"role": role} if role else {}
        entry |= {"path": str(path), "sha256": None}
        with contextlib.suppress(OSError):
            entry["sha256"] = sha256_file(Path(path)) if Path(path).is_file() else None
        found.append(entry)
    return found


def default_destination(command: str, label: str) -> Path:
    """``fieldcheck-runs/<command>-<label>-<UTC time>-<id>``: a new folder for a run without
    ``--out`` (``json-batch-data-20261128T150102Z-3f2a``)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    words = [*command.split(), safe_filename(label, max_len=60), stamp, secrets.token_hex(2)]
    return RUNS_DIR / "-".join(w for w in words if w)


def _some(names: Sequence[str]) -> str:
    """Every name when there are few, else the first ones and a count."""
    names = sorted(names)
    if len(names) <= 2 * _SHOWN:
        return ", ".join(names)
    return ", ".join(names[:_SHOWN]) + f" and {len(names) - _SHOWN} more"


def check_destination(dest: Path) -> None:
    """Refuse (``FolderError``) a destination fieldcheck may not fill: a link, a file, a folder
    holding anything, the current folder; nothing is made or changed."""
    if os.path.islink(dest):
        raise FolderError(f"{dest} is a link; give a new or empty folder (links are not followed)")
    if os.path.lexists(dest) and not dest.is_dir():
        raise FolderError(f"{dest} is a file, not a directory; give a new or empty folder")
    if not dest.is_dir():
        return
    try:
        with os.scandir(dest) as entries:
            held = sorted(e.name for e in entries)
    except OSError as exc:
        raise FolderError(f"cannot read {dest}: {exc.strerror or exc}") from None
    old = _read_info(dest / OLD_MANIFEST, first_line=True) if OLD_MANIFEST in held else None
    if old is not None and old.get("complete") is False:
        raise FolderError(
            f"{dest} is an unfinished run of `fieldcheck {old.get('command')}` left by an older "
            f"fieldcheck (its {OLD_MANIFEST}), which this version cannot continue in place: give "
            "the same command a new --out (a model run resumes there the run the older version "
            "stored, its finished items not called again)"
        )
    if held:
        hint = ""
        if str(dest).endswith(PARTIAL):
            hint = f" (to continue this unfinished run, give --out {str(dest)[: -len(PARTIAL)]})"
        raise FolderError(f"{dest} holds files ({_some(held)}); give a new or empty folder{hint}")
    if os.path.abspath(dest) == os.getcwd():  # renamed over, the shell would be in a gone folder
        raise FolderError(f"{dest} is the current folder; give a new or empty folder by its name")


def _files(folder: Path) -> list[str]:
    """The files under ``folder``, by their paths inside it (none when it cannot be read)."""
    return [
        (Path(root) / name).relative_to(folder).as_posix()
        for root, _, names in os.walk(folder)
        for name in names
    ]


def _other_run(earlier: Mapping[str, Any], info: Mapping[str, Any]) -> str | None:
    """How an unfinished run's run.json differs from this run's (None: this run continues it):
    other inputs, models or settings would leave the first run's files among the second's."""
    if any(earlier.get(k) != info.get(k) for k in ("command", "inputs")):
        return "on other inputs"
    if earlier.get("models") != info.get("models"):
        return f"of other models (it had {', '.join(earlier.get('models') or ()) or 'none'})"
    before, now = earlier.get("settings"), info.get("settings")
    if isinstance(before, dict) and isinstance(now, dict) and before != now:
        keys = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
        had = ", ".join(f"{k}={before.get(k)!r}" for k in keys)
        return f"with other settings (it had {had})"
    return None


def _read_info(path: Path, *, first_line: bool = False) -> dict[str, Any] | None:
    try:
        text = path.read_bytes()
        value = orjson.loads(text.split(b"\n", 1)[0] if first_line else text)
    except (OSError, orjson.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


@dataclass
class _State:
    """What a folder and its subfolder views share."""

    temp: Path
    dest: Path
    info: dict[str, Any] | None  # run.json; None: a plain folder (``RunFolder.of`` a path)
    done: bool = False  # renamed into place (a plain folder is in place)
    written: list[str] = field(default_factory=list)
    expected: dict[str, None] = field(default_factory=dict)
    resumed: bool = False
    earlier_runs: list[str] = field(default_factory=list)  # the runs the continued run.json names
    made: list[Path] = field(default_factory=list)  # the partial folder's parents this process made


@dataclass(frozen=True)
class Problems:
    """A run's input problems, which every scoring command shows the same way (the first few on
    stderr): ``errors`` (``InputError`` or its line), ``listed_in`` the key in ``Scored.files``
    of the file listing each, ``total`` their count when ``errors`` holds only the first ones."""

    errors: Sequence[Any]
    listed_in: str
    total: int | None = None


@dataclass
class Scored:
    """What a system's scoring of one run gives the pipeline (ARCHITECTURE.md "One evaluation, one
    path"); ``failed``: some input not scored (exit 3), ``gate``: ``--fail-under`` values by
    model; ``problems``: the input problems the command shows."""

    result: Any
    files: dict[str, Path]
    metrics: dict[str, Any]
    intervals: dict[str, Any]
    signature: Any
    failed: bool
    gate: dict[str, dict[str, Any]]
    summary: Any = None
    problems: Problems | None = None


Write = Callable[["RunRecorder"], tuple[Any, Any]]
"""Stores a run's items with the recorder it is given and returns its (metrics, intervals)."""


class Views:
    """The defaults of ``core.System``'s view methods, which a system overrides where its stored
    metrics differ: one column per run, metrics at the top level, items paired on their key."""

    export_columns: tuple[tuple[str, str, str], ...] = ()
    latency_key = "latency_s"
    item_tag: str | None = None
    pairing = Pairing()
    dataset_inputs: tuple[str, ...] = ()
    model_settings: tuple[str, ...] = ("model", "models")
    problems_file: str | None = None
    """The run folder's file listing the input lines it refused (``InputError.to_dict`` rows),
    which the run page shows; None where its items show them (json's lines not scored)."""

    def columns(
        self, model: str, metrics: Mapping[str, Any], intervals: Mapping[str, Any]
    ) -> list[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
        return [(model, metrics, intervals)]

    def estimate(self, metrics: Mapping[str, Any], name: str) -> Any:
        return metrics.get(name)

    def interval(self, intervals: Mapping[str, Any], name: str) -> Any:
        return intervals.get(name)

    def latency(self, metrics: Mapping[str, Any]) -> Mapping[str, Any] | None:
        found = metrics.get(self.latency_key)
        return found if isinstance(found, Mapping) else None

    def paired(self, metrics: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        return []

    @property
    def item_table(self) -> tuple[ItemColumn, ...]:
        return (FAILED, *(ItemColumn(n, n, item_value(p, t)) for n, p, t in self.export_columns))

    def export_row(self, result: Mapping[str, Any]) -> list[Any]:
        return [result.get(name) for name, _, _ in self.export_columns]

    def related_keys(self, item: Mapping[str, Any]) -> Sequence[str]:
        return ()

    def item_story(
        self,
        item: Mapping[str, Any],
        settings: Mapping[str, Any],
        related: Mapping[str, Mapping[str, Any]],
    ) -> list[dict[str, Any]]:
        """A system's item told plainly: the scalar values of its result, one row each."""
        result = item.get("result") or {}
        rows = [[k, v] for k, v in result.items() if k != "call" and not isinstance(v, dict | list)]
        return [section("values", "Values", values_block(rows))]


def section(key: str, title: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    """One section of a story (``core.System.item_story``): its id, title and blocks."""
    return {"id": key, "title": title, "blocks": list(blocks)}


def values_block(rows: Sequence[Sequence[Any]], tones: Sequence[str | None] = ()) -> dict[str, Any]:
    """A story's list of (label, value) rows (``core.System.item_story``); ``tones`` colour
    them: ``pass``, ``fail`` or None, one per row (None for those not given)."""
    return {"kind": "values", "rows": [list(r) for r in rows], "tones": _tones(rows, tones)}


def table_block(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], tones: Sequence[str | None] = ()
) -> dict[str, Any]:
    """A story's table: ``columns`` headings, ``rows`` of JSON values, ``tones`` per row."""
    return {
        "kind": "table",
        "columns": list(columns),
        "rows": [list(r) for r in rows],
        "tones": _tones(rows, tones),
    }


def _tones(rows: Sequence[Any], tones: Sequence[str | None]) -> list[str | None]:
    """One tone per row: those given, the rest None."""
    return [*tones[: len(rows)], *[None] * (len(rows) - len(tones))]


def text_block(
    label: str, text: str, *, code: bool = False, folded: bool = False
) -> dict[str, Any]:
    """A story's text as written (a question, a prompt); ``code``: a machine's text (a raw reply)
    in a monospace font; ``folded``: shown on demand (a long prompt)."""
    return {"kind": "code" if code else "text", "label": label, "text": text, "folded": folded}


def tone(passed: bool | None) -> str | None:
    """A row's tone of a verdict: pass, fail, or None (not scored)."""
    return None if passed is None else ("pass" if passed else "fail")


def _writing(writer: dict[str, Any]) -> bool:
    """Whether the process that wrote an unfinished folder's run.json still runs: on this host
    and alive (not this process), or on another host (never taken over, as the store's runs)."""
    pid, host = writer.get("pid"), writer.get("host")
    if not isinstance(pid, int) or not host:
        return False
    if host != socket.gethostname():
        return True
    return pid != os.getpid() and pid_alive(pid)


class RunFolder:
    """A run's folder, or a view of one of its subfolders (``sub``). Files are written under
    ``path`` (the partial folder until ``finish`` renames it to ``destination``)."""

    def __init__(self, state: _State, prefix: str = "") -> None:
        self._state = state
        self.prefix = prefix

    @classmethod
    def open(
        cls,
        out: str | os.PathLike[str] | None,
        *,
        command: str,
        inputs: Iterable[Input] = (),
        label: str = "",
        models: Sequence[str] = (),
        system: str | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> RunFolder:
        """The folder of a run of ``command`` into ``out`` (new or empty; None: a new one under
        fieldcheck-runs/), continuing its partial folder of the same command, inputs, models and
        ``settings``; else ``FolderError`` with nothing touched."""
        dest = Path(out) if out is not None else default_destination(command, label)
        check_destination(dest)
        temp = Path(os.path.abspath(dest) + PARTIAL)
        if dest.name not in ("", ".", ".."):
            temp = dest.with_name(dest.name + PARTIAL)
        info: dict[str, Any] = {
            "system": system or command.split()[0],
            "command": command,
            "inputs": _described(inputs),
            "complete": False,
            "fieldcheck_version": __version__,
            "writer": {"pid": os.getpid(), "host": socket.gethostname()},
        }
        if models:
            info["models"] = list(models)
        if settings is not None:
            info["settings"] = orjson.loads(dumps(settings))
        state = _State(temp, dest, info)
        if os.path.lexists(temp):
            earlier = _read_info(temp / RUN_JSON) if not os.path.islink(temp) else None
            if earlier is None or earlier.get("complete") is not False or not temp.is_dir():
                raise FolderError(
                    f"{temp} is in the way and is not an unfinished fieldcheck run; move it or "
                    "give another folder"
                )
            if other := _other_run(earlier, info):
                raise FolderError(
                    f"{temp} is an unfinished run of `fieldcheck {earlier.get('command')}` "
                    f"{other}; run that command again to finish it, move it, or give another "
                    "folder"
                )
            writer = earlier.get("writer") or {}
            if _writing(writer):
                raise FolderError(
                    f"{temp} is being written by another fieldcheck process (pid "
                    f"{writer.get('pid')} on {writer.get('host')}); wait for it to finish, or "
                    "give another folder"
                )
            state.resumed = True
            state.earlier_runs = [r for r in earlier.get("runs") or () if isinstance(r, str)]
        else:
            try:
                if os.path.lexists(temp.parent) and not temp.parent.is_dir():
                    raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
                state.made = [p for p in temp.parents if not os.path.lexists(p)]
                temp.parent.mkdir(parents=True, exist_ok=True)
                temp.mkdir()
            except OSError as exc:
                raise FolderError(
                    f"cannot create directory {dest}: {exc.strerror or exc}"
                ) from None
        folder = cls(state)
        try:
            folder._write_info()
        except OSError as exc:
            raise FolderError(f"cannot write {temp / RUN_JSON}: {exc.strerror or exc}") from None
        # while the folder is open, a file in it is named where it will be (errors, warnings)
        place(temp, dest)
        weakref.finalize(state, place, temp, dest, -1)  # undone when the folder goes
        return folder

    @classmethod
    def of(cls, out: str | os.PathLike[str] | RunFolder) -> RunFolder:
        """``out`` itself, or a plain path as a folder written in place (no partial folder, no
        run.json: for library callers)."""
        if isinstance(out, RunFolder):
            return out
        root = Path(out)
        root.mkdir(parents=True, exist_ok=True)
        return cls(_State(root, root, None, done=True))

    def sub(self, name: str) -> RunFolder:
        """The subfolder ``name`` (created): a model's folder."""
        view = RunFolder(self._state, self._rel(name))
        view.path.mkdir(parents=True, exist_ok=True)
        return view

    @property
    def path(self) -> Path:
        """Where files are written now (the partial folder until ``finish``)."""
        root = self._state.dest if self._state.done else self._state.temp
        return root / self.prefix if self.prefix else root

    @property
    def destination(self) -> Path:
        """Where the folder will be when complete (what the store records)."""
        return self._state.dest / self.prefix if self.prefix else self._state.dest

    @property
    def resumed(self) -> bool:
        """Whether this run continues an unfinished run's folder."""
        return self._state.resumed

    @property
    def earlier_runs(self) -> list[str]:
        """The stored runs the unfinished folder this run continues was written for (its
        run.json's ``runs``): the run a resumed scoring finishes (one run per evaluation)."""
        return self._state.earlier_runs

    @property
    def digests(self) -> dict[str, str]:
        """The sha256 run.json gives each input file, by its path as given: the store records
        them as they are (a file hashed once per run)."""
        info = self._state.info or {}
        return {e["path"]: e["sha256"] for e in info.get("inputs", ()) if e.get("sha256")}

    def placed(self, path: Path) -> Path:
        """``path``, written under the partial folder, where it is once the folder is in place."""
        temp = self._state.temp
        for under in (temp, temp.resolve()):
            if Path(path).is_relative_to(under):
                return self._state.dest / Path(path).relative_to(under)
        return Path(path)

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def __str__(self) -> str:
        return str(self.path)

    def expect(self, *names: str) -> None:
        """Files this run means to write (named in the Ctrl-C line when they are not finished)."""
        for name in names:
            self._refuse_replacing(name)
            self._state.expected.setdefault(self._rel(name), None)

    def _refuse_replacing(self, name: str) -> None:
        """A plain folder (a library caller's path) is written in place: a file of ``name``
        there that this folder did not write is refused (``FolderError``), never replaced."""
        state = self._state
        path = self.path / name
        if state.info is None and self._rel(name) not in state.written and os.path.lexists(path):
            raise FolderError(
                f"{path} exists; fieldcheck never replaces a file it did not write: "
                "give a new or empty folder"
            )

    @contextmanager
    def atomic(self, name: str) -> Iterator[Path]:
        """The path of the file ``name`` to write (its folders made), written when the block ends
        without an error (the whole folder is renamed into place, so no temporary name)."""
        self._refuse_replacing(name)
        path = self.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        yield path
        self._state.written.append(self._rel(name))

    @contextmanager
    def bulk(self, name: str) -> Iterator[Path]:
        """The subfolder ``name`` (created) for many files written with plain writes (numeric's
        ``traces/``)."""
        with self.atomic(name) as path:
            path.mkdir(exist_ok=True)
            yield path

    def write_text(self, name: str, text: str) -> Path:
        """``text`` as UTF-8 (a file name's byte that is not UTF-8 shown as U+FFFD)."""
        with self.atomic(name) as path:
            path.write_text(shown_text(text), encoding="utf-8")
        return path

    def write_summary(self, name: str, value: dict[str, Any]) -> Path:
        """The run's summary: ``value`` with ``"complete": true``."""
        return self.write_text(name, dumps({**value, "complete": True}, indent=True) + "\n")

    def note(
        self,
        *,
        signature: Any = None,
        run_id: str | None = None,
        settings: dict[str, Any] | None = None,
    ) -> None:
        """The signature and settings (per model folder) for run.json, and the store's run id
        (written at once, so a Ctrl-C leaves it for the resume to finish)."""
        info = self._state.info
        if info is None:
            return
        if run_id is not None and run_id not in info.setdefault("runs", []):
            info["runs"].append(run_id)
            if not self._state.done:
                self._write_info()
        if hasattr(signature, "model_dump"):  # a Signature model
            signature = signature.model_dump(mode="json")
        for key, by_model, value in (
            ("settings", "settings_by_model", settings),
            ("signature", "signatures", signature),
        ):
            if value is not None and self.prefix:
                info.setdefault(by_model, {})[self.prefix] = value
            elif value is not None:
                info[key] = value

    @property
    def complete(self) -> bool:
        """The whole folder is in place (``finish`` renamed it)."""
        return self._state.done

    def finish(self) -> None:
        """run.json says complete and the partial folder is renamed into place (once, by the whole
        folder); OSError when the destination was filled meanwhile (the run stays partial)."""
        state = self._state
        if self.prefix or state.done or state.info is None:
            return
        state.info["complete"] = True
        self._write_info()
        try:
            os.rename(state.temp, state.dest)
        except OSError as exc:
            state.info["complete"] = False
            self._write_info()
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                raise OSError(
                    exc.errno,
                    f"it was filled during the run; the complete run is in {state.temp}",
                    str(state.dest),
                ) from None
            raise
        state.done = True

    def discard(self) -> None:
        """Remove the partial folder when this process made it and it holds nothing but the
        run.json it wrote (a usage error once the folder was opened, exit 2: nothing is left),
        and the parents it made for it that are empty; a continued folder, one holding anything
        else, or one in place is left as it is (fieldcheck removes only what it made)."""
        state = self._state
        if self.prefix or state.done or state.resumed or state.info is None:
            return
        ours = (dumps(state.info, indent=True) + "\n").encode()
        try:
            if os.listdir(state.temp) != [RUN_JSON] or (state.temp / RUN_JSON).read_bytes() != ours:
                return
            (state.temp / RUN_JSON).unlink()
            state.temp.rmdir()
            for parent in state.made:  # the deepest first; one holding anything stays
                parent.rmdir()
        except OSError:
            return

    def interrupted_line(self, note: str = "") -> str:
        """What a Ctrl-C left: the folder's files, where, those not finished, and how to go on;
        ``note`` says what going on costs."""
        state = self._state
        where = state.dest if state.done else state.temp
        missing = [] if state.done else [n for n in state.expected if n not in state.written]
        # a file being written when the Ctrl-C came is named once, as not finished
        held = [f for f in _files(where) if not any(f"{f}/".startswith(f"{m}/") for m in missing)]
        text = f"interrupted: {len(held)} file{'' if len(held) == 1 else 's'}"
        text += f" ({_some(held)})" if held else ""
        text += f" in {where}"
        if state.done:
            return text + " (complete)"
        text += f"; not finished: {_some(missing)}" if missing else ""
        if state.info is None:
            return text + f" (run the command again{note})"
        return (
            text + f" (run.json says complete: false); the same command with --out "
            f"{state.dest} continues it{note}"
        )

    def _rel(self, name: str) -> str:
        parts = Path(name).parts
        if not name or Path(name).is_absolute() or any(p in (".", "..") for p in parts):
            raise ValueError(f"not a relative file name inside the output folder: {name!r}")
        return f"{self.prefix}/{name}" if self.prefix else name

    def _write_info(self) -> None:
        path = self._state.temp / RUN_JSON
        tmp = path.with_name(RUN_JSON + ".tmp")
        tmp.write_text(dumps(self._state.info, indent=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)


OutputFolder = RunFolder  # the writers' name for it

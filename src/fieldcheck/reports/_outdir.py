"""The ``--out`` folder: what fieldcheck wrote there, written safely (issue 9, docs/formats.md
"Output folders").

- Every file is written to a temporary name in its own folder and renamed when complete
  (``os.replace``): a kill leaves the old file or the new one, never half of one; the rename
  replaces a symlink planted under the name, never the file it points to.
- ``.fieldcheck-manifest.jsonl`` lists every file fieldcheck wrote (a line is appended before the
  file takes its name, so no file of ours is ever unlisted) and ends with ``{"complete": true}``
  when the run wrote everything. A new run removes exactly the listed files first (the summaries
  first, so a half-removed folder never claims completeness), never following a link.
- A folder holding anything else is refused unless ``force`` (the other files are then kept).
- The run's summary (json ``summary.json``, slots ``metrics.json``, numeric ``statistics.json``)
  is written last with ``"complete": true``: present only when every other file was written.
- One run at a time: a folder being written by another process is refused (``flock``).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import stat
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

import orjson

from fieldcheck._util.child import pid_alive
from fieldcheck._util.errors import shown_path
from fieldcheck._util.jsonio import dumps

log = logging.getLogger(__name__)

try:
    import fcntl
except ImportError:  # not on Windows: no lock there
    fcntl = None  # type: ignore[assignment]

MANIFEST = ".fieldcheck-manifest.jsonl"
# prepared folders (and their subfolders) by absolute path: ``OutputFolder.of(path)`` finds them
_ACTIVE: dict[str, OutputFolder] = {}
# folders marked complete (``finish``) since ``completed_folders(clear=True)``: what a Ctrl-C
# after that left
_COMPLETED: list[Path] = []
TMP_MARK = ".fieldcheck-tmp-"
_SHOWN = 5


class OutputFolderError(Exception):
    """The folder cannot be used (a file, not creatable, or holding other files): a usage error.
    ``reason``: the system's reason when the folder cannot be created."""

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason


def _check_name(name: str) -> PurePosixPath:
    rel = PurePosixPath(name)
    if not name or rel.is_absolute() or any(p in ("", ".", "..") for p in rel.parts):
        raise ValueError(f"not a relative file name inside the output folder: {name!r}")
    return rel


def _is_link(path: Path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _listing(root: Path, *, skip: Iterable[str] = ()) -> tuple[set[str], set[str]]:
    """Files (and links, and anything not a directory) and directories under ``root``, relative,
    without following a link. The contents of the real folders ``skip`` (bulk folders, ours
    with everything in them) are not listed."""
    files: set[str] = set()
    dirs: set[str] = set()
    skipped = set(skip)
    for top, subdirs, names in os.walk(root, followlinks=False):
        base = Path(top).relative_to(root)
        if base.as_posix() in skipped and not _is_link(Path(top)):
            subdirs.clear()
            continue
        for d in list(subdirs):
            rel = (base / d).as_posix()
            if _is_link(Path(top) / d):  # os.walk lists a link to a folder as a folder
                files.add(rel)
                subdirs.remove(d)
            else:
                dirs.add(rel)
        files.update((base / n).as_posix() for n in names)
    return files, dirs


def _added_since(
    root: Path, folder: str, manifest: Path, names: frozenset[str] | None
) -> list[str]:
    """The entries of the bulk folder ``folder`` (ours, written whole) put there after the run
    that wrote it: those not among ``names``, the entries the manifest lists it with. A
    manifest of an earlier version lists none: then the entries newer than the manifest (its
    entries all predate the manifest's last write, and adding an entry changes the folder's
    time, so an untouched folder is not listed)."""
    if names is not None:
        try:
            if not stat.S_ISDIR(os.lstat(root / folder).st_mode):
                return []
            return sorted(f"{folder}/{e}" for e in set(os.listdir(root / folder)) - names)
        except OSError:
            return []
    try:
        since = os.lstat(manifest).st_mtime_ns
        top = os.lstat(root / folder)
    except OSError:
        return []
    if not stat.S_ISDIR(top.st_mode) or top.st_mtime_ns <= since:
        return []
    added = []
    for top_dir, subdirs, files in os.walk(root / folder, followlinks=False):
        base = Path(top_dir).relative_to(root)
        for name in [*subdirs, *files]:
            try:
                if os.lstat(Path(top_dir) / name).st_mtime_ns > since:
                    added.append((base / name).as_posix())
            except OSError:
                continue
    return added


def _another_runs(path: Path) -> OutputFolderError:
    return OutputFolderError(
        f"{path} is another run's output folder (it has its own manifest), where this run "
        "would write; give another folder, or remove it"
    )


def _not_ours_inside(folder: str, names: Iterable[str]) -> OutputFolderError:
    names = list(names)
    return OutputFolderError(
        f"{folder} holds {len(names)} {'entry' if len(names) == 1 else 'entries'} fieldcheck "
        f"did not write ({_some(names)}), and fieldcheck replaces that folder whole; move them "
        "out of it or give another folder"
    )


def _read_manifest(
    path: Path,
) -> tuple[list[str], list[str], list[str], dict[str, frozenset[str] | None], str | None]:
    """(files, summaries, folders, bulk folders, command) of a manifest; lines that are not
    ours (or torn) are skipped. Folders are listed so an empty one (``traces/`` of a run that
    scored nothing) is still known as ours; a bulk folder (``"all": true``, written by
    ``bulk``) is ours with everything in it. ``command``: the one that wrote the folder, named
    by the first line (None in manifests written before it was)."""
    files: list[str] = []
    summaries: list[str] = []
    folders: list[str] = []
    bulk: dict[str, frozenset[str] | None] = {}
    command: str | None = None
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return files, summaries, folders, bulk, command
        raw = path.read_bytes()
    except OSError:
        return files, summaries, folders, bulk, command
    for line in raw.splitlines():
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(entry, dict):
            continue
        if "fieldcheck" in entry and isinstance(entry.get("command"), str):
            command = entry["command"]
        name, folder = entry.get("file"), entry.get("dir")
        for value, into in ((name, files), (folder, folders)):
            if not isinstance(value, str):
                continue
            try:
                _check_name(value)
            except ValueError:
                continue
            into.append(value)
            if into is files and entry.get("summary") is True:
                summaries.append(value)
            if into is folders and entry.get("all") is True:
                listed = entry.get("names")
                if isinstance(listed, list) and all(isinstance(n, str) for n in listed):
                    bulk[value] = frozenset(listed)
                else:
                    bulk[value] = None
    return files, summaries, folders, bulk, command


_TMP_PID = re.compile(re.escape(TMP_MARK) + r"(\d+)")


_TMP_NAME = re.compile(r"\.?(.+?)" + re.escape(TMP_MARK) + r"\d+(?:\.[^.]*)?")


def final_path(path: str | os.PathLike[str]) -> str:
    """``path`` as the user knows it: each temporary entry of an output folder in it
    (``.records.jsonl.fieldcheck-tmp-PID.jsonl``, ``.traces.fieldcheck-tmp-PID``) named by what
    it becomes (``records.jsonl``, ``traces``); what an error message shows."""
    parts = []
    for part in Path(path).parts:
        found = _TMP_NAME.fullmatch(part)
        if found is not None and not part.startswith(f".scratch{TMP_MARK}"):
            part = MANIFEST if found[0].startswith(MANIFEST) else found[1]
        parts.append(part)
    return str(Path(*parts)) if parts else str(path)


def _tmp_pid(name: str) -> int | None:
    """The process id in a temporary entry's name (``...fieldcheck-tmp-PID...``)."""
    found = _TMP_PID.search(name)
    return int(found[1]) if found is not None else None


def _running_elsewhere(rel: str) -> bool:
    """Whether the temporary entry ``rel`` is another process's, still running: a run writing
    there now, not a killed run's leftover."""
    pid = _tmp_pid(rel.rsplit("/", 1)[-1])
    return pid is not None and pid != os.getpid() and pid_alive(pid)


def remove_leftover_scratch(folder: Path) -> None:
    """Remove the scratch folders (``scratch_prefix``) that killed processes left directly in
    ``folder``: a run's scratch folder may sit beside its ``--out`` (in the nearest folder that
    exists), where no next run into ``--out`` looks."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        pid = _tmp_pid(entry.name)
        if (
            entry.name.startswith(f".scratch{TMP_MARK}")
            and pid is not None
            and entry.is_dir(follow_symlinks=False)
            and not pid_alive(pid)
        ):
            with contextlib.suppress(OSError):  # best effort: another run may be removing it
                _remove_tree(Path(entry.path))


def scratch_prefix() -> str:
    """The name prefix of this process's scratch folders inside an output folder (slot
    buckets): ``prepare`` leaves them alone while this process runs, and removes them as a
    killed run's leftovers once it has ended."""
    return f".scratch{TMP_MARK}{os.getpid()}-"


def _inside_any(rel: str, folders: Iterable[str]) -> bool:
    return any(rel.startswith(folder + "/") for folder in folders)


def _remove_tree(path: Path) -> None:
    """Delete the real folder ``path`` and everything in it, never following a link: a link
    inside is unlinked, its target untouched (``os.scandir`` tells links from folders without a
    ``stat`` per file)."""
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                _remove_tree(Path(entry.path))
            else:
                os.unlink(entry.path)
    os.rmdir(path)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _some(names: Iterable[str]) -> str:
    """Every name when there are few (a run's own files, ~10), else the first ones and a count
    (traces of thousands of conversations)."""
    names = sorted(names)
    if len(names) <= 2 * _SHOWN:
        return ", ".join(names)
    return ", ".join(names[:_SHOWN]) + f" and {len(names) - _SHOWN} more"


# folders this process writes, by absolute path: a descriptor of each, holding its lock
_LOCKS: dict[str, int] = {}


def _lock(root: Path) -> None:
    """Take the folder for this process (``flock`` on the folder itself, released when the run
    finishes or the process ends, even killed): two runs into one folder would remove and
    overwrite each other's files. Where the file system has no such locks, none is taken."""
    key = os.path.abspath(root)
    if key in _LOCKS or fcntl is None:
        return
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    for wait in (0.0, 0.01, 0.02, 0.05, 0.1):  # another run's look at its parents is brief
        time.sleep(wait)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue
        except OSError:  # no locks here (some network file systems)
            os.close(fd)
            return
        _LOCKS[key] = fd
        return
    os.close(fd)
    raise OutputFolderError(
        f"{root} is being written by another fieldcheck run; wait for it to end or give another "
        "folder"
    )


def _refuse_link_loop(root: Path) -> None:
    """Refuse (``OutputFolderError``) ``root`` when it, or a folder it is in, is a link loop
    (``ln -s loop loop``, a -> b -> a): its links never lead to a folder."""
    if _errno(root) != errno.ELOOP:
        return
    loop = next(p for p in (*reversed(root.parents), root) if _errno(p) == errno.ELOOP)
    where = f"{root} is" if loop == root else f"{root} is inside {loop},"
    if _is_cycle(loop):
        raise OutputFolderError(
            f"{where} a link loop (following its links leads back to them); fix the link or "
            "give another folder"
        )
    raise OutputFolderError(
        f"{where} a chain of more links than the system follows (40 on Linux); link to the "
        "folder itself or give another folder"
    )


def _is_cycle(path: Path) -> bool:
    """Whether following the link ``path`` comes back to a link already followed (a loop), not
    only to more links than the system follows (ELOOP for both)."""
    seen: set[str] = set()
    current = os.path.abspath(path)
    while current not in seen:
        seen.add(current)
        try:
            target = os.readlink(current)
        except OSError as exc:  # the end of the chain; a folder on the way that loops: a loop
            return exc.errno == errno.ELOOP
        current = os.path.normpath(os.path.join(os.path.dirname(current), target))
    return True


def _errno(path: Path) -> int | None:
    """The error ``os.stat(path)`` gives (None: none)."""
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno
    return None


def reserve(path: str | Path) -> None:
    """Take ``path``'s lock now, before a long read of the inputs, when it is a folder already
    (``prepare`` takes it otherwise), so a run started later cannot take it first; refuse it
    (``OutputFolderError``) when another run writes it or a folder around it, or it is a link
    loop. Nothing is made or changed."""
    root = Path(path)
    _refuse_link_loop(root)
    _check_parents(root)
    if root.is_dir():
        _lock(root)


def _check_parents(root: Path) -> None:
    """Refuse a folder inside one another run is writing, or inside an earlier run's output
    folder whose manifest lists it or what is in it (a model's folder of ``json run``),
    checked before anything is made: that run's manifest would claim the files written here,
    and its next run remove them. Not even ``--force`` writes there."""
    here = Path(os.path.abspath(root))
    # a run's manifest is ignored inside a folder with a manifest of its own (``prepare``)
    shielded = _has_manifest(here)
    for parent in here.parents:
        if str(parent) in _LOCKS:
            continue
        if fcntl is not None and _free(parent, fcntl.LOCK_SH | fcntl.LOCK_NB) is False:
            raise OutputFolderError(
                f"{root} is inside {parent}, which another fieldcheck run is writing; wait for "
                "it to end or give a folder outside it"
            )
        if shielded or not _has_manifest(parent):
            continue
        shielded = True
        if claimed := _claimed_by(parent, here.relative_to(parent).as_posix()):
            raise OutputFolderError(
                f"{root} is inside {parent}, an earlier run's output folder whose manifest "
                f"lists {_some(claimed)}: that run's next run would delete what is written "
                "here; give a folder outside it"
            )


def _has_manifest(folder: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(folder / MANIFEST).st_mode)
    except OSError:
        return False


def _claimed_by(parent: Path, rel: str) -> list[str]:
    """What the manifest in ``parent`` lists at ``rel`` or inside it, or the folder written
    whole (``bulk``) that ``rel`` is in."""
    files, _, folders, bulk, _ = _read_manifest(parent / MANIFEST)
    around = [b for b in bulk if rel == b or _inside_any(rel, [b])]
    return around or [e for e in (*files, *folders) if e == rel or _inside_any(e, [rel])]


def _other_run(folder: Path) -> bool:
    """Whether ``folder`` is another run's output folder: it holds its own manifest, or another
    run is writing it. A run with ``--force`` into a folder around it keeps its files, and
    never lists in its own manifest the files that run writes meanwhile (its next run would
    remove them)."""
    if _has_manifest(folder):
        return True
    if fcntl is None or os.path.abspath(folder) in _LOCKS:
        return False
    return _free(folder, fcntl.LOCK_SH | fcntl.LOCK_NB) is False


def _free(folder: Path, how: int) -> bool | None:
    """Whether ``flock(how)`` on ``folder`` succeeds (it is let go at once); None when it
    cannot be tried (no such folder, no locks there)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, how)
        return True
    except BlockingIOError:
        return False
    except OSError:
        return None
    finally:
        os.close(fd)


def completed_folders(*, clear: bool = False) -> list[Path]:
    """The folders this process marked complete since the last ``clear`` (a command's start)."""
    found = list(_COMPLETED)
    if clear:
        _COMPLETED.clear()
    return found


def completed_line(folders: Iterable[Path]) -> str:
    """The Ctrl-C line once every file was written: the run's folders are complete."""
    names = [str(f) for f in folders]
    verb = "is" if len(names) == 1 else "are"
    return f"interrupted after every file was written: {', '.join(names)} {verb} complete"


def release_all() -> None:
    """Let go of every folder this process holds: a command has ended (for the commands run
    in one process, as tests do; a process that ends lets go anyway)."""
    while _LOCKS:
        os.close(_LOCKS.popitem()[1])


def _unlock(root: Path) -> None:
    fd = _LOCKS.pop(os.path.abspath(root), None)
    if fd is not None:
        os.close(fd)


class OutputFolder:
    """A prepared output folder, or a view of one of its subfolders (``sub``)."""

    def __init__(self, root: Path, *, managed: bool, prefix: str = "", shared: Any = None) -> None:
        self.root = root
        self.managed = managed
        self.prefix = prefix
        self._state: _State = shared if shared is not None else _State()

    # ------------------------------------------------------------------ opening

    @classmethod
    def prepare(
        cls,
        path: str | Path,
        *,
        force: bool = False,
        whole: Iterable[str] = (),
        subfolders: Iterable[str] = (),
        inputs: Iterable[str | Path] = (),
        outputs: Iterable[str] = (),
        command: str | None = None,
    ) -> OutputFolder:
        """Create ``path`` or check it; remove what an earlier run listed in its manifest.

        Raises OutputFolderError when ``path`` is a file or a link loop, is inside a folder
        another run writes or an earlier run's manifest claims (``_check_parents``), cannot be
        created, or holds anything fieldcheck did not write (unless ``force``: those are kept,
        ours are replaced), when a folder ``whole`` names (this run's ``bulk`` folders) holds
        such entries even with ``force``, or when one of ``subfolders`` (where this run will
        write) is another run's output folder (``check_subfolders``), or when one of the run's
        ``inputs`` is an earlier run's output there (it would be deleted before it is read):
        refused before anything in ``path`` is changed; so is an input (kept by ``force``) that
        has the name of one of the run's ``outputs`` (or is inside such a folder), which would
        replace it (``atomic`` refuses that too, for the outputs not named here). ``command``
        (``numeric score``) is written in the manifest; without ``force``, an earlier run of
        another command is refused too, as its files would be replaced by files of another
        kind."""
        root = Path(path)
        _refuse_link_loop(root)  # before ``exists``, False for a loop: not "does not exist"
        dangling = False
        if root.exists() and not root.is_dir():
            raise OutputFolderError(f"{root} is a file, not a directory")
        with contextlib.suppress(OSError):  # under a file: refused below, when it is made
            dangling = stat.S_ISLNK(os.lstat(root).st_mode) and not root.exists()
        if dangling:
            raise OutputFolderError(
                f"{root} is a link to {os.readlink(root)}, which does not exist"
            )
        _check_parents(root)
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise OutputFolderError(
                f"cannot create directory {root}: {reason}", reason=reason
            ) from None
        _lock(root)
        manifest = root / MANIFEST
        old_files, summaries, old_dirs, old_bulk, earlier = _read_manifest(manifest)
        for name, listed in old_bulk.items():  # a user's file in our traces/: refused
            if added := _added_since(root, name, manifest, listed):
                raise _not_ours_inside(str(root / name), added)
        files, dirs = _listing(root, skip=old_bulk)
        # in use, left alone: this process's own scratch folders (``scratch_prefix``: slot
        # buckets), the temporary files and folders of another run still writing here, and
        # another run's folder inside this one (its own manifest, or being written)
        live = {d for d in dirs if "/" not in d and scratch_prefix() in d}
        live |= {e for e in files | dirs if TMP_MARK in e and _running_elsewhere(e)}
        files -= live
        dirs -= live
        nested = {d for d in dirs if TMP_MARK not in d and _other_run(root / d)}
        inside = live | nested
        dirs -= {d for d in dirs if _inside_any(d, inside)}
        files -= {f for f in files if _inside_any(f, inside)}
        old_files = [f for f in old_files if not _inside_any(f, nested)]
        summaries = [f for f in summaries if not _inside_any(f, nested)]
        for name in subfolders:
            if _check_name(name).as_posix() in nested:
                raise _another_runs(root / name)
        temporary = {d for d in dirs if TMP_MARK in d.rsplit("/", 1)[-1]}
        dirs -= {d for d in dirs if _inside_any(d, temporary)}
        files -= {f for f in files if _inside_any(f, temporary)}
        ours = set(old_files) | {MANIFEST} | {f for f in files if TMP_MARK in f.rsplit("/", 1)[-1]}
        parents = {p.as_posix() for f in old_files for p in PurePosixPath(f).parents} - {"."}
        parents |= {
            p.as_posix() for d in old_dirs for p in (PurePosixPath(d), *PurePosixPath(d).parents)
        } - {"."}
        foreign = (files - ours) | (dirs - parents - temporary)
        if _is_link(manifest) and MANIFEST in files:
            foreign.add(MANIFEST)
        if MANIFEST in dirs:  # not ours, and in the way of ours even with force
            raise OutputFolderError(
                f"{manifest} is a folder, where fieldcheck keeps the list of the files it "
                "wrote; remove it or give another folder"
            )
        if foreign and not force:
            runs = sorted(foreign & nested)
            also = (
                f" ({_some(runs)}: another run's output folder, kept as it is with --force)"
                if runs
                else ""
            )
            raise OutputFolderError(
                f"{root} holds {len(foreign)} {'entry' if len(foreign) == 1 else 'entries'} "
                f"fieldcheck did not write ({_some(foreign)}){also}; give an empty or new "
                "folder, or --force to write beside them"
            )
        for name in whole:  # what ``check_whole`` would refuse once ours are removed
            rel = _check_name(name).as_posix()
            inside = {
                f"{rel}/{f[len(rel) + 1 :].split('/')[0]}"
                for f in foreign
                if f.startswith(rel + "/")
            }
            if rel in nested and rel in foreign:  # another run's folder, not listed inside
                inside |= {f"{rel}/{e}" for e in os.listdir(root / rel)}
            if inside:
                raise _not_ours_inside(str(root / rel), inside)
        real_inputs = {os.path.realpath(p) for p in inputs}
        outputs = set(outputs)
        real_root = os.path.realpath(root)
        for given in sorted(real_inputs):
            rel = os.path.relpath(given, real_root)
            if rel.startswith(".."):
                continue
            rel = PurePosixPath(*Path(rel).parts).as_posix()
            if rel in old_files or _inside_any(rel, old_bulk):
                raise OutputFolderError(
                    f"{given} is an input of this run and an output of the earlier run in "
                    f"{root}, which this run would delete before reading it; copy it elsewhere "
                    "or give another folder"
                )
            if rel in outputs or _inside_any(rel, outputs):
                raise OutputFolderError(
                    f"{given} is an input of this run and has the name of one of its outputs, "
                    "which would replace it; rename it or give another folder"
                )
        if command and not force and earlier and earlier != command and (old_files or old_bulk):
            raise OutputFolderError(
                f"{root} holds the files of an earlier `fieldcheck {earlier}` run, which this "
                f"`fieldcheck {command}` run would delete; give another folder, or --force to "
                "replace them"
            )
        folder = cls(root, managed=True)
        folder._state.command = command
        try:
            # 1. the manifest stops claiming completeness, 2. summaries go, 3. the rest
            folder._write_manifest(old_files, summaries)
            for name in [*summaries, *sorted(set(old_files) - set(summaries))]:
                folder._remove(name)
            for name in sorted(f for f in files if TMP_MARK in f.rsplit("/", 1)[-1]):
                folder._remove(name)
            folder._discard([*old_bulk, *temporary])
            for d in sorted(parents, key=lambda d: -d.count("/")):
                folder._remove_dir(d)
            folder._write_manifest([], [])
        except OSError as exc:
            where = f"{final_path(exc.filename)}: " if exc.filename else ""
            raise OutputFolderError(
                f"cannot prepare {root}: {where}{exc.strerror or exc}"
            ) from None
        folder._state.before = files - ours
        folder._state.inputs = real_inputs
        folder._state.nested = nested
        _ACTIVE[os.path.abspath(root)] = folder
        return folder

    @classmethod
    def of(cls, out: str | Path | OutputFolder) -> OutputFolder:
        """``out`` itself, or a plain path as an unmanaged folder (atomic writes, no manifest:
        for library callers that give a path)."""
        if isinstance(out, OutputFolder):
            return out
        root = Path(out)
        active = _ACTIVE.get(os.path.abspath(root))
        if active is not None:  # the path of a prepared folder: keep its manifest
            return active
        root.mkdir(parents=True, exist_ok=True)
        return cls(root, managed=False)

    def check_subfolders(self, names: Iterable[str]) -> None:
        """Refuse (``OutputFolderError``) a subfolder this run will write that is another run's
        output folder (found by ``prepare``): writing there would replace that run's files."""
        for name in names:
            if self._rel(name) in self._state.nested:
                raise _another_runs(self.path / name)

    def check_whole(self, names: Iterable[str]) -> None:
        """Refuse (``OutputFolderError``) a folder this run will write whole (``bulk``) where
        another's non-empty folder is (kept by --force): writing it would delete that folder's
        files. Called before any work, and again by ``bulk``."""
        for name in names:
            rel = self._rel(name)
            final = self.root / rel
            mine = not self.managed or rel in self._state.bulk or _is_link(final)
            if not mine and final.is_dir() and (found := sorted(os.listdir(final))):
                raise _not_ours_inside(str(final), [f"{rel}/{f}" for f in found])

    def sub(self, name: str) -> OutputFolder:
        """The subfolder ``name`` (created), sharing this folder's manifest."""
        _check_name(name)
        view = OutputFolder(
            self.root, managed=self.managed, prefix=self._rel(name), shared=self._state
        )
        view._mkdirs(view._rel("x"))
        if self.managed:
            _ACTIVE[os.path.abspath(view.path)] = view
            self._append({"dir": view.prefix})  # an empty subfolder is ours too
        return view

    @property
    def path(self) -> Path:
        """The folder on disk (a subfolder for a ``sub`` view)."""
        return self.root / self.prefix if self.prefix else self.root

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def __str__(self) -> str:
        return str(self.path)

    # ------------------------------------------------------------------ writing

    def expect(self, *names: str) -> None:
        """Files this run means to write (named in the Ctrl-C line when they are not written)."""
        self._state.summary_last = False
        for name in names:
            self._state.expected.setdefault(self._rel(name), None)

    @contextmanager
    def atomic(self, name: str, *, summary: bool = False) -> Iterator[Path]:
        """A temporary path beside ``name`` to write; renamed to ``name`` when the block ends
        without an error (removed otherwise). Returns via the block; the final path is
        ``self / name``."""
        rel = self._rel(name)
        final = self.root / rel
        self._state.summary_last = summary and not self.prefix
        if self._state.inputs and os.path.realpath(final) in self._state.inputs:
            raise OSError(
                errno.EEXIST,
                "it is an input of this run, which this output would replace; give another folder",
                str(final),
            )
        self._mkdirs(rel)
        tmp = final.with_name(f".{final.name}{TMP_MARK}{os.getpid()}{final.suffix}")
        if os.path.lexists(tmp):
            os.unlink(tmp)
        try:
            yield tmp
            if self.managed:
                self._append({"file": rel, "summary": summary} if summary else {"file": rel})
            os.replace(tmp, final)
        except BaseException as exc:
            if os.path.lexists(tmp):
                os.unlink(tmp)
            if isinstance(exc, OSError) and exc.filename in (tmp, str(tmp)):
                exc.filename = str(final)  # the user knows the file, not our temporary name
            raise
        self._state.written[rel] = None

    @contextmanager
    def bulk(self, name: str) -> Iterator[Path]:
        """A new, empty temporary folder beside the subfolder ``name``, for many files written
        with plain writes (numeric's ``traces/``: one file per conversation); renamed to
        ``name`` when the block ends without an error, removed otherwise, so a folder under
        ``name`` is always complete. The manifest lists it as ``{"dir": name, "all": true}``
        (before the rename): ours with everything in it, removed whole by the next run. An
        earlier ``name`` (a link: unlinked, never followed) is removed first."""
        rel = self._rel(name)
        final = self.root / rel
        self._state.summary_last = False
        self.check_whole([name])  # a folder there is not ours (``prepare`` removed ours)
        self._mkdirs(rel)
        tmp = final.with_name(f".{final.name}{TMP_MARK}{os.getpid()}")
        self._clear(tmp)
        tmp.mkdir()
        try:
            yield tmp
            if self.managed:  # with what it holds: anything else found there later is not ours
                self._append({"dir": rel, "all": True, "names": sorted(os.listdir(tmp))})
            self._clear(final)
            os.rename(tmp, final)
        except BaseException as exc:
            self._clear(tmp)
            if (
                isinstance(exc, OSError)
                and isinstance(exc.filename, str)
                and TMP_MARK in exc.filename
            ):
                exc.filename = final_path(exc.filename)  # the name the user knows
            raise
        self._state.bulk[rel] = None

    def write_text(self, name: str, text: str, *, summary: bool = False) -> Path:
        """``text`` as UTF-8 (a file name's byte that is not UTF-8 shown as U+FFFD)."""
        with self.atomic(name, summary=summary) as tmp:
            tmp.write_text(shown_path(text), encoding="utf-8")
        return self / name

    def write_summary(self, name: str, value: dict[str, Any]) -> Path:
        """The run's summary, written last: ``value`` with ``"complete": true``."""
        return self.write_text(
            name, dumps({**value, "complete": True}, indent=True) + "\n", summary=True
        )

    def finish(self) -> None:
        """Mark the folder complete: every file of the run was written. Files that appeared
        during the run without ``atomic`` are listed too, so a next run removes them. Another
        run may then use the folder. A second call does nothing."""
        if not self.managed or self._state.finished:
            return
        self._wait()
        files, dirs = _listing(self.root, skip=self._state.bulk)
        known = set(self._state.written) | {MANIFEST}
        temporary = {d for d in dirs if TMP_MARK in d.rsplit("/", 1)[-1]}
        new = files - known - self._state.before
        nested = self._state.nested
        if new:  # another run's folder made meanwhile (in this process: a separate run too)
            nested = nested | {d for d in dirs if TMP_MARK not in d and _other_run(self.root / d)}
        for rel in sorted(new):
            if TMP_MARK in rel.rsplit("/", 1)[-1] or _inside_any(rel, temporary):
                continue
            if not _inside_any(rel, nested):
                self._append({"file": rel})
        self._append({"complete": True})
        self._state.finished = True
        if not self.prefix:
            _unlock(self.root)
            _COMPLETED.append(self.root)

    def interrupted_line(self, note: str = "") -> str:
        """What a Ctrl-C left: the files written and those not; ``note`` follows "run the
        command again" (what that costs). A Ctrl-C just after the summary, the last file of a
        run into this folder, marks the folder complete and says so."""
        if self.managed and not self.prefix and self._state.summary_last:
            with contextlib.suppress(OSError):  # not markable: what was not written, below
                self.finish()
                return completed_line([self.root])
        written = list(self._state.written)
        done = self._state.written.keys() | self._state.bulk.keys()
        missing = [n for n in self._state.expected if n not in done]
        text = f"interrupted: {self.root} is not complete; "
        text += f"written: {_plural(len(written), 'file')}"
        text += f" ({_some(written)})" if written else ""
        text += f"; not written: {_some(missing)}" if missing else "; the rest was not written"
        return text + f" (no summary says complete: true; run the command again{note})"

    # ------------------------------------------------------------------ internals

    def _rel(self, name: str) -> str:
        _check_name(name)
        return f"{self.prefix}/{name}" if self.prefix else name

    def _mkdirs(self, rel: str) -> None:
        """Real directories for every parent of ``rel``: a link in their place is replaced
        (managed folders only; the folder was checked or --force given), never followed."""
        current = self.root
        for part in PurePosixPath(rel).parts[:-1]:
            current = current / part
            if _is_link(current):
                if not self.managed:
                    raise OSError(0, "a link where a folder should be", str(current))
                os.unlink(current)
            if not current.is_dir():
                current.mkdir()

    def _inside(self, rel: str) -> Path | None:
        """``root / rel`` when no parent of it is a link (else None: never delete through one)."""
        current = self.root
        for part in PurePosixPath(rel).parts[:-1]:
            current = current / part
            if _is_link(current) or not current.is_dir():
                return None
        return self.root / rel

    def _remove(self, rel: str) -> None:
        path = self._inside(rel)
        if path is None or not os.path.lexists(path):
            return
        if _is_link(path) or not path.is_dir():
            os.unlink(path)

    def _discard(self, folders: list[str]) -> None:
        """Remove whole folders (an earlier run's bulk folders, killed runs' temporary ones):
        each is renamed at once to a temporary name in the root (never followed if a link) and
        deleted by a thread while the run goes on (thousands of traces took seconds to
        unlink); ``finish`` waits for it. A folder left half-deleted by a kill keeps its
        temporary name, which the next run removes."""
        trash: list[Path] = []
        for n, rel in enumerate(sorted(folders, key=lambda d: -d.count("/"))):
            path = self._inside(rel)
            if path is None or not os.path.lexists(path):
                continue
            if _is_link(path) or not path.is_dir():
                os.unlink(path)
                continue
            target = self.root / f".trash{TMP_MARK}{os.getpid()}-{n}"
            self._clear(target)
            os.rename(path, target)
            trash.append(target)
        if trash:
            # a daemon: a Ctrl-C or an error ends the process at once, not after a silent wait
            # for the removal; what is left is a temporary folder the next run removes first
            thread = threading.Thread(
                target=self._empty, args=(trash,), name="fieldcheck-trash", daemon=True
            )
            thread.start()
            self._state.cleaning = thread

    def _empty(self, trash: list[Path]) -> None:
        for path in trash:
            try:
                self._clear(path)
            except OSError as exc:
                self._state.left.append(f"{path} ({exc.strerror or exc})")

    def _wait(self) -> None:
        thread = self._state.cleaning
        if thread is not None:
            thread.join()
            self._state.cleaning = None
        if self._state.left:
            log.warning(
                "an earlier run's folder could not be deleted and is left as %s; the next run "
                "into %s tries again",
                ", ".join(self._state.left),
                self.root,
            )
            self._state.left = []

    @staticmethod
    def _clear(path: Path) -> None:
        """Remove ``path``: a link or file unlinked, a real folder with everything in it."""
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISDIR(mode):
            _remove_tree(path)
        else:
            os.unlink(path)

    def _remove_dir(self, rel: str) -> None:
        path = self._inside(rel)
        if path is not None and not _is_link(path) and path.is_dir():
            with contextlib.suppress(OSError):  # not empty: others' files, kept under --force
                path.rmdir()

    def _write_manifest(self, files: list[str], summaries: list[str]) -> None:
        header: dict[str, Any] = {"fieldcheck": "output folder manifest", "complete": False}
        if self._state.command:
            header["command"] = self._state.command
        lines = [header]
        lines += [{"file": f, "summary": True} if f in summaries else {"file": f} for f in files]
        path = self.root / MANIFEST
        tmp = path.with_name(path.name + TMP_MARK + str(os.getpid()))
        try:
            tmp.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):  # a full disk: nothing of ours left behind
                tmp.unlink(missing_ok=True)
            raise

    def _append(self, entry: dict[str, Any]) -> None:
        path = self.root / MANIFEST
        if _is_link(path):
            os.unlink(path)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags, 0o644)
        try:
            os.write(fd, orjson.dumps(entry) + b"\n")
        finally:
            os.close(fd)


class _State:
    """What a folder and its subfolder views share: files written, expected, and present before."""

    def __init__(self) -> None:
        self.written: dict[str, None] = {}
        self.expected: dict[str, None] = {}
        self.before: set[str] = set()
        self.nested: set[str] = set()  # other runs' folders inside this one (``_other_run``)
        self.bulk: dict[str, None] = {}  # bulk folders written (``OutputFolder.bulk``)
        self.cleaning: threading.Thread | None = None  # removing an earlier run's folders
        self.finished = False  # the manifest says complete (``finish``)
        self.inputs: set[str] = set()  # the run's input files (real paths), never replaced
        self.left: list[str] = []  # an earlier run's folders ``_discard`` could not delete
        # the last file written is the run's summary, in the root folder (``write_summary``):
        # every file is written, only the manifest's ``complete`` is missing
        self.summary_last = False
        self.command: str | None = None  # the command writing the folder (``prepare``)

"""fieldcheck's own helper processes (the store's writer, the slot reader and second scorer, the
numeric writer): how they start, stop and hand back errors, and their environment. They start
as ``python -P -m fieldcheck....``: ``-P`` keeps the
working folder off ``sys.path`` (a ``fieldcheck`` package there must not stand in for this one),
and ``PYTHONPATH`` starts with the folder this process imported fieldcheck from, so a helper runs
the same code even when fieldcheck is not installed for the interpreter (a source checkout, a
path a script added)."""

from __future__ import annotations

import os
import pickle
import signal
import site
import subprocess
import sys
import threading
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import IO

import fieldcheck
from fieldcheck._util.frames import write_frame

ROOT = str(Path(fieldcheck.__file__).resolve().parent.parent)
"""The folder holding the ``fieldcheck`` package this process runs."""


def child_env() -> dict[str, str]:
    """This process's environment with ``ROOT`` first on ``PYTHONPATH``, unless ROOT is a site
    folder (an installed fieldcheck), which must stay behind the standard library."""
    env = dict(os.environ)
    sites = {str(Path(p).resolve()) for p in (*site.getsitepackages(), site.getusersitepackages())}
    if ROOT not in sites:
        rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != ROOT]
        env["PYTHONPATH"] = os.pathsep.join([ROOT, *rest])
    return env


def start(
    command: Sequence[str], stderr: IO[bytes] | int, spec: bytes | None = None
) -> subprocess.Popen[bytes]:
    """``command`` (a ``python -P -m`` helper) with piped standard input and output, ``stderr``
    there, ``child_env``, in a session of its own (a Ctrl-C reaches the starting process, which
    stops it); ``spec``, if given, written as its first frame. Stopped again if that fails."""
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=child_env(),
        start_new_session=True,
    )
    if spec is not None:
        try:
            assert process.stdin is not None
            write_frame(process.stdin, spec)
        except BaseException:
            stop(process)
            raise
    return process


def stop(process: subprocess.Popen[bytes]) -> None:
    """Kill ``process`` if it still runs, wait for it and close its pipes."""
    if process.poll() is None:
        process.kill()
    process.wait()
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            with suppress(OSError):
                pipe.close()


def exit_when_input_ends(done: threading.Event) -> None:
    """In a helper: exit at once (status 3) when its standard input ends before ``done`` is
    set, i.e. the process that started it stopped it or is gone."""
    fd = sys.stdin.buffer.fileno()

    def watch() -> None:
        # the file descriptor, not sys.stdin: a daemon thread blocked in a buffered reader holds
        # its lock, which the interpreter's shutdown then cannot take (a fatal error)
        while os.read(fd, 1 << 16):
            pass
        if not done.is_set():
            os._exit(3)

    threading.Thread(target=watch, daemon=True).start()


def ended(status: int | None, log: str) -> str:
    """How a helper ended: its exit status and the last line of its standard error ``log``."""
    lines = log.strip().splitlines()
    return status_text(status) + (f": {lines[-1]}" if lines else "")


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this host (another user's counts). A zombie (killed,
    not yet reaped by its parent: ``kill -9`` from a shell) is not: its run was resumed by
    nobody until the shell reaped it (a tester's finding)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # Linux: the state after the command name's closing parenthesis
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def status_text(status: int | None) -> str:
    """A helper's exit status in words: ``exit status 5``, or ``killed by SIGKILL`` (Popen's
    negative status)."""
    if status is not None and status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exit status {status}"


def error_bytes(error: BaseException) -> bytes:
    """``error`` pickled for the starting process to raise again (a ``RuntimeError`` with its
    type and message when it cannot be pickled)."""
    try:
        return pickle.dumps(error)
    except Exception:
        return pickle.dumps(RuntimeError(f"{type(error).__name__}: {error}"))

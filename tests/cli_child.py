"""``fieldcheck`` run as a child process of a test, to be stopped by a signal mid-run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading


def start_cli(*args: str) -> subprocess.Popen[str]:
    """``fieldcheck ARGS`` in a child process with this environment, its output piped."""
    return subprocess.Popen(
        [sys.executable, "-m", "fieldcheck._cli.main", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )


def interrupt(
    proc: subprocess.Popen[str], reached: threading.Event, release: threading.Event
) -> None:
    """Ctrl-C (SIGINT) to ``proc`` once the server has ``reached`` the call it holds, then the
    call released: the child must exit 130 (its stderr in the message if not)."""
    assert reached.wait(60), proc.stderr.read() if proc.stderr else ""
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    release.set()
    assert proc.returncode == 130, err

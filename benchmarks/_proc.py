"""Run one benchmark side in its own process: wall time of its work (imports excluded, see
``_driver``) and its peak resident memory (VmHWM, read by the child itself when its work is done).

A run is stopped at ``timeout`` seconds or when its RSS passes ``rss_cap_mib`` (so a run whose
memory grows with its input cannot take the machine down); the result then says so and its time
or memory is only a bound.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATABASE_ENV = "FIELDCHECK_DATABASE_URL"
DEFAULT_RSS_CAP_MIB = 6144.0
TIME_LIMIT = 300.0  # seconds; a run stopped there gives a bound ("<" in the ratio)


@dataclass(frozen=True)
class ProcRun:
    seconds: float  # the work only; for a stopped run, the time until it was stopped
    peak_rss_mib: float
    status: int
    stopped: str = ""  # "" when it finished; else why it was stopped
    stderr_tail: str = ""
    cpu_seconds: float = math.nan  # user + system of the work, ended child processes included

    @property
    def ok(self) -> bool:
        return not self.stopped and self.status == 0

    def problem(self) -> str:
        """One line on what went wrong, '' when nothing did."""
        if self.stopped:
            return self.stopped
        if self.status:
            return f"exit status {self.status}: {self.stderr_tail}"
        return ""


TRASH_NAME = ".bench-trash"
_trash: set[Path] = set()


def fresh(folder: Path) -> Path:
    """``folder`` moved out of the way (into a trash folder beside it, emptied by
    ``empty_trash`` when the bench ends): a timed run's ``--out`` starts from an empty output
    location, and no file is deleted while the bench runs. On ext4 without a journal (this
    machine's disk) the kernel skips the inodes of files deleted in the last 60-300 s when it
    creates new ones (``recently_deleted`` in fs/ext4/ialloc.c): 25,000 files created after
    25,000 were deleted took 2-11 s of system time against 0.8 s, so a deletion before a timed
    run put its figure at the mercy of the clock."""
    if os.path.lexists(folder):
        trash = folder.parent / TRASH_NAME
        trash.mkdir(exist_ok=True)
        _trash.add(trash)
        os.rename(folder, Path(tempfile.mkdtemp(dir=trash)) / folder.name)
    return folder


def empty_trash() -> None:
    """Delete what ``fresh`` moved aside (and what an earlier, killed bench left there)."""
    for trash in sorted(_trash):
        shutil.rmtree(trash, ignore_errors=True)
    _trash.clear()


def _rss_mib(pid: int, key: str = "VmRSS:") -> float:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in text.splitlines():
        if line.startswith(key):
            return int(line.split()[1]) / 1024
    return 0.0


def run_child(
    target: str,
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    preload_model: bool = False,
    timeout: float = TIME_LIMIT,
    rss_cap_mib: float = DEFAULT_RSS_CAP_MIB,
) -> ProcRun:
    """Run ``target`` (``fieldcheck`` or a ``benchmarks`` module) with ``argv`` in a child."""
    with tempfile.TemporaryDirectory(prefix="fieldcheck-bench-") as tmp:
        out = Path(tmp) / "time.json"
        err_path = Path(tmp) / "stderr.txt"
        cmd = [sys.executable, "-m", "benchmarks._driver", str(out)]
        cmd += ["--preload-model"] if preload_model else []
        cmd += ["--", target, *argv]
        child_env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        child_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
        )
        # a store of its own (every scoring command records its run), never the user's
        child_env[DATABASE_ENV] = f"sqlite:///{Path(tmp) / 'store.sqlite3'}"
        child_env.update(env or {})
        with open(err_path, "wb") as err:
            proc = subprocess.Popen(
                cmd, stdout=subprocess.DEVNULL, stderr=err, env=child_env, cwd=tmp
            )
            start = time.monotonic()
            stopped = ""
            peak_seen = 0.0
            while True:
                pid, wstatus = os.waitpid(proc.pid, os.WNOHANG)
                if pid:
                    break
                rss = _rss_mib(proc.pid, "VmHWM:")
                peak_seen = max(peak_seen, rss)
                elapsed = time.monotonic() - start
                if not stopped and rss > rss_cap_mib:
                    stopped = f"stopped at {rss:,.0f} MiB RSS (cap {rss_cap_mib:,.0f})"
                elif not stopped and elapsed > timeout:
                    stopped = f"stopped after {elapsed:,.0f} s (time limit)"
                if stopped:
                    proc.kill()
                time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(wstatus)
        tail = " ".join(err_path.read_text(errors="replace").split()[-40:])
        if stopped or not out.exists():
            status = proc.returncode or -1  # a finished run that wrote no timing failed
            return ProcRun(time.monotonic() - start, peak_seen, status, stopped, tail)
        timing = json.loads(out.read_text())
        peak = max(float(timing["peak_rss_mib"]), peak_seen)
        cpu = float(timing.get("cpu_seconds", math.nan))
        return ProcRun(float(timing["seconds"]), peak, int(timing["status"]), "", tail, cpu)


def fastest(runs: Sequence[ProcRun]) -> ProcRun:
    """The quickest of repeated runs of one side (``timeit``'s rule: the slower ones measured
    the machine's other load, not the work); a failed or stopped run, if any, is the answer."""
    bad = [r for r in runs if not r.ok]
    return bad[0] if bad else min(runs, key=lambda r: r.seconds)

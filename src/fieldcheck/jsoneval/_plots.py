"""The JSON batch plots from plain data, drawn in this process or in a child one (issue 10, the
fixed cost): importing matplotlib and drawing take ~0.7 s, so a large batch starts a child
(``PlotWorker``) that imports matplotlib while the batch is scored on another core and draws
the plots into the temporary paths the parent's output folder gives it. This module imports
nothing of fieldcheck but the report helpers, so the child starts in a fraction of a second.

Child protocol: ``python -c BOOT THIS_FILE`` reads one JSON request on stdin
``{"spec": ..., "paths": {name: temporary path}}``, draws, writes ``ok`` or the error on stdout.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

MATCH_RATE = "plot_field_match_rate"
SCORES = "plot_score_distribution"
DPI = 110  # as reports._document.figure


def draw(spec: dict[str, Any], paths: Mapping[str, Path | IO[bytes]]) -> None:
    """Draw the plots of ``spec`` into ``paths`` (by plot name; only those in ``paths``).

    ``spec``: ``bars`` [[label, rate], ...] lowest first, ``bars_title``, ``edges`` (the
    histogram bin edges), ``histograms`` [[title, counts], ...] (four), ``scored``.
    """
    from fieldcheck.reports._document import no_glyph_warnings, pyplot

    plt = pyplot()
    with no_glyph_warnings():
        if MATCH_RATE in paths:
            bars = spec["bars"]
            fig, ax = plt.subplots(figsize=(8, max(2.5, 0.32 * len(bars) + 1.3)))
            try:
                ax.barh(range(len(bars)), [rate for _, rate in bars], color="#4c72b0")
                ax.set_yticks(range(len(bars)), [name for name, _ in bars])
                ax.invert_yaxis()  # the lowest rate on top
                ax.set_xlim(0, 1)
                ax.set_xlabel("match rate (matched / scored)")
                ax.set_title(spec["bars_title"])
                fig.tight_layout()
                fig.savefig(paths[MATCH_RATE], dpi=DPI, format="png")
            finally:
                plt.close(fig)
        if SCORES in paths:
            edges = spec["edges"]
            fig, axes = plt.subplots(nrows=2, ncols=2, figsize=(9, 6))
            try:
                for ax, (title, counts) in zip(axes.flat, spec["histograms"], strict=True):
                    ax.hist(
                        edges[:-1], bins=edges, weights=counts, color="#4c72b0", edgecolor="white"
                    )
                    ax.set_title(title)
                    ax.set_xlim(0, 1)
                    ax.set_ylabel("records")
                fig.suptitle(f"Per-record scores ({spec['scored']} scored records)")
                fig.tight_layout()
                fig.savefig(paths[SCORES], dpi=DPI, format="png")
            finally:
                plt.close(fig)


BOOT = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__fieldcheck_plots__')"


class PlotWorker:
    """A child process with matplotlib imported, ready to draw (``draw``), started early so its
    start-up overlaps the scoring. Terminal interrupts do not reach it (its own session); it
    ends when the parent closes its input, dies or calls ``close``."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-c", BOOT, __file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def start(self, spec: dict[str, Any], paths: Mapping[str, Path]) -> bool:
        """Ask the child to draw (``wait`` for it); False when it cannot be asked."""
        proc = self.proc
        if proc is None or proc.stdin is None:
            return False
        try:
            request = {"spec": spec, "paths": {k: str(v) for k, v in paths.items()}}
            proc.stdin.write(json.dumps(request).encode())
            proc.stdin.close()
        except OSError:
            self.close()
            return False
        return True

    def wait(self) -> bool:
        """Whether the child drew every plot it was asked for (False: the caller draws)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.stdout is None:
            return False
        try:
            answer = proc.stdout.read()
            proc.wait()
        except OSError:
            _kill(proc)
            return False
        proc.stdout.close()
        return answer == b"ok" and proc.returncode == 0

    def close(self) -> None:
        """Stop the child if it was not used (an error or an interrupt in the parent)."""
        proc, self.proc = self.proc, None
        if proc is not None:
            _kill(proc)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        proc.kill()
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        proc.wait(timeout=5)
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


_WARM_UP: dict[str, Any] = {
    "bars": [["field", 0.5]],
    "bars_title": "warm-up",
    "edges": [i / 20 for i in range(21)],
    "histograms": [[name, [1000] * 20] for name in ("a", "b", "c", "d")],
    "scored": 1,
}


def _child(stdin: IO[bytes], stdout: IO[bytes]) -> int:
    # the import and a first drawing (fonts, caches) are the cost this child pays early
    draw(_WARM_UP, {MATCH_RATE: io.BytesIO(), SCORES: io.BytesIO()})
    raw = stdin.read()
    if not raw:  # the parent closed without a request: nothing to draw
        return 0
    try:
        request = json.loads(raw)
        draw(request["spec"], {k: Path(v) for k, v in request["paths"].items()})
    except Exception as exc:  # reported to the parent, which then draws itself
        stdout.write(f"{type(exc).__name__}: {exc}".encode())
        return 1
    stdout.write(b"ok")
    return 0


if __name__ == "__fieldcheck_plots__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    sys.exit(_child(sys.stdin.buffer, sys.stdout.buffer))

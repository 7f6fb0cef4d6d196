"""The batch plots drawn in a child process (``_plots.PlotWorker``, issue 10's fixed cost): the
same PNG bytes as drawn here, written through the output folder (temporary names, manifest),
and the child gone when the parent does not use it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fieldcheck.jsoneval import BatchReader, EvalConfig, _io, stream_batch_outputs
from fieldcheck.jsoneval._plots import MATCH_RATE, SCORES, PlotWorker, draw

SPEC = {
    "bars": [["<img src=x onerror=alert(1)>", 0.25], ["b", 0.75]],
    "bars_title": "Match rate per field",
    "edges": [i / 20 for i in range(21)],
    "histograms": [[name, [i * 3 for i in range(20)]] for name in ("a", "b", "c", "d")],
    "scored": 57,
}


def test_the_child_draws_the_same_png_bytes_as_this_process(tmp_path: Path) -> None:
    worker = PlotWorker()
    child = {MATCH_RATE: tmp_path / "c1.png", SCORES: tmp_path / "c2.png"}
    assert worker.start(SPEC, child) and worker.wait()
    here = {MATCH_RATE: tmp_path / "h1.png", SCORES: tmp_path / "h2.png"}
    draw(SPEC, here)
    for name in (MATCH_RATE, SCORES):
        data = child[name].read_bytes()
        assert data.startswith(b"\x89PNG") and data == here[name].read_bytes()


def test_an_unused_child_is_stopped(tmp_path: Path) -> None:
    worker = PlotWorker()
    proc = worker.proc
    assert proc is not None
    worker.close()
    assert proc.poll() is not None and worker.proc is None
    assert not worker.wait()  # nothing left to wait for: the caller draws itself


def test_a_large_streamed_batch_draws_in_the_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the threshold lowered so a small file starts the worker; both folders get the same files
    line = {"ground_truth": {"a": 1, "b": "x"}, "output": {"a": 1, "b": "y"}}
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": i, **line}) + "\n" for i in range(300)))
    started: list[PlotWorker] = []

    class Counted(PlotWorker):
        def __init__(self) -> None:
            super().__init__()
            started.append(self)

    outs = {}
    for name, lines in (("here", 10**9), ("child", 100)):
        monkeypatch.setattr(_io, "PLOT_WORKER_LINES", lines)
        monkeypatch.setattr(_io, "PlotWorker", Counted)
        out = tmp_path / name
        reader = BatchReader(data, chunk_lines=50)
        stream_batch_outputs(out, reader.chunks(), EvalConfig(), bootstrap=20)
        outs[name] = out
    assert len(started) == 1 and started[0].proc is None  # used once, and waited for
    for png in ("plot_field_match_rate.png", "plot_score_distribution.png"):
        assert (outs["child"] / png).read_bytes() == (outs["here"] / png).read_bytes()
    assert not [p.name for p in outs["child"].iterdir() if ".tmp" in p.name or p.name[0] == "."]

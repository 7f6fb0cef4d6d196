"""report.html is one self-contained file (issue 28): each system's plots embedded as the very
bytes of the PNGs beside it, CSS inline, no reference outside the page, the same bytes from the
same inputs, and its size bounded by its text plus the plots' base64."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "store"))

from runs_data import json_folder, numeric_folder, slots_folder
from tests.report_html import embedded_pngs, external_refs

FOLDERS: dict[str, Callable[[Path], Path]] = {
    "json": lambda root: json_folder(root)[0],
    "slots": lambda root: slots_folder(root)[0],
    "numeric": numeric_folder,
}
PLOTS = {  # what each example's folder plots (no latency file: no latency plot)
    "json": {"plot_field_match_rate.png", "plot_score_distribution.png"},
    "slots": {"plot_prf1.png", "plot_topic_f1_heatmap.png", "plot_extra_slots_by_topic.png"},
    "numeric": {"accuracy_by_turn.png", "plot_match_types.png", "plot_failure_modes.png", "plot_operations_vs_accuracy.png"},
}  # fmt: skip


@pytest.mark.parametrize("system", sorted(FOLDERS))
def test_report_html_embeds_its_plots_and_references_nothing_outside(
    system: str, tmp_path: Path
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    out = FOLDERS[system](tmp_path / "a")
    page = (out / "report.html").read_text()
    assert external_refs(page) == []
    pngs = {p.name: p.read_bytes() for p in out.glob("*.png")}
    assert set(pngs) == PLOTS[system]  # the spec's plot files stay beside the report
    embedded = sorted(embedded_pngs(page).values())
    assert embedded == sorted(pngs.values())  # each plot once, byte for byte
    assert "<style>" in page and "<link" not in page and "<script" not in page
    # bounded: the text, plus each PNG's base64 (4 bytes per 3) and its tag
    text = len(page.encode()) - sum(4 * -(-len(b) // 3) for b in embedded)
    assert 2_000 < text < 60_000
    assert len(page.encode()) < 400_000
    # byte-stable: the same inputs in another folder give the same report.html
    again = FOLDERS[system](tmp_path / "b")
    assert (again / "report.html").read_bytes() == (out / "report.html").read_bytes()
    markdown = (out / "report.md").read_text()
    assert all(f"]({name})" in markdown for name in pngs)  # report.md links the files, as before

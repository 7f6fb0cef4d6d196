"""The screenshot pass of issue 28 at 1366 px: /runs with a model name that has no break
opportunity and /compare of two runs with long values fit the width, no table scrolling
sideways (both did: the runs table hid its last columns, the item matrix clipped values)."""

from __future__ import annotations

import sys
from pathlib import Path

from live_server import LiveServer
from playwright.sync_api import Page

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from runs_data import json_folder, slots_folder

from fieldcheck.runs import record_folder
from fieldcheck.store import Store

LONG_MODEL = "TheBloke_Mixtral_8x7B_Instruct_v0.1_GPTQ_4bit_128g_actorder_True_finetuned_on_invoices_2024_december_rc3"
LONG_NAME = "Ann " + "of the long record value " * 14


def overflow(page: Page) -> list[list[object]]:
    """The page and each table wrapper wider than its box: [what, scroll width, client width]."""
    found: list[list[object]] = page.evaluate(
        """() => [[document.documentElement, 'page'],
                  ...[...document.querySelectorAll('.table-wrap, .scroll')].map(e => [e, e.className])]
                 .filter(([e]) => e.scrollWidth > e.clientWidth)
                 .map(([e, what]) => [what, e.scrollWidth, e.clientWidth])"""
    )
    return found


def test_runs_and_compare_fit_1366_px(page: Page, live: LiveServer, tmp_path: Path) -> None:
    def records(city: str) -> list[dict[str, object]]:
        gt = {"name": LONG_NAME, "city": "Oslo"}
        return [
            {"id": f"r{i}", "ground_truth": gt, "output": {**gt, "city": city}} for i in range(3)
        ]

    store = Store(f"sqlite:///{tmp_path / 'web.sqlite3'}")
    a = record_folder(store, json_folder(tmp_path, "a", records("Oslo"))[0], model=LONG_MODEL)
    b = record_folder(store, json_folder(tmp_path, "b", records("Roma"))[0], model="beta")
    slots_out, inputs = slots_folder(tmp_path)  # a metric per model: the widest metric cell
    record_folder(store, slots_out, inputs=inputs)
    store.close()
    page.set_viewport_size({"width": 1366, "height": 900})

    page.goto("/runs")
    assert page.locator(f"tr[data-run='{a.id}'] td.model").inner_text() == LONG_MODEL
    assert overflow(page) == []
    started = page.locator(f"tr[data-run='{a.id}'] td.started time")
    lines = "t => t.getBoundingClientRect().height / parseFloat(getComputedStyle(t).lineHeight)"
    assert started.evaluate(lines) < 1.5  # the date and time on one line

    page.goto(f"/compare?runs={a.id},{b.id}")
    assert page.locator("#item-matrix tbody tr").count() == 3  # every record: Oslo against Roma
    assert overflow(page) == []

"""The Runs page (issue 28 page 1) in Debian's Chromium on a store made by real runs: a column
heading sorts (by mouse and by keyboard) in the order ``GET /api/runs`` gives, the dataset
filter keeps the runs whose dataset holds the text, and two runs ticked open
``/compare?runs=A,B``. Screenshots at 1366 px into /work/shots when that folder exists."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from live_server import LiveServer
from playwright.sync_api import Page
from runs_list_data import reply, store_runs

SHOTS = Path("/work/shots")


def _shot(page: Page, tmp_path: Path, name: str) -> None:
    folder = SHOTS if SHOTS.is_dir() else tmp_path
    path = folder / f"runs-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 1000


def _order(page: Page) -> list[str]:
    rows = page.locator("#runs tbody tr[data-run]")
    return [str(r) for r in rows.evaluate_all("rows => rows.map(r => r.dataset.run)")]


def test_sort_filter_and_compare_two_runs(
    page: Page,
    live: LiveServer,
    tmp_path: Path,
    chat_server: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = chat_server(reply)
    with ThreadPoolExecutor(1) as thread:  # its own thread: asyncio.run beside Playwright's loop
        ids = thread.submit(store_runs, tmp_path, server, monkeypatch, "web.sqlite3").result()
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto("/runs")
    newest = page.request.get("/api/runs").json()["runs"]
    assert _order(page) == [r["id"] for r in newest] and len(newest) == 5
    json_row = page.locator(f"tr[data-run='{ids['json']}']")
    assert json_row.locator("td.dataset").inner_text().split() == [
        "docs.jsonl",
        newest[-1]["dataset_sha256_short"],
    ]
    run = newest[-1]
    metric = json_row.locator("td.metric").inner_text()
    estimate, low, high = (run["metric"]["values"][0][k] for k in ("estimate", "low", "high"))
    assert f"{estimate:.4f} [{low:.3f}, {high:.3f}]" in metric and "rqs" in metric
    slots = page.locator(f"tr[data-run='{ids['slots']}'] td.metric .metric-value")
    assert slots.count() == 2  # one line per model of the slot run
    _shot(page, tmp_path, "list")

    page.click("th[data-sort='metric'] a")
    page.wait_for_url("**sort=metric**")
    by_metric = page.request.get("/api/runs?sort=metric&order=desc").json()["runs"]
    assert _order(page) == [r["id"] for r in by_metric]
    best = [
        max(float(v) for v in cell.locator("strong").all_inner_texts())
        for cell in page.locator("td.metric").all()
    ]  # a slot row by its best model's F1
    assert best == sorted(best, reverse=True) and len(best) == 5
    assert page.locator("th[data-sort='metric']").get_attribute("aria-sort") == "descending"
    page.focus("th[data-sort='metric'] a")  # the keyboard: the same link, Enter
    page.keyboard.press("Enter")
    page.wait_for_url("**order=asc**")
    rising = page.request.get("/api/runs?sort=metric&order=asc").json()["runs"]
    assert _order(page) == [r["id"] for r in rising]  # ties (alpha, beta): newest first
    assert [r["headline"] for r in rising] == [r["headline"] for r in by_metric][::-1]
    _shot(page, tmp_path, "sorted")

    page.fill("#filter-dataset", "DOCS")
    page.click("#apply-filter")
    page.wait_for_url("**dataset=DOCS**")
    assert _order(page) == [ids["json"]]
    assert "sort=metric" in page.url  # the sort stays
    page.fill("#filter-dataset", "gold")
    page.keyboard.press("Enter")
    page.wait_for_url("**dataset=gold**")
    assert _order(page) == [ids["slots"]]
    _shot(page, tmp_path, "filtered")

    page.goto("/runs")
    assert page.locator("#compare-selected").is_disabled()
    page.check(f"#pick-{ids['alpha']}")
    assert page.locator("#compare-selected").is_disabled()  # one run is no comparison
    page.check(f"#pick-{ids['beta']}")
    assert page.locator("#compare-count").inner_text() == "2 runs ticked"
    page.click("#compare-selected")
    page.wait_for_url("**/compare?runs=*")
    assert page.url.split("/compare?", 1)[1] == f"runs={ids['alpha']},{ids['beta']}"
    # a sort the route refuses: the page says so (as the route's 422 does) above the runs
    shown = page.goto("/runs?sort=nope&dataset=gold")
    assert shown is not None and shown.status == 422
    said = page.locator("#runs-error")
    assert said.is_visible() and "sort: must be one of started" in said.inner_text()
    assert _order(page) == [ids["slots"]]  # the filter given with it still holds

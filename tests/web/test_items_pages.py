"""The run page's item table in Debian's Chromium (issue 28 page 2): type in the search box,
sort a column, filter failed items, page forward; the rows shown are the items the store holds
(their JSONL export) with their own values. Screenshots at 1366 px."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
from playwright.sync_api import Page

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from live_server import LiveServer
from runs_data import json_folder, numeric_folder

from fieldcheck.runs import iter_export, record_folder
from fieldcheck.store import RunInfo, Store

CITIES = ("Oslo", "Rome", "Lyon")


def _records() -> list[dict[str, Any]]:
    """60 records: every 4th names a wrong city, every 7th misses its name."""
    found = []
    for i in range(60):
        truth = {"name": f"N{i}", "city": CITIES[i % 3]}
        output = dict(truth)
        if i % 4 == 0:
            output["city"] = CITIES[(i + 1) % 3]
        if i % 7 == 0:
            del output["name"]
        found.append({"id": f"rec-{i:02d}", "ground_truth": truth, "output": output})
    return found


def _items(url: str, run: RunInfo) -> list[dict[str, Any]]:
    store = Store(url)
    text = b"".join(iter_export(store, run.id, "jsonl"))
    store.close()
    return [orjson.loads(line) for line in text.splitlines()]


def _rows(page: Page) -> list[dict[str, str]]:
    """Each row of the item table: its key and its cells by column name."""
    return page.locator("#items tbody tr").evaluate_all(
        """rows => rows.map(r => Object.fromEntries([['key', r.dataset.key],
            ...[...r.querySelectorAll('td[data-column]')].map(
                td => [td.dataset.column, td.textContent.trim()])]))"""
    )


def _shot(page: Page, folder: Path, name: str) -> None:
    path = folder / f"items-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 1000


def test_search_sort_filter_and_page_the_items_of_a_json_run(
    page: Page, live: LiveServer, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'web.sqlite3'}"
    store = Store(url)
    out, batch = json_folder(tmp_path, "many", _records())
    run = record_folder(store, out, inputs=[("batch", batch)], model="m")
    store.close()
    items = _items(url, run)
    by_key = {i["key"]: i for i in items}
    page.set_viewport_size({"width": 1366, "height": 900})

    page.goto(f"/runs/{run.id}")
    assert page.locator("#items-count").inner_text() == "60 item(s) match · showing 1–50"
    rows = _rows(page)
    assert [r["key"] for r in rows] == [i["key"] for i in items[:50]]
    for row in rows:  # the values shown are the item's own, rounded only here
        item = by_key[row["key"]]
        assert row["rqs"] == f"{item['result']['rqs']:.4f}"
        assert row["failed"] == ("yes" if item["failed"] else "no")

    with page.expect_navigation():  # the next page, not this one, is read
        page.click("#next-page")  # page forward
    assert [r["key"] for r in _rows(page)] == [i["key"] for i in items[50:]]
    assert page.locator("#items-count").inner_text() == "60 item(s) match · showing 51–60"
    with page.expect_navigation():  # the next page, not this one, is read
        page.click("#previous-page")
    assert len(_rows(page)) == 50

    page.fill("#items-q", "OSLO")  # typed, then Enter: the form's search
    page.press("#items-q", "Enter")
    page.wait_for_url("**q=OSLO**")
    want = [i["key"] for i in items if "oslo" in orjson.dumps(i["result"]).decode().lower()]
    assert [r["key"] for r in _rows(page)] == want and len(want) == 25
    assert page.input_value("#items-q") == "OSLO"

    page.click("#items thead a:text-is('RQS')")  # sort a column, the search kept
    page.wait_for_url("**sort=rqs**")
    shown = _rows(page)
    ordered = sorted(want, key=lambda k: by_key[k]["result"]["rqs"])  # ties in seq order
    assert [r["key"] for r in shown] == ordered
    assert [r["rqs"] for r in shown] == [f"{by_key[k]['result']['rqs']:.4f}" for k in ordered]
    assert page.get_attribute("#items th[data-column='rqs']", "aria-sort") == "ascending"
    page.click("#items thead a:text-is('RQS ▲')")  # again: descending
    page.wait_for_url("**order=desc**")
    values = [float(r["rqs"]) for r in _rows(page)]
    assert values == sorted(values, reverse=True) and len(values) == 25

    with page.expect_navigation():  # a filter's choice applies at once
        page.select_option("#filter-failed", "true")
    failed = [k for k in want if by_key[k]["failed"]]
    rows = _rows(page)
    assert sorted(r["key"] for r in rows) == sorted(failed) and all(
        r["failed"] == "yes" for r in rows
    )
    assert page.locator("#items-count").inner_text().startswith(f"{len(failed)} item(s) match")
    _shot(page, tmp_path, "json-searched")

    with page.expect_navigation():  # the next page, not this one, is read
        page.click(f"#items tbody tr[data-key='{rows[0]['key']}'] a")  # the item's own page
    assert page.url.endswith(f"/runs/{run.id}/items/{rows[0]['key']}")


def test_numeric_items_filtered_by_failure_mode_and_turn(
    page: Page, live: LiveServer, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'web.sqlite3'}"
    store = Store(url)
    run = record_folder(store, numeric_folder(tmp_path))
    store.close()
    items = _items(url, run)
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(f"/runs/{run.id}")
    with page.expect_navigation():
        page.select_option("#filter-failure_mode", "wrong")
    with page.expect_navigation():
        page.select_option("#filter-turn", "2")
    want = [i for i in items if i["result"]["failure_mode"] == "wrong" and i["turn"] == 2]
    rows = _rows(page)
    assert [r["key"] for r in rows] == [i["key"] for i in want] and want
    for row, item in zip(rows, want, strict=True):
        assert row["question"] == item["result"]["question"]
        assert row["expected"] == str(item["result"]["expected_answer"])
        assert row["failure_mode"] == "wrong" and row["numerical_match"] == "no"
    _shot(page, tmp_path, "numeric-filtered")


def test_the_last_page_and_a_page_past_the_end(
    page: Page, live: LiveServer, tmp_path: Path
) -> None:
    """The run page's pager and the Compare matrix's have a last page; an offset past the end
    says so, with the first and last pages, and its "previous" is the last page (a new user
    pressed "next" 99 times, and saw an empty table at ?offset=99999)."""
    url = f"sqlite:///{tmp_path / 'web.sqlite3'}"
    store = Store(url)
    out, batch = json_folder(tmp_path, "many", _records())
    run = record_folder(store, out, inputs=[("batch", batch)], model="m")
    many = [dict(r, id=f"rec-{i:03d}") for i, r in enumerate(_records() * 4)]  # 240
    other = [dict(r, output={}) for r in many[:230]]  # 230 wrong, 10 missing: all 240 differ
    runs = []
    for name, records in (("left", many), ("right", other)):
        folder, data = json_folder(tmp_path, name, records)
        runs.append(record_folder(store, folder, inputs=[("batch", data)], model=name).id)
    store.close()

    page.goto(f"/runs/{run.id}")
    assert page.locator("#last-page").inner_text() == "last page"
    with page.expect_navigation():
        page.click("#last-page")
    assert page.locator("#items-count").inner_text() == "60 item(s) match · showing 51–60"
    assert page.locator("#last-page").count() == 0 and page.locator("#next-page").count() == 0

    page.goto(f"/runs/{run.id}?sort=rqs&offset=99999")  # its query kept in its links
    past = page.locator("#items-past-end")
    assert past.inner_text() == "No items on this page: 60 item(s) match; first page · last page."
    assert page.locator("#items").count() == 0
    last = f"/runs/{run.id}?sort=rqs&offset=50#items-section"
    assert past.locator("a").evaluate_all("a => a.map(e => e.getAttribute('href'))") == [
        f"/runs/{run.id}?sort=rqs#items-section",
        last,
    ]
    assert page.get_attribute("#last-page", "href") == last
    assert page.get_attribute("#previous-page", "href") == last
    with page.expect_navigation():
        page.click("#items-past-end a:text-is('last page')")
    assert page.locator("#items-count").inner_text() == (
        "60 item(s) match · showing 51–60 · sorted by RQS ascending"
    )

    ids = ",".join(runs).replace(",", "%2C")
    page.goto(f"/compare?runs={','.join(runs)}")
    assert page.locator("#matrix-count").inner_text().startswith("240 of 240 records differ")
    assert page.get_attribute("#matrix-last", "href") == (
        f"/compare?runs={ids}&differ=true&offset=200"
    )
    with page.expect_navigation():
        page.click("#matrix-last")
    assert page.locator("#item-matrix tbody tr").count() == 40
    assert page.locator("#matrix-last").count() == 0 and page.locator("#matrix-next").count() == 0
    page.goto(f"/compare?runs={','.join(runs)}&offset=9999")
    past = page.locator("#matrix-past-end")
    assert (
        past.inner_text()
        == "No records on this page: 240 record(s) differ; first page · last page."
    )
    assert page.locator("#item-matrix").count() == 0
    assert page.get_attribute("#matrix-prev", "href") == (
        f"/compare?runs={ids}&differ=true&offset=200"
    )

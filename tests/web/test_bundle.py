"""The portable bundle (issue 28 point 5, ``fieldcheck view --bundle``) in Debian's Chromium,
opened from ``file://`` with the network off: real runs of the three systems against
serve-model and two json models against the chat server fixture; the runs list shows them, a
run's table sorts, searches and filters as ``GET /api/runs/{id}/items`` does, an item of each
system shows its trace, and the two models' Compare page lists exactly the items they disagree
on (checked against the items). Screenshots at 1366 px."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Route, expect

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from runs_data import json_folder

from compare_runs import GT, invoke, json_runs, reply
from fieldcheck.api import ApiSettings, create_app
from fieldcheck.api.routes.items import ItemsQuery, items_view
from fieldcheck.runs import record_folder
from fieldcheck.store import Store
from item_runs import HOSTILE_KEY, make_runs


@pytest.fixture
def site(tmp_path: Path, chat_server: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The bundle of the five runs, and the runs by name (json, slots, numeric, a, b)."""
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{tmp_path / 'bundle.sqlite3'}")
    with ThreadPoolExecutor(1) as thread:  # the runs' event loop: not Playwright's thread
        made = thread.submit(make_runs, tmp_path).result()
    a, b = json_runs(tmp_path, chat_server(reply))
    runs = {name: run.id for name, run in made.items()} | {"a": a, "b": b}
    out = tmp_path / "bundle"
    done = invoke(["view", "--bundle", str(out), *runs.values()])
    assert done.exit_code == 0, done.output
    assert f"wrote {out / 'index.html'}: 5 runs" in done.stdout
    return {"dir": out, "runs": runs}


@pytest.fixture
def offline(browser: Browser) -> Iterator[tuple[Page, list[str]]]:
    """A page with the network off; every request that is not of a file is aborted and kept."""
    context = browser.new_context(offline=True)
    asked: list[str] = []

    def route(route: Route) -> None:
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            asked.append(route.request.url)
            route.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("request", lambda r: None if r.url.startswith("file://") else asked.append(r.url))
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_viewport_size({"width": 1366, "height": 900})
    yield page, asked
    context.close()
    assert errors == []


def shot(page: Page, tmp_path: Path, name: str) -> None:
    path = tmp_path / "screenshots" / f"bundle-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 1000


def shown(page: Page) -> list[str]:
    return page.locator("#items tbody tr").evaluate_all("rows => rows.map(r => r.dataset.key)")


def served(run_id: str, **asked: Any) -> list[str]:
    """The keys ``GET /api/runs/{id}/items`` gives for the same query."""
    ctx = create_app(ApiSettings()).state.fieldcheck
    run = ctx.store.get_run(run_id)
    return [i["key"] for i in items_view(ctx, run, ItemsQuery(limit=500, **asked))["items"]]


def test_the_bundle_from_file_with_the_network_off(
    site: dict[str, Any], offline: tuple[Page, list[str]], tmp_path: Path
) -> None:
    page, asked = offline
    runs, root = site["runs"], site["dir"]
    page.goto((root / "index.html").as_uri())
    listed = page.locator("#runs tbody tr").evaluate_all("rows => rows.map(r => r.dataset.run)")
    assert sorted(listed) == sorted(runs.values())
    shot(page, tmp_path, "runs")

    # a run's table: sorted, searched and filtered as the route does it
    json_run = runs["json"]
    with page.expect_navigation():
        page.click(f"#runs tr[data-run='{json_run}'] td.run a")
    assert page.locator("h1 code").inner_text() == json_run
    assert shown(page) == served(json_run)
    assert len(shown(page)) == 8
    page.click("#items th[data-column='rqs'] button")
    assert shown(page) == served(json_run, sort="rqs", order="asc")
    heading = page.locator("#items th[data-column='rqs']")  # its corner, outside the text
    box = heading.bounding_box()
    assert box is not None
    heading.click(position={"x": box["width"] - 2, "y": box["height"] - 2})
    assert shown(page) == served(json_run, sort="rqs", order="desc")
    assert page.locator("#items th[data-column='rqs']").get_attribute("aria-sort") == "descending"
    page.fill("#items-q", "A B?C#")
    assert shown(page) == [HOSTILE_KEY]
    page.fill("#items-q", "")
    page.select_option("#filter-failed", "false")
    passed = served(json_run, sort="rqs", order="desc", failed=False)
    assert shown(page) == passed and 0 < len(passed) < 8
    field = page.locator("#filter-field option").nth(1).get_attribute("value")
    assert field
    page.select_option("#filter-failed", "true")
    page.select_option("#filter-field", field)
    assert shown(page) == served(json_run, sort="rqs", order="desc", failed=True, field=field)
    page.click("#clear-filter")  # the form is reset after its event: the table follows it
    expect(page.locator("#items tbody tr")).to_have_count(8)
    assert shown(page) == served(json_run, sort="rqs", order="desc")
    shot(page, tmp_path, "run")
    with page.expect_navigation():  # an export needs the server: the page says which link
        page.click("a:text-is('CSV')")
    assert page.locator("#wanted").inner_text() == f"/api/runs/{json_run}/export?format=csv"
    page.go_back()

    # an item of each system, opened from its run's table, with its trace
    store = Store()
    with page.expect_navigation():
        page.locator("#items tr", has=page.locator(f"text={HOSTILE_KEY}")).locator("a").click()
    assert page.locator("#item-key").inner_text() == HOSTILE_KEY
    [item] = store.find_items(json_run, [HOSTILE_KEY])
    reply_text = page.locator("section#call-1 figure", has_text="raw reply").locator("pre")
    assert reply_text.text_content() == item.result["call"]["calls"][0]["text"]
    shot(page, tmp_path, "item-json")
    for system in ("slots", "numeric"):
        page.goto((root / "index.html").as_uri())
        with page.expect_navigation():
            page.click(f"#runs tr[data-run='{runs[system]}'] td.run a")
        key = shown(page)[0]
        with page.expect_navigation():
            page.locator("#items tbody tr").first.locator("a").click()
        assert page.locator("#item-key").inner_text() == key
        [item] = store.find_items(runs[system], [key])
        for n, call in enumerate(item.result["call"]["calls"], 1):
            pre = page.locator(f"section#call-{n} figure", has_text="raw reply").locator("pre")
            assert pre.text_content() == call["text"]
        shot(page, tmp_path, f"item-{system}")

    # the two models compared: only the records they disagree on, checked against the items
    page.goto((root / "index.html").as_uri())
    page.check(f"#pick-{runs['a']}")
    page.check(f"#pick-{runs['slots']}")
    said = page.locator("#compare-count").inner_text()
    assert said == "runs of different systems cannot be compared"
    assert page.locator("#compare-selected").is_disabled()
    page.uncheck(f"#pick-{runs['slots']}")
    page.check(f"#pick-{runs['a']}")
    page.check(f"#pick-{runs['b']}")
    with page.expect_navigation():
        page.click("#compare-selected")
    keys = page.locator("#item-matrix tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.key)"
    )
    items = {r: {i.key: i for i in store.items(runs[r])} for r in ("a", "b")}
    differ = sorted(
        k
        for k in GT
        if (items["a"][k].failed, items["a"][k].result["output"])
        != (items["b"][k].failed, items["b"][k].result["output"])
    )
    assert keys == differ == ["r2", "r5", "r6"]
    named = page.locator("#item-matrix tr[data-key='r5'] td a").evaluate_all(
        "a => a.map(e => e.getAttribute('aria-label'))"
    )
    assert named == [
        f"record r5 in run {runs['a'][:8]} a: right",
        f"record r5 in run {runs['b'][:8]} b: wrong",
    ]
    shot(page, tmp_path, "compare")
    with page.expect_navigation():
        page.locator("#item-matrix tr[data-key='r5'] td a").first.click()
    assert page.locator("#item-key").inner_text() == "r5"
    store.close()
    assert asked == []


def test_a_bidi_override_in_a_model_name_shows_escaped_in_chromium(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offline: tuple[Page, list[str]]
) -> None:
    # raw, U+202E reversed the F1 after the name: "模型[439.0 ,019.0] 0429.0 live"
    page, _ = offline
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{tmp_path / 'bidi.sqlite3'}")
    examples = Path(__file__).resolve().parents[2] / "examples" / "slots"
    args = ["slots", "score", "--gold", str(examples / "gold.synthetic.jsonl"), "--out"]
    pred = examples / "pred_synthetic-eager.synthetic.jsonl"
    args += [str(tmp_path / "s"), "--pred", f"模型\u202eevil={pred}", "--pred", f"plain={pred}"]
    scored = invoke(args)
    assert scored.exit_code == 0, scored.output
    [run] = re.findall(r"stored as run ([0-9a-f]{12})", scored.output)
    assert invoke(["view", "--bundle", str(tmp_path / "b"), run]).exit_code == 0
    page.goto((tmp_path / "b" / "index.html").as_uri())
    model = page.locator(f"#runs tr[data-run='{run}'] td.model").inner_text()
    assert model == "模型\\u202eevil, plain"
    page.locator(f"#runs tr[data-run='{run}'] a").first.click()
    page.locator("#items tbody td").first.wait_for()  # the table is built by bundle.js
    cells = page.locator("#items tbody td").all_inner_texts()
    assert "模型\\u202eevil" in cells
    assert not [c for c in cells if "\u202e" in c]


def test_runs_ticked_that_the_bundle_did_not_compare_say_how_to_get_their_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offline: tuple[Page, list[str]]
) -> None:
    # a bundle of many runs compares each with the first (s37 trial F6): the other pairs are
    # not in it, and ticking them opens unavailable.html with the command that serves them
    page, asked = offline
    url = f"sqlite:///{tmp_path / 'first.sqlite3'}"
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", url)
    out, batch = json_folder(tmp_path, "few")
    store = Store(url)
    a, b, c = (record_folder(store, out, inputs=[("batch", batch)], model=m).id for m in "abc")
    store.close()
    done = invoke(["view", "--bundle", str(tmp_path / "b"), "--compare", "first", a, b, c])
    assert done.exit_code == 0, done.output
    page.goto((tmp_path / "b" / "index.html").as_uri())
    listed = page.locator("#runs tbody tr").evaluate_all("rows => rows.map(r => r.dataset.run)")
    page.check(f"#pick-{b}")
    assert (
        page.locator("#compare-count").inner_text() == "this bundle has no comparison of this run"
    )
    assert page.locator("#compare-selected").is_disabled()
    page.check(f"#pick-{a}")
    assert page.locator("#compare-count").inner_text() == "2 runs ticked"
    with page.expect_navigation():
        page.click("#compare-selected")
    assert page.url.startswith((tmp_path / "b" / "compare").as_uri())
    assert page.locator("p.hint a code").all_inner_texts() == [a, b]
    page.go_back()
    page.uncheck(f"#pick-{a}")
    page.check(f"#pick-{c}")
    said = "this bundle has no comparison of these runs: Compare says how to get it"
    assert page.locator("#compare-count").inner_text() == said
    with page.expect_navigation():
        page.click("#compare-selected")
    ticked = [r for r in listed if r in (b, c)]  # in the list's order
    assert page.locator("#wanted").inner_text() == f"/compare?runs={','.join(ticked)}"
    expect(page.locator("#compare-hint")).to_be_visible()
    assert page.locator("#compare-command").inner_text() == f"fieldcheck view {' '.join(ticked)}"
    page.goto((tmp_path / "b" / "index.html").as_uri())  # a new hash alone loads no page
    page.goto((tmp_path / "b" / "unavailable.html").as_uri() + f"#/api/runs/{a}/export")
    assert page.locator("#wanted").inner_text() == f"/api/runs/{a}/export"
    expect(page.locator("#compare-hint")).to_be_hidden()
    assert asked == []

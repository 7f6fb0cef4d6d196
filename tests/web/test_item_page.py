"""An item's page in Debian's Chromium (issue 28, "An item"): opened from its URL for an item
of each system of real runs against serve-model, it shows the item's trace (the field verdicts,
the slots, the numeric plan steps and checks, the prompt and raw reply) read from the item
itself; a key with ``/``, spaces, ``?`` and ``#``; an unknown key says so. Screenshots at
1366 px."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from live_server import LiveServer
from playwright.sync_api import Page

from fieldcheck.runs import item_url
from fieldcheck.store import Store
from item_runs import HOSTILE_KEY, make_runs


def shot(page: Page, tmp_path: Path, name: str) -> None:
    path = tmp_path / "screenshots" / f"item-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 1000


def rows(page: Page, section: str) -> list[list[str]]:
    """The cells of a section's last table, as the page shows them."""
    table = page.locator(f"section#{section} table").last
    return table.locator("tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
    )


def test_an_item_of_each_system_from_its_url(
    page: Page, live: LiveServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{tmp_path / 'web.sqlite3'}")
    with ThreadPoolExecutor(1) as thread:  # the runs' event loop: not Playwright's thread
        runs = thread.submit(make_runs, tmp_path).result()
    store = Store()
    page.set_viewport_size({"width": 1366, "height": 900})

    run = runs["json"]
    [item] = store.find_items(run.id, [HOSTILE_KEY])
    page.goto(item_url(run.id, HOSTILE_KEY))
    assert page.locator("#item-key").inner_text() == HOSTILE_KEY
    assert page.locator("#item-verdict").inner_text() == "failed"
    fields = {r[0]: r for r in rows(page, "fields")}
    for name, scored in item.result["fields"].items():
        verdict = "match" if scored["score"] == 1 else "no match"
        assert (fields[name][4], fields[name][-1]) == (scored["strategy"], verdict)
    failed = page.locator("section#fields tr.tone-fail td:first-child").all_inner_texts()
    assert failed and set(failed) <= set(fields)
    call = item.result["call"]["calls"][0]
    reply = page.locator("section#call-1 figure", has_text="raw reply").locator("pre")
    assert reply.text_content() == call["text"]
    prompt = page.locator("section#call-1 figure", has_text="prompt: user").locator("pre")
    assert prompt.text_content() == call["messages"][-1]["content"]
    with page.expect_navigation():  # the next page, not this one, is read
        page.click("#item-run")
    assert page.url.endswith(f"/runs/{run.id}")
    page.go_back()
    shot(page, tmp_path, "json")

    run = runs["numeric"]
    key = "Single_ETR/2004/page_213.pdf-4#1"
    [item] = store.find_items(run.id, [key])
    page.goto(item_url(run.id, key))
    assert page.locator("#item-key").inner_text() == key
    steps = rows(page, "plan")
    assert [s[1] for s in steps] == [s["tool"] for s in item.result["plan"]["steps"]]
    checks = rows(page, "checks")
    assert [(c[1], c[2]) for c in checks] == [
        (c["check"], "yes" if c["passed"] else "no") for c in item.result["validation"]
    ]
    assert "repair round" in page.locator("h2", has_text="plan").inner_text()
    calls = item.result["call"]["calls"]
    for n, call in enumerate(calls, 1):
        reply = page.locator(f"section#call-{n} figure", has_text="raw reply").locator("pre")
        assert reply.text_content() == call["text"]
    assert page.locator("#item-related a").inner_text() == "Single_ETR/2004/page_213.pdf-4#0"
    with page.expect_navigation():  # the next page, not this one, is read
        page.click("#item-related a")
    assert page.locator("#item-key").inner_text() == "Single_ETR/2004/page_213.pdf-4#0"
    page.go_back()
    shot(page, tmp_path, "numeric")

    run = runs["slots"]
    key = "synthetic-fast/u2/3"
    [item] = store.find_items(run.id, [key])
    page.goto(item_url(run.id, key))
    slots = rows(page, "slots")
    gold = {(t, f): "; ".join(v) for t, f, v in item.result["gold"]}
    assert {(s[0], s[1]): s[2] for s in slots if s[2] != "-"} == gold
    assert [s[9] for s in slots].count("FN (missed)") == item.result["counts"]["fn"]
    reply = page.locator("section#call-1 figure", has_text="raw reply").locator("pre")
    assert reply.text_content() == item.result["call"]["calls"][0]["text"]
    shot(page, tmp_path, "slots")

    missing = page.goto(item_url(run.id, "no such/key"))
    assert missing is not None and missing.status == 404
    assert "no item 'no such/key'" in page.locator("#item-error").inner_text()
    store.close()


def test_keys_a_browser_resolves_open_from_the_run_page(
    page: Page, live: LiveServer, tmp_path: Path
) -> None:
    """Keys ``..``, ``.``, ``a/../b`` and ``%2E%2E``: clicking each in the run's item table
    opens that item (Chromium resolves a ``..`` or ``%2E%2E`` path segment away)."""
    import json
    import re

    from typer.testing import CliRunner

    from fieldcheck._cli.main import app

    keys = ["..", ".", "a/../b", "%2E%2E"]
    batch = tmp_path / "dots.jsonl"
    rows = [{"id": k, "ground_truth": {"city": k}, "output": {"city": k}} for k in keys]
    batch.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["json", "batch", str(batch), "--out", str(tmp_path / "dots"), "--bootstrap", "0"]
    env = {"FIELDCHECK_DATABASE_URL": f"sqlite:///{tmp_path / 'web.sqlite3'}"}
    with ThreadPoolExecutor(1) as thread:
        result = thread.submit(CliRunner().invoke, app, args, env=env).result()
    assert result.exit_code == 0, result.output
    run_id = result.output.split("stored as run ")[1][:12]
    for key in keys:
        page.goto(f"/runs/{run_id}")
        with page.expect_navigation():
            page.locator("#items a", has_text=re.compile(f"^{re.escape(key)}$")).click()
        assert page.locator("#item-key").inner_text() == key
        assert f"/runs/{run_id}/item" in page.url

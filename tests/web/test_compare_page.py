"""The Compare page in Debian's Chromium on runs made by ``json run`` against the chat server
fixture: exactly the records the two models disagree on (checked against their items), every
record with ``all``, a warning for another dataset, a link followed to an item's page; one slots
run's models. Screenshots at 1366 px."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from live_server import LiveServer
from playwright.sync_api import Page

from compare_runs import GT, invoke, json_runs, reply


def shot(page: Page, tmp_path: Path, name: str) -> None:
    path = tmp_path / "screenshots" / f"compare-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 1000


def shown_keys(page: Page) -> list[str]:
    return page.locator("#item-matrix tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.key)"
    )


def test_two_models_show_only_their_disagreements_and_link_to_items(
    page: Page,
    live: LiveServer,
    tmp_path: Path,
    chat_server: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{tmp_path / 'web.sqlite3'}")
    server = chat_server(reply)
    a, b = json_runs(tmp_path, server)
    other = tmp_path / "other.jsonl"
    other.write_text((tmp_path / "docs.jsonl").read_text().replace('"N3"', '"N33"'))
    c, _ = json_runs(tmp_path, server, data=other)
    page.set_viewport_size({"width": 1366, "height": 900})

    page.goto(f"/compare?runs={a},{b}")
    items = {
        run: {i["key"]: i for i in page.request.get(f"/api/runs/{run}/items").json()["items"]}
        for run in (a, b)
    }
    differ = sorted(
        k
        for k in GT
        if (items[a][k]["failed"], items[a][k]["result"]["output"])
        != (items[b][k]["failed"], items[b][k]["result"]["output"])
    )
    assert shown_keys(page) == differ == ["r2", "r5", "r6"]
    assert page.locator(".compare-warning").count() == 0
    assert page.locator("#matrix-count").inner_text().startswith("3 of 8 records differ")
    r5 = page.locator("#item-matrix tr[data-key='r5'] td")
    assert [r5.nth(i).locator("a").inner_text() for i in range(2)] == ["✓ right", "✗ wrong"]
    assert '"Rome"' in r5.nth(1).inner_text()
    paired = page.locator("#paired-difference tbody tr").inner_text().split()
    # RQS 0.85 right, 0.625 with the city wrong (accuracy 0.5): a (7 x 0.85 + 0.625) / 8,
    # b (5 x 0.85 + 3 x 0.625) / 8
    assert paired[:3] == [f"{a[:8]}", "a", f"{b[:8]}"]
    assert paired[5:7] == ["0.8219", "0.7656"]
    assert paired[7] in ("+0.0562", "+0.0563")  # 0.05625: the last digit is the float error's
    shot(page, tmp_path, "two-models")

    page.select_option("#differ", "false")
    with page.expect_navigation():  # the next page, not this one, is read
        page.click("#apply-differ")
    assert shown_keys(page) == sorted(GT)
    assert page.locator("#item-matrix td.wrong").count() == 4  # r1 in both, r2 and r5 in b

    page.goto(f"/compare?runs={a},{b}")
    page.locator("#item-matrix tr[data-key='r5'] td").nth(1).locator("a").click()
    page.wait_for_url(re.compile(rf"/runs/{b}/items/r5$"))

    page.goto(f"/compare?runs={a},{c}")
    warning = page.locator(".compare-warning[data-kind='dataset']")
    assert "the runs differ in dataset" in warning.inner_text()
    assert shown_keys(page) == ["r3"]  # another ground truth: a wrong where it was right
    shot(page, tmp_path, "dataset-warning")


def test_one_slots_run_compares_its_models(
    page: Page, live: LiveServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{tmp_path / 'web.sqlite3'}")
    examples = Path(__file__).resolve().parents[2] / "examples" / "slots"
    args = ["slots", "score", "--gold", str(examples / "gold.synthetic.jsonl")]
    for model in ("synthetic-careful", "synthetic-fast"):
        args += ["--pred", f"{model}={examples / f'pred_{model}.synthetic.jsonl'}"]
    result = invoke([*args, "--out", str(tmp_path / "s"), "--bootstrap", "20"])
    assert result.exit_code == 0, result.stderr
    [run] = re.findall(r"stored as run ([0-9a-f]{12})", result.stdout + result.stderr)
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(f"/compare?runs={run}")
    heads = page.locator("#item-matrix thead th").all_inner_texts()
    assert heads == ["session", f"{run[:8]} synthetic-careful", f"{run[:8]} synthetic-fast"]
    assert len(shown_keys(page)) == 15 and shown_keys(page)[0] == "u1/1"
    assert page.locator("#paired-difference tbody tr").count() == 1
    shot(page, tmp_path, "slots-models")


def test_the_settings_warning_names_each_value_per_run(
    page: Page,
    live: LiveServer,
    tmp_path: Path,
    chat_server: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/runs.md: each differing setting named with its value per run, on the page as in
    ``runs compare`` (a new user saw only the names)."""
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{tmp_path / 'web.sqlite3'}")
    server = chat_server(reply)
    a, _ = json_runs(tmp_path, server)
    c, _ = json_runs(tmp_path, server, "--fuzzy-threshold", "0.5", "--weights", "accuracy=0.5")
    page.goto(f"/compare?runs={a},{c}")
    warning = page.locator(".compare-warning[data-kind='settings']")
    assert warning.inner_text() == (
        "⚠ the runs differ in signature settings: fuzzy_threshold: [0.85, 0.5]; "
        "weights.accuracy: [0.45, 0.5]"
    )


def test_the_matrix_links_name_their_run_and_record(
    page: Page, live: LiveServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each link of the item matrix is named by its record (the pair key) and its column, not
    only "✓ right" (a new user's finding: 100 rows x N runs of the same names); its column
    headers have scope="col"."""
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{tmp_path / 'web.sqlite3'}")
    examples = Path(__file__).resolve().parents[2] / "examples" / "slots"
    args = ["slots", "score", "--gold", str(examples / "gold.synthetic.jsonl")]
    for model in ("synthetic-careful", "synthetic-fast"):
        args += ["--pred", f"{model}={examples / f'pred_{model}.synthetic.jsonl'}"]
    result = invoke([*args, "--out", str(tmp_path / "s"), "--bootstrap", "20"])
    assert result.exit_code == 0, result.stderr
    [run] = re.findall(r"stored as run ([0-9a-f]{12})", result.stdout + result.stderr)
    page.goto(f"/compare?runs={run}")
    scopes = page.locator("#item-matrix thead th").evaluate_all(
        "ths => ths.map(th => th.getAttribute('scope'))"
    )
    assert scopes == ["col", "col", "col"]
    first = page.locator("#item-matrix tbody tr").first
    assert first.get_attribute("data-key") == "u1/1"
    labels = first.locator("a").evaluate_all("a => a.map(e => e.getAttribute('aria-label'))")
    shown = first.locator("a").all_inner_texts()
    states = [s.split(" ", 1)[1] for s in shown]  # "✓ right" -> "right"
    assert labels == [
        f"session u1/1 in run {run[:8]} {model}: {state}"
        for model, state in zip(("synthetic-careful", "synthetic-fast"), states, strict=True)
    ]
    assert sorted(states) == ["right", "wrong"]  # a row the models disagree on
    name = labels[1]
    link = page.get_by_role("link", name=name, exact=True)
    assert link.count() == 1 and link.get_attribute("href") == (
        f"/runs/{run}/items/synthetic-fast%2Fu1%2F1"
    )

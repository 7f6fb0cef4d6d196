"""The Runs pages in Debian's Chromium: the list, a run (metrics, plots, signature, items
filtered and paged), comparing two runs; hostile values render as text. Screenshots saved."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from playwright.sync_api import Page
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from live_server import LiveServer
from runs_data import HOSTILE, json_folder, slots_folder

from fieldcheck._cli.main import app
from fieldcheck.runs import record_folder
from fieldcheck.store import Store


def shot(page: Page, tmp_path: Path, name: str) -> Path:
    path = tmp_path / "screenshots" / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 1000
    return path


def test_open_a_run_filter_its_items_and_compare_two(
    page: Page, live: LiveServer, tmp_path: Path
) -> None:
    store = Store(f"sqlite:///{tmp_path / 'web.sqlite3'}")
    out, batch = json_folder(tmp_path, "a")
    a = record_folder(store, out, inputs=[("batch", batch)], model=HOSTILE)
    b = record_folder(store, json_folder(tmp_path, "b")[0], model="beta")
    store.close()

    page.goto("/runs")
    assert page.locator("#runs tbody tr").count() == 2
    assert page.locator(f"tr[data-run='{a.id}'] td.model").inner_text() == HOSTILE
    assert page.locator("#runs img").count() == 0
    shot(page, tmp_path, "runs")

    page.click(f"a[href='/runs/{a.id}']")
    assert page.locator("#run-model").inner_text() == HOSTILE
    assert page.locator("#items tbody tr").count() == 3
    assert "0.8333" in page.locator("#metrics").inner_text()
    assert page.locator("#plots img").count() >= 1
    assert "system" in page.locator("#signature").inner_text()
    page.check("#filter-failed")
    page.select_option("#filter-tag", HOSTILE)
    page.click("#apply-filter")
    assert page.locator("#items-count").inner_text() == "1 item(s) match"
    assert [
        k
        for k in page.locator("#items tbody tr").evaluate_all(
            "rows => rows.map(r => r.dataset.key)"
        )
    ] == ["r3"]
    assert page.locator("main img[src='x']").count() == 0  # the hostile field stays text
    shot(page, tmp_path, "run-filtered")

    page.goto("/runs")
    page.check(f"input[value='{a.id}']")
    page.check(f"input[value='{b.id}']")
    page.click("#compare-selected")
    path, query = page.url.split("/", 3)[3].split("?")  # /runs/compare?ids= redirects here
    assert (path, sorted(query.removeprefix("runs=").split(","))) == (
        "compare",
        sorted([a.id, b.id]),
    )
    city = page.locator("table[data-table='field'] tr", has_text="city").inner_text()
    assert city.split() == ["city", "0.5000", "0.5000"]
    assert page.locator("table[data-table='field'] tbody th", has_text=HOSTILE).count() == 1
    assert page.locator("table[data-table='field'] thead th", has_text=HOSTILE).count() == 1
    shot(page, tmp_path, "compare")


def test_slot_compare_heatmap_and_paired_p_values(
    page: Page, live: LiveServer, tmp_path: Path
) -> None:
    store = Store(f"sqlite:///{tmp_path / 'web.sqlite3'}")
    slots_out, inputs = slots_folder(tmp_path)
    s = record_folder(store, slots_out, inputs=inputs)
    store.close()
    page.goto(f"/runs/compare?ids={s.id}")
    work = page.locator("table[data-table='topic'] tr", has_text="work")
    assert work.inner_text().split() == ["work", "1.0000", "0.0000"]
    assert "hsl(120" in (work.locator("td").first.get_attribute("style") or "")
    assert page.locator("#paired tbody tr").count() == 1
    shot(page, tmp_path, "compare-slots")
    page.goto(f"/runs/{s.id}")
    page.select_option("#filter-item-model", "b")
    page.click("#apply-filter")
    assert page.locator("#items-count").inner_text() == "2 item(s) match"
    page.goto("/runs/compare?ids=nope")
    assert "no run 'nope'" in page.locator("[data-testid=compare-error]").inner_text()


def test_run_and_compare_pages_show_latency_in_ms(
    page: Page, live: LiveServer, tmp_path: Path
) -> None:
    """A slot run of demo-sized latencies (sessions of 19-62 ms) shows them in ms on the run
    page and the comparison (issue 26: 0.0 s before); the API keeps the seconds unrounded."""
    examples = Path(__file__).resolve().parents[2] / "examples" / "slots"
    out = tmp_path / "slots-ms"
    args = ["slots", "score", "--gold", str(examples / "gold.synthetic.jsonl"), "--out", str(out)]
    inputs = []
    for model in ("synthetic-careful", "synthetic-fast"):
        rows = [json.loads(line) for line in (examples / f"latency_{model}.synthetic.jsonl").open()]
        lat = tmp_path / f"latency_{model}.jsonl"
        lat.write_text(
            "".join(json.dumps(r | {"seconds": r["seconds"] / 10_000}) + "\n" for r in rows)
        )
        pred = examples / f"pred_{model}.synthetic.jsonl"
        args += ["--pred", f"{model}={pred}", "--latency", f"{model}={lat}"]
        inputs += [(f"pred:{model}", pred), (f"latency:{model}", lat)]
    result = CliRunner().invoke(app, [*args, "--bootstrap", "0", "--no-store"])
    assert result.exit_code == 0, result.output
    store = Store(f"sqlite:///{tmp_path / 'web.sqlite3'}")
    run = record_folder(store, out, inputs=inputs)
    store.close()

    page.goto(f"/runs/{run.id}")
    row = page.locator("#metrics #latency").inner_text()
    assert "34.1 / 33.8 / 40.6 / 510.9 ms" in row
    assert "25.5 / 26.5 / 29.0 / 382.1 ms" in row
    shot(page, tmp_path, "run-latency")
    page.goto(f"/runs/compare?ids={run.id}")
    assert "25.5 / 26.5 / 29.0 / 382.1 ms" in page.locator("#metrics #latency").inner_text()
    data = page.request.get(f"/api/runs/compare?ids={run.id}").json()
    fast = data["latency"][[c["model"] for c in data["columns"]].index("synthetic-fast")]
    assert fast["mean"] == pytest.approx(0.025474)  # seconds, unrounded

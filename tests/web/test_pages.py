"""The Configuration and Test evaluation pages in real Chromium: the strategy table (add, edit,
remove, import, export and the round trip through the file), thresholds, weights, the spec's
walkthrough read off the page (RQS 0.7375), and hostile names shown as text. A screenshot of
every page goes to the test's tmp folder."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from live_server import LiveServer
from playwright.sync_api import Page, expect

from walkthrough import WALK_AIO, WALK_GT, WALK_STRATEGIES

HOSTILE = "<img src=x onerror=alert(1)>"
ALLOWED = "EXACT, FUZZY, SEMANTIC, IGNORE"


def shot(page: Page, tmp_path: Path, name: str) -> Path:
    path = tmp_path / "screenshots" / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 1000
    return path


def rows(page: Page) -> list[tuple[str, str]]:
    table = page.locator("#strategy-table tbody tr")
    return [
        (
            table.nth(i).locator("input[name=field]").input_value(),
            table.nth(i).locator("input[name=strategy]").input_value(),
        )
        for i in range(table.count())
    ]


def add_row(page: Page, field: str, strategy: str) -> None:
    page.click("#add-row")
    last = page.locator("#strategy-table tbody tr").last
    last.locator("input[name=field]").fill(field)
    last.locator("input[name=strategy]").fill(strategy)


def submit(page: Page, selector: str) -> None:
    """Click a submit button and wait until the page it leads to has loaded."""
    with page.expect_navigation():
        page.click(selector)


def saved(live: LiveServer, section: str = "strategies") -> object:
    return httpx.get(f"{live.base_url}/api/config/{section}").json()


def test_strategy_table_add_edit_remove_export_import(
    page: Page, live: LiveServer, tmp_path: Path
) -> None:
    page.goto("/configuration")
    assert rows(page) == []
    add_row(page, "name", "FUZZY")
    add_row(page, "bio", "semantic")  # values are case-insensitive, as in a --strategies file
    add_row(page, "notes", "EXACT")
    submit(page, "#save-strategies")
    expect(page.locator("p.saved")).to_have_text("Saved the field strategies.")
    assert saved(live) == {"bio": "SEMANTIC", "name": "FUZZY", "notes": "EXACT"}
    # edit one row, remove another
    notes = page.locator("#strategy-table tbody tr").filter(
        has=page.locator("input[name=field][value=notes]")
    )
    notes.locator("input[name=strategy]").fill("IGNORE")
    bio = page.locator("#strategy-table tbody tr").filter(
        has=page.locator("input[name=field][value=bio]")
    )
    bio.locator(".remove-row").click()
    submit(page, "#save-strategies")
    assert saved(live) == {"name": "FUZZY", "notes": "IGNORE"}
    assert rows(page) == [("name", "FUZZY"), ("notes", "IGNORE")]
    shot(page, tmp_path, "configuration")
    # export: the file is the saved mapping
    with page.expect_download() as download:
        page.click("#export-strategies")
    exported = tmp_path / "exported.json"
    download.value.save_as(exported)
    assert download.value.suggested_filename == "field_strategies.json"
    assert json.loads(exported.read_text()) == {"name": "FUZZY", "notes": "IGNORE"}
    # import another file, then the exported one back: the round trip gives the same bytes
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"sku": "exact", "title": "Fuzzy"}))
    page.set_input_files("#import-strategies-file", str(other))
    submit(page, "#import-strategies")
    assert rows(page) == [("sku", "EXACT"), ("title", "FUZZY")]
    assert saved(live) == {"sku": "EXACT", "title": "FUZZY"}
    page.set_input_files("#import-strategies-file", str(exported))
    submit(page, "#import-strategies")
    assert rows(page) == [("name", "FUZZY"), ("notes", "IGNORE")]
    with page.expect_download() as again:
        page.click("#export-strategies")
    again.value.save_as(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == exported.read_bytes()


def test_a_bad_value_gets_the_cli_message_and_saves_nothing(
    page: Page, live: LiveServer, tmp_path: Path
) -> None:
    page.goto("/configuration")
    add_row(page, "name", "FUZZZY")
    submit(page, "#save-strategies")
    error = page.get_by_test_id("error-strategies")
    expect(error).to_have_text(f"field 'name': strategy must be one of {ALLOWED} (got 'FUZZZY')")
    assert rows(page) == [("name", "FUZZZY")]  # the table keeps what was typed
    assert saved(live) == {}
    shot(page, tmp_path, "configuration-error")
    bad_file = tmp_path / "bad.json"
    bad_file.write_text('{"a": 1}')
    page.set_input_files("#import-strategies-file", str(bad_file))
    submit(page, "#import-strategies")
    expect(error).to_have_text(f"bad.json: field 'a': strategy must be one of {ALLOWED} (got 1)")


def test_thresholds_and_weights_forms(page: Page, live: LiveServer, tmp_path: Path) -> None:
    page.goto("/configuration")
    page.fill("input[name=fuzzy_threshold]", "0.9")
    submit(page, "#save-thresholds")
    expect(page.locator("p.saved")).to_have_text("Saved the thresholds.")
    assert saved(live, "thresholds") == {"fuzzy_threshold": 0.9, "semantic_threshold": 0.8}
    page.fill("input[name=safety]", "0")
    submit(page, "#save-weights")
    assert saved(live, "weights")["safety"] == 0.0  # type: ignore[index]
    page.fill("input[name=accuracy]", "-1")
    submit(page, "#save-weights")
    expect(page.get_by_test_id("error-weights")).to_have_text(
        "field 'accuracy': must be greater than or equal to 0 (got -1.0)"
    )
    page.fill("input[name=semantic_threshold]", "high")
    submit(page, "#save-thresholds")
    expect(page.get_by_test_id("error-thresholds")).to_have_text(
        "field 'semantic_threshold': must be a valid number (got 'high')"
    )
    assert saved(live, "weights")["accuracy"] == 0.45  # type: ignore[index]


def test_walkthrough_on_the_test_evaluation_page(
    page: Page, live: LiveServer, tmp_path: Path
) -> None:
    httpx.put(f"{live.base_url}/api/config/strategies", json=WALK_STRATEGIES)
    page.goto("/evaluate")
    shot(page, tmp_path, "evaluate-empty")
    page.fill("#ground-truth", json.dumps(WALK_GT, indent=2))
    page.fill("#output", json.dumps(WALK_AIO, indent=2))
    submit(page, "#run-evaluation")
    # 0.45 x 1.0 + 0.25 x 0.75 + 0.15 x 1.0 - 0.15 x 2/6 = 0.7375
    expect(page.locator("#score-rqs")).to_have_text("0.7375")
    expect(page.locator("#score-completeness")).to_have_text("0.7500")
    expect(page.locator("#score-hallucination")).to_have_text("0.3333")
    expect(page.locator("#score-accuracy")).to_have_text("1.0000")
    expect(page.locator("#score-safety")).to_have_text("1.0000")
    buckets = page.locator("#buckets tbody tr")
    assert buckets.all_inner_texts() == [
        "extra_keys\t1\textra_field",
        "gt_null_aio_has_value\t1\tinternal_id",
        "gt_non_null\t4\tbio, email, name, status",
        "aio_missing_or_null\t1\tstatus",
        "both_non_null\t3\tbio, email, name",
    ]
    fields = page.locator("#fields tbody tr").all_inner_texts()
    assert sorted(fields) == [
        "bio\tSEMANTIC\t0.8800\t1.0000",
        "email\tEXACT\t1.0000\t1.0000",
        "name\tFUZZY\t0.9200\t1.0000",
    ]
    shot(page, tmp_path, "evaluate-walkthrough")


def test_evaluation_from_uploaded_files(page: Page, live: LiveServer, tmp_path: Path) -> None:
    (tmp_path / "gt.json").write_text(json.dumps({"email": "a@example.com", "age": 3}))
    (tmp_path / "out.json").write_text(json.dumps({"email": "A@Example.com"}))
    page.goto("/evaluate")
    page.set_input_files("#ground-truth-file", str(tmp_path / "gt.json"))
    page.set_input_files("#output-file", str(tmp_path / "out.json"))
    expect(page.locator("#ground-truth")).to_have_value(
        json.dumps({"email": "a@example.com", "age": 3})
    )
    submit(page, "#run-evaluation")
    # completeness 1/2, accuracy 1/1, no hallucination: 0.45 + 0.125 + 0.15 = 0.725
    expect(page.locator("#score-rqs")).to_have_text("0.7250")
    page.fill("#ground-truth", "[1, 2]")
    page.set_input_files("#ground-truth-file", [])
    submit(page, "#run-evaluation")
    expect(page.get_by_test_id("evaluate-error")).to_have_text(
        "ground truth: ground truth must be a JSON object (got [1, 2])"
    )


def test_a_hostile_field_name_renders_as_text(page: Page, live: LiveServer, tmp_path: Path) -> None:
    httpx.put(f"{live.base_url}/api/config/strategies", json={HOSTILE: "EXACT"})
    page.goto("/configuration")
    assert rows(page) == [(HOSTILE, "EXACT")]
    shot(page, tmp_path, "configuration-hostile")
    page.goto("/evaluate")
    page.fill("#ground-truth", json.dumps({HOSTILE: HOSTILE, "x": None}))
    page.fill("#output", json.dumps({HOSTILE: HOSTILE, "x": HOSTILE, HOSTILE + "2": 1}))
    submit(page, "#run-evaluation")
    expect(page.locator("#score-rqs")).to_have_text("0.7500")  # 0.45+0.25+0.15-0.15*2/3
    fields = page.locator("#fields tbody tr").all_inner_texts()
    assert fields == [f"{HOSTILE}\tEXACT\t1.0000\t1.0000"]
    assert HOSTILE in page.locator("#buckets").inner_text()
    assert page.locator("main img").count() == 0  # nothing became an element
    shot(page, tmp_path, "evaluate-hostile")


def test_every_page_names_its_icon_so_no_browser_asks_for_favicon_ico(live: LiveServer) -> None:
    """A page without an icon link makes a browser ask for /favicon.ico, a 404 in the server's
    log on each page (a tester's finding): every page names an inline empty icon instead."""
    with httpx.Client(base_url=live.base_url) as http:
        for path in ("/evaluate", "/configuration", "/runs", "/login"):
            html = http.get(path).text
            assert '<link rel="icon" href="data:,">' in html, path
        assert http.get("/favicon.ico").status_code == 404  # never asked for, so never served


def test_the_file_inputs_have_their_own_names(page: Page, live: LiveServer) -> None:
    """The label around each text area and file input names the text area only (a new user's
    finding: a screen reader said only "Choose file"): each file input has its own name."""
    page.goto("/evaluate")
    names = {
        "#ground-truth-file": "Ground truth file (JSON)",
        "#output-file": "Model output file (JSON, or text)",
    }
    for selector, name in names.items():
        found = page.get_by_label(name, exact=True)
        assert found.count() == 1
        assert found.evaluate("e => '#' + e.id") == selector
        assert page.get_attribute(selector, "aria-label") == name
    labelled = page.locator("#ground-truth").evaluate("e => [...e.labels].map(l => l.id || 'x')")
    assert labelled == ["x"]  # the text area keeps its label

"""Each system's report.html opened from file:// in Chromium with the network off: every plot
shows (decoded, non-zero natural width), the page asks for nothing but itself and it fits
1366 px (issue 28)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Route

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from runs_data import json_folder, numeric_folder, slots_folder

FOLDERS = {
    "json": lambda root: json_folder(root)[0],
    "slots": lambda root: slots_folder(root)[0],
    "numeric": numeric_folder,
}


BREAKS = """code => {
  const chars = [], tops = [];
  const walk = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
  for (let node = walk.nextNode(); node; node = walk.nextNode()) {
    for (let i = 0; i < node.length; i++) {
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      chars.push(node.data[i]);
      tops.push(range.getBoundingClientRect().top);
    }
  }
  return chars.slice(1).flatMap((_, i) => (tops[i + 1] > tops[i] + 2 ? [chars[i]] : []));
}"""
"""The character before each line break of an element's text."""


@pytest.mark.parametrize("system", sorted(FOLDERS))
def test_report_html_shows_its_plots_offline(browser: Browser, tmp_path: Path, system: str) -> None:
    out = FOLDERS[system](tmp_path)
    report = out / "report.html"
    plots = sorted(p.name for p in out.glob("*.png"))
    assert plots
    for png in out.glob("*.png"):  # the plots must come from inside the page, not beside it
        png.rename(tmp_path / png.name)
    context = browser.new_context(offline=True)
    asked: list[str] = []

    def refuse_all_but_the_page(route: Route) -> None:
        asked.append(route.request.url)
        if route.request.url == report.as_uri():
            route.continue_()
        else:
            route.abort()

    context.route("**/*", refuse_all_but_the_page)
    page = context.new_page()
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(report.as_uri())
    page.wait_for_load_state("load")
    widths = page.locator("img").evaluate_all(
        "imgs => imgs.map(i => [i.complete, i.naturalWidth, i.getBoundingClientRect().width])"
    )
    assert len(widths) == len(plots)
    assert all(done and natural > 100 and shown > 100 for done, natural, shown in widths), widths
    assert [u for u in asked if not u.startswith("data:")] == [report.as_uri()]
    # at 1366 px the page never scrolls sideways: the signature wraps, a wide table scrolls
    wide = page.evaluate("() => document.documentElement.scrollWidth")
    assert wide <= 1366  # json's and numeric's signatures made 1683 and 1488 px before
    # and its lines break after a separator, never inside a word (`safety_c|heck` before)
    breaks = page.locator("p:has-text('Signature:') code").evaluate(BREAKS)
    assert set(breaks) <= {"|", ",", " "}, breaks
    assert breaks or system == "slots"  # json's and numeric's are longer than a line
    context.close()

"""A bidi control in a model name (U+202E, right-to-left override) is shown escaped, as the
terminal shows it (``\\u202e``), on every page and in the bundle: raw, it reversed the numbers and
names after it on the page (``模型[439.0 ,019.0] 0429.0``); form values keep it as it is."""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner

from fieldcheck._cli.main import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "slots"
BIDI = re.compile(r"[\u202a-\u202e\u2066-\u2069]")
NAME = "模型\u202eevil"
SHOWN = "模型\\u202eevil"
KEPT = {"value", "data-key"}  # what a form sends back or a script reads, not shown


class Shown(HTMLParser):
    """A page's text and its attributes but those in ``KEPT``."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.text += [v or "" for k, v in attrs if k not in KEPT]


def shown_text(html: str) -> str:
    parser = Shown()
    parser.feed(html)
    return "\n".join(parser.text)


def test_a_bidi_control_in_a_model_name_is_shown_escaped_on_pages_and_in_the_bundle(
    serve: Any, tmp_path: Path
) -> None:
    args = ["slots", "score", "--gold", str(EXAMPLES / "gold.synthetic.jsonl")]
    for model in (NAME, "plain"):
        args += ["--pred", f"{model}={EXAMPLES / 'pred_synthetic-eager.synthetic.jsonl'}"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "s")])
    assert result.exit_code == 0, result.stderr
    [run] = re.findall(r"stored as run ([0-9a-f]{12})", result.stdout + result.stderr)
    live = serve(database_url=os.environ["FIELDCHECK_DATABASE_URL"])
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        [item] = http.get(f"/api/runs/{run}/items", params={"model": NAME, "limit": 1}).json()[
            "items"
        ]
        pages = {
            url: http.get(url).text
            for url in ("/runs", f"/runs/{run}", f"/compare?runs={run}", item["href"])
        }
    for url, html in pages.items():
        text = shown_text(html)
        assert not BIDI.search(text), url
        assert SHOWN in text, url
    assert f'<option value="{NAME}">' in pages[f"/runs/{run}"]  # the model filter still works

    bundle = tmp_path / "bundle"
    made = CliRunner().invoke(app, ["view", "--bundle", str(bundle), run])
    assert made.exit_code == 0, made.stderr
    html_files = list(bundle.rglob("*.html"))
    assert len(html_files) > 3
    for path in html_files:
        assert not BIDI.search(shown_text(path.read_text(encoding="utf-8"))), path
    [script] = bundle.rglob("items.js")
    rows = json.loads(script.read_text(encoding="utf-8").split("=", 1)[1].rstrip(";\n"))["rows"]
    assert {r["model"] for r in rows} == {NAME, "plain"}
    assert not any(BIDI.search(t) for r in rows for t in [r["shown"], *r["cells"]])
    assert any(SHOWN in r["shown"] and SHOWN in r["cells"] for r in rows)

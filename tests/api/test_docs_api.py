"""docs/api.md: its example request, sent to a live server with the local matcher, prints the
line the doc shows; the doc lists every route of the OpenAPI schema."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
from live_server import Serve

DOC = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()


def test_the_documented_example_prints_what_the_doc_says(serve: Serve) -> None:
    live = serve(matcher="local", judge_base_url=None, judge_model=None)
    body = re.search(r"api/json/evaluate -H 'content-type: application/json' -d '(.*)'", DOC)
    assert body is not None
    shown = DOC.split("prints (abridged):", 1)[1].split("```json\n", 1)[1].split("\n", 1)[0]
    response = httpx.post(f"{live.base_url}/api/json/evaluate", json=json.loads(body.group(1)))
    assert response.status_code == 200
    assert response.text.startswith(shown)
    saved = re.search(r"-X PUT \S+ -H 'content-type: application/json' -d '(.*)'", DOC)
    assert saved is not None
    put = httpx.put(f"{live.base_url}/api/config/strategies", json=json.loads(saved.group(1)))
    assert put.json() == {"name": "FUZZY", "status": "FUZZY"}


def test_the_doc_names_every_route(serve: Serve) -> None:
    paths = httpx.get(f"{serve().base_url}/openapi.json").json()["paths"]
    for path in paths:
        section = path.removesuffix("/import").removesuffix("/export")
        assert path in DOC or section in DOC, path

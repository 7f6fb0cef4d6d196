"""docs/api.md: its example request, sent to a live server with the local matcher, prints the
line the doc shows; the doc lists every route of the OpenAPI schema."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
from live_server import Serve

from fieldcheck.api import check_binding

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


def test_the_access_rules_and_the_rescore_exception_are_in_the_doc() -> None:
    """api.md named no length for the token (serve refuses one under 16 characters) and said
    every call without strategies, thresholds or weights of its own takes the saved ones,
    re-score included, which starts from the run's settings (a new-user trial's findings)."""
    words = " ".join(DOC.split())
    with pytest.raises(ValueError, match="at least 16 characters"):
        check_binding("0.0.0.0", "x" * 15)
    check_binding("0.0.0.0", "x" * 16)
    assert "`FIELDCHECK_API_TOKEN` is set to a token of at least 16 characters" in words
    assert (
        "except a re-score (`POST /api/runs/{id}/rescore`), which starts from the run's own"
        in words
    )

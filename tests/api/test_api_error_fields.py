"""Every 422 names what is at fault (issue 26 follow-up): ``body`` for the body as a whole
(empty, not an object, not sent as JSON, a multipart form of which no part can be read), the
field for a field (a body's field called ``path`` too), in the project's words (``must ...``,
not pydantic's "String should have ..." or "valid dictionary or object to extract fields
from"). They were ``"field": null``, or ``file`` for a broken form."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

JSON = {"content-type": "application/json"}
MULTIPART = {"content-type": "multipart/form-data; boundary=XyZ"}
OBJECT = "body: must be a JSON object"

# (method, route, request arguments, detail, field)
CASES: list[tuple[str, str, dict[str, Any], str, str]] = [
    ("POST", "/api/json/evaluate", {"content": b"", "headers": JSON}, "body: missing", "body"),
    ("POST", "/api/json/evaluate", {"content": b""}, "body: missing", "body"),
    ("PUT", "/api/config/weights", {"content": b"", "headers": JSON}, "body: missing", "body"),
    ("POST", "/api/json/evaluate", {"content": b"null", "headers": JSON}, OBJECT, "body"),
    ("POST", "/api/json/evaluate", {"content": b"[]", "headers": JSON}, OBJECT, "body"),
    ("POST", "/api/json/evaluate", {"content": b'"x"', "headers": JSON}, OBJECT, "body"),
    ("PUT", "/api/config/strategies", {"json": []}, OBJECT, "body"),
    ("PUT", "/api/config/thresholds", {"json": 1}, OBJECT, "body"),
    ("POST", "/api/json/batch-path", {"content": b"null", "headers": JSON}, OBJECT, "body"),
    (
        "POST",
        "/api/json/evaluate",
        {
            "content": b'{"ground_truth": {}, "output": {}}',
            "headers": {"content-type": "text/plain"},
        },
        "body: must be a JSON object sent as application/json (got 'text/plain')",
        "body",
    ),
    (
        "POST",
        "/api/json/batch-path",
        {"json": {"path": ""}},
        "path: must have at least 1 character",
        "path",
    ),
    (
        "POST",
        "/api/json/batch-path",
        {"json": {"path": "a" * 5000}},
        "path: must have at most 4096 characters",
        "path",
    ),
    (
        "POST",
        "/api/json/batch-path",
        {"json": {"path": "a.jsonl", "seed": -1}},
        "seed: must be greater than or equal to 0",
        "seed",
    ),
    ("POST", "/api/json/evaluate", {"json": {"ground_truth": {}}}, "output: missing", "output"),
    (
        "POST",
        "/api/json/evaluate",
        {"json": {"ground_truth": [], "output": {}}},
        "ground_truth: must be a JSON object",
        "ground_truth",
    ),
    (
        "POST",
        "/api/config/weights/import",
        {"content": b"--XyZ\r\nbroken", "headers": MULTIPART},
        "body: not a multipart form (no part could be read)",
        "body",
    ),
    (
        "POST",
        "/api/json/batch",
        {"content": b"", "headers": MULTIPART},
        "body: not a multipart form (no part could be read)",
        "body",
    ),
    # a batch part cut short (no closing boundary): the body is at fault, not a missing batch
    (
        "POST",
        "/api/score/json",
        {
            "content": b'--XyZ\r\nContent-Disposition: form-data; name="batch"; '
            b'filename="a.jsonl"\r\n\r\n{"id":1}',
            "headers": MULTIPART,
        },
        "body: not a whole multipart form (it ends before its closing boundary: the body was "
        "cut short)",
        "body",
    ),
    *(
        (
            "POST",
            "/api/score/json",
            args,
            "body: the route takes a multipart form (multipart/form-data: one file field per "
            f"input role, and settings) ({got})",
            "body",
        )
        for args, got in (
            ({"json": {"batch": "a.jsonl"}}, "got application/json"),
            ({"content": b"x", "headers": {"content-type": "text/plain"}}, "got text/plain"),
            ({}, "got no content type"),
            # curl --data-binary @batch.jsonl: the file's text is a URL-encoded field's name
            (
                {
                    "content": b'{"id":"s","ground_truth":{"a":1},"output":{"a":1}}\n',
                    "headers": {"content-type": "application/x-www-form-urlencoded"},
                },
                "got application/x-www-form-urlencoded: text fields, no file",
            ),
            (
                {
                    "content": b'--XyZ\r\nContent-Disposition: form-data; name="batch"; '
                    b'filename="a.jsonl"\r\n\r\n{"id":1}\r\n--XyZ--\r\n',
                    "headers": {"content-type": "application/x-www-form-urlencoded"},
                },
                "got application/x-www-form-urlencoded: text fields, no file",
            ),
        )
    ),
    # a form that was read but lacks its file: the field is at fault
    ("POST", "/api/json/batch", {"files": {"other": ("a.jsonl", b"{}")}}, "file: missing", "file"),
    (
        "GET",
        "/api/runs",
        {"params": {"limit": "x"}},
        "limit: must be a valid integer, unable to parse string as an integer",
        "limit",
    ),
]


@pytest.mark.parametrize(("method", "route", "request_args", "detail", "field"), CASES)
def test_a_422_names_the_body_or_the_field_in_the_projects_words(
    client: httpx.Client,
    method: str,
    route: str,
    request_args: dict[str, Any],
    detail: str,
    field: str,
) -> None:
    response = client.request(method, route, **request_args)
    assert response.status_code == 422, response.text
    assert response.json() == {"detail": detail, "field": field}


@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        (
            "/api/json/evaluate",
            {"ground_truth": {}, "output": {}, "safety_score": False},
            "safety_score",
        ),
        (
            "/api/json/evaluate",
            {"ground_truth": {}, "output": {}, "safety_score": "0.5"},
            "safety_score",
        ),
        ("/api/json/evaluate", {"ground_truth": {}, "output": {}, "flatten": 1}, "flatten"),
        ("/api/json/batch-path", {"path": "b.jsonl", "bootstrap": "5"}, "bootstrap"),
        ("/api/json/batch-path", {"path": "b.jsonl", "seed": 1.0}, "seed"),
    ],
)
def test_a_value_of_another_json_type_is_refused_not_coerced(
    client: httpx.Client, route: str, body: dict[str, Any], field: str
) -> None:
    """A request body's numbers and booleans are taken as their JSON type says, as the CLI's
    files are (a schemathesis run found ``"safety_score": false`` scored as 0.0, a 200 for a
    body its schema refuses)."""
    response = client.post(route, json=body)
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field

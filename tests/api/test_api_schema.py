"""Property-based API tests generated from the live server's /openapi.json (schemathesis): every
answer to a generated request, valid or not, is what the schema says (issue 26, item 17): no 5xx,
a documented status, content type and headers, a body that matches the declared schema, and
invalid data refused. The Guard's own answers (400, 401, 403, 413), which no generated request
meets on an open loopback server, are checked against the schema too."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from live_server import LiveServer, start_server, walkthrough_judge
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from chat_server import ChatServer
from fieldcheck.api import ApiSettings, create_app
from fieldcheck.api.routes.items import ItemsQuery
from fieldcheck.api.routes.runs import RunsQuery

CONFORMS = [
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]
CHECKS = [not_a_server_error, *CONFORMS, negative_data_rejection]
EXAMPLES = 20  # per operation and generation mode: about 600 requests in all
OPERATIONS = 25  # 15 json and config operations, 8 runs, 1 compare, 1 score
TOKEN = "a-token-of-sixteen-or-more"
RUN_ID = "run_id"
NO_PARAMETERS = {
    f"GET /api/config/{section}{part}"
    for section in ("strategies", "thresholds", "weights")
    for part in ("", "/export")
}


@pytest.fixture(scope="module")
def judge() -> Iterator[ChatServer]:
    server = ChatServer(walkthrough_judge).start()
    yield server
    server.stop()


def serve(folder: Path, judge: ChatServer, **values: Any) -> LiveServer:
    """A live server over ``folder`` (its store, ``data/walk.jsonl``) with ``values`` set."""
    (folder / "data").mkdir(exist_ok=True)
    (folder / "data" / "walk.jsonl").write_text(
        '{"id": 1, "ground_truth": {"a": "x"}, "output": {"a": "x"}}\n'
    )
    settings_ = ApiSettings(
        database_url=f"sqlite:///{folder / 'schema.sqlite3'}",
        data_root=folder / "data",
        matcher="llm",
        judge_base_url=judge.base_url,
        judge_model="judge-1",
        **{"max_json_bytes": 64_000, "max_upload_bytes": 256_000, **values},
    )
    return start_server(create_app(settings_))


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, judge: ChatServer) -> Iterator[LiveServer]:
    server = serve(tmp_path_factory.mktemp("schema"), judge)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def stored_run(live: LiveServer) -> str:
    """A stored run, so that the run operations also answer 200 for a run that exists."""
    body = {"path": "walk.jsonl", "bootstrap": 0}
    answer = httpx.post(f"{live.base_url}/api/json/batch-path", json=body)
    assert answer.status_code == 200, answer.text
    run_id: str = answer.json()["run_id"]
    return run_id


@pytest.fixture(scope="module")
def api_schema(live: LiveServer) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{live.base_url}/openapi.json")


def checks_for(case: schemathesis.Case) -> list[Any]:
    """All checks, but for a multipart form whose only invalid part is its file: a file part is
    bytes, so the "object" or "integer" schemathesis puts there to break the schema's ``string``
    reaches the server as a file like any other (``{}`` is a valid strategies file)."""
    meta = case.meta
    if meta is None or not (case.media_type or "").startswith("multipart/"):
        return CHECKS
    other = [c for where, c in meta.components.items() if where is not ParameterLocation.BODY]
    if meta.generation.mode.is_negative and not any(c.mode.is_negative for c in other):
        return [c for c in CHECKS if c is not negative_data_rejection]
    return CHECKS


def run_cases(
    operation: Any,
    strategy: st.SearchStrategy[schemathesis.Case],
    test: Callable[..., None],
    examples: int = EXAMPLES,
) -> bool:
    """``test(case)`` on ``examples`` cases drawn from ``strategy``; False when the schema
    admits no such case (an operation without parameters has no invalid request)."""

    @given(case=strategy)
    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    def each(case: schemathesis.Case) -> None:
        test(case)

    try:
        each()
    except Unsatisfiable:
        return False
    except Exception as exc:
        raise AssertionError(f"{operation.label}: {exc}") from exc
    return True


def test_every_answer_is_what_the_schema_says(
    api_schema: schemathesis.BaseSchema, stored_run: str
) -> None:
    """Every operation of the served schema, ``EXAMPLES`` valid and ``EXAMPLES`` invalid
    requests each, all of schemathesis's response checks (schemathesis's ``from_fixture`` does
    not run under this pytest, so the operations are looped here); valid requests to the run
    operations also name the stored run."""
    statuses: dict[str, set[int]] = {"positive": set(), "negative": set()}
    negative: list[str] = []
    operations = [result.ok() for result in api_schema.get_all_operations()]
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            strategy = operation.as_strategy(mode)
            if mode is GenerationMode.POSITIVE and RUN_ID in operation.path_parameters:
                fixed = operation.as_strategy(mode, path_parameters={RUN_ID: stored_run})
                strategy = st.one_of(strategy, fixed)

            def conforms(case: schemathesis.Case, seen: set[int] = statuses[mode.value]) -> None:
                seen.add(case.call_and_validate(checks=checks_for(case)).status_code)

            if run_cases(operation, strategy, conforms) and mode is GenerationMode.NEGATIVE:
                negative.append(operation.label)
    assert len(operations) == OPERATIONS
    # no invalid request exists without parameters or body, nor for a path that is any string
    no_negative = {op.label for op in operations} - set(negative)
    assert no_negative == {*NO_PARAMETERS, "GET /api/runs/{run_id}"}
    assert {200, 404, 422} <= statuses["positive"]  # found, not found, refused by the library
    assert 422 in statuses["negative"]


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory, judge: ChatServer) -> Iterator[LiveServer]:
    """A server with a token and a 1-byte limit on every body: the Guard answers everything."""
    server = serve(
        tmp_path_factory.mktemp("guarded"),
        judge,
        token=TOKEN,
        max_json_bytes=1,
        max_upload_bytes=1,
    )
    yield server
    server.stop()


def test_the_guards_answers_are_declared(
    api_schema: schemathesis.BaseSchema, guarded: LiveServer
) -> None:
    """Host refused (400), no token (401), another origin (403), a body over the limit (413):
    each a status the operation declares, with the error body its schema gives."""
    seen: set[int] = set()
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    for result in api_schema.get_all_operations():
        operation = result.ok()
        writes = operation.method.upper() in ("POST", "PUT")
        expected = [
            ({"Host": "fieldcheck.example"}, 400),
            ({}, 401),
            *([({**bearer, "Origin": "http://elsewhere.example"}, 403)] if writes else []),
            *([(bearer, 413)] if len(operation.body) else []),
        ]

        def answers(case: schemathesis.Case, expected: Any = expected) -> None:
            for headers, status in expected:
                answer = case.call(base_url=guarded.base_url, headers=headers)
                assert answer.status_code == status, (headers, answer.text)
                case.validate_response(answer, checks=CONFORMS)
                seen.add(status)

        assert run_cases(operation, operation.as_strategy(), answers, examples=2)
    assert seen == {400, 401, 403, 413}


def test_every_error_answer_is_declared_with_the_error_body(
    api_schema: schemathesis.BaseSchema,
) -> None:
    """The schema names FastAPI's own 422 body (an array of problems) nowhere: every status
    of 400 and above that an operation declares has ``{"detail", "field"}``."""
    raw = api_schema.raw_schema
    assert "HTTPValidationError" not in raw["components"]["schemas"]
    assert raw["components"]["schemas"]["ErrorBody"]["required"] == ["detail", "field"]
    for path, methods in raw["paths"].items():
        for method, operation in methods.items():
            errors = {int(s): r for s, r in operation["responses"].items() if int(s) >= 400}
            assert {400, 401, 403, 413} <= set(errors), (method, path)
            for status, response in errors.items():
                schema = response["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (path, status)


def test_the_schema_is_the_served_one(
    api_schema: schemathesis.BaseSchema, live: LiveServer
) -> None:
    operations = {op.ok().label for op in api_schema.get_all_operations()}
    assert "POST /api/json/evaluate" in operations and len(operations) == OPERATIONS
    assert live.base_url.startswith("http://127.0.0.1:")  # served on a real port


def test_dates_are_iso_8601_as_the_schema_says(live: LiveServer) -> None:
    """``since`` and ``until`` are ``date-time`` strings in the schema; pydantic also read a
    number as Unix time (``until=5``: 1970-01-01T00:00:05Z), invalid data the API accepted."""
    with httpx.Client(base_url=live.base_url) as http:
        for name in ("since", "until"):
            answer = http.get("/api/runs", params={name: "5"})
            assert answer.status_code == 422
            assert answer.json() == {
                "detail": f"{name}: must be an ISO 8601 date-time (2024-05-01T12:00:00Z)",
                "field": name,
            }
            assert http.get("/api/runs", params={name: "2024-05-01T12:00:00Z"}).status_code == 200


def test_a_query_model_is_its_routes_parameters_one_by_one() -> None:
    """``ItemsQuery`` and ``RunsQuery`` (one query for a route, its page and the bundle) are
    declared as the routes' own query parameters, in order, each with its constraints."""
    paths = create_app(ApiSettings()).openapi()["paths"]
    items = paths["/api/runs/{run_id}/items"]["get"]["parameters"]
    assert [(p["name"], p["in"]) for p in items] == [("run_id", "path")] + [
        (name, "query") for name in ItemsQuery.model_fields
    ]
    [limit] = [p for p in items if p["name"] == "limit"]
    assert limit == {
        "name": "limit",
        "in": "query",
        "required": False,
        "schema": {
            "type": "integer",
            "maximum": 500,
            "minimum": 1,
            "default": 100,
            "title": "Limit",
        },
    }
    runs = paths["/api/runs"]["get"]["parameters"]
    assert [(p["name"], p["in"]) for p in runs] == [(n, "query") for n in RunsQuery.model_fields]
    [since] = [p for p in runs if p["name"] == "since"]
    assert since["description"] == "Started at or after (ISO 8601)."
    assert since["schema"]["anyOf"][0] == {"type": "string", "format": "date-time"}

"""Property-based API tests generated from the live server's /openapi.json (schemathesis):
no generated request, valid or not, gets a 5xx answer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from live_server import LiveServer, start_server, walkthrough_judge
from schemathesis.checks import not_a_server_error

from chat_server import ChatServer
from fieldcheck.api import ApiSettings, create_app


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("schema")
    (folder / "data").mkdir()
    (folder / "data" / "walk.jsonl").write_text(
        '{"id": 1, "ground_truth": {"a": "x"}, "output": {"a": "x"}}\n'
    )
    judge = ChatServer(walkthrough_judge).start()
    settings_ = ApiSettings(
        database_url=f"sqlite:///{folder / 'schema.sqlite3'}",
        data_root=folder / "data",
        matcher="llm",
        judge_base_url=judge.base_url,
        judge_model="judge-1",
        max_json_bytes=64_000,
        max_upload_bytes=256_000,
    )
    server = start_server(create_app(settings_))
    yield server
    server.stop()
    judge.stop()


@pytest.fixture(scope="module")
def api_schema(live: LiveServer) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{live.base_url}/openapi.json")


def test_no_generated_request_gets_a_server_error(api_schema: schemathesis.BaseSchema) -> None:
    """Every operation of the served schema, 30 generated requests each (schemathesis's
    ``from_fixture`` does not run under this pytest, so the operations are looped here)."""
    checked = []
    statuses: set[int] = set()
    for result in api_schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
        def no_server_error(case: schemathesis.Case) -> None:
            statuses.add(case.call_and_validate(checks=[not_a_server_error]).status_code)

        try:
            no_server_error()
        except Exception as exc:
            raise AssertionError(f"{operation.label}: {exc}") from exc
        checked.append(operation.label)
    assert len(checked) == 21  # 15 json and config operations, 6 runs
    assert {200, 422} <= statuses  # valid and invalid requests were both generated and answered


def test_the_schema_is_the_served_one(
    api_schema: schemathesis.BaseSchema, live: LiveServer
) -> None:
    operations = {op.ok().label for op in api_schema.get_all_operations()}
    assert "POST /api/json/evaluate" in operations and len(operations) == 21
    assert Path(live.base_url).name  # served on a real port

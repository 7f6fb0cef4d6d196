"""Text that is not Unicode in a request body (issue 26, item 16): a lone surrogate written as
the JSON escape ``"\\ud800"`` (which Python's json reads into a str that cannot be encoded, and
orjson refuses), a UTF-8-encoded surrogate and a byte that is not UTF-8 at all. Each is a 422 in
the API's error shape naming the field, wherever it sits: a key, a value, a strategy key, a
threshold or weight name, a nested output; never a 500 or a dropped connection."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from live_server import start_server, walkthrough_judge

from chat_server import ChatServer
from fieldcheck.api import ApiSettings, create_app

JSON = {"content-type": "application/json"}
ESCAPED = b'"\\ud800"'  # JSON text: a backslash escape of a lone high surrogate
ENCODED = b'"\xed\xa0\x80"'  # the surrogate's three UTF-8-style bytes (not valid UTF-8)
NOT_UTF8 = b'"\xff"'
SURROGATE = "a lone surrogate \\ud800 is not Unicode text"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """One live server for the module, with the walkthrough judge as its matcher."""
    folder = tmp_path_factory.mktemp("bad-text")
    (folder / "data").mkdir()
    judge = ChatServer(walkthrough_judge).start()
    settings = ApiSettings(
        database_url=f"sqlite:///{folder / 'api.sqlite3'}",
        data_root=folder / "data",
        matcher="llm",
        judge_base_url=judge.base_url,
        judge_model="judge-1",
    )
    live = start_server(create_app(settings))
    with httpx.Client(base_url=live.base_url, timeout=30) as http:
        yield http
    live.stop()
    judge.stop()


def evaluate(**parts: bytes) -> bytes:
    """An evaluate body with ``parts`` (raw JSON text) beside a valid ground truth and output."""
    members = {"ground_truth": b'{"a": 1}', "output": b"{}", **parts}
    return b"{" + b", ".join(b'"%s": %s' % (k.encode(), v) for k, v in members.items()) + b"}"


# (method, route, body with {} for the bad text, the field named)
CASES = [
    ("POST", "/api/json/evaluate", b'{"ground_truth": {%s: 1}, "output": {}}', "ground_truth.{}"),
    ("POST", "/api/json/evaluate", evaluate(ground_truth=b'{"a": %s}'), "ground_truth.a"),
    ("POST", "/api/json/evaluate", evaluate(output=b'{"a": [1, %s]}'), "output.a.1"),
    ("POST", "/api/json/evaluate", evaluate(output=b"%s"), "output"),
    ("POST", "/api/json/evaluate", evaluate(output=b'{"b": {%s: 2}}'), "output.b.{}"),
    (
        "POST",
        "/api/json/evaluate",
        evaluate(field_strategies=b'{%s: "EXACT"}'),
        "field_strategies.{}",
    ),
    ("POST", "/api/json/evaluate", evaluate(field_strategies=b'{"a": %s}'), "field_strategies.a"),
    ("POST", "/api/json/evaluate", evaluate(thresholds=b"{%s: 0.5}"), "thresholds.{}"),
    ("POST", "/api/json/evaluate", evaluate(weights=b"{%s: 0.5}"), "weights.{}"),
    ("POST", "/api/json/evaluate", evaluate(safety_check=b"%s"), "safety_check"),
    ("POST", "/api/json/evaluate", b'{"ground_truth": {}, "output": {}, %s: 1}', "{}"),
    ("POST", "/api/json/batch-path", b'{"path": %s}', "path"),
    (
        "POST",
        "/api/json/batch-path",
        b'{"path": "x", "field_strategies": {%s: "FUZZY"}}',
        "field_strategies.{}",
    ),
    ("PUT", "/api/config/strategies", b'{%s: "EXACT"}', "{}"),
    ("PUT", "/api/config/strategies", b'{"a": %s}', "a"),
    ("PUT", "/api/config/thresholds", b"{%s: 0.5}", "{}"),
    ("PUT", "/api/config/weights", b'{"accuracy": 0.5, %s: 0.5}', "{}"),
    ("POST", "/api/runs/r1/rescore", b'{"field_strategies": {%s: "EXACT"}}', "field_strategies.{}"),
]
# the bad text as sent, how the field shows it as a key, the reason
KINDS = {
    "escaped": (ESCAPED, "\\ud800", SURROGATE),
    "encoded": (ENCODED, "\\xed\\xa0\\x80", "not UTF-8 text (byte 0xed)"),
    "not-utf8": (NOT_UTF8, "\\xff", "not UTF-8 text (byte 0xff)"),
}


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize(("method", "route", "body", "field"), CASES)
def test_text_that_is_not_unicode_is_a_422_naming_the_field(
    client: httpx.Client, method: str, route: str, body: bytes, field: str, kind: str
) -> None:
    bad, as_key, reason = KINDS[kind]
    named = field.replace("{}", as_key)
    answer = client.request(method, route, content=body.replace(b"%s", bad), headers=JSON)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {"detail": f"{named}: {reason}", "field": named}
    assert client.get("/api/config/strategies").json() == {}  # nothing was saved


def test_an_escaped_surrogate_pair_is_text_and_scored(client: httpx.Client) -> None:
    """``"\\ud83d\\ude00"`` is one character (U+1F600), not a lone surrogate: accepted."""
    body = b'{"ground_truth": {"\\ud83d\\ude00": "x"}, "output": {"\\ud83d\\ude00": "x"}}'
    answer = client.post("/api/json/evaluate", content=body, headers=JSON)
    assert answer.status_code == 200, answer.text
    assert answer.json()["completeness"] == 1.0 and answer.json()["accuracy"] == 1.0


def test_a_body_that_is_not_json_names_the_body(client: httpx.Client) -> None:
    """Not the byte offset FastAPI gives as the field (``"0"``), nor its 400."""
    answer = client.post("/api/json/evaluate", content=b'{"ground_truth": ', headers=JSON)
    assert answer.status_code == 422
    assert answer.json() == {
        "detail": "body: invalid JSON: Expecting value at line 1 column 18",
        "field": "body",
    }
    answer = client.post("/api/json/evaluate", content=b"\xff\xfe{}", headers=JSON)
    assert answer.json() == {"detail": "body: not UTF-8 text (byte 0xff)", "field": "body"}
    deep = b"[" * 5000 + b"]" * 5000  # past what Python's json reads (FastAPI: 400)
    answer = client.post("/api/json/evaluate", content=deep, headers=JSON)
    assert answer.json() == {"detail": "body: nested too deep to read", "field": "body"}


def test_a_broken_multipart_form_names_the_body(client: httpx.Client) -> None:
    """Starlette's 400 for a form it cannot parse becomes the 422 of any unreadable body."""
    headers = {"content-type": "multipart/form-data; boundary=b"}
    body = b'--b\r\nContent-Disposition: form-data; name="file"\r\n[\r\n--b--\r\n'
    for route in ("/api/config/strategies/import", "/api/json/batch"):
        answer = client.post(route, content=body, headers=headers)
        assert answer.status_code == 422, answer.text
        assert answer.json() == {
            "detail": "body: cannot be read: Invalid multipart data.",
            "field": "body",
        }


@pytest.mark.parametrize("kind", list(KINDS))
def test_uploads_and_query_parameters_with_such_text_are_answered(
    client: httpx.Client, kind: str
) -> None:
    """Already so before issue 26, pinned beside the bodies: an uploaded file is read by orjson,
    which refuses such text (422 naming ``file``); a query parameter is decoded with U+FFFD."""
    bad = KINDS[kind][0]
    for route in ("/api/config/strategies/import", "/api/config/weights/import"):
        answer = client.post(route, files={"file": ("f.json", b"{%s: 1}" % bad)})
        assert answer.status_code == 422 and answer.json()["field"] == "file", answer.text
        assert answer.json()["detail"].startswith("f.json:1: invalid JSON: ")
    line = b'{"id": 1, "ground_truth": {%s: "x"}, "output": {"a": "x"}}\n' % bad
    answer = client.post("/api/json/batch", files={"file": ("b.jsonl", line)})
    assert answer.status_code == 422 and answer.json()["field"] == "file", answer.text
    first = "b.jsonl: no valid record (1 problem; first: b.jsonl:1: invalid JSON: "
    assert answer.json()["detail"].startswith(first)
    query = "%ED%A0%80" if kind != "not-utf8" else "%FF"
    answer = client.get(f"/api/runs?model={query}")
    assert answer.status_code == 200 and answer.json()["total"] == 0
    answer = client.get(f"/api/runs/{query}")
    assert answer.status_code == 404 and answer.json()["field"] == "id"

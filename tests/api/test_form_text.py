"""Text that is not UTF-8 in the web pages' forms and in uploads (issue 26 follow-up): Starlette
reads such bytes as U+FFFD (URL-encoded forms) or Latin-1 (multipart), so a strategy for the
field "\ufffd\ufffd\ufffd" was saved (303) and the Test evaluation page scored raw surrogate bytes
(200) that the API refuses. Each is now a page naming the field, nothing saved or scored; an
upload's bad byte is worded as the CLI words it, not orjson's "surrogates not allowed"."""

from __future__ import annotations

import html
import json

import httpx
from live_server import Serve

FORM = {"content-type": "application/x-www-form-urlencoded"}


def shown(page: httpx.Response) -> str:
    return html.unescape(page.text)


def test_form_text_that_is_not_utf8_is_refused_and_nothing_saved(client: httpx.Client) -> None:
    for body in (b"field=%ED%A0%80&strategy=EXACT", b"field=a&strategy=EXA%FFCT"):
        page = client.post("/configuration/strategies", content=body, headers=FORM)
        assert page.status_code == 400, page.text
        field = "field" if b"%ED" in body else "strategy"
        byte = "0xed" if b"%ED" in body else "0xff"
        assert f"field '{field}': not UTF-8 text (byte {byte}); nothing was saved" in shown(page)
    weights = client.post("/configuration/weights", content=b"accuracy=0.%FF", headers=FORM)
    assert weights.status_code == 400 and "field 'accuracy': not UTF-8 text" in shown(weights)
    assert client.get("/api/config/strategies").json() == {}
    assert client.get("/api/config/weights").json()["accuracy"] == 0.45
    # UTF-8 text is text: saved as typed
    good = client.post(
        "/configuration/strategies", content=b"field=caf%C3%A9&strategy=EXACT", headers=FORM
    )
    assert good.status_code == 303 and client.get("/api/config/strategies").json() == {
        "café": "EXACT"
    }


def test_the_evaluate_page_refuses_bytes_that_are_not_utf8(client: httpx.Client) -> None:
    pasted = client.post(
        "/evaluate",
        files={"ground_truth": (None, b'{"a": "\xed\xa0\x80"}'), "output": (None, b'{"a": 1}')},
    )
    assert pasted.status_code == 422, pasted.text
    assert "field 'ground_truth': not UTF-8 text (byte 0xed)" in shown(pasted)
    uploaded = client.post(
        "/evaluate",
        files={
            "ground_truth": (None, b'{"a": "caf\xc3\xa9"}'),
            "output_file": ("o.json", b'{"a": "caf\xff"}', "application/json"),
        },
    )
    assert uploaded.status_code == 422 and "field 'output_file': not UTF-8 text (byte 0xff)" in (
        shown(uploaded)
    )
    good = client.post(
        "/evaluate",
        files={"ground_truth": (None, '{"a": "café"}'.encode()), "output": (None, b'{"a": 1}')},
    )
    assert good.status_code == 200 and "RQS" in good.text


def test_an_upload_with_a_byte_that_is_not_utf8_is_worded_as_the_cli_words_it(
    client: httpx.Client,
) -> None:
    answer = client.post(
        "/api/config/weights/import", files={"file": ("w.json", b'{"accuracy":\n "\xff"}')}
    )
    assert answer.status_code == 422
    assert answer.json() == {
        "detail": "w.json:2: invalid JSON: not UTF-8 text (byte 0xff at column 3)",
        "field": "file",
    }
    # the Configuration page's import says it as the API does: file, line and column (it said
    # "field 'file': not UTF-8 text (byte 0xff)"; a new-user trial's finding)
    page = client.post(
        "/configuration/strategies/import", files={"file": ("s.json", b'{"a": "\xff"}')}
    )
    assert page.status_code == 400
    assert "s.json:1: invalid JSON: not UTF-8 text (byte 0xff at column 8)" in shown(page)
    assert client.get("/api/config/strategies").json() == {}


def test_a_pasted_text_takes_the_json_limit_and_one_over_it_is_shown_on_the_page(
    serve: Serve,
) -> None:
    """The Test evaluation page's pasted ground truth of 2.7 MB is scored under
    `--max-json-mb 5`, as the API scores it; over the limit the page says so (413), where
    Starlette's own 1 MiB part limit gave a bare JSON 400 (a new user's finding)."""
    truth = {f"k{i}": "v" * 20 for i in range(80_000)}
    form = {"ground_truth": json.dumps(truth), "output": json.dumps({"k1": "v" * 20})}
    assert len(form["ground_truth"]) > 2_500_000
    roomy, tight = serve(max_json_bytes=5 << 20), serve()
    with httpx.Client(base_url=roomy.base_url, timeout=120) as http:
        page = http.post("/evaluate", files={k: (None, v) for k, v in form.items()})
    assert page.status_code == 200, page.text[:300]
    assert 'data-testid="evaluate-error"' not in page.text and "RQS" in page.text
    with httpx.Client(base_url=tight.base_url, timeout=120) as http:
        page = http.post("/evaluate", files={k: (None, v) for k, v in form.items()})
    assert page.status_code == 413 and page.headers["content-type"].startswith("text/html")
    assert (
        "a pasted text is larger than 1048576 bytes (the server's --max-json-mb); "
        "upload it as a file instead" in shown(page)
    )


def test_the_evaluate_page_names_the_line_and_column_of_broken_json(client: httpx.Client) -> None:
    """Broken ground truth is named at its line and column, an upload by its file name in the
    CLI's words (`gt_bad.json:4: ... at column 2`); the page said neither (a new user's
    finding)."""
    broken = '{\n "a": 1,\n "b": 2\n "c": 3\n}'
    reason = "invalid JSON: unexpected character, expected ',' or '}'"
    uploaded = client.post(
        "/evaluate",
        files={"ground_truth_file": ("gt_bad.json", broken.encode()), "output": (None, '{"a":1}')},
    )
    assert uploaded.status_code == 422
    assert f"gt_bad.json:4: {reason} at column 2" in shown(uploaded)
    pasted = client.post(
        "/evaluate", files={"ground_truth": (None, broken), "output": (None, "{}")}
    )
    assert pasted.status_code == 422
    assert f"ground truth: {reason} at line 4 column 2" in shown(pasted)

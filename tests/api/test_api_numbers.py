"""The API reads JSON numbers as ``json score`` and ``json batch`` read them (issue 26, item 3):
integers beyond 64 bits exact, NaN, Infinity and numbers beyond the double range refused."""

from __future__ import annotations

import json
from typing import Any

import httpx

BIG = 2**64  # 18446744073709551616: orjson reads it and BIG + 1 as the one double 2.0**64


def line(rid: Any, gt: Any, out: Any) -> str:
    return json.dumps({"id": rid, "ground_truth": gt, "output": out})


def test_the_api_reads_numbers_as_the_cli(client: httpx.Client) -> None:
    def evaluate_body(body: bytes) -> httpx.Response:
        headers = {"content-type": "application/json"}
        return client.post("/api/json/evaluate", content=body, headers=headers)

    for out_value, accuracy in ((BIG + 1, 0.0), (BIG, 1.0)):
        body = f'{{"ground_truth": {{"n": {BIG}}}, "output": {{"n": {out_value}}}}}'.encode()
        response = evaluate_body(body)
        assert response.status_code == 200, response.text
        assert response.json()["accuracy"] == accuracy
    # what a JSON file may not hold, a body may not either (the CLI: "invalid JSON: ...")
    for bad, words in (
        (b"NaN", "NaN and Infinity are not JSON numbers"),
        (b"-Infinity", "NaN and Infinity are not JSON numbers"),
        (b"1e400", "a number beyond the double range"),
        (b"1" + b"0" * 400, "a number beyond the double range"),
    ):
        response = evaluate_body(b'{"ground_truth": {"n": %s}, "output": {}}' % bad)
        assert response.status_code == 422, response.text
        assert response.json()["detail"].startswith(f"body: invalid JSON: {words}"), response.text
        assert response.json()["field"] == "body"
    upload = "\n".join(
        [line("r1", {"n": BIG}, {"n": BIG + 1}), line("r2", {"n": BIG}, {"n": BIG})]
    ).encode()
    response = client.post(
        "/api/json/batch", params={"bootstrap": 0}, files={"file": ("b.jsonl", upload)}
    )
    assert response.status_code == 200, response.text
    assert response.json()["means"]["accuracy"] == 0.5

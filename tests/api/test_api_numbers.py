"""The API reads JSON numbers as ``json score`` and ``json batch`` read them (issue 26, item 3):
integers beyond 64 bits exact, NaN, Infinity and numbers beyond the double range refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner

from fieldcheck._cli.main import app

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


HUGE_INT = b"1" * 5000  # beyond Python's 4,300-digit limit for int(str): was a 500


def test_an_integer_of_5000_digits_is_refused_on_every_json_route(client: httpx.Client) -> None:
    run_id = client.post(
        "/api/json/batch",
        params={"bootstrap": 0},
        files={"file": ("b.jsonl", line("r1", {"n": 1}, {"n": 1}))},
    ).json()["run_id"]
    routes = [
        ("POST", "/api/json/evaluate", b'{"ground_truth": {"n": %s}, "output": {}}'),
        ("POST", "/api/json/evaluate", b'{"ground_truth": {}, "output": {"n": [-%s]}}'),
        ("POST", "/api/json/batch-path", b'{"path": "a.jsonl", "seed": %s}'),
        ("PUT", "/api/config/weights", b'{"accuracy": %s}'),
        ("PUT", "/api/config/strategies", b'{"a": %s}'),
        ("PUT", "/api/config/thresholds", b'{"fuzzy_threshold": %s}'),
        ("POST", f"/api/runs/{run_id}/rescore", b'{"bootstrap": %s}'),
    ]
    for method, path, body in routes:
        response = client.request(
            method, path, content=body % HUGE_INT, headers={"content-type": "application/json"}
        )
        assert response.status_code == 422, (path, response.text)
        assert response.json() == {
            "detail": "body: invalid JSON: a number beyond the double range (write it as a string)",
            "field": "body",
        }, path


def test_the_cli_refuses_an_integer_of_5000_digits_in_one_line(tmp_path: Path) -> None:
    gt, out, batch = tmp_path / "gt.json", tmp_path / "out.json", tmp_path / "b.jsonl"
    gt.write_bytes(b'{"n": 1}')
    out.write_bytes(b'{"n": %s}' % HUGE_INT)
    batch.write_text(
        "\n".join(
            [
                line("r1", {"n": 1}, {"n": 1}),
                '{"id": "r2", "ground_truth": {"n": 1}, '
                f'"output": {{"n": {HUGE_INT.decode()}}}}}',
            ]
        )
        + "\n"
    )
    runner = CliRunner()
    # an output that is not JSON is scored at its worst (documented), the reason said
    scored = runner.invoke(app, ["json", "score", str(gt), str(out), "--no-store", "--json"])
    assert scored.exit_code == 0 and json.loads(scored.stdout)["rqs"] == 0.0
    assert "output is not a JSON object (invalid_json)" in scored.stderr
    refused = runner.invoke(app, ["json", "score", str(out), str(gt), "--no-store"])
    assert refused.exit_code == 2 and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "out.json:1: invalid JSON: number is infinity when parsed as double" in refused.stderr
    folder = tmp_path / "o"
    batched = runner.invoke(
        app, ["json", "batch", str(batch), "--out", str(folder), "--no-store", "--bootstrap", "0"]
    )
    assert batched.exit_code == 3 and "Traceback" not in batched.stderr  # some input failed
    (error,) = [json.loads(x) for x in (folder / "errors.jsonl").read_text().splitlines()]
    assert error["line"] == 2 and error["reason"].startswith(
        "invalid JSON: number is infinity when parsed as double"
    )

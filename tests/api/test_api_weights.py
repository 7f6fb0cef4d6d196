"""RQS weights whose sum is beyond the double range (issue 26 follow-up): each weight finite and
>= 0 was not enough, ``1e308`` four times was saved and then every score raised
``OverflowError: intermediate overflow in fsum``. The rule is that the sum of the weights is a
finite double too, so no weighted sum can overflow; it holds wherever weights enter (the
library's model, ``--weights``, the API, the Configuration page), and weights saved before the
rule are a one-line error naming them, never a 500 or a traceback."""

from __future__ import annotations

import json
import math
from pathlib import Path

import httpx
import pytest
from live_server import LiveServer, Serve
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck.jsoneval import EvalConfig, evaluate, parse_weights
from fieldcheck.metrics import RqsWeights
from fieldcheck.store import Store

HUGE = {"accuracy": 1e308, "completeness": 1e308, "hallucination": 1e308, "safety": 1e308}
SUM = "must keep the sum of the weights finite"
DEFAULT = RqsWeights().model_dump()


def test_the_library_refuses_weights_whose_sum_overflows() -> None:
    with pytest.raises(ValueError, match=SUM) as caught:
        RqsWeights(**HUGE)
    # the first weight that takes the running sum beyond the double range is named
    assert caught.value.errors()[0]["loc"] == ("completeness",)  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=f"weights: completeness {SUM}"):
        parse_weights("accuracy=1e308,completeness=1e308")
    # one huge weight is allowed (its sum with the defaults is finite) and scores clamp to 1
    big = EvalConfig(weights=RqsWeights(accuracy=1.7e308))
    assert evaluate({"a": 1}, {"a": 1}, big).rqs == 1.0
    assert math.isfinite(math.fsum(RqsWeights(accuracy=1.7e308).model_dump().values()))


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stderr


def test_json_score_refuses_such_weights_in_one_line(tmp_path: Path) -> None:
    record = tmp_path / "a.json"
    record.write_text('{"a": 1}')
    code, stderr = cli(
        "json", "score", str(record), str(record), "--no-store",
        "--weights", "accuracy=1e308,completeness=1e308",
    )  # fmt: skip
    assert code == 2 and "Traceback" not in stderr
    assert stderr.strip().splitlines() == [
        f"error: --weights: completeness {SUM} (at most 1.7976931348623157e+308) (got 1e+308) "
        "(see 'fieldcheck json score --help')"
    ]
    # weights saved in the store before the rule: named, not a traceback
    Store().put_config("weights", HUGE)
    code, stderr = cli("json", "score", str(record), str(record))
    assert code == 2 and "Traceback" not in stderr
    assert "the weights saved in the store are not valid: weights.completeness" in stderr
    code, _ = cli("json", "score", str(record), str(record), "--weights", "accuracy=1")
    assert code == 0  # weights given win over the saved ones


def test_the_api_and_the_page_refuse_such_weights_and_save_nothing(client: httpx.Client) -> None:
    put = client.put("/api/config/weights", json=HUGE)
    assert put.status_code == 422, put.text
    assert put.json()["field"] == "completeness" and SUM in put.json()["detail"]
    form = client.post("/configuration/weights", data={k: "1e308" for k in HUGE})
    assert form.status_code == 400 and SUM in form.text
    assert client.get("/api/config/weights").json() == DEFAULT
    body = {"ground_truth": {"a": 1}, "output": {"a": 1}, "weights": HUGE}
    given = client.post("/api/json/evaluate", json=body)
    assert given.status_code == 422, given.text
    assert given.json()["field"] == "weights.completeness"
    batch = client.post(
        "/api/json/batch",
        params={"bootstrap": 0},
        files={
            "file": ("b.jsonl", json.dumps({"id": "r", "ground_truth": {"a": 1}, "output": {}}))
        },
    )
    rescored = client.post(f"/api/runs/{batch.json()['run_id']}/rescore", json={"weights": HUGE})
    assert rescored.status_code == 422, rescored.text
    assert rescored.json()["field"] == "weights.completeness"


def test_weights_saved_before_the_rule_are_an_error_naming_them(
    serve: Serve, tmp_path: Path
) -> None:
    live: LiveServer = serve()
    Store(f"sqlite:///{tmp_path / 'api.sqlite3'}").put_config("weights", HUGE)
    (tmp_path / "data" / "b.jsonl").write_text(
        json.dumps({"id": "r", "ground_truth": {"a": 1}, "output": {"a": 1}}) + "\n"
    )
    with httpx.Client(base_url=live.base_url, timeout=30) as http:
        for path, body in (
            ("/api/json/evaluate", {"ground_truth": {"a": 1}, "output": {"a": 1}}),
            ("/api/json/batch-path", {"path": "b.jsonl"}),
        ):
            response = http.post(path, json=body)
            assert response.status_code == 422, (path, response.text)
            assert response.json()["field"] == "weights"
            assert response.json()["detail"].startswith(
                f"the weights saved in the store are not valid: weights.completeness {SUM}"
            )
        page = http.post("/evaluate", data={"ground_truth": '{"a": 1}', "output": '{"a": 1}'})
        assert page.status_code == 422 and "the weights saved in the store" in page.text
        # weights given with the call are used in their place
        given = {"ground_truth": {"a": 1}, "output": {"a": 1}, "weights": DEFAULT}
        assert http.post("/api/json/evaluate", json=given).json()["rqs"] == 0.85
        assert http.get("/api/config/weights").json() == HUGE  # shown as saved, to replace

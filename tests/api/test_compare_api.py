"""``GET /api/compare`` against uvicorn, on runs made by ``json run`` against the chat server
fixture (two models whose replies differ on known records) and a slots run of two models: the
items listed are exactly those the runs disagree on (checked against the items themselves), the
paired p-value is the naive reference's, and runs of another dataset or other settings warn."""

from __future__ import annotations

import html
import json
import os
import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import numpy as np
import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compare_runs import GT, json_runs, reply
from fieldcheck._cli.main import app
from fieldcheck.metrics import safe_div_array
from stats_reference import paired_bootstrap_test_naive


def items(http: httpx.Client, run: str) -> dict[str, dict[str, Any]]:
    found = http.get(f"/api/runs/{run}/items", params={"limit": 500}).json()["items"]
    return {i["key"]: i for i in found}


def test_two_models_disagreements_are_exactly_those_of_their_items(
    serve: Any, chat_server: Any, tmp_path: Path
) -> None:
    a, b = json_runs(tmp_path, chat_server(reply))
    live = serve(database_url=os.environ["FIELDCHECK_DATABASE_URL"])
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        found = http.get("/api/compare", params={"runs": f"{a},{b}"}).json()
        items_a, items_b = items(http, a), items(http, b)
        assert sorted(items_a) == sorted(GT)
        matrix = found["matrix"]
        listed = {row["key"] for row in matrix["rows"]}
        # r2 and r5: right in a, wrong in b; r6: right in both, another value
        assert listed == {"r2", "r5", "r6"}
        for key in GT:
            ia, ib = items_a[key], items_b[key]
            same = ia["failed"] == ib["failed"] and ia["result"]["output"] == ib["result"]["output"]
            assert (key not in listed) == same, key
        assert (matrix["items"], matrix["differing"], matrix["next_offset"]) == (8, 3, None)
        r2 = next(row for row in matrix["rows"] if row["key"] == "r2")
        assert [(c["right"], json.loads(c["value"])["city"]) for c in r2["cells"]] == [
            (True, "Oslo"),
            (False, "Rome"),
        ]
        assert [c["url"] for c in r2["cells"]] == [f"/runs/{a}/items/r2", f"/runs/{b}/items/r2"]
        assert found["warnings"] == []  # the model differs by design

        # the paired difference of mean RQS and its p-value, from the items themselves
        [paired] = found["paired"]
        rows_a = np.array([[items_a[k]["result"]["rqs"], 1.0] for k in GT])
        rows_b = np.array([[items_b[k]["result"]["rqs"], 1.0] for k in GT])
        difference, p_value = paired_bootstrap_test_naive(
            rows_a, rows_b, lambda t: safe_div_array(t[:, 0], t[:, 1]), resamples=1000, seed=0
        )
        metrics = {r["name"]: r["values"] for r in found["metrics"]}
        assert paired["metric"] == "rqs" and paired["items"] == 8
        assert abs(paired["estimate_a"] - metrics["rqs"][0]["estimate"]) < 1e-12
        assert abs(paired["difference"] - difference) < 1e-12 and paired["difference"] > 0
        assert paired["p_value"] == p_value

        every = http.get("/api/compare", params={"runs": [a, b], "differ": "false", "limit": 5})
        page = every.json()["matrix"]
        assert [r["key"] for r in page["rows"]] == ["r0", "r1", "r2", "r3", "r4"]
        assert page["next_offset"] == 5
        rest = http.get(
            "/api/compare", params={"runs": f"{a},{b}", "differ": "false", "offset": 5}
        ).json()["matrix"]
        assert [r["key"] for r in rest["rows"]] == ["r5", "r6", "r7"]
        # a page past the rows still counts them (the counts and the page are one query)
        past = http.get("/api/compare", params={"runs": f"{a},{b}", "offset": 3}).json()
        assert (past["matrix"]["items"], past["matrix"]["differing"]) == (8, 3)
        assert past["matrix"]["rows"] == [] and past["matrix"]["next_offset"] is None

        old = http.get("/api/runs/compare", params={"ids": f"{a},{b}"})
        assert old.status_code == 200 and old.json()["matrix"] == matrix
        assert old.json()["tables"] == found["tables"]
        page_old = http.get(f"/runs/compare?ids={a}&ids={b}", follow_redirects=False)
        assert page_old.headers["location"] == f"/compare?runs={a},{b}"
        html = http.get("/compare", params={"runs": f"{a},{b}"}).text
        assert f'href="/runs/{a}/items/r5"' in html and "/items/r3" not in html

        assert http.get("/api/compare", params={"runs": "nope1234"}).status_code == 404
        assert http.get("/api/compare", params={"runs": ","}).status_code == 422


def test_runs_of_another_dataset_or_other_settings_warn(
    serve: Any, chat_server: Any, tmp_path: Path
) -> None:
    server = chat_server(reply)
    a, _ = json_runs(tmp_path, server)
    c, _ = json_runs(tmp_path, server, "--fuzzy-threshold", "0.5")
    other = tmp_path / "other.jsonl"
    lines = [{"id": k, "document": f"doc {k}", "ground_truth": v} for k, v in GT.items()][:5]
    other.write_text("".join(json.dumps(line) + "\n" for line in lines))
    d, _ = json_runs(tmp_path, server, data=other)
    live = serve(database_url=os.environ["FIELDCHECK_DATABASE_URL"])
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        settings = http.get("/api/compare", params={"runs": f"{a},{c}"}).json()["warnings"]
        assert [(w["kind"], w["names"]) for w in settings] == [("settings", ["fuzzy_threshold"])]
        assert settings[0]["values"] == {"fuzzy_threshold": [0.85, 0.5]}
        found = http.get("/api/compare", params={"runs": f"{a},{d}"}).json()
        assert [w["kind"] for w in found["warnings"]] == ["dataset"]
        message = found["warnings"][0]["message"]
        assert f"{a}: documents docs.jsonl sha256 " in message
        assert f"{d}: documents other.jsonl sha256 " in message
        # r5-r7 are missing from d: listed as disagreements
        missing = [r["key"] for r in found["matrix"]["rows"] if r["cells"][1]["key"] is None]
        assert missing == ["r5", "r6", "r7"]
        html = http.get("/compare", params={"runs": f"{a},{d}"}).text
        assert 'data-kind="dataset"' in html
    # a json batch names no dataset input: its items' ground truth tells it apart
    same, other_truth = batch_run(tmp_path, GT), batch_run(tmp_path, {**GT, "r3": {"city": "X"}})
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        kinds = lambda runs: [w["kind"] for w in http.get(  # noqa: E731
            "/api/compare", params={"runs": runs}).json()["warnings"]]  # fmt: skip
        assert "dataset" not in kinds(f"{a},{same}")
        assert "dataset" not in kinds(f"{same},{a}")
        assert "dataset" in kinds(f"{a},{other_truth}")
        assert "dataset" in kinds(f"{same},{other_truth}")
        found = http.get("/api/compare", params={"runs": f"{a},{other_truth}"}).json()
        message = found["warnings"][0]["message"]
        assert message.startswith("the runs differ in dataset (")
        assert f"{a}: documents docs.jsonl sha256 " in message and "outputs" not in message
        assert f"{other_truth}: batch batch1.jsonl sha256 " in message
        assert message.count(", ground truth of 8 items") == 2


def batch_run(tmp_path: Path, truth: dict[str, Any]) -> str:
    """A ``json batch`` of ``truth`` (each output its ground truth), city EXACT, name FUZZY."""
    n = len(list(tmp_path.glob("batch*.jsonl")))
    batch = tmp_path / f"batch{n}.jsonl"
    lines = [{"id": k, "ground_truth": v, "output": v} for k, v in truth.items()]
    batch.write_text("".join(json.dumps(line) + "\n" for line in lines))
    strategies = tmp_path / "strategies.json"
    args = ["json", "batch", str(batch), "--strategies", str(strategies)]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / f"b{n}"), "--bootstrap", "0"])
    assert result.exit_code == 0, result.output
    [run] = re.findall(r"stored as run ([0-9a-f]{12})", result.output)
    return run


def _two_model_slots_run(tmp_path: Path, bootstrap: int) -> str:
    """The id of a ``slots score`` run of the two bundled example models."""
    examples = Path(__file__).resolve().parents[2] / "examples" / "slots"
    args = ["slots", "score", "--gold", str(examples / "gold.synthetic.jsonl")]
    for model in ("synthetic-careful", "synthetic-fast"):
        args += ["--pred", f"{model}={examples / f'pred_{model}.synthetic.jsonl'}"]
    args += ["--out", str(tmp_path / "s"), "--bootstrap", str(bootstrap)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    [run] = re.findall(r"stored as run ([0-9a-f]{12})", result.stdout + result.stderr)
    return str(run)


def test_one_slots_run_compares_its_models(serve: Any, tmp_path: Path) -> None:
    run = _two_model_slots_run(tmp_path, 20)
    live = serve(database_url=os.environ["FIELDCHECK_DATABASE_URL"])
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        found = http.get("/api/compare", params={"runs": run, "differ": "false"}).json()
        assert [c["model"] for c in found["columns"]] == ["synthetic-careful", "synthetic-fast"]
        stored = {r["name"]: r["values"] for r in found["metrics"]}["f1"]
        [paired] = found["paired"]
        assert paired["metric"] == "f1" and paired["items"] == 15
        assert abs(paired["estimate_a"] - stored[0]["estimate"]) < 1e-12
        assert abs(paired["estimate_b"] - stored[1]["estimate"]) < 1e-12
        assert paired["p_value"] is not None and paired["p_value"] < 0.05
        own = items(http, run)
        rows = found["matrix"]["rows"]
        assert len(rows) == found["matrix"]["items"] == 15
        for row in rows:
            careful, fast = (
                own[f"{m}/{row['key']}"] for m in ("synthetic-careful", "synthetic-fast")
            )
            assert [c["key"] for c in row["cells"]] == [careful["key"], fast["key"]]
            assert [c["right"] for c in row["cells"]] == [not careful["failed"], not fast["failed"]]
            assert row["cells"][1]["url"] == f"/runs/{run}/items/{quote(fast['key'], safe='')}"


@pytest.mark.parametrize(
    ("settings", "models"),
    [
        ([], ("synthetic-eager", "synthetic-fast")),
        (["--bootstrap", "200", "--seed", "7"], ("synthetic-eager", "synthetic-fast")),
        ([], ("synthetic-fast", "synthetic-eager")),  # --pred order, not sorted: the scorer's
    ],
)
def test_compare_of_a_slots_run_gives_the_runs_own_paired_p_value(
    serve: Any, tmp_path: Path, settings: list[str], models: tuple[str, str]
) -> None:
    # eager vs fast: p near 0.17, where classes drawn in another order or stream differ
    examples = Path(__file__).resolve().parents[2] / "examples" / "slots"
    args = ["slots", "score", "--gold", str(examples / "gold.synthetic.jsonl")]
    for model in models:
        args += ["--pred", f"{model}={examples / f'pred_{model}.synthetic.jsonl'}"]
    result = CliRunner().invoke(app, [*args, *settings, "--out", str(tmp_path / "s")])
    assert result.exit_code == 0, result.stderr
    [run] = re.findall(r"stored as run ([0-9a-f]{12})", result.stdout + result.stderr)
    live = serve(database_url=os.environ["FIELDCHECK_DATABASE_URL"])
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        [own] = http.get(f"/api/runs/{run}").json()["metrics"]["paired_f1"]
        shown_page = http.get("/api/compare", params={"runs": run, "limit": 1}).json()
    [paired] = shown_page["paired"]
    assert shown_page["paired_test"] == (
        {"resamples": 200, "seed": 7} if settings else {"resamples": 1000, "seed": 0}
    )
    assert (own["model_a"], own["model_b"], own["sessions"]) == (*models, 15)
    assert 0.1 < own["p_value"] < 0.3
    assert paired["p_value"] == own["p_value"]
    assert [paired["a"], paired["b"]] == [f"{run[:8]} {m}" for m in models]
    assert paired["items"] == 15 and abs(paired["difference"] - own["difference"]) < 1e-12
    shown = CliRunner().invoke(app, ["runs", "compare", run, "--json"])
    assert shown.exit_code == 0, shown.stderr
    assert [p["p_value"] for p in json.loads(shown.stdout)["paired"]] == [own["p_value"]]


def test_the_compare_page_answers_a_bad_offset_with_its_page(serve: Any, tmp_path: Path) -> None:
    """A new user's finding: `/compare?...&offset=99999999999999999999` answered the API's bare
    JSON 422. The page leaves out an offset it refuses, as the Runs page does: its first page
    and the reason, as HTML (422); a good offset pages as before."""
    run = _two_model_slots_run(tmp_path, 0)
    live = serve(database_url=os.environ["FIELDCHECK_DATABASE_URL"])
    with httpx.Client(base_url=live.base_url, timeout=60) as http:

        def page(offset: str, **more: str) -> tuple[int, str, list[str], str]:
            params = {"runs": run, "differ": "false", "offset": offset, **more}
            got = http.get("/compare", params=params)
            assert got.headers["content-type"].startswith("text/html")
            said = re.findall(r'data-testid="compare-error">([^<]*)<', got.text)
            rows = re.findall(r'<tr data-key="([^"]*)"', got.text)
            return got.status_code, html.unescape("".join(said)), rows, got.text

        status, said, every, _ = page("0")
        assert (status, said, len(every)) == (200, "", 15)
        assert page("10")[2] == every[10:]
        big = "99999999999999999999"
        for offset in (big, "-1", "x", "2147483648", "9" * 5000):
            status, said, rows, text = page(offset)
            assert status == 422 and rows == every, offset
            assert said == (
                f"offset: must be a whole number from 0 to 2147483647 (got {offset[:64]!r})"
            )
            assert 'id="item-matrix"' in text
        status, said, rows, _ = page(big, runs="nope")
        assert status == 404 and rows == [] and said.endswith("; no run 'nope'")
        assert page("0", differ="x" * 20)[0] == 200  # any other text: only the differing

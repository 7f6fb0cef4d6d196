"""``GET /api/runs`` (issue 28 page 1) on a store made by real runs: a priced ``json run``
against the chat server (one call error, one failed record), two imported ``json batch``
folders, a two-model ``slots score`` and a ``numeric score``. Each row's headline metric and
interval are ``runs show``'s, its counts the items' own; sorted by any column, filtered by
system, model and dataset text, paged."""

from __future__ import annotations

import hashlib
import re
import shutil
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any, get_args
from urllib.parse import parse_qsl

import httpx
import pytest
from live_server import LiveServer, Serve
from runs_list_data import reply, shown, store_runs
from sqlalchemy import create_engine, text

from fieldcheck.api.routes.runs import Sort
from fieldcheck.store import Store


@pytest.fixture
def runs(
    tmp_path: Path, chat_server: Any, monkeypatch: pytest.MonkeyPatch, serve: Serve
) -> Iterator[tuple[dict[str, str], httpx.Client]]:
    ids = store_runs(tmp_path, chat_server(reply), monkeypatch, "api.sqlite3")
    live: LiveServer = serve()
    with httpx.Client(base_url=live.base_url, timeout=30) as http:
        yield ids, http


def test_each_row_holds_runs_show_s_metric_and_the_items_counts(runs: Any) -> None:
    ids, http = runs
    listed = http.get("/api/runs").json()
    assert listed["total"] == 5 and (listed["sort"], listed["order"]) == ("started", "desc")
    rows = {r["id"]: r for r in listed["runs"]}
    assert [r["id"] for r in listed["runs"]] == [
        ids["slots"],
        ids["beta"],
        ids["alpha"],
        ids["numeric"],
        ids["json"],
    ]
    for name, run_id in ids.items():
        row, cli_run = rows[run_id], shown(run_id)
        items = cli_run["items"]
        assert row["n_items"] == cli_run["n_items"] == len(items), name
        assert row["n_failed"] == cli_run["failed_items"] == sum(i["failed"] is True for i in items)
        # a server path by its name alone (docs/api.md), `runs show` the whole path
        assert row["dataset"] == Path(cli_run["dataset"]).name and row["model"] == cli_run["model"]
    # json: RQS and its interval as `runs show` gives them; r2 failed, r1 a call error
    run, cli_run = rows[ids["json"]], shown(ids["json"])
    rqs = cli_run["intervals"]["rqs"]
    assert run["metric"] == {
        "name": "rqs",
        "values": [
            {
                "model": "m",
                "estimate": cli_run["metrics"]["means"]["rqs"],
                "low": rqs["low"],
                "high": rqs["high"],
            }
        ],
    }
    assert rqs["low"] < run["metric"]["values"][0]["estimate"] < rqs["high"]
    assert run["headline"] == cli_run["metrics"]["means"]["rqs"]
    # r2 and r3 (no JSON: the model's failure) failed; r1's call failed (not scored)
    assert (run["n_failed"], run["n_call_errors"]) == (2, 1)
    assert (run["input_tokens"], run["output_tokens"], run["tokens"]) == (200, 25, 225)
    assert run["cost_usd"] == pytest.approx(200 / 1e6 * 2 + 25 / 1e6 * 10)
    assert run["latency_mean_s"] > 0
    docs = Path(cli_run["dataset"])
    assert (run["dataset_name"], run["dataset_sha256_short"]) == (
        "docs.jsonl",
        hashlib.sha256(docs.read_bytes()).hexdigest()[:12],
    )
    # slots: one row, each model's F1 with its interval; sorted by the best one
    slots, cli_slots = rows[ids["slots"]], shown(ids["slots"])
    f1 = {v["model"]: v for v in slots["metric"]["values"]}
    for model in ("a", "b"):
        stored = cli_slots["intervals"][model]["f1"]
        assert f1[model] == {
            "model": model,
            "estimate": cli_slots["metrics"]["models"][model]["f1"],
            "low": stored["low"],
            "high": stored["high"],
        }
    assert slots["headline"] == max(v["estimate"] for v in f1.values())
    assert slots["dataset_name"] == "gold.jsonl" and slots["n_call_errors"] is None
    # numeric: numerical-match accuracy
    numeric, cli_numeric = rows[ids["numeric"]], shown(ids["numeric"])
    [value] = numeric["metric"]["values"]
    assert value["estimate"] == cli_numeric["metrics"]["numerical_match_accuracy"]
    ci = cli_numeric["intervals"]["overall"]["numerical_match_accuracy"]
    assert (value["low"], value["high"]) == (ci["low"], ci["high"])
    assert numeric["dataset_name"] == "data.json" and numeric["n_call_errors"] is None
    # given predictions' tokens and cost, from the run's own statistics (no model call made)
    stats = cli_numeric["metrics"]
    assert (numeric["input_tokens"], numeric["output_tokens"]) == (
        stats["total_input_tokens"],
        stats["total_output_tokens"],
    )
    assert numeric["tokens"] == stats["total_tokens"] > 0
    assert numeric["cost_usd"] == stats["total_cost_usd"] > 0


def test_sorted_by_any_column_filtered_and_paged(runs: Any) -> None:
    ids, http = runs

    def listed(**params: Any) -> list[dict[str, Any]]:
        response = http.get("/api/runs", params=params)
        assert response.status_code == 200, response.text
        rows: list[dict[str, Any]] = response.json()["runs"]
        return rows

    by_metric = [r["headline"] for r in listed(sort="metric")]
    assert by_metric == sorted(by_metric, reverse=True) and len(by_metric) == 5
    assert [r["headline"] for r in listed(sort="metric", order="asc")] == by_metric[::-1]
    assert [r["model"] for r in listed(sort="model")] == sorted(r["model"] for r in listed())
    failed = listed(sort="failed", order="asc")
    assert [r["n_failed"] for r in failed] == sorted(r["n_failed"] for r in failed)
    tokens = listed(sort="tokens")  # the model run's and numeric's predictions'; then the rest
    counted = sorted((r for r in listed() if r["tokens"] is not None), key=lambda r: -r["tokens"])
    assert {r["id"] for r in counted} == {ids["json"], ids["numeric"]}
    assert [r["id"] for r in tokens[:2]] == [r["id"] for r in counted]
    assert [r["tokens"] for r in tokens[2:]] == [None] * 3
    assert [r["id"] for r in listed(dataset="DOCS.J")] == [ids["json"]]  # any case
    assert {r["id"] for r in listed(dataset="batch")} == {ids["alpha"]}
    assert listed(dataset="examples") == []  # numeric's folder: the server's, never matched
    assert [r["id"] for r in listed(model_contains="lph")] == [ids["alpha"]]
    assert [r["id"] for r in listed(model="b")] == [ids["slots"]]  # one of its models, as before
    assert {r["id"] for r in listed(system="json")} == {ids["json"], ids["alpha"], ids["beta"]}
    page = http.get("/api/runs", params={"sort": "items", "limit": 2, "offset": 2}).json()
    every = [r["id"] for r in listed(sort="items")]
    assert [r["id"] for r in page["runs"]] == every[2:4] and page["total"] == 5
    bad = http.get("/api/runs", params={"sort": "nope"})
    assert bad.status_code == 422 and bad.json()["field"] == "sort"
    assert http.get("/api/runs", params={"dataset": "%"}).json()["total"] == 0  # literal
    # by dataset: as the list shows it, its file name then its short sha256 (not its path:
    # numeric's examples/numeric/data.json sorts before the test folder's docs.jsonl)
    by_dataset = listed(sort="dataset")
    shown = [(r["dataset_name"], r["dataset_sha256_short"]) for r in by_dataset]
    assert shown == sorted(shown) and len(set(shown)) == 5
    names = [name for name, _ in shown]
    assert names.index("data.json") < names.index("docs.jsonl") < names.index("gold.jsonl")
    assert [r["id"] for r in listed(sort="dataset", order="desc")] == [r["id"] for r in by_dataset][
        ::-1
    ]
    # a value the route refuses: the page says so (422) and lists the runs without it
    for params, said in (
        ({"sort": "nope"}, "sort: must be one of started, system"),
        ({"order": "up", "system": "json"}, "order: must be 'asc' or 'desc' (got 'up')"),
        ({"system": "nope"}, "system: no system 'nope' (json, slots, numeric)"),
        ({"offset": "-1"}, "offset: must be a whole number"),
        ({"limit": "501"}, "limit: must be a whole number from 1 to 500 (got '501')"),
        ({"model_contains": "m" * 256}, "model_contains: must have at most 255 characters"),
    ):
        assert http.get("/api/runs", params=params).status_code == 422
        page = http.get("/runs", params=params)
        assert page.status_code == 422, params
        [error] = re.findall(
            r'<p class="error" role="alert" id="runs-error">([^<]*)</p>', page.text
        )
        assert said in unescape(error), (params, error)
        kept = {k: v for k, v in params.items() if k == "system" and v == "json"}
        assert re.findall(r'<tr data-run="([0-9a-f]+)"', page.text) == [
            r["id"] for r in listed(**kept)
        ]
    assert 'id="runs-error"' not in http.get("/runs", params={"sort": "dataset"}).text
    # the page renders the same rows, in the same order, and honours limit (it showed 50)
    html = http.get("/runs", params={"sort": "metric", "order": "asc"}).text
    assert re.findall(r'<tr data-run="([0-9a-f]+)"', html) == [
        r["id"] for r in listed(sort="metric", order="asc")
    ]
    html = http.get("/runs", params={"sort": "items", "limit": 2, "offset": 2}).text
    assert re.findall(r'<tr data-run="([0-9a-f]+)"', html) == every[2:4]
    assert "runs 3–4 of 5" in html  # the next page keeps the limit
    [nxt] = re.findall(r'href="([^"]+)" id="next-page"', html)
    assert "limit=2" in unescape(nxt) and "offset=4" in unescape(nxt)


def test_docs_runs_md_names_every_sort_column() -> None:
    """The parameters table of docs/runs.md lists every column ``sort`` takes."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "runs.md").read_text()
    row = next(line for line in doc.splitlines() if line.startswith("| `sort` |"))
    assert re.findall(r"`(\w+)`", row)[1:] == list(get_args(Sort))


def test_thousands_of_runs_list_from_their_rows_alone(runs: Any, tmp_path: Path) -> None:
    """3,000 more runs (copies of the model run's row) and no items file left: every sort and
    filter still answers, from the rows (a run's own route says its items are gone). How fast
    is the benchmarks' business, not a timed test's."""
    ids, http = runs
    before = {r["id"]: r["n_failed"] for r in http.get("/api/runs").json()["runs"]}
    engine = create_engine(f"sqlite:///{tmp_path / 'api.sqlite3'}")
    with engine.begin() as c:
        row = dict(
            c.execute(text("SELECT * FROM runs WHERE id = :id"), {"id": ids["json"]}).one()._mapping
        )
        copies = [
            {**row, "id": f"c{i:011d}", "run_key": f"k{i}", "headline": i / 3000}
            for i in range(3000)
        ]
        c.execute(
            text(f"INSERT INTO runs ({', '.join(row)}) VALUES ({', '.join(':' + k for k in row)})"),
            copies,
        )
    engine.dispose()
    shutil.rmtree(tmp_path / "artifacts")  # no items file anywhere
    assert http.get(f"/api/runs/{ids['json']}").json()["items_missing"] is not None
    assert http.get("/api/runs", params={"sort": "metric"}).status_code == 200
    first = http.get("/api/runs", params={"sort": "metric", "limit": 3}).json()
    assert first["total"] == 3005
    assert [r["headline"] for r in first["runs"]] == [1.0, 2999 / 3000, 2998 / 3000]
    assert {
        r["id"]: r["n_failed"]
        for r in http.get("/api/runs", params={"system": "slots"}).json()["runs"]
    } == {ids["slots"]: before[ids["slots"]]}
    assert http.get("/api/runs", params={"dataset": "docs", "limit": 1}).json()["total"] == 3001


def test_a_page_past_the_last_run_says_so_and_links_the_first_and_last_pages(
    serve: Serve, tmp_path: Path
) -> None:
    """Seven runs, 3 a page (a new user's finding on 307 runs): ``offset=10000`` said `No run in
    the store yet` and `runs 10001–307 of 307`. It says how many runs there are and links the
    first and last pages; every page links the first and last (it had previous and next only)."""
    store = Store(f"sqlite:///{tmp_path / 'api.sqlite3'}")
    for n in range(7):
        settings = {"system": "json", "task": "run", "dataset": "d", "dataset_sha256": "x"}
        store.open_run(
            **settings, model=f"m{n}", endpoint="e", settings={}, signature="", n_items=1
        )
    store.close()
    with httpx.Client(base_url=serve().base_url, timeout=30) as http:

        def page(**params: Any) -> tuple[str, dict[str, str]]:
            html = http.get("/runs", params={"limit": 3, **params}).text
            links = re.findall(r'<a href="([^"]+)" id="([a-z]+)-page">', html)
            pager = re.sub(
                r"<[^>]+>|\s+", " ", html.split('id="runs-pager">')[1].split("</span>")[0]
            )
            return " ".join(pager.split()), {name: unescape(url) for url, name in links}

        def offset(url: str) -> str:
            return dict(parse_qsl(url.split("?")[1])).get("offset", "0")

        pager, links = page()
        assert pager == "runs 1–3 of 7 · next page · last page"
        assert (offset(links["next"]), offset(links["last"])) == ("3", "6")
        pager, links = page(offset=3)
        assert pager == "runs 4–6 of 7 · first page · previous page · next page · last page"
        assert [offset(links[k]) for k in ("first", "prev", "next", "last")] == ["0", "0", "6", "6"]
        pager, links = page(offset=6)
        assert pager == "runs 7–7 of 7 · first page · previous page"
        html = http.get("/runs", params={"limit": 3, "offset": 10000}).text
        [said] = re.findall(r'<td colspan="13" id="no-runs">(.*?)</td>', html)
        assert re.sub(r"<[^>]+>", "", unescape(said)) == (
            "No run on this page: 7 run(s) in the store; first page · last page."
        )
        assert [offset(unescape(u)) for u in re.findall(r'href="([^"]+)"', said)] == ["0", "6"]
        pager, links = page(offset=10000)
        assert pager == "7 runs · first page · previous page · last page"
        assert [offset(links[k]) for k in ("first", "prev", "last")] == ["0", "6", "6"]
        html = http.get("/runs", params={"limit": 3, "offset": 10000, "model": "m1"}).text
        assert "No run on this page: 1 run(s) match;" in html and "in the store;" not in html
        for name in ("offset", "limit"):  # over Python's 4,300 digits for int(): was a 500
            refused = http.get("/runs", params={name: "9" * 5000})
            assert refused.status_code == 422 and f"{name}: must be a whole number" in refused.text

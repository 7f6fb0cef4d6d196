"""``GET /api/runs/{id}/items`` against uvicorn (issue 28 page 2): the search finds exactly the
items whose key or JSON holds the text, each sort orders by the item's own value, each filter
keeps exactly its items, and paging (offset or keyset) gives every item once; checked against
the items themselves (``runs.iter_export``'s JSONL). Runs made by the real scoring commands."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import orjson
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from live_server import LiveServer
from runs_data import json_folder, numeric_folder, slots_folder

from fieldcheck.runs import iter_export, record_folder
from fieldcheck.store import RunInfo, Store

CITIES = ("Oslo", "Rome", "Zürich", "Lyon")
ODD_KEY = "odd/key #1? é"


def records() -> list[dict[str, Any]]:
    """40 records: every 3rd names a wrong city, every 5th misses its name, one value holds a
    quote, one key the characters a URL must quote, two are input errors (not scored)."""
    found: list[dict[str, Any]] = []
    for i in range(40):
        truth = {"name": f"Name{i}", "city": CITIES[i % 4]}
        output = dict(truth)
        if i % 3 == 0:
            output["city"] = CITIES[(i + 1) % 4]
        if i % 5 == 0:
            del output["name"]
        found.append({"id": f"r{i:02d}", "ground_truth": truth, "output": output})
    found[7]["output"]["name"] = found[7]["ground_truth"]["name"] = 'they say "hi"'
    found[8]["id"] = ODD_KEY
    found.append({"id": "no-truth", "output": {"name": "x"}})
    found.append({"id": "list-truth", "ground_truth": [1], "output": {"name": "x"}})
    return found


def stored(tmp_path: Path) -> dict[str, RunInfo]:
    store = Store(f"sqlite:///{tmp_path / 'api.sqlite3'}")
    out, batch = json_folder(tmp_path, "many", records())
    runs = {"json": record_folder(store, out, inputs=[("batch", batch)], model="m")}
    slots_out, inputs = slots_folder(tmp_path)
    runs["slots"] = record_folder(store, slots_out, inputs=inputs)
    runs["numeric"] = record_folder(store, numeric_folder(tmp_path))
    store.close()
    return runs


def the_items(tmp_path: Path, run: RunInfo) -> list[dict[str, Any]]:
    """The run's items as its JSONL export gives them (key, seq, failed, ..., result)."""
    store = Store(f"sqlite:///{tmp_path / 'api.sqlite3'}")
    text = b"".join(iter_export(store, run.id, "jsonl"))
    store.close()
    return [orjson.loads(line) for line in text.splitlines()]


def every(http: httpx.Client, run: RunInfo, limit: int = 7, **params: Any) -> list[dict[str, Any]]:
    """All items of a query, page by page (by offset), checking each page's bookkeeping."""
    found: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None:
        response = http.get(
            f"/api/runs/{run.id}/items", params={**params, "limit": limit, "offset": offset}
        )
        assert response.status_code == 200, response.text
        page = response.json()
        assert page["offset"] == offset and len(page["items"]) <= limit
        found += page["items"]
        offset = page["next_offset"]
    assert len(found) == page["total"]
    return found


def texts(value: Any) -> list[str]:
    """Every name and scalar of a JSON value as text (what the search looks in)."""
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in (k, *texts(v))]
    if isinstance(value, list):
        return [t for v in value for t in texts(v)]
    return [value if isinstance(value, str) else orjson.dumps(value).decode()]


def keys(items: list[dict[str, Any]]) -> list[str]:
    return [i["key"] for i in items]


def stored_run(tmp_path: Path, args: list[str]) -> RunInfo:
    """Run the CLI with ``args`` against a store of its own; the one run it stored."""
    from typer.testing import CliRunner

    from fieldcheck._cli.main import app

    url = f"sqlite:///{tmp_path / 'api.sqlite3'}"
    result = CliRunner().invoke(app, args, env={"FIELDCHECK_DATABASE_URL": url})
    assert result.exit_code == 0, result.output
    store = Store(url)
    [run] = store.list_runs()
    store.close()
    return run


@pytest.fixture
def api(
    serve: Callable[..., LiveServer], tmp_path: Path
) -> tuple[httpx.Client, dict[str, RunInfo]]:
    runs = stored(tmp_path)
    live = serve()
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        yield http, runs  # type: ignore[misc]


def test_search_finds_exactly_the_items_holding_the_text(
    api: tuple[httpx.Client, dict[str, RunInfo]], tmp_path: Path
) -> None:
    http, runs = api
    long = http.get(f"/runs/{runs['json'].id}", params={"q": "lorem " * 40})  # 240 characters
    assert long.status_code == 422 and "a search of at most 200 characters" in long.text
    assert "1 item(s) match" not in long.text  # not a search of the text cut at 200
    for system, queries in {
        "json": ["oslo", "ZÜRICH", "r1", 'say "hi"', "#1? é", "0.625", "missing", "nothing-here"],
        "numeric": ["capital expenditures", "EX02", "rounding", "6135.4"],
        "slots": ["doctor", "b/u"],
    }.items():
        items = the_items(tmp_path, runs[system])
        for q in queries:
            want = [
                i["key"]
                for i in items
                if q.lower() in i["key"].lower()
                or any(q.lower() in t.lower() for t in texts(i["result"]))
            ]
            got = every(http, runs[system], q=q)
            assert keys(got) == want, (system, q)
            assert (q, len(want) > 0) != ("nothing-here", True)
    assert len(every(http, runs["json"], q="oslo")) == 14  # 10 in Oslo, 4 put there wrongly
    hostile = every(http, runs["json"], q="'); DROP TABLE runs; --")
    assert hostile == [] and len(every(http, runs["json"], limit=100)) == 42


def test_each_sort_orders_by_the_items_own_values(
    api: tuple[httpx.Client, dict[str, RunInfo]], tmp_path: Path
) -> None:
    """Nulls last in both orders, ties in seq order; each row's values are its item's."""
    http, runs = api
    read: dict[str, dict[str, Callable[[dict[str, Any]], Any]]] = {
        "json": {
            "rqs": lambda i: i["result"].get("rqs"),
            "accuracy": lambda i: i["result"].get("accuracy"),
            "failed": lambda i: i["failed"],
            "key": lambda i: i["key"],
        },
        "numeric": {
            "turn": lambda i: i["turn"],
            "expected": lambda i: _answer(i["result"]["expected_answer"]),
            "parsed": lambda i: _answer(i["result"].get("parsed_answer")),
            "question": lambda i: i["result"]["question"],
        },
        "slots": {
            "f1": lambda i: _f1(i["result"]["counts"]),
            "hallucinated": lambda i: i["result"]["counts"]["fp"],
        },
    }
    for system, sorts in read.items():
        items = the_items(tmp_path, runs[system])
        for name, value in sorts.items():
            for order in ("asc", "desc"):
                present = [i for i in items if value(i) is not None]
                present.sort(key=lambda i: i["seq"])
                present.sort(key=value, reverse=order == "desc")
                want = present + [i for i in items if value(i) is None]
                got = every(http, runs[system], sort=name, order=order, limit=9)
                assert keys(got) == keys(want), (system, name, order)
    page = http.get(f"/api/runs/{runs['json'].id}/items", params={"sort": "rqs"}).json()
    names = [c["name"] for c in page["columns"]]
    by_key = {i["key"]: i for i in the_items(tmp_path, runs["json"])}
    for row in page["items"]:
        item = by_key[row["key"]]
        assert row["values"][names.index("rqs") - 1] == item["result"].get("rqs")
        assert row["values"][names.index("failed") - 1] == item["failed"]
        assert row["href"] == f"/runs/{runs['json'].id}/items/{quote(row['key'], safe='')}"
    odd = http.get(f"/api/runs/{runs['json'].id}/items", params={"q": "#1?"}).json()["items"]
    assert [i["href"] for i in odd] == [
        f"/runs/{runs['json'].id}/items/odd%2Fkey%20%231%3F%20%C3%A9"
    ]


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _answer(value: Any) -> tuple[bool, float] | None:
    """A numeric answer's sort: numbers by value, then text answers (ties), then empty ones."""
    number = _number(value)
    return None if value in (None, "") else (number is None, 0.0 if number is None else number)


def _f1(counts: dict[str, int]) -> float | None:
    tp, fp, fn = counts["tp"], counts["fp"], counts["fn"]
    return 2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn else None


def test_each_filter_keeps_exactly_its_items(
    api: tuple[httpx.Client, dict[str, RunInfo]], tmp_path: Path
) -> None:
    http, runs = api
    checks: dict[str, list[tuple[dict[str, Any], Callable[[dict[str, Any]], bool]]]] = {
        "json": [
            ({"failed": "true"}, lambda i: i["failed"] is True),
            ({"failed": "false"}, lambda i: i["failed"] is False),
            ({"field": "city"}, lambda i: _wrong(i, "city")),
            ({"field": "name", "failed": "true"}, lambda i: _wrong(i, "name")),
            ({"error_type": "missing"}, lambda i: i["error_type"] == "missing"),
            ({"q": "oslo", "failed": "true"}, lambda i: i["failed"] and "Oslo" in str(i)),
        ],
        "numeric": [
            ({"turn": 2}, lambda i: i["turn"] == 2),
            ({"failure_mode": "wrong"}, lambda i: i["result"]["failure_mode"] == "wrong"),
            (
                {"failure_mode": "rounding", "turn": 2},
                lambda i: i["result"]["failure_mode"] == "rounding" and i["turn"] == 2,
            ),
        ],
        "slots": [
            ({"model": "b"}, lambda i: i["model"] == "b"),
            # b misses the job (an FN): failed on the topic; a's other job is a TP under the
            # presence rule, so a did not fail there (nor anywhere)
            ({"topic": "work", "failed": "true"}, lambda i: i["key"] == "b/u1/1"),
            ({"topic": "work", "failed": "false"}, lambda i: i["key"] == "a/u1/1"),
        ],
    }
    for system, filters in checks.items():
        items = the_items(tmp_path, runs[system])
        for params, keep in filters:
            want = [i["key"] for i in items if keep(i)]
            assert want, (system, params)  # each filter keeps some items, not all
            assert len(want) < len(items), (system, params)
            assert keys(every(http, runs[system], **params)) == want, (system, params)
    failures = {i["result"]["failure_mode"] for i in the_items(tmp_path, runs["numeric"])}
    page = http.get(f"/api/runs/{runs['numeric'].id}/items").json()
    [mode] = [f for f in page["filters"] if f["name"] == "failure_mode"]
    assert [c["value"] for c in mode["choices"]] == sorted(failures - {None})
    names = [f["name"] for f in http.get(f"/api/runs/{runs['json'].id}/items").json()["filters"]]
    assert names == ["failed", "field", "error_type"]
    names = [f["name"] for f in http.get(f"/api/runs/{runs['slots'].id}/items").json()["filters"]]
    assert names == ["failed", "topic", "model"]


def _wrong(item: dict[str, Any], field: str) -> bool:
    """Whether a JSON record failed on ``field`` (scored below 1 or missing)."""
    result = item["result"]
    scored = (result.get("fields") or {}).get(field) or {}
    missing = field in ((result.get("buckets") or {}).get("aio_missing_or_null") or [])
    return (scored.get("score") is not None and scored["score"] < 1) or missing


def test_paging_gives_every_item_once(
    api: tuple[httpx.Client, dict[str, RunInfo]], tmp_path: Path
) -> None:
    http, runs = api
    run = runs["numeric"]
    every_key = sorted(i["key"] for i in the_items(tmp_path, run))
    assert len(every_key) == 51
    for params in ({}, {"sort": "expected", "order": "desc"}, {"sort": "question"}):
        got = keys(every(http, run, **params))
        assert sorted(got) == every_key and len(set(got)) == len(got), params
    after, seen = -1, []
    while True:  # the keyset pages of clients before the sorted table
        page = http.get(f"/api/runs/{run.id}/items", params={"after": after, "limit": 10}).json()
        seen += keys(page["items"])
        if page["next_after"] is None:
            break
        after = page["next_after"]
    assert seen == keys(every(http, run))


def test_a_sort_or_filter_the_run_has_not_is_422_naming_it(
    api: tuple[httpx.Client, dict[str, RunInfo]],
) -> None:
    http, runs = api
    url = f"/api/runs/{runs['json'].id}/items"
    for params, field in (
        ({"sort": "rqs; DROP TABLE runs"}, "sort"),
        ({"sort": "turn"}, "sort"),
        ({"failure_mode": "wrong"}, "failure_mode"),
        ({"sort": "rqs", "after": 3}, "after"),
        ({"order": "sideways"}, "order"),
        ({"q": "x" * 201}, "q"),
    ):
        response = http.get(url, params=params)
        assert response.status_code == 422 and response.json()["field"] == field, params


def test_a_model_runs_items_are_searched_in_their_calls_too(
    serve: Callable[..., LiveServer], tmp_path: Path, chat_server: Callable[..., Any]
) -> None:
    """A ``json run`` against the chat server: its items keep the call (prompt, raw reply), so
    the search finds a word of the reply; failed and sorted as a batch's items are."""
    import json

    truth = {f"d{i}": {"name": f"N{i}", "city": "Oslo"} for i in range(5)}

    def reply(body: dict[str, Any]) -> str:
        key = next(k for k in truth if f"doc {k}." in body["messages"][-1]["content"])
        city = "Quokkaville" if key == "d3" else "Oslo"  # d3 fails on city
        return json.dumps({"name": truth[key]["name"], "city": city})

    server = chat_server(reply)
    data = tmp_path / "docs.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": k, "document": f"doc {k}.", "ground_truth": v}) + "\n"
            for k, v in truth.items()
        )
    )
    args = ["json", "run", str(data), "--base-url", server.base_url, "--model", "m"]
    args += ["--out", str(tmp_path / "out"), "--no-progress", "--bootstrap", "20"]
    run = stored_run(tmp_path, args)
    live = serve()
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        found = every(http, run, q="QUOKKA")
        assert keys(found) == ["d3"] and "Quokkaville" in str(found[0]["result"]["call"])
        assert keys(every(http, run, failed="true")) == ["d3"]
        worst = every(http, run, sort="rqs")
        assert keys(worst)[0] == "d3" and keys(worst)[1:] == ["d0", "d1", "d2", "d4"]


def test_a_slot_topic_failed_under_a_fuzzy_rule_is_an_fp_or_fn_there(
    serve: Callable[..., LiveServer], tmp_path: Path
) -> None:
    """``slots score --tp fuzzy``: a job ``nurses`` for gold ``nurse`` differs but is a TP
    (similar enough), ``doctor`` is an FP and an FN. The topic filter's ``failed`` is the
    session's FP or FN on the topic, so every session it keeps is a failed row and the item
    page names the same topics and the matcher's verdict per slot."""

    def jobs(name: str, values: dict[str, str]) -> Path:
        path = tmp_path / name
        rows = [
            {"user": u, "session": 1, "topic": "work", "field": "job", "values": [v]}
            for u, v in values.items()
        ]
        path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
        return path

    gold = jobs("gold.jsonl", {"u1": "nurse", "u2": "nurse"})
    pred = jobs("pred.jsonl", {"u1": "nurses", "u2": "doctor"})
    args = ["slots", "score", "--gold", str(gold), "--pred", f"m={pred}", "--tp", "fuzzy"]
    args += ["--out", str(tmp_path / "out"), "--bootstrap", "0"]
    run = stored_run(tmp_path, args)
    live = serve()
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        failed = every(http, run, topic="work", failed="true")
        assert keys(failed) == ["m/u2/1"] and [i["failed"] for i in failed] == [True]
        assert keys(every(http, run, topic="work", failed="false")) == ["m/u1/1"]
        assert keys(every(http, run, failed="true")) == ["m/u2/1"]
        for key, topics, verdict in (("m/u1/1", [], "TP"), ("m/u2/1", ["work"], "FP + FN")):
            story = http.get(f"/api/runs/{run.id}/items/{quote(key, safe='')}").json()
            [session] = [s for s in story["sections"] if s["id"] == "session"]
            shown = dict(session["blocks"][0]["rows"])
            assert shown["failed on topics"] == topics
            [slots] = [s for s in story["sections"] if s["id"] == "slots"]
            table = slots["blocks"][0]
            assert [r[table["columns"].index("verdict")] for r in table["rows"]] == [verdict]


def test_the_run_pages_links_have_no_empty_query(
    api: tuple[httpx.Client, dict[str, RunInfo]],
) -> None:
    # "first page" was /runs/ID?#items-section (a new-user trial's finding); so were "previous"
    # and "last" when they lead to the first page; a query that is not empty is kept
    import re

    http, runs = api
    run = runs["json"].id  # 42 items: one page of 50
    pages = [
        http.get(f"/runs/{run}", params={"offset": 10, **q}).text for q in ({}, {"sort": "key"})
    ]
    hrefs = [dict(re.findall(r'<a id="([a-z]+-page)" href="([^"]*)"', page)) for page in pages]
    first = f"/runs/{run}#items-section"
    assert hrefs[0] == {"first-page": first, "previous-page": first, "last-page": first}
    assert hrefs[1]["first-page"] == f"/runs/{run}?sort=key#items-section"
    links = [link for page in pages for link in re.findall(r'href="(/runs/[^"]*)"', page)]
    assert len(links) > 10 and [link for link in links if "?#" in link or link[-1] == "?"] == []


def test_a_numeric_answer_sort_puts_text_answers_after_numbers_and_empty_ones_last(
    tmp_path: Path,
) -> None:
    # sorted by `parsed`, "yes"/"no" fell among the empty values (cast to a number: null)
    from typer.testing import CliRunner

    from fieldcheck._cli.main import app
    from fieldcheck.api import ApiSettings, create_app
    from fieldcheck.api.routes.items import ItemsQuery, items_view

    dev = orjson.loads((Path(__file__).parents[2] / "examples/convfinqa/dev.json").read_bytes())
    (tmp_path / "dev.json").write_bytes(orjson.dumps({"dev": dev["dev"][:3]}))
    answers: list[Any] = [1.5, "yes", -2, "no", "", None, "n/a", 7]
    lines = [
        {"conversation_id": c["id"], "turn": t, "answer": answers[(i + t) % len(answers)]}
        for i, c in enumerate(dev["dev"][:3])
        for t in range(len(c["dialogue"]["conv_questions"]))
    ]
    (tmp_path / "p.jsonl").write_bytes(b"\n".join(map(orjson.dumps, lines)))
    args = ["numeric", "score", "--data", str(tmp_path / "dev.json"), "--out", str(tmp_path / "o")]
    done = CliRunner().invoke(app, [*args, "--predictions", str(tmp_path / "p.jsonl")])
    assert done.exit_code == 0, done.output
    ctx = create_app(ApiSettings()).state.fieldcheck
    [run] = ctx.store.list_runs()
    for order in ("asc", "desc"):
        page = items_view(ctx, run, ItemsQuery(limit=500, sort="parsed", order=order))
        at = [c["name"] for c in page["columns"]].index("parsed") - 1
        got = [(i["seq"], i["values"][at]) for i in page["items"]]
        numbers = sorted((v for _, v in got if _number(v) is not None), key=float)
        texts = [v for _, v in sorted(got) if v and _number(v) is None]
        empty = [v for _, v in got if not v]
        ahead = numbers + texts if order == "asc" else texts + numbers[::-1]
        assert [v for _, v in got] == ahead + empty, order
        assert {"yes", "no"} <= set(texts) and len(numbers) > 3 and empty

"""The API's long work runs off the event loop (a tester's finding: a request waited for a slow
one): while a scoring or the Test evaluation page waits on a slow judge, a GET still answers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
from live_server import LiveServer, start_server

from chat_server import ChatServer, Reply, Script
from fieldcheck.api import ApiSettings, create_app

JUDGE_S = 2.0  # each judge call takes this long


def _slow_judge(request: dict[str, Any]) -> Reply:
    return Reply(content="0.9", delay_s=JUDGE_S)


def _while_slow(base_url: str, slow: Callable[[httpx.Client], httpx.Response]) -> list[float]:
    """Run ``slow`` in a thread; meanwhile, once a judge call is under way, the seconds each of
    three GET /api/runs takes. The slow response must be a 200 that took a judge call's time."""
    answered: dict[str, Any] = {}

    def call() -> None:
        started = time.monotonic()
        with httpx.Client(base_url=base_url, timeout=60) as http:
            answered["response"] = slow(http)
        answered["took"] = time.monotonic() - started

    thread = threading.Thread(target=call)
    thread.start()
    time.sleep(JUDGE_S / 4)
    took = []
    with httpx.Client(base_url=base_url, timeout=60) as http:
        for _ in range(3):
            started = time.monotonic()
            assert http.get("/api/runs").status_code == 200
            took.append(time.monotonic() - started)
    thread.join()
    assert answered["response"].status_code == 200, answered["response"].text
    assert answered["took"] >= JUDGE_S
    return took


def _serve(tmp_path: Path, judge: ChatServer) -> LiveServer:
    """The app with ``judge`` as its matcher, a fresh store and a data root."""
    (tmp_path / "data").mkdir()
    return start_server(
        create_app(
            ApiSettings(
                database_url=f"sqlite:///{tmp_path / 'api.sqlite3'}",
                data_root=tmp_path / "data",
                matcher="llm",
                judge_base_url=judge.base_url,
                judge_model="judge-1",
            )
        )
    )


def score(http: httpx.Client, key: str = "1") -> httpx.Response:
    """POST /api/score/json of one record whose one field the judge scores."""
    batch = orjson.dumps({"id": key, "ground_truth": {"bio": "tall"}, "output": {"bio": key}})
    settings = {"bootstrap": 0, "config": {"strategies": {"bio": "SEMANTIC"}}}
    return http.post(
        "/api/score/json",
        files={"batch": ("b.jsonl", batch + b"\n")},
        data={"settings": orjson.dumps(settings).decode()},
    )


def test_a_get_answers_while_a_slow_score_or_evaluation_runs(
    tmp_path: Path, chat_server: Callable[[Script], ChatServer]
) -> None:
    judge = chat_server(_slow_judge)
    live = _serve(tmp_path, judge)
    try:

        def evaluate_page(http: httpx.Client) -> httpx.Response:
            return http.post(
                "/evaluate",
                data={"ground_truth": '{"bio": "a tall engineer"}', "output": '{"bio": "big"}'},
            )

        for slow in (score, evaluate_page):
            calls = len(judge.chat_requests)
            took = _while_slow(live.base_url, slow)
            assert len(judge.chat_requests) > calls, slow.__name__  # the judge was asked
            assert max(took) < JUDGE_S / 2, (slow.__name__, took)
    finally:
        live.stop()


def test_two_scorings_run_at_once(
    tmp_path: Path, chat_server: Callable[[Script], ChatServer]
) -> None:
    """Two score requests are scored at the same time (their judge calls overlap), their plots
    drawn one at a time; each is its own stored run (a tester's finding: the API scored one run
    at a time, a second waiting for the first)."""
    judge = chat_server(_slow_judge)
    live = _serve(tmp_path, judge)
    answers: dict[str, httpx.Response] = {}

    def one(key: str) -> None:
        with httpx.Client(base_url=live.base_url, timeout=60) as http:
            answers[key] = score(http, key)

    try:
        threads = [threading.Thread(target=one, args=(key,)) for key in ("a", "b")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        live.stop()
    assert judge.max_in_flight == 2 and len(judge.chat_requests) == 2
    ids = {key: answer.json()["run_id"] for key, answer in answers.items()}
    assert len(set(ids.values())) == 2
    for answer in answers.values():
        assert "plot_score_distribution.png" in answer.json()["files"]

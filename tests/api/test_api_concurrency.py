"""The API's long work runs off the event loop (a tester's finding: a request waited for a slow
one): while a scoring or the Test evaluation page waits on a slow judge, a GET still answers."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
from live_server import LiveServer, start_server

from chat_server import ChatServer, Reply, Script
from fieldcheck.api import ApiSettings, create_app

WAIT_S = 30.0  # the longest any step waits before the test fails instead of hanging


class _HeldJudge:
    """A judge whose replies wait until the test releases them, so a test can act while a judge
    call is certainly under way; no timing threshold decides a result."""

    def __init__(self, together: int = 1) -> None:
        self.release = threading.Event()
        self.arrived = threading.Semaphore(0)
        self._together = threading.Barrier(together, timeout=WAIT_S)

    def __call__(self, request: dict[str, Any]) -> Reply:
        self.arrived.release()
        try:
            self._together.wait()  # the calls meant to overlap are all under way
        except threading.BrokenBarrierError:
            return Reply(content="0.9")
        self.release.wait(WAIT_S)
        return Reply(content="0.9")


def _while_slow(
    base_url: str, held: _HeldJudge, slow: Callable[[httpx.Client], httpx.Response]
) -> None:
    """Run ``slow`` in a thread; once its judge call is under way (and held), three GET
    /api/runs must answer before the judge is released; then ``slow`` must end in a 200."""
    answered: dict[str, Any] = {}

    def call() -> None:
        with httpx.Client(base_url=base_url, timeout=2 * WAIT_S) as http:
            answered["response"] = slow(http)

    thread = threading.Thread(target=call)
    thread.start()
    try:
        assert held.arrived.acquire(timeout=WAIT_S), "the judge was never asked"
        with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
            for _ in range(3):
                assert http.get("/api/runs").status_code == 200
        assert thread.is_alive() and "response" not in answered  # the slow one still waits
    finally:
        held.release.set()
        thread.join()
    assert answered["response"].status_code == 200, answered["response"].text


def _serve(tmp_path: Path, judge: ChatServer) -> LiveServer:
    """The app with ``judge`` as its matcher, a fresh store and a data root."""
    (tmp_path / "data").mkdir(parents=True)
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
    def evaluate_page(http: httpx.Client) -> httpx.Response:
        return http.post(
            "/evaluate",
            data={"ground_truth": '{"bio": "a tall engineer"}', "output": '{"bio": "big"}'},
        )

    for slow in (score, evaluate_page):
        held = _HeldJudge()
        judge = chat_server(held)
        live = _serve(tmp_path / slow.__name__, judge)
        try:
            _while_slow(live.base_url, held, slow)
        finally:
            held.release.set()
            live.stop()


def test_two_scorings_run_at_once(
    tmp_path: Path, chat_server: Callable[[Script], ChatServer]
) -> None:
    """Two score requests are scored at the same time (their judge calls overlap), their plots
    drawn one at a time; each is its own stored run (a tester's finding: the API scored one run
    at a time, a second waiting for the first)."""
    held = _HeldJudge(together=2)  # each judge call waits until both are under way
    held.release.set()
    judge = chat_server(held)
    live = _serve(tmp_path, judge)
    answers: dict[str, httpx.Response] = {}

    def one(key: str) -> None:
        with httpx.Client(base_url=live.base_url, timeout=2 * WAIT_S) as http:
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

"""The runner against a real scripted chat-completions server on 127.0.0.1 (issue 8's list)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import types
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from chat_server import ChatServer, Reply, Script, user_text
from fieldcheck.runner import (
    CallResult,
    ModelSpec,
    RunHandle,
    Runner,
    RunnerSettings,
    RunSpec,
    estimate_tokens,
    messages_tokens,
    retry_after_seconds,
    retry_wait,
    run_task,
)
from fieldcheck.runner._client import FLUSH_AFTER_S
from fieldcheck.store import Store

Start = Callable[[Script], ChatServer]
HERE = Path(__file__).resolve().parent


def _spec(server: ChatServer, **kw: Any) -> ModelSpec:
    return ModelSpec(name="m", model="scripted", base_url=server.base_url, **kw)


def _ask(runner: Runner, spec: ModelSpec, texts: list[str]) -> list[CallResult]:
    async def go() -> list[CallResult]:
        client = runner.client(spec)
        try:
            return list(
                await asyncio.gather(
                    *(client.complete([{"role": "user", "content": t}]) for t in texts)
                )
            )
        finally:
            await runner.aclose()

    return asyncio.run(go())


WAIT_S = 60.0  # the longest a held reply or a poll waits before the test fails instead of hanging


def test_concurrency_limit_seen_by_the_server(
    chat_server: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    """12 calls with a limit of 3: the server holds each call until 3 are under way (a barrier:
    the limit is used whatever the machine's load, and a 4th call in flight is counted), then
    answers the 3. The runner's request clock moves one unit each time a round of 3 is let go,
    and only then, so each call's latency is its own round's unit: a wait for a free slot
    counted in would give the last round 4 units."""
    from fieldcheck.runner import _client

    clock = {"now": 0.0}

    def one_round() -> None:
        clock["now"] += 1.0

    together = threading.Barrier(3, action=one_round, timeout=WAIT_S)

    def script(req: dict[str, Any]) -> Reply:
        try:
            together.wait()
        except threading.BrokenBarrierError:
            return Reply(content="fewer than 3 at once")
        return Reply(content="ok")

    server = chat_server(script)
    clocked = types.SimpleNamespace(**vars(time))
    clocked.perf_counter = lambda: clock["now"]
    monkeypatch.setattr(_client, "time", clocked)
    runner = Runner(RunnerSettings(concurrency=3, use_cache=False))
    results = _ask(runner, _spec(server), [f"q{i}" for i in range(12)])
    assert [r.text for r in results] == ["ok"] * 12
    assert server.max_in_flight == 3  # never more, and the limit is used
    assert clock["now"] == 4.0  # 4 rounds of 3
    assert [r.latency_s for r in results] == [1.0] * 12


def test_429_with_retry_after_is_waited_for(chat_server: Start) -> None:
    seen: list[float] = []

    def script(req: dict[str, Any]) -> Reply:
        seen.append(time.monotonic())
        if len(seen) == 1:
            return Reply(status=429, headers={"Retry-After": "3"})
        return Reply(content="fine")

    server = chat_server(script)
    [result] = _ask(Runner(RunnerSettings(max_retries=2, use_cache=False)), _spec(server), ["q"])
    assert result.text == "fine" and result.attempts == 2 and result.error_type is None
    assert seen[1] - seen[0] >= 2.95
    # time in requests, not the wait the server asked for: a latency over the whole call would
    # hold the time from the server's first request to its second, the wait within it
    assert result.latency_s < seen[1] - seen[0]


def test_retry_after_forms() -> None:
    assert retry_after_seconds({"retry-after": "2.5"}) == 2.5
    assert retry_after_seconds({"retry-after-ms": "1500"}) == 1.5
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 28 <= (retry_after_seconds({"retry-after": when}) or 0) <= 30.5
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_retry_wait_backoff_and_cap() -> None:
    rng = random.Random(1)
    waits = [retry_wait(a, None, rng) for a in (1, 2, 3, 10, 10, 10)]
    assert all(0 <= w <= cap for w, cap in zip(waits, [1, 2, 4, 30, 30, 30], strict=True))
    assert max(waits[3:]) > 4  # the range grows with the attempt
    assert retry_wait(1, {"retry-after": "7"}) == 7.0
    assert retry_wait(1, {"retry-after": "99999"}) == 120.0  # a hostile Retry-After is capped


def test_500_is_retried_and_exhausted_retries_are_a_server_error(chat_server: Start) -> None:
    calls = Counter[str]()

    def script(req: dict[str, Any]) -> Reply:
        text = user_text(req)
        calls[text] += 1
        if text == "always" or calls[text] == 1:
            return Reply(status=500)
        return Reply(content="second time")

    server = chat_server(script)
    runner = Runner(RunnerSettings(max_retries=2, use_cache=False))
    once, always = _ask(runner, _spec(server), ["once", "always"])
    assert (once.text, once.attempts, once.error_type) == ("second time", 2, None)
    assert (always.text, always.attempts, always.error_type) == (None, 3, "server_error")
    assert calls == {"once": 2, "always": 3}


def test_400_is_not_retried(chat_server: Start) -> None:
    server = chat_server(lambda req: Reply(status=400))
    [result] = _ask(Runner(RunnerSettings(max_retries=5, use_cache=False)), _spec(server), ["q"])
    assert (result.error_type, result.attempts, len(server.chat_requests)) == ("bad_request", 1, 1)
    assert result.error_message and "400" in result.error_message


def test_max_retries_zero_means_one_attempt(chat_server: Start) -> None:
    server = chat_server(lambda req: Reply(status=503))
    [result] = _ask(Runner(RunnerSettings(max_retries=0, use_cache=False)), _spec(server), ["q"])
    assert (result.error_type, result.attempts, len(server.chat_requests)) == ("server_error", 1, 1)


def test_a_hang_hits_the_timeout(chat_server: Start) -> None:
    """A server that holds every call (until the test ends): each attempt stops at the runner's
    own deadline, so the call ends as a timeout while the server still holds both attempts."""
    release = threading.Event()
    held = threading.Semaphore(0)

    def script(req: dict[str, Any]) -> Reply:
        held.release()
        release.wait(WAIT_S)
        return Reply(content="late")

    server = chat_server(script)
    runner = Runner(RunnerSettings(timeout=0.3, max_retries=1, use_cache=False))
    try:
        [result] = _ask(runner, _spec(server), ["q"])
        assert not release.is_set()  # ended by its deadline, not by an answer
    finally:
        release.set()
    assert (result.error_type, result.attempts, result.text) == ("timeout", 2, None)
    assert held.acquire(timeout=WAIT_S) and held.acquire(timeout=WAIT_S)  # both were sent


def test_connection_refused_is_a_connection_error() -> None:
    spec = ModelSpec(name="m", model="x", base_url="http://127.0.0.1:9/v1")
    [result] = _ask(Runner(RunnerSettings(max_retries=1, use_cache=False)), spec, ["q"])
    assert (result.error_type, result.attempts) == ("connection", 2)


def test_usage_missing_is_estimated_and_marked(chat_server: Start) -> None:
    server = chat_server(lambda req: Reply(content="twelve chars", usage=False))
    [result] = _ask(Runner(RunnerSettings(use_cache=False)), _spec(server), ["abcdefgh"])
    assert result.tokens_estimated is True
    assert result.output_tokens == estimate_tokens("twelve chars") == 3
    assert result.input_tokens == messages_tokens([{"role": "user", "content": "abcdefgh"}]) == 6


def test_usage_present_is_taken_as_sent(chat_server: Start) -> None:
    server = chat_server(lambda req: Reply(content="x", prompt_tokens=123, completion_tokens=7))
    [result] = _ask(Runner(RunnerSettings(use_cache=False)), _spec(server), ["q"])
    assert (result.input_tokens, result.output_tokens, result.tokens_estimated) == (123, 7, False)


def test_lone_surrogate_in_a_reply_is_replaced_and_cached(chat_server: Start) -> None:
    server = chat_server(lambda req: "ok \udfff end")  # json.dumps writes it as \\udfff
    store = Store()
    [first] = _ask(Runner(store=store), _spec(server), ["q"])
    [again] = _ask(Runner(store=store), _spec(server), ["q"])
    assert first.text == again.text == "ok \ufffd end" and again.cached


def test_no_choices_is_an_invalid_reply(chat_server: Start) -> None:
    """A chat completion with no content ('choices' empty, content null) is the model's
    `invalid_reply`, not the endpoint's `bad_response`."""
    server = chat_server(
        lambda req: (
            Reply(no_choices=True)
            if user_text(req) == "q"
            else Reply(content="x", fields={"choices": [{"message": {"content": None}}]})
        )
    )
    results = _ask(Runner(RunnerSettings(use_cache=False)), _spec(server), ["q", "null"])
    assert [(r.error_type, r.attempts) for r in results] == [("invalid_reply", 1)] * 2


def test_parameters_and_json_mode_are_sent(chat_server: Start) -> None:
    server = chat_server(lambda req: "{}")
    runner = Runner(RunnerSettings(json_mode=True, use_cache=False))
    _ask(runner, _spec(server, temperature=0.3, max_tokens=50, seed=7), ["q"])
    [body] = server.chat_requests
    assert body["response_format"] == {"type": "json_object"}
    assert (body["temperature"], body["max_tokens"], body["seed"], body["model"]) == (
        0.3,
        50,
        7,
        "scripted",
    )


def test_cache_serves_a_rerun_with_zero_calls(chat_server: Start) -> None:
    server = chat_server(lambda req: Reply(content="a:" + user_text(req), delay_s=0.05))
    store = Store()
    first = _ask(Runner(store=store), _spec(server), ["x", "y"])
    assert len(server.chat_requests) == 2
    runner = Runner(store=store)
    again = _ask(runner, _spec(server), ["x", "y"])
    assert len(server.chat_requests) == 2  # nothing new reached the server
    assert [r.text for r in again] == ["a:x", "a:y"] and all(r.cached for r in again)
    assert [r.latency_s for r in again] == [r.latency_s for r in first]
    assert runner.stats.cache_hits == 2
    _ask(Runner(RunnerSettings(use_cache=False), store=store), _spec(server), ["x"])
    assert len(server.chat_requests) == 3  # --no-cache asks again


def test_an_empty_cache_is_asked_once_and_a_reply_cached_since_is_found(
    chat_server: Start,
) -> None:
    from sqlalchemy import event

    server = chat_server(lambda req: "a:" + user_text(req))
    store = Store()
    lookups: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        if "response_cache" in statement and statement.lstrip().upper().startswith("SELECT"):
            lookups.append(statement)

    event.listen(store.engine, "before_cursor_execute", seen)
    runner = Runner(store=store)
    _ask(runner, _spec(server), ["x", "y", "z"])
    assert len(lookups) == 1  # how many replies the store holds, not a lookup a call
    [again] = _ask(runner, _spec(server), ["x"])  # cached by this runner: looked up
    assert again.cached and again.text == "a:x" and len(server.chat_requests) == 3
    assert len(lookups) == 2
    [other] = _ask(Runner(store=store), _spec(server), ["y"])  # a store with replies
    assert other.cached and len(lookups) == 4  # its count, then its lookup


def test_nonzero_temperature_is_not_cached_unless_asked(chat_server: Start) -> None:
    server = chat_server(lambda req: "r")
    store = Store()
    spec = _spec(server, temperature=0.7)
    _ask(Runner(store=store), spec, ["x"])
    _ask(Runner(store=store), spec, ["x"])
    assert len(server.chat_requests) == 2
    settings = RunnerSettings(cache_nonzero_temperature=True)
    _ask(Runner(settings, store=store), spec, ["x"])
    _ask(Runner(settings, store=store), spec, ["x"])
    assert len(server.chat_requests) == 3


def test_errors_are_not_cached(chat_server: Start) -> None:
    state = {"n": 0}

    def script(req: dict[str, Any]) -> Reply:
        state["n"] += 1
        return Reply(status=400) if state["n"] == 1 else Reply(content="ok")

    server = chat_server(script)
    store = Store()
    [bad] = _ask(Runner(store=store), _spec(server), ["x"])
    [good] = _ask(Runner(store=store), _spec(server), ["x"])
    assert (bad.error_type, good.text, good.cached) == ("bad_request", "ok", False)


def test_identical_calls_in_flight_are_one_call_and_a_rerun_reports_their_latency(
    chat_server: Start,
) -> None:
    """Six calls at once, three of them the same request and two another (a run's users with the
    same session): each request reaches the server once, the others take its reply, latency and
    tokens as a cache hit does, so the cached re-run reports what the first run did (a tester
    saw 82 calls for 15 requests, and a re-run's latencies differ)."""
    server = chat_server(lambda req: Reply(content="a:" + user_text(req), prompt_tokens=11))
    store = Store()
    texts = ["x", "y", "x", "x", "y", "z"]
    first = _ask(Runner(store=store), _spec(server), texts)
    assert sorted(user_text(r) for r in server.chat_requests) == ["x", "y", "z"]
    assert [r.cached for r in first] == [False, False, True, True, True, False]
    assert [r.latency_s for r in first] == [first[texts.index(t)].latency_s for t in texts]
    runner = Runner(store=store)
    again = _ask(runner, _spec(server), texts)
    assert len(server.chat_requests) == 3 and runner.stats.cache_hits == 6
    seen = [(r.text, r.latency_s, r.input_tokens, r.output_tokens) for r in first]
    assert [(r.text, r.latency_s, r.input_tokens, r.output_tokens) for r in again] == seen


def test_a_failed_call_in_flight_leaves_its_waiters_to_ask(chat_server: Start) -> None:
    """The first of three identical calls fails (a 500, no retry): the two that waited for it
    are not given its error (none is cached) but ask, as a cache miss does, and are answered."""
    state = {"n": 0}
    lock = threading.Lock()

    def script(req: dict[str, Any]) -> Reply:
        with lock:
            state["n"] += 1
            return Reply(status=500) if state["n"] == 1 else Reply(content="ok")

    server = chat_server(script)
    runner = Runner(RunnerSettings(max_retries=0), store=Store())
    results = _ask(runner, _spec(server), ["x", "x", "x"])
    assert [(r.error_type, r.text, r.cached) for r in results] == [
        ("server_error", None, False),
        (None, "ok", False),
        (None, "ok", False),
    ]
    assert len(server.chat_requests) == 3


def test_the_waiters_of_a_failed_call_in_flight_ask_within_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Five identical calls, a limit of 2: the first fails (not JSON, not retried) and the four
    that waited for it then ask at once (none is given its error), each through the limit. A
    fake endpoint holds their calls until 2 are under way, then lets the 2 go together: a
    waiter that skipped the limit would be under way before they go (docs/decisions.md)."""
    from fieldcheck.runner._client import ChatClient, InvalidReply

    asked, now, most = [0], [0], [0]
    rounds: list[asyncio.Event] = []

    async def create(**kw: Any) -> Any:
        asked[0] += 1
        now[0] += 1
        most[0] = max(most[0], now[0])
        try:
            if asked[0] == 1:  # the first fails once the others wait for it (a turn later)
                await asyncio.sleep(0)
            else:  # they ask once it failed: held until 2 are under way
                if not rounds or rounds[-1].is_set():
                    rounds.append(asyncio.Event())
                held = rounds[-1]
                if now[0] == 2:
                    asyncio.get_running_loop().call_soon(held.set)
                await held.wait()
            raise InvalidReply("the reply is not JSON (text/html): '<html>'")
        finally:
            now[0] -= 1

    fake = types.SimpleNamespace(create=create)
    endpoint = types.SimpleNamespace(
        chat=types.SimpleNamespace(completions=types.SimpleNamespace(with_raw_response=fake))
    )
    monkeypatch.setattr(ChatClient, "_openai", lambda self: endpoint)
    spec = ModelSpec(name="m", model="x", base_url="http://127.0.0.1:9/v1")
    runner = Runner(RunnerSettings(concurrency=2, max_retries=0), store=Store())
    results = _ask(runner, spec, ["x"] * 5)
    assert [r.error_type for r in results] == ["bad_response"] * 5
    assert (asked[0], most[0], len(rounds)) == (5, 2, 2)


def test_a_cancelled_call_in_flight_lets_its_waiter_ask(chat_server: Start) -> None:
    """Ctrl-C cancels the call that another identical one waits for: the waiter does not hang
    on it but asks the server itself."""
    release = threading.Event()

    def script(req: dict[str, Any]) -> Reply:
        if len(server.chat_requests) == 1:  # the first: held until the test ends
            release.wait(WAIT_S)
            return Reply(content="late")
        return Reply(content="ok")

    server = chat_server(script)
    runner = Runner(store=Store())
    message = [{"role": "user", "content": "x"}]

    async def go() -> CallResult:
        client = runner.client(_spec(server))
        try:
            first = asyncio.create_task(client.complete(message))
            second = asyncio.create_task(client.complete(message))
            deadline = time.monotonic() + WAIT_S
            while not server.chat_requests and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            first.cancel()
            return await asyncio.wait_for(second, WAIT_S)
        finally:
            await runner.aclose()

    try:
        result = asyncio.run(go())
    finally:
        release.set()
    assert (result.text, result.cached, len(server.chat_requests)) == ("ok", False, 2)


def _echo_work(unit: list[str], handle: RunHandle) -> Any:
    async def go() -> None:
        for item in unit:
            if handle.result(item) is not None:
                continue
            r = await handle.client.complete([{"role": "user", "content": item}])
            handle.save(item, {"text": r.text}, error_type=r.error_type, calls=1)

    return go()


async def _a_then_b_interrupted(
    runner: Runner, base_url: str, dataset: Path, console: Console
) -> None:
    """Model a answers both items; model b is cancelled after one, as Ctrl-C cancels the main
    task mid-run (``run_task`` raises ``RunInterrupted``)."""

    async def stop_after_one(unit: list[str], handle: RunHandle) -> None:
        await _echo_work(unit[:1], handle)
        raise asyncio.CancelledError

    for name, work in (("a", _echo_work), ("b", stop_after_one)):
        spec = ModelSpec(name=name, model=f"scripted-{name}", base_url=base_url)
        run_spec = RunSpec(system="test", task="echo", dataset=dataset, model=spec)
        await run_task(
            runner, run_spec, [["x", "y"]], work, total_items=2, console=console,
            show_progress=False,
        )  # fmt: skip


def _ctrl_c_line(calls: Any, runner: Runner) -> str:
    """``run_async`` of ``calls`` stopped by Ctrl-C: exit 130, and its one line, flattened."""
    import typer

    from fieldcheck._cli._runopts import run_async

    err = Console(record=True, width=1000)
    with pytest.raises(typer.Exit) as stopped:
        run_async(calls, console=err, runner=runner)
    assert stopped.value.exit_code == 130
    return " ".join(err.export_text().split())


def _run(runner: Runner, spec: ModelSpec, dataset: Path, units: list[list[str]]) -> RunHandle:
    async def go() -> RunHandle:
        try:
            handle = await run_task(
                runner,
                RunSpec(system="test", task="echo", dataset=dataset, model=spec),
                units,
                _echo_work,
                total_items=sum(map(len, units)),
                show_progress=False,
            )
        finally:
            await runner.aclose()
        runner.set_status(handle.id, "finished")  # as its scoring does: run_task leaves it running
        return handle

    return asyncio.run(go())


def test_in_order_tells_each_item_the_earlier_results_read_back_on_resume(
    chat_server: Start, tmp_path: Path
) -> None:
    """``in_order`` asks a unit's items in order, each told the results before it: on resume
    those of the finished items are read back from the journal, not asked again. An item's
    latency is its calls' unless its result says one (numeric's rounded latency)."""
    from fieldcheck.runner import Asked, ChatClient, RunInterrupted, in_order

    server = chat_server(lambda req: "r:" + user_text(req))
    dataset = tmp_path / "d.jsonl"
    dataset.write_text("x\n")
    store = Store()
    spec = RunSpec(system="test", task="chain", dataset=dataset, model=_spec(server))
    stop = {"c"}

    async def ask(item: str, earlier: list[dict[str, Any]], client: ChatClient) -> Asked:
        if item in stop:
            raise asyncio.CancelledError  # as Ctrl-C cancels the run mid-unit
        prompt = f"{item} after {[e['text'] for e in earlier]}"
        r = await client.complete([{"role": "user", "content": prompt}])
        return {"text": r.text, **({"latency_s": 0.25} if item == "b" else {})}, None, [r]

    def run() -> RunHandle:
        async def go() -> RunHandle:
            runner = Runner(store=store)
            try:
                work = in_order(str, ask)
                return await run_task(
                    runner, spec, [["a", "b", "c"]], work, total_items=3, show_progress=False
                )
            finally:
                await runner.aclose()

        return asyncio.run(go())

    with pytest.raises(RunInterrupted):
        run()
    stop.clear()
    handle = run()
    assert handle.resumed_items == 2
    assert [user_text(r) for r in server.chat_requests] == [
        "a after []",
        "b after ['r:a after []']",
        "c after ['r:a after []', \"r:b after ['r:a after []']\"]",
    ]
    items = {i.key: i for i in store.journal(handle.id)}
    assert items["b"].latency_s == 0.25 and items["b"].calls == 1
    assert items["c"].latency_s == items["c"].call_log[0]["latency_s"] > 0


def test_run_is_stored_and_a_finished_run_is_not_resumed(
    chat_server: Start, tmp_path: Path
) -> None:
    server = chat_server(lambda req: "r:" + user_text(req))
    dataset = tmp_path / "d.jsonl"
    dataset.write_text("x\n")
    store = Store()
    handle = _run(Runner(store=store), _spec(server), dataset, [["a", "b"], ["c"]])
    info = store.get_run(handle.id)
    assert info is not None
    assert (info.status, info.n_items, info.n_done, info.n_errors) == ("finished", 3, 3, 0)
    assert sorted(i.key for i in store.journal(handle.id)) == ["a", "b", "c"]
    assert {i.key: i.result["text"] for i in store.journal(handle.id)}["b"] == "r:b"
    again = _run(Runner(store=store), _spec(server), dataset, [["a", "b"], ["c"]])
    assert again.id != handle.id and not again.resumed  # a new run, served from the cache
    assert len(server.chat_requests) == 3


def test_the_estimate_counts_only_the_items_still_to_run(
    chat_server: Start, tmp_path: Path
) -> None:
    """The line before a run of over 100 calls estimates the items still to run: a resume of
    half says half, a resume of all says nothing (a tester's finding: it announced every call
    right after saying every item was finished). A run the store does not keep says so."""
    from rich.console import Console

    server = chat_server(lambda req: "r:" + user_text(req))
    dataset = tmp_path / "d.jsonl"
    dataset.write_text("x\n")
    store = Store()
    spec = RunSpec(system="test", task="echo", dataset=dataset, model=_spec(server))

    def run(units: list[list[str]], runner: Runner) -> tuple[RunHandle, str]:
        console = Console(record=True, width=300)

        async def go() -> RunHandle:
            try:
                return await run_task(
                    runner,
                    spec,
                    units,
                    _echo_work,
                    total_items=4,
                    estimate=(400, 4000, 800),
                    console=console,
                    show_progress=False,
                )
            finally:
                await runner.aclose()

        handle = asyncio.run(go())
        return handle, console.export_text()

    first, text = run([["a", "b"]], Runner(store=store))  # 2 of the 4 items, then stopped
    assert "about 400 model calls" in text and "~4,000 input / ~800 output tokens" in text
    store.set_status(first.id, "interrupted")
    again, text = run([["a", "b"], ["c", "d"]], Runner(store=store))
    assert again.id == first.id and again.resumed_items == 2
    assert "about 200 model calls" in text and "~2,000 input / ~400 output tokens" in text
    assert f"run {again.id} finished: 4 items (2 resumed)" in text
    store.set_status(first.id, "interrupted")
    _, text = run([["a", "b"], ["c", "d"]], Runner(store=store))
    assert "model calls" not in text  # every item resumed: no call to estimate
    _, text = run([["a", "b"], ["c", "d"]], Runner())
    assert "(not stored) finished: 4 items;" in text


def _pid_file_wait(predicate: Callable[[], bool], seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)


def _target(server: ChatServer, dataset: Path, n: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE / "_kill_target.py"), server.base_url, str(dataset), str(n)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "FIELDCHECK_API_KEY": "sk-test-secret-0123456789"},
    )


@pytest.mark.parametrize("how", ["SIGKILL", "SIGINT"])
def test_killed_run_resumes_every_item_exactly_once(
    chat_server: Start, tmp_path: Path, how: str
) -> None:
    """Kill mid-run (item 7 in flight), re-run: each item once in the store, one answered call each."""
    phase = {"n": 1}
    reached = threading.Event()
    release = threading.Event()
    unanswered: list[str] = []

    def script(req: dict[str, Any]) -> Reply:
        item = user_text(req)
        if phase["n"] == 1 and item == "item-7":
            unanswered.append(item)
            reached.set()
            release.wait(30)  # the client is killed while this request is in flight
            return Reply(status=500)
        return Reply(content="answer " + item, delay_s=0.01)

    server = chat_server(script)
    dataset = tmp_path / "items.txt"
    dataset.write_text("20 items\n")
    proc = _target(server, dataset, 20)
    assert reached.wait(60), proc.stderr.read() if proc.stderr else ""
    proc.send_signal(signal.SIGKILL if how == "SIGKILL" else signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    release.set()
    store = Store()
    [run] = store.list_runs(system="test")
    assert run.status == "interrupted"
    assert sorted(i.key for i in store.journal(run.id)) == sorted(f"item-{i}" for i in range(7))
    if how == "SIGINT":
        assert proc.returncode == 130
        assert "7 of 20 items finished and stored" in err
        assert "resume with:" in err and "_kill_target.py" in err
    else:
        assert proc.returncode == -signal.SIGKILL

    phase["n"] = 2
    proc = _target(server, dataset, 20)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "done 20" in out and "resuming run" in err
    [run2] = store.list_runs(system="test")
    assert run2.id == run.id and run2.status == "finished"
    items = store.journal(run.id)
    assert sorted(i.key for i in items) == sorted(f"item-{i}" for i in range(20))
    assert len(items) == 20 and all(i.result["text"] == f"answer {i.key}" for i in items)
    answered = Counter(user_text(r) for r in server.chat_requests) - Counter(unanswered)
    assert answered == Counter(f"item-{i}" for i in range(20))


def test_an_item_finished_while_a_call_hangs_is_committed_and_its_reply_cached(
    chat_server: Start, tmp_path: Path
) -> None:
    """The journal and the cache are written a few completions at a time, in one transaction:
    an item finished while another call is in flight is in the store within ``FLUSH_AFTER_S``
    (a killed process loses at most that), and its reply, queued, answers the same prompt asked
    again from the cache (no second request)."""
    release = threading.Event()

    def script(req: dict[str, Any]) -> Reply:
        if user_text(req) == "slow":
            release.wait(2 * WAIT_S)
        return Reply(content="r:" + user_text(req))

    server = chat_server(script)
    dataset = tmp_path / "d.txt"
    dataset.write_text("3 items\n")
    waited: list[float] = []

    async def work(unit: list[str], handle: RunHandle) -> None:
        for item in unit:
            r = await handle.client.complete([{"role": "user", "content": item.split("#")[0]}])
            handle.save(item, {"text": r.text, "cached": r.cached}, calls=1)
        if unit[0] != "slow":  # "slow" is still in flight: nothing else commits these
            start = time.monotonic()
            while {i.key for i in Store().journal(handle.id)} != {"fast#1", "fast#2"}:
                assert time.monotonic() - start < WAIT_S, "not committed while a call hangs"
                await asyncio.sleep(0.02)
            waited.append(time.monotonic() - start)
            release.set()

    async def go() -> RunHandle:
        runner = Runner(RunnerSettings(concurrency=2), store=Store())
        try:
            spec = RunSpec(system="test", task="t", dataset=dataset, model=_spec(server))
            units = [["slow"], ["fast#1", "fast#2"]]
            return await run_task(runner, spec, units, work, total_items=3, show_progress=False)
        finally:
            await runner.aclose()

    handle = asyncio.run(go())
    assert waited and waited[0] < 20 * FLUSH_AFTER_S  # a flush due in 0.5 s, however late
    assert [user_text(r) for r in server.chat_requests].count("fast") == 1
    stored = {i.key: i.result for i in Store().journal(handle.id)}
    assert stored == {
        "slow": {"text": "r:slow", "cached": False},
        "fast#1": {"text": "r:fast", "cached": False},
        "fast#2": {"text": "r:fast", "cached": True},
    }


def test_two_runs_of_one_command_at_once_are_two_runs(chat_server: Start, tmp_path: Path) -> None:
    """A run still running (its process alive) is never taken over by the same command started
    meanwhile: both used to write the same items and one failed with an IntegrityError (a
    tester's finding). Each is its own run, finished, every item stored once."""
    first_call = threading.Event()

    def script(req: dict[str, Any]) -> Reply:
        first_call.set()
        return Reply(content="answer " + user_text(req), delay_s=0.05)

    server = chat_server(script)
    dataset = tmp_path / "items.txt"
    dataset.write_text("20 items\n")
    first = _target(server, dataset, 20)
    assert first_call.wait(60)
    second = _target(server, dataset, 20)
    results = [proc.communicate(timeout=60) for proc in (first, second)]
    assert [first.returncode, second.returncode] == [0, 0], [err for _, err in results]
    assert not any("resuming run" in err for _, err in results)
    runs = Store().list_runs(system="test")
    assert len(runs) == 2 and {r.status for r in runs} == {"finished"}
    for run in runs:
        assert sorted(i.key for i in Store().journal(run.id)) == sorted(
            f"item-{i}" for i in range(20)
        )


def test_api_key_is_never_written(
    chat_server: Start, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-live-DO-NOT-WRITE-4242"
    monkeypatch.setenv("FIELDCHECK_API_KEY", secret)

    def script(req: dict[str, Any]) -> Reply:
        if user_text(req) == "echo":  # a hostile server echoes the key into its error
            # ...and its fragments: without its prefix, any run of 16 characters of it
            message = f"bad key {secret} raw {secret[3:]} run {secret[5:21]}. short {secret[:7]}"
            return Reply(status=400, error_body={"error": {"message": message}})
        return Reply(content="fine")

    server = chat_server(script)
    dataset = tmp_path / "d.txt"
    dataset.write_text("x")
    handle = _run(Runner(store=Store()), _spec(server), dataset, [["echo", "fine"]])
    assert handle.errors == {"bad_request": 1}
    assert server.headers[0]["authorization"] == f"Bearer {secret}"  # it was used...
    password = "pw-in-the-url-777"  # credentials in a URL are refused, never stored
    for base in (
        server.base_url.replace("http://", f"http://user:{password}@"),
        server.base_url + f"?key={password}",
    ):
        with pytest.raises(ValueError, match="must not carry") as refused:
            ModelSpec(name="m2", model="scripted", base_url=base)
        assert "user or password" in str(refused.value) or "query" in str(refused.value)
    stored = [i.result for i in Store().journal(handle.id)]
    assert stored  # ...and written nowhere: not the store, the cache, any file under the test dirs
    db_dir = Path(os.environ["FIELDCHECK_DATABASE_URL"].removeprefix("sqlite:///")).parent
    for root in (db_dir, tmp_path):
        for path in root.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                assert secret.encode() not in data, path
                assert secret[3:].encode() not in data and secret[5:21].encode() not in data
    [echoed] = _ask(Runner(RunnerSettings(use_cache=False)), _spec(server), ["echo"])
    assert echoed.error_message is not None
    assert "bad key *** raw *** run ***. short sk-live" in echoed.error_message
    assert secret not in repr(handle.client)
    info = Store().get_run(handle.id)
    assert info is not None and info.endpoint == server.base_url


def test_a_200_that_is_not_json_is_a_bad_response_not_retried(tmp_path: Path) -> None:
    """A server that answers 200 with a body that is not a chat completion."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            hits.append(self.path)
            body = b"<html>not json</html>"
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        spec = ModelSpec(name="m", model="x", base_url=f"http://127.0.0.1:{httpd.server_port}/v1")
        [result] = _ask(Runner(RunnerSettings(max_retries=3, use_cache=False)), spec, ["q"])
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert (result.error_type, result.attempts, len(hits)) == ("bad_response", 1, 1)


def test_an_unreachable_endpoint_stops_the_run_early(tmp_path: Path) -> None:
    from fieldcheck.runner import RunAborted

    dataset = tmp_path / "d.txt"
    dataset.write_text("x")
    spec = ModelSpec(name="m", model="x", base_url="http://127.0.0.1:9/v1")
    store = Store()
    units = [[f"i{n}"] for n in range(20)]
    with pytest.raises(RunAborted) as stopped:
        _run(
            Runner(RunnerSettings(concurrency=1, max_retries=0), store=store), spec, dataset, units
        )
    message = str(stopped.value)
    assert "first 3 items of m all failed with connection at http://127.0.0.1:9/v1" in message
    [run] = store.list_runs(system="test")
    assert (run.status, run.n_done) == ("failed", 3)  # 17 items never tried
    with pytest.raises(RunAborted):  # a failed run is not resumed: the next run asks again
        _run(
            Runner(RunnerSettings(concurrency=1, max_retries=0), store=store), spec, dataset, units
        )
    assert len(store.list_runs(system="test")) == 2


def test_the_early_stop_starts_no_call_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fake endpoint holds the first 4 calls (the limit) until all 4 are under way, then
    answers each with a body that is not JSON (any later call it holds until the run ends): the
    run stops on the third answer and no call starts after it (each slot freed before the stop
    let a new call out: up to 2 x concurrency calls, a tester's 32 of 16)."""
    from fieldcheck.runner import RunAborted
    from fieldcheck.runner._client import ChatClient, InvalidReply

    started: list[str] = []
    full, never = asyncio.Event(), asyncio.Event()

    async def create(**kw: Any) -> Any:
        started.append(kw["messages"][-1]["content"])
        if len(started) == 4:  # answered together, once this call waits as the others do
            asyncio.get_running_loop().call_soon(full.set)
        await (full if len(started) <= 4 else never).wait()
        raise InvalidReply("the reply is not JSON (text/html): '<html>'")

    fake = types.SimpleNamespace(create=create)
    endpoint = types.SimpleNamespace(
        chat=types.SimpleNamespace(completions=types.SimpleNamespace(with_raw_response=fake))
    )
    monkeypatch.setattr(ChatClient, "_openai", lambda self: endpoint)
    dataset = tmp_path / "d.txt"
    dataset.write_text("x")
    spec = ModelSpec(name="m", model="x", base_url="http://127.0.0.1:9/v1")
    runner = Runner(RunnerSettings(concurrency=4, max_retries=0), store=Store())
    with pytest.raises(RunAborted, match="all failed with bad_response"):
        _run(runner, spec, dataset, [[f"i{n}"] for n in range(20)])
    assert started == ["i0", "i1", "i2", "i3"]


def test_a_run_that_reaches_the_endpoint_is_not_stopped(chat_server: Start, tmp_path: Path) -> None:
    state = {"n": 0}

    def script(req: dict[str, Any]) -> Reply:
        state["n"] += 1
        return Reply(content="ok") if state["n"] == 2 else Reply(status=400)

    server = chat_server(script)
    dataset = tmp_path / "d.txt"
    dataset.write_text("x")
    handle = _run(
        Runner(RunnerSettings(concurrency=1), store=Store()),
        _spec(server),
        dataset,
        [[f"i{n}"] for n in range(6)],
    )
    assert handle.errors == {"bad_request": 5} and handle.done == 6


def test_a_resumed_run_calls_failed_items_again_and_what_was_built_on_them(
    chat_server: Start, tmp_path: Path
) -> None:
    """An interrupted run whose item "b" failed (500): the resume calls "b" again and runs "c"
    after it in the same unit (its reply comes from the cache), not "a" nor the other unit's
    "d"; the store keeps one row per item, with the run's counts."""
    failing = {"b"}

    def script(req: dict[str, Any]) -> Reply:
        text = user_text(req)
        return Reply(status=500) if text in failing else Reply(content="r:" + text)

    server = chat_server(script)
    dataset = tmp_path / "d.jsonl"
    dataset.write_text("x\n")
    store = Store()
    settings = RunnerSettings(max_retries=0)
    units = [["a", "b", "c"], ["d"]]
    first = _run(Runner(settings, store=store), _spec(server), dataset, units)
    assert first.errors == {"server_error": 1}
    store.set_status(first.id, "interrupted")  # as Ctrl-C leaves it
    failing.clear()
    asked = len(server.chat_requests)
    again = _run(Runner(settings, store=store), _spec(server), dataset, units)
    assert again.id == first.id and again.resumed and again.resumed_items == 3
    assert [user_text(r) for r in server.chat_requests[asked:]] == ["b"]
    assert (again.new_items, again.errors, again.done) == (2, {}, 4)
    items = {i.key: (i.error_type, i.result["text"]) for i in store.journal(first.id)}
    assert items == {"a": (None, "r:a"), "b": (None, "r:b"), "c": (None, "r:c"), "d": (None, "r:d")}
    info = store.get_run(first.id)
    assert info is not None and (info.status, info.n_done, info.n_errors) == ("finished", 4, 0)


def test_a_reply_that_did_not_parse_is_not_called_again_on_resume(
    chat_server: Start, tmp_path: Path
) -> None:
    """An item saved with invalid_reply after a successful call (its log says the call was
    answered) is finished: a resume reads it back."""
    server = chat_server(lambda req: "r:" + user_text(req))
    dataset = tmp_path / "d.jsonl"
    dataset.write_text("x\n")
    store = Store()

    def work(unit: list[str], handle: RunHandle) -> Any:
        async def go() -> None:
            for item in unit:
                if handle.result(item) is not None:
                    continue
                r = await handle.client.complete([{"role": "user", "content": item}])
                handle.save(item, {"text": r.text}, error_type="invalid_reply", call_log=[r])

        return go()

    def run() -> RunHandle:
        async def go() -> RunHandle:
            runner = Runner(store=store)
            try:
                return await run_task(
                    runner,
                    RunSpec(system="test", task="parse", dataset=dataset, model=_spec(server)),
                    [["a"]],
                    work,
                    total_items=1,
                    show_progress=False,
                )
            finally:
                await runner.aclose()

        return asyncio.run(go())

    first = run()
    store.set_status(first.id, "interrupted")
    again = run()
    assert again.resumed and again.resumed_items == 1 and again.errors == {"invalid_reply": 1}
    assert len(server.chat_requests) == 1


def test_the_interrupted_line_and_the_resume_count_the_same_items_finished(
    chat_server: Start, tmp_path: Path
) -> None:
    """Interrupted after 3 items, one of them a 500: the line said "3 of 4 items finished and
    stored" and the resume "2 of 4 items already finished" (a tester's finding). Both count 2
    finished; the line says the item with a call error is asked again."""
    from rich.console import Console

    from fieldcheck.runner import RunInterrupted

    server = chat_server(lambda req: Reply(status=500) if user_text(req) == "i1" else "ok")
    dataset = tmp_path / "d.jsonl"
    dataset.write_text("x\n")
    store = Store()
    spec = ModelSpec(name="m", model="scripted", base_url=server.base_url)
    run_spec = RunSpec(system="test", task="echo", dataset=dataset, model=spec)
    units = [[f"i{i}"] for i in range(4)]

    async def stop_at_i3(unit: list[str], handle: RunHandle) -> None:
        if unit == ["i3"]:
            while handle.done < 3:  # the other three saved
                await asyncio.sleep(0.01)
            raise asyncio.CancelledError  # as Ctrl-C cancels the main task mid-run
        await _echo_work(unit, handle)

    def command(work: Any) -> tuple[str, RunHandle | None]:
        runner = Runner(RunnerSettings(concurrency=1, max_retries=0), store=store)
        err = Console(record=True, width=1000)

        async def go() -> RunHandle:
            try:
                return await run_task(
                    runner, run_spec, units, work, total_items=4, console=err,
                    show_progress=False,
                )  # fmt: skip
            finally:
                await runner.aclose()

        try:
            handle = asyncio.run(go())
        except RunInterrupted as exc:
            return str(exc), None
        return " ".join(err.export_text().split()), handle

    line, _ = command(stop_at_i3)
    assert line.startswith(
        "interrupted: 2 of 4 items finished and stored, 1 more item with a call error, asked "
        "again on resume (run "
    ), line
    said, handle = command(_echo_work)
    assert handle is not None and handle.resumed_items == 2
    assert f"resuming run {handle.id}: 2 of 4 items already finished are not called again" in said
    assert sorted(user_text(r) for r in server.chat_requests) == ["i0", "i1", "i1", "i2", "i3"]


@pytest.mark.parametrize("second_interrupt", [False, True])
def test_an_interrupt_without_the_store_says_every_item_is_called_again(
    chat_server: Start, tmp_path: Path, second_interrupt: bool
) -> None:
    """Model a finishes, model b is interrupted after 1 item, with no store (``--no-store``):
    the line names no run and no resume (nothing was stored), but that the same command starts
    over calling every item again; after a second Ctrl-C too."""
    from rich.console import Console

    from fieldcheck.runner import RunInterrupted

    server = chat_server(lambda req: "r:" + user_text(req))
    dataset = tmp_path / "d.jsonl"
    dataset.write_text("x\n")
    quiet = Console(file=open(os.devnull, "w"))  # noqa: SIM115 - the run lines are not asserted
    runner = Runner(RunnerSettings(), store=None)

    async def both() -> None:
        try:
            await _a_then_b_interrupted(runner, server.base_url, dataset, quiet)
        except RunInterrupted:
            if second_interrupt:
                raise KeyboardInterrupt from None
            raise
        finally:
            await runner.aclose()

    line = _ctrl_c_line(both(), runner)
    said = (
        "a (finished), b (1 item finished), none stored (no store: nothing to resume); the same "
        "command starts over, calling every item again: "
        if second_interrupt
        else "1 of 2 items finished, none stored (no store: nothing to resume); the same "
        "command starts over, calling a and all 2 items of b again: "
    )
    assert line.startswith("interrupted: " + said), line


@pytest.mark.parametrize("use_cache", [False, True])
def test_an_interrupt_after_a_finished_model_says_what_a_resume_calls_again(
    chat_server: Start, tmp_path: Path, use_cache: bool
) -> None:
    """Model a finishes, model b is interrupted after 1 item. The Ctrl-C line names a's run and
    says the resume command takes it up again with no call (its run is marked interrupted: not
    scored yet, one run per model), with the cache or without. A second Ctrl-C that cuts the first's
    report short (a KeyboardInterrupt while unwinding) still names both runs, marks b
    interrupted and gives the resume command: it said "nothing was stored" (a tester's finding)."""
    from rich.console import Console

    from fieldcheck.runner import RunInterrupted

    server = chat_server(lambda req: "r:" + user_text(req))
    dataset = tmp_path / "d.jsonl"
    dataset.write_text("x\n")
    store = Store()
    quiet = Console(file=open(os.devnull, "w"))  # noqa: SIM115 - the run lines are not asserted

    def command(second_interrupt: bool) -> tuple[Runner, str]:
        runner = Runner(RunnerSettings(use_cache=use_cache), store=store)

        async def both() -> None:
            try:
                await _a_then_b_interrupted(runner, server.base_url, dataset, quiet)
            except RunInterrupted:
                if not second_interrupt:
                    raise
                store.set_status(runner.runs[1].id, "running")  # before the first one marked it
                raise KeyboardInterrupt from None
            finally:
                await runner.aclose()

        return runner, _ctrl_c_line(both(), runner)

    runner, line = command(second_interrupt=False)
    a, b = runner.runs
    assert line.startswith(f"interrupted: 1 of 2 items finished and stored (run {b.id}); ")
    assert (
        f"; a (run {a.id}) had finished its calls, and the command below resumes it with no "
        "call; resume with:" in line
    )
    for run in (a, b):
        info = store.get_run(run.id)
        assert info is not None and info.status == "interrupted"
    asked = len(server.chat_requests)
    resumed = Runner(RunnerSettings(use_cache=use_cache), store=store)

    async def resume_a() -> RunHandle:
        try:
            spec = ModelSpec(name="a", model="scripted-a", base_url=server.base_url)
            run_spec = RunSpec(system="test", task="echo", dataset=dataset, model=spec)
            return await run_task(
                resumed, run_spec, [["x", "y"]], _echo_work, total_items=2, console=quiet,
                show_progress=False,
            )  # fmt: skip
        finally:
            await resumed.aclose()

    again = asyncio.run(resume_a())
    assert again.id == a.id and len(server.chat_requests) == asked  # the same run, no call
    runner, line = command(second_interrupt=True)
    a, b = runner.runs
    info = store.get_run(b.id)
    assert info is not None and info.status == "interrupted"  # resumable
    listed = f"interrupted: a (run {a.id}, finished), b (run {b.id}, 1 item finished); "
    note = "the command below resumes a with no call"
    assert line.startswith(listed + note + "; resume with: ")


def test_a_ctrl_c_line_counts_what_a_resume_asks_again_of_a_finished_model(
    chat_server: Start, tmp_path: Path
) -> None:
    """Model a finished with a 500 on x (y built on it), then b is interrupted: the line says the
    resume asks a's 2 items again, not that it resumes a "with no call" (a hostile-endpoint
    trial's finding: that resume made 225 calls)."""
    from rich.console import Console

    from fieldcheck.runner import RunInterrupted, in_order

    server = chat_server(lambda req: Reply(status=500) if user_text(req) == "x" else "ok")
    dataset = tmp_path / "d.jsonl"
    dataset.write_text("x\n")
    quiet = Console(file=open(os.devnull, "w"))  # noqa: SIM115 - the run lines are not asserted
    runner = Runner(RunnerSettings(max_retries=0), store=Store())

    async def ask(item: str, _: Any, client: Any) -> Any:
        r = await client.complete([{"role": "user", "content": item}])
        return {"text": r.text}, r.error_type, [r]

    async def interrupted(unit: Any, handle: RunHandle) -> None:
        raise asyncio.CancelledError  # as Ctrl-C cancels the main task mid-run

    async def go() -> None:
        try:
            for name, work in (("a", in_order(str, ask)), ("b", interrupted)):
                spec = ModelSpec(name=name, model=f"scripted-{name}", base_url=server.base_url)
                run_spec = RunSpec(system="test", task="echo", dataset=dataset, model=spec)
                await run_task(
                    runner, run_spec, [["x", "y"], ["z"]], work, total_items=3, console=quiet,
                    show_progress=False,
                )  # fmt: skip
        finally:
            await runner.aclose()

    with pytest.raises(RunInterrupted) as caught:
        asyncio.run(go())
    a = runner.runs[0]
    assert (
        f"a (run {a.id}) had finished its calls, and the command below resumes it asking again "
        "only 2 items (a failed call or one built on it); resume with:" in str(caught.value)
    )


def test_a_key_echoed_in_a_reply_is_masked_before_anything_keeps_it(
    chat_server: Start, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An endpoint that echoes the Authorization bearer inside a 200's content: the key was kept
    verbatim in outputs.jsonl, the reply cache, the run journal and items.parquet (it was masked
    only in error bodies); it is masked ``***`` where replies are received, so a real
    ``json run`` writes it in no file of its folder or the store, a second run (from the cache)
    neither."""
    from typer.testing import CliRunner

    from fieldcheck._cli.main import app

    secret = "sk-live-ECHOED-IN-CONTENT-5151"
    monkeypatch.setenv("FIELDCHECK_API_KEY", secret)
    seen: list[ChatServer] = []

    def script(req: dict[str, Any]) -> Reply:
        bearer = seen[0].headers[-1]["authorization"].removeprefix("Bearer ")
        return Reply(content=json.dumps({"name": f"Ann {bearer}"}))

    seen.append(chat_server(script))
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"id": "a", "document": "Ann", "ground_truth": {"name": "Ann"}}\n')
    for n in (1, 2):
        result = CliRunner().invoke(
            app,
            ["json", "run", str(docs), "--model", "m", "--base-url", seen[0].base_url,
             "--no-progress", "--out", str(tmp_path / f"out{n}")],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        assert secret not in result.output
    assert seen[0].headers[0]["authorization"] == f"Bearer {secret}" and len(seen[0].headers) == 1
    [line] = (tmp_path / "out2" / "m" / "outputs.jsonl").read_text().splitlines()
    assert json.loads(line)["output"] == {"name": "Ann ***"}  # answered from the cache, masked
    db_dir = Path(os.environ["FIELDCHECK_DATABASE_URL"].removeprefix("sqlite:///")).parent
    files = [p for root in (db_dir, tmp_path) for p in root.rglob("*") if p.is_file()]
    assert any(p.name == "items.parquet" for p in files)
    for path in files:
        assert secret.encode() not in path.read_bytes(), path

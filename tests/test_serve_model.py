"""serve-model: a real HTTP server on 127.0.0.1, called through the runner's openai client."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from fieldcheck.matchers._llm import PROMPTS
from fieldcheck.runner import CallResult, ModelSpec, Runner, RunnerSettings
from fieldcheck.serve_model import (
    FINGERPRINT,
    BackgroundServer,
    create_app,
    free_port,
    parse_fail_rates,
)


@pytest.fixture
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(create_app()) as running:
        yield running


def _ask(base_url: str, messages: list[list[dict[str, str]]], **settings: Any) -> list[CallResult]:
    runner = Runner(RunnerSettings(use_cache=False, **settings))
    spec = ModelSpec(name="c", model="synthetic-careful", base_url=base_url)

    async def go() -> list[CallResult]:
        try:
            return list(await asyncio.gather(*(runner.client(spec).complete(m) for m in messages)))
        finally:
            await runner.aclose()

    return asyncio.run(go())


def _judge_messages(prediction: str, reference: str) -> list[dict[str, str]]:
    prompt = PROMPTS["fuzzy"]
    return [
        {"role": "system", "content": prompt.system},
        {"role": "user", "content": prompt.user.format(prediction=prediction, reference=reference)},
    ]


def test_judge_prompts_get_a_score_with_usage(server: BackgroundServer) -> None:
    same, other = _ask(
        server.base_url,
        [_judge_messages("John Smith", "smith john"), _judge_messages("apple", "zebra")],
    )
    assert same.text == "1.00" and other.text is not None and float(other.text) < 0.5
    assert same.input_tokens > 20 and same.output_tokens == 1 and not same.tokens_estimated


def test_replies_are_deterministic_and_labelled(server: BackgroundServer) -> None:
    messages = [{"role": "user", "content": "hello"}]
    body = {"model": "synthetic-fast", "messages": messages}
    first = httpx.post(server.base_url + "/chat/completions", json=body).json()
    second = httpx.post(server.base_url + "/chat/completions", json=body).json()
    assert first["choices"] == second["choices"]
    assert first["system_fingerprint"] == FINGERPRINT
    assert first["choices"][0]["message"]["content"].startswith("synthetic model:")
    models = httpx.get(server.base_url + "/models").json()
    assert [m["id"] for m in models["data"]] == [
        "synthetic-careful",
        "synthetic-eager",
        "synthetic-fast",
    ]


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[1, 2]",
        b'{"model": 3, "messages": []}',
        b'{"model": "synthetic-fast", "messages": [1]}',
    ],
)
def test_bad_requests_are_400(server: BackgroundServer, body: bytes) -> None:
    response = httpx.post(
        server.base_url + "/chat/completions",
        content=body,
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400 and "error" in response.json()


def test_an_unknown_model_is_404_as_a_real_endpoint_answers_it(server: BackgroundServer) -> None:
    # a typo (--model synthetic-carefull) got believable synthetic scores and exit 0
    body = {"model": "synthetic-carefull", "messages": [{"role": "user", "content": "x"}]}
    response = httpx.post(server.base_url + "/chat/completions", json=body)
    assert response.status_code == 404
    message = response.json()["error"]["message"]
    assert message == (
        "the model 'synthetic-carefull' does not exist (it serves synthetic-careful, "
        "synthetic-eager, synthetic-fast)"
    )


def test_injected_faults_are_retried_by_the_runner() -> None:
    app = create_app(fail_rates={429: 0.3, 500: 0.2}, seed=3)
    with BackgroundServer(app) as running:
        results = _ask(
            running.base_url,
            [_judge_messages(f"v{i}", f"v{i}") for i in range(30)],
            max_retries=10,
        )
        assert all(r.text == "1.00" for r in results)
        assert sum(r.attempts - 1 for r in results) == app.state.serve.faults > 0
    with BackgroundServer(create_app(fail_rates={500: 1.0})) as failing:
        [result] = _ask(failing.base_url, [_judge_messages("a", "a")], max_retries=1)
        assert (result.error_type, result.attempts) == ("server_error", 2)


def test_latency_is_added() -> None:
    with BackgroundServer(create_app(latency_ms=200)) as running:
        [result] = _ask(running.base_url, [_judge_messages("a", "a")])
    assert 0.13 <= result.latency_s < 1.5  # 200 ms x [0.7, 1.3] for synthetic-careful


def test_parse_fail_rates() -> None:
    assert parse_fail_rates("429=0.1, 500=0.05") == {429: 0.1, 500: 0.05}
    assert parse_fail_rates("") == {}
    for bad in ("429", "404=0.1", "500=2", "500=x", "429=0.6,500=0.6"):
        with pytest.raises(ValueError):
            parse_fail_rates(bad)


def _serve_once(*options: str) -> str:
    """Start ``fieldcheck serve-model``, wait until it answers, stop it: its stderr."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fieldcheck._cli.main",
            "serve-model",
            "--port",
            str(port),
            *options,
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        assert response.status_code == 200
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert (
        f"serving synthetic models synthetic-careful, synthetic-eager, synthetic-fast at http://127.0.0.1:{port}/v1"
        in err
    )
    return err


def test_serve_model_command_serves_until_stopped() -> None:
    assert "has no data for" not in _serve_once()  # examples/ holds every task's


def test_serve_model_names_the_tasks_its_responses_folder_has_no_data_for(tmp_path: Any) -> None:
    """``--responses DIR`` with ConvFinQA data only: one startup line names the slot memory and
    JSON extraction files it lacks (it started silently, and every ConvFinQA turn of a folder
    without it scored 0.000 with exit 0: a tester's finding); the judge needs no data."""
    from fieldcheck.serve_model import EXAMPLES

    (tmp_path / "convfinqa").mkdir()
    shutil.copy(EXAMPLES / "numeric" / "data.json", tmp_path / "convfinqa" / "dev.json")
    err = _serve_once("--responses", str(tmp_path))
    assert err.splitlines()[1] == (
        f"warning: {tmp_path} has no data for slot memory (slots/conversations.synthetic.jsonl, "
        "slots/gold.synthetic.jsonl); JSON extraction (json/documents.jsonl): their every "
        "request gets a naive reply (scores near 0 that are no model's)"
    )


def test_serve_model_rejects_a_bad_fail_rate() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "fieldcheck._cli.main", "serve-model", "--fail-rate", "404=1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "status must be one of" in proc.stderr


def test_serve_model_on_a_busy_port_is_a_usage_error_before_it_says_it_serves() -> None:
    """A busy port: one usage line and exit 2, never "serving ..." then uvicorn's error and exit
    3 (the docs start serve-model in the background, where that went unnoticed: a tester's
    finding)."""
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "fieldcheck._cli.main", "serve-model", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 2 and "serving" not in proc.stderr
    assert f"--port: 127.0.0.1:{port} cannot be used: " in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_answers_do_not_depend_on_latency() -> None:
    """The responder's generator is not drawn from for the latency jitter."""
    from fieldcheck.serve_model import EXAMPLES
    from fieldcheck.slots._extract import build_messages, load_conversations

    conversations = load_conversations(EXAMPLES / "slots" / "conversations.synthetic.jsonl")
    messages = [build_messages({}, c) for c in conversations]

    def answers(latency_ms: float) -> list[str | None]:
        with BackgroundServer(create_app(latency_ms=latency_ms)) as running:
            runner = Runner(RunnerSettings(use_cache=False, concurrency=16))
            spec = ModelSpec(name="f", model="synthetic-fast", base_url=running.base_url)

            async def go() -> list[CallResult]:
                try:
                    return list(
                        await asyncio.gather(*(runner.client(spec).complete(m) for m in messages))
                    )
                finally:
                    await runner.aclose()

            return [r.text for r in asyncio.run(go())]

    plain, delayed = answers(0), answers(5)
    assert plain == delayed and len(set(plain)) > 5

"""The runner against an endpoint that misbehaves (issue 26, items 7-11, 13, 14): every case ends
as a call error of its type on its item, recorded and counted, the run going on; never a
traceback, never a hang. Each server reply is scripted on a real server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

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
    run_task,
)
from fieldcheck.store import Store

Start = Callable[[Script], ChatServer]
MiB = 1024 * 1024


def _spec(server: ChatServer) -> ModelSpec:
    return ModelSpec(name="m", model="scripted", base_url=server.base_url)


def _ask(settings: RunnerSettings, server: ChatServer, text: str = "q") -> CallResult:
    runner = Runner(settings)

    async def go() -> CallResult:
        try:
            return await runner.client(_spec(server)).complete([{"role": "user", "content": text}])
        finally:
            await runner.aclose()

    return asyncio.run(go())


NO_CACHE = RunnerSettings(use_cache=False, max_retries=3)


# item 7: a 200 whose body is not a chat completion
@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply(body=b"hello, plain text", content_type="text/plain"), "not JSON (text/plain)"),
        (Reply(content="x", fields={"choices": "a string"}), "'choices' is a string, not a list"),
        (Reply(content="x", fields={"choices": ["a"]}), "'choices[0]' is a string"),
        (Reply(content="x", fields={"choices": [{"message": "m"}]}), "'choices[0].message' is"),
        (
            Reply(content="x", fields={"choices": [{"message": {"content": 7}}]}),
            "'choices[0].message.content' is a number, not a string",
        ),
        (Reply(body=b'{"id": "x", "object": "chat.completion"}'), "'choices' is missing"),
        (Reply(body=b"[1, 2]"), "is a list, not a chat completion object"),
        (Reply(body=b"[" * 100_000 + b"]" * 100_000), "not JSON"),  # too deep to parse
    ],
)
def test_a_200_that_is_not_a_chat_completion_is_a_bad_response(
    chat_server: Start, reply: Reply, message: str
) -> None:
    """The endpoint's failure (`bad_response`), not the model's (`invalid_reply`, kept for a chat
    completion with no content): every system leaves it unscored and a resume asks again; it was
    an `invalid_reply`, scored as a wrong answer by numeric and slots (a tester's finding)."""
    server = chat_server(lambda req: reply)
    result = _ask(NO_CACHE, server)
    assert (result.error_type, result.attempts, result.text) == ("bad_response", 1, None)
    assert result.error_message is not None and message in result.error_message
    assert len(server.chat_requests) == 1  # never retried


@pytest.mark.parametrize(
    ("status", "error_type"), [(400, "bad_request"), (429, "rate_limited"), (500, "server_error")]
)
def test_an_error_status_names_the_endpoint(
    chat_server: Start, status: int, error_type: str
) -> None:
    """docs/running.md: "Errors name the endpoint"; a 400, 429 or 500 gave the SDK's text alone,
    so with several endpoints an item's error did not say which failed (a hostile-endpoint
    trial's finding)."""
    server = chat_server(lambda req: Reply(status=status))
    result = _ask(RunnerSettings(use_cache=False, max_retries=0), server)
    assert result.error_type == error_type
    assert result.error_message is not None
    assert result.error_message.startswith(f"{server.base_url}: ")
    assert f"Error code: {status}" in result.error_message


# item 8: token counts that are not counts
@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": 2**64, "completion_tokens": 5},  # beyond 64 bits
        {"prompt_tokens": 10, "completion_tokens": -5},
        {"prompt_tokens": 10.0, "completion_tokens": 5},
        {"prompt_tokens": "10", "completion_tokens": 5},
        {"prompt_tokens": True, "completion_tokens": 5},
        {"prompt_tokens": 10, "completion_tokens": 10**12},  # an int, but no call spends it
        "ten tokens",
    ],
)
def test_usage_that_is_not_a_count_is_dropped_and_estimated(
    chat_server: Start, usage: Any, tmp_path: Path
) -> None:
    """Both counts are estimated (characters / 4) and marked so; the store takes the item and
    the cache the reply (orjson refuses an int past 64 bits)."""
    server = chat_server(lambda req: Reply(content="twelve chars", fields={"usage": usage}))
    result = _ask(NO_CACHE, server, "abcdefgh")
    assert (result.error_type, result.text, result.tokens_estimated) == (None, "twelve chars", True)
    assert result.output_tokens == estimate_tokens("twelve chars") == 3
    assert result.input_tokens == messages_tokens([{"role": "user", "content": "abcdefgh"}]) == 6
    store = Store()
    handle = _run(Runner(store=store), server, tmp_path, [["a", "b"]])
    [run] = store.list_runs(system="test")
    assert (run.status, run.n_done, handle.errors) == ("finished", 2, {})
    assert [i.call_log[0]["input_tokens"] for i in store.journal(run.id)] == [5, 5]
    _run(Runner(store=store), server, tmp_path, [["a", "b"]])  # the cache answers it
    assert len(server.chat_requests) == 3


def test_estimated_tokens_are_counted_and_said(chat_server: Start, tmp_path: Path) -> None:
    """One item of two with no usable usage: the run's summary line says its tokens are
    estimated (numeric and slots outputs showed estimated tokens unmarked; a tester's
    finding)."""
    from rich.console import Console

    server = chat_server(
        lambda req: Reply(content="ok", usage=False) if user_text(req) == "a" else "ok"
    )
    console = Console(record=True, width=1000)
    handle = _run(Runner(NO_CACHE), server, tmp_path, [["a"], ["b"]], console=console)
    assert handle.tokens_estimated == 1
    said = " ".join(console.export_text().split())
    assert "tokens of 1 of 2 items estimated (characters / 4: the endpoint sent no usable usage)" in said  # fmt: skip


# item 9: a reply sent a byte at a time
def test_the_timeout_is_a_deadline_for_the_whole_call(chat_server: Start) -> None:
    """One byte every 2 s passes a per-read timeout of 1 s for ever; the deadline stops it."""
    server = chat_server(lambda req: Reply(content="a slow reply", trickle_s=2.0))
    import openai  # noqa: F401  # imported before the clock: on a loaded machine it takes a second

    start = time.monotonic()
    result = _ask(RunnerSettings(timeout=1.0, max_retries=1, use_cache=False), server)
    assert (result.error_type, result.attempts, result.text) == ("timeout", 2, None)
    assert (
        result.error_message is not None and "no complete reply within 1 s" in result.error_message
    )
    assert time.monotonic() - start < 30  # 2 attempts of 1 s and a backoff; the body takes 10 min


# item 10: a reply over the cap
@pytest.mark.parametrize("send_length", [True, False])
def test_a_reply_over_the_cap_is_a_bad_response_and_stores_nothing_of_it(
    chat_server: Start, send_length: bool, tmp_path: Path
) -> None:
    big = "x" * (9 * MiB)
    server = chat_server(
        lambda req: (
            Reply(content=big, send_length=send_length)
            if user_text(req) == "big"
            else Reply(content="small")
        )
    )
    result = _ask(NO_CACHE, server, "big")  # the default cap, 8 MiB
    assert (result.error_type, result.attempts, result.text) == ("bad_response", 1, None)
    assert result.error_message is not None
    assert "over --max-reply-bytes (8 MiB)" in result.error_message
    capped = RunnerSettings(use_cache=False, max_reply_bytes=1000)
    assert _ask(capped, server, "small").text == "small"
    store = Store()
    handle = _run(Runner(capped, store=store), server, tmp_path, [["big", "small"]])
    assert (handle.errors, handle.done) == ({"bad_response": 1}, 2)
    database = Path(store.url.removeprefix("sqlite:///"))
    assert database.stat().st_size < 2 * MiB  # no copy of the reply in the item, log or cache


# item 11: a redirect is never followed
@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_to_another_host_is_not_followed(chat_server: Start, status: int) -> None:
    elsewhere = chat_server(lambda req: "the prompt arrived elsewhere")
    target = elsewhere.base_url.replace("127.0.0.1", "localhost") + "/chat/completions"
    server = chat_server(lambda req: Reply(status=status, headers={"Location": target}))
    result = _ask(NO_CACHE, server)
    assert (result.error_type, result.attempts, result.text) == ("bad_request", 1, None)
    assert elsewhere.requests == []  # the prompt went nowhere else
    assert result.error_message is not None
    assert f"redirected ({status}) to {target.removesuffix('/chat/completions')}" in (
        result.error_message.replace("/chat/completions", "")
    )
    assert "not followed" in result.error_message


# item 13: each server's way of saying the prompt is over the context
CONTEXT_REPLIES = {
    "openai": Reply(
        status=400,
        error_body={
            "error": {
                "message": "This model's maximum context length is 8192 tokens. However, your "
                "messages resulted in 9000 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
    ),
    "vllm": Reply(
        status=400,
        error_body={
            "object": "error",
            "message": "This model's maximum context length is 4096 tokens. However, you "
            "requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce "
            "the length of the messages or completion.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    ),
    "llama.cpp-500": Reply(
        status=500,
        error_body={
            "error": {
                "code": 500,
                "message": "Context size has been exceeded.",
                "type": "server_error",
            }
        },
    ),
    "llama.cpp-400": Reply(
        status=400,
        error_body={
            "error": {
                "code": 400,
                "message": "request (5012 tokens) exceeds the available context size (4096 "
                "tokens), try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 5012,
                "n_ctx": 4096,
            }
        },
    ),
    # vLLM's engine (input processing), when the prompt alone is over max_model_len
    "vllm-engine": Reply(
        status=400,
        error_body={
            "object": "error",
            "message": "The decoder prompt (length 5000) is longer than the maximum model length "
            "of 4096. Make sure that `max_model_len` is no smaller than the number of text tokens.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    ),
    # Ollama's OpenAI-compatible endpoint (400, or 500 from its runner)
    "ollama-400": Reply(
        status=400,
        error_body={
            "error": {
                "message": "the input length exceeds the context length",
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        },
    ),
    "ollama-500": Reply(
        status=500,
        error_body={
            "error": {
                "message": "the input length exceeds the context length",
                "type": "api_error",
                "param": None,
                "code": None,
            }
        },
    ),
    # LiteLLM's proxy, for a provider whose own wording is none of the above
    "litellm": Reply(
        status=400,
        error_body={
            "error": {
                "message": "litellm.ContextWindowExceededError: AnthropicException - prompt is "
                "too long: 210000 tokens > 200000 maximum",
                "type": None,
                "param": None,
                "code": "400",
            }
        },
    ),
    # Hugging Face TGI (422): the prompt alone, or the prompt with the token budget
    "tgi-inputs": Reply(
        status=422,
        error_body={
            "error": "Input validation error: `inputs` must have less than 4096 tokens. Given: "
            "5000",
            "error_type": "validation",
        },
    ),
    "tgi-total": Reply(
        status=422,
        error_body={
            "error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= "
            "4096. Given: 4090 `inputs` tokens and 16 `max_new_tokens`",
            "error_type": "validation",
        },
    ),
}


@pytest.mark.parametrize("server_kind", sorted(CONTEXT_REPLIES))
def test_a_prompt_over_the_context_is_a_context_length_error_never_retried(
    chat_server: Start, server_kind: str
) -> None:
    server = chat_server(lambda req: CONTEXT_REPLIES[server_kind])
    result = _ask(NO_CACHE, server)
    assert (result.error_type, result.attempts) == ("context_length", 1)
    assert len(server.chat_requests) == 1


def test_a_run_whose_every_prompt_is_over_the_context_is_not_stopped_as_unreachable(
    chat_server: Start, tmp_path: Path
) -> None:
    """vLLM's engine wording and Ollama's were `bad_request`s, and after three items the run
    stopped with "check --base-url" (a tester's finding): they are `context_length` errors,
    each item recorded, the run finished."""
    kinds = ["vllm-engine", "ollama-400", "ollama-500", "litellm", "tgi-total"]
    server = chat_server(lambda req: CONTEXT_REPLIES[user_text(req)])
    handle = _run(Runner(NO_CACHE), server, tmp_path, [kinds])
    assert (handle.done, handle.errors) == (5, {"context_length": 5})
    assert len(server.chat_requests) == 5  # none retried


def test_other_400s_and_500s_keep_their_types(chat_server: Start) -> None:
    server = chat_server(
        lambda req: Reply(status=500 if user_text(req) == "a" else 400, error_body={"error": {}})
    )
    assert _ask(RunnerSettings(use_cache=False, max_retries=0), server, "a").error_type == (
        "server_error"
    )
    assert _ask(NO_CACHE, server, "b").error_type == "bad_request"


# item 14: a reply cut by max_tokens
def test_a_reply_cut_by_max_tokens_is_marked_counted_and_said(
    chat_server: Start, tmp_path: Path
) -> None:
    from rich.console import Console

    server = chat_server(
        lambda req: (
            Reply(content='{"a": "cut he', finish_reason="length")
            if user_text(req) in ("b", "c")
            else Reply(content='{"a": 1}')
        )
    )
    store = Store()
    console = Console(record=True, width=400)
    handle = _run(Runner(store=store), server, tmp_path, [["a", "b"], ["c"]], console=console)
    assert (handle.truncated, handle.errors, handle.done) == (2, {}, 3)
    items = {i.key: i for i in store.journal(handle.id)}
    assert {k: i.call_log[0]["truncated"] for k, i in items.items()} == {
        "a": False,
        "b": True,
        "c": True,
    }
    text = console.export_text()
    assert "2 of 3 items had a reply cut by the token limit (finish_reason length): " in text
    assert "raise --max-tokens" in text
    again = _run(Runner(store=store), server, tmp_path, [["a", "b"], ["c"]], console=console)
    assert again.truncated == 2  # from the cache, still cut
    assert len(server.chat_requests) == 3


# the run goes on past every kind and finishes with each counted
def test_a_run_past_every_hostile_reply_finishes_with_each_counted(
    chat_server: Start, tmp_path: Path
) -> None:
    replies = {
        "plain": Reply(body=b"no", content_type="text/plain"),
        "choices": Reply(content="x", fields={"choices": "s"}),
        "context": CONTEXT_REPLIES["llama.cpp-500"],
        "redirect": Reply(status=307, headers={"Location": "http://example.invalid/v1"}),
        "usage": Reply(content="ok", fields={"usage": {"prompt_tokens": -1}}),
        "fine": Reply(content="ok"),
    }
    server = chat_server(lambda req: replies[user_text(req)])
    store = Store()
    handle = _run(  # one at a time, in this order: three unreachable replies first would stop
        Runner(RunnerSettings(max_retries=2, concurrency=1), store=store),  # it (RunAborted)
        server,
        tmp_path,
        [[k] for k in replies],
    )
    assert handle.done == 6
    assert handle.errors == {"bad_response": 2, "context_length": 1, "bad_request": 1}
    [run] = store.list_runs(system="test")
    assert (run.status, run.n_done, run.n_errors) == ("finished", 6, 4)
    assert len(server.chat_requests) == 6  # none retried


def _work(unit: list[str], handle: RunHandle) -> Any:
    async def go() -> None:
        for item in unit:
            if handle.result(item) is not None:
                continue
            r = await handle.client.complete([{"role": "user", "content": item}])
            handle.save(item, {"text": r.text}, error_type=r.error_type, call_log=[r])

    return go()


def _run(
    runner: Runner,
    server: ChatServer,
    tmp_path: Path,
    units: list[list[str]],
    console: Any = None,
) -> RunHandle:
    dataset = tmp_path / "d.jsonl"
    dataset.write_text("x\n")

    async def go() -> RunHandle:
        try:
            handle = await run_task(
                runner,
                RunSpec(system="test", task="hostile", dataset=dataset, model=_spec(server)),
                units,
                _work,
                total_items=sum(map(len, units)),
                console=console,
                show_progress=False,
            )
        finally:
            await runner.aclose()
        runner.set_status(handle.id, "finished")  # as its scoring does: run_task leaves it running
        return handle

    return asyncio.run(go())


# item 12: SIGTERM takes Ctrl-C's path
@pytest.mark.parametrize("sigint", ["handled", "ignored"])
def test_sigterm_during_a_model_run_is_one_line_and_the_run_resumes(
    chat_server: Start, tmp_path: Path, sigint: str
) -> None:
    """`json run` stopped by SIGTERM while item 5 is in flight: exit 130, the one Ctrl-C line (it
    ended with an "unhandled exception during asyncio.run() shutdown" traceback), the run
    interrupted; the same command resumes it and asks only the items left. "ignored": started
    with SIGINT ignored, as a script's `cmd &` starts it (asyncio then installs no SIGINT
    handler; the same traceback, a tester's finding)."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import threading

    from fieldcheck.jsoneval import document_from_prompt

    reached, release = threading.Event(), threading.Event()
    phase = {"n": 1}

    def script(req: dict[str, Any]) -> Reply:
        doc = document_from_prompt(req["messages"][1]["content"])
        if phase["n"] == 1 and doc == "doc 5":
            reached.set()
            release.wait(30)
            return Reply(status=500)
        return Reply(content='{"a": 1}')

    server = chat_server(script)
    data = tmp_path / "d.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": i, "document": f"doc {i}", "ground_truth": {"a": 1}}) + "\n"
            for i in range(10)
        )
    )
    command = [
        sys.executable, "-m", "fieldcheck._cli.main", "json", "run", str(data), "--model", "m",
        "--base-url", server.base_url, "--out", str(tmp_path / "out"), "--no-progress",
        "--concurrency", "1",
    ]  # fmt: skip

    def ignore_sigint() -> None:
        if sigint == "ignored":
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
        preexec_fn=ignore_sigint,
    )
    try:
        assert reached.wait(120), proc.stderr.read() if proc.stderr else ""
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        release.set()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "unhandled exception" not in err, err
    [line] = err.splitlines()
    assert line.startswith("interrupted: 5 of 10 items finished and stored (run ")
    assert "resume with: " in line
    [run] = Store().list_runs(system="json")
    assert (run.status, run.n_done) == ("interrupted", 5)
    partial = tmp_path / "out.fieldcheck-partial"  # the unfinished folder, not yet in place
    assert not (tmp_path / "out").exists()
    assert json.loads((partial / "run.json").read_text())["complete"] is False
    phase["n"] = 2
    asked = len(server.chat_requests)
    again = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ))
    assert again.returncode == 0, again.stderr
    assert f"resuming run {run.id}: 5 of 10 items" in again.stderr
    assert not partial.exists() and (tmp_path / "out" / "m" / "summary.json").is_file()
    assert sorted(
        document_from_prompt(r["messages"][1]["content"]) for r in server.chat_requests[asked:]
    ) == [f"doc {i}" for i in range(5, 10)]

"""The model runner against serve-model (its own process, on loopback).

- runner calls vs a bare asyncio loop over the ``openai`` client making the same calls
  (the client's own limit), zero added latency, 64 in flight;
- with 50 ms latency: calls/s vs the ideal concurrency / latency;
- a fully cached re-run (replies from the store) vs the first run.

Targets (issue 10, figure 5): 0.8, 0.8 and 20x.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks._harness import Comparison, Measurement, measure, row_of
from benchmarks._table import Row, Target, format_table
from fieldcheck.matchers._llm import PROMPTS
from fieldcheck.runner import ModelSpec, Runner, RunnerSettings
from fieldcheck.serve_model import free_port

CONCURRENCY = 64


def _messages(n: int, salt: str) -> list[list[dict[str, str]]]:
    prompt = PROMPTS["fuzzy"]
    return [
        [
            {"role": "system", "content": prompt.system},
            {
                "role": "user",
                "content": prompt.user.format(prediction=f"{salt}{i}", reference=f"v{i}"),
            },
        ]
        for i in range(n)
    ]


class _Server:
    def __init__(self, latency_ms: float = 0) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fieldcheck._cli.main",
                "serve-model",
                "--port",
                str(self.port),
                "--latency-ms",
                str(latency_ms),
            ],
            stderr=subprocess.DEVNULL,
        )
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(self.base_url + "/models", timeout=1)
                return
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def _runner_calls(base_url: str, batches: list[list[dict[str, str]]], runner: Runner) -> None:
    spec = ModelSpec(name="bench", model="synthetic-careful", base_url=base_url)

    async def go() -> None:
        client = runner.client(spec)
        try:
            results = await asyncio.gather(*(client.complete(m) for m in batches))
        finally:
            await runner.aclose()
        assert all(r.ok for r in results), [r.error_message for r in results if not r.ok][:3]

    asyncio.run(go())


def _bare_calls(base_url: str, batches: list[list[dict[str, str]]]) -> None:
    import openai

    async def go() -> None:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0, timeout=60)
        limit = asyncio.Semaphore(CONCURRENCY)

        async def one(m: list[dict[str, str]]) -> str | None:
            async with limit:
                response = await client.chat.completions.create(
                    model="synthetic-careful",
                    messages=m,
                    temperature=0,  # type: ignore[arg-type]
                )
            return response.choices[0].message.content

        try:
            await asyncio.gather(*(one(m) for m in batches))
        finally:
            await client.close()

    asyncio.run(go())


def _in_process(n: int = 2000, m: int = 1000) -> list[Comparison]:
    out: list[Comparison] = []
    server = _Server()
    try:
        batches = _messages(n, "p")
        settings = RunnerSettings(concurrency=CONCURRENCY, use_cache=False)
        ours = measure(
            lambda: _runner_calls(server.base_url, batches, Runner(settings)), n, repeat=2
        )
        base = measure(lambda: _bare_calls(server.base_url, batches), n, repeat=2)
        out.append(Comparison("runner, 64 in flight", "calls", ours, base, "bare openai loop"))

        from fieldcheck.store import Store

        with tempfile.TemporaryDirectory() as tmp:
            store = Store(f"sqlite:///{Path(tmp) / 'bench.sqlite3'}")
            fresh = _messages(n, "c")
            cached_settings = RunnerSettings(concurrency=CONCURRENCY)
            start = time.perf_counter()
            _runner_calls(server.base_url, fresh, Runner(cached_settings, store=store))
            first = Measurement(time.perf_counter() - start, n, 0.0)
            again = measure(
                lambda: _runner_calls(server.base_url, fresh, Runner(cached_settings, store=store)),
                n,
                repeat=2,
            )
            out.append(Comparison("runner, cached re-run", "calls", again, first, "first run"))
    finally:
        server.stop()
    slow = _Server(latency_ms=50)
    try:
        batches = _messages(m, "s")
        settings = RunnerSettings(concurrency=CONCURRENCY, use_cache=False)
        ours = measure(lambda: _runner_calls(slow.base_url, batches, Runner(settings)), m, repeat=1)
        ideal = Measurement(seconds=m / (CONCURRENCY / 0.050), items=m, peak_mib=0.0)
        out.append(Comparison("runner, 50 ms latency", "calls", ours, ideal, "64 / 50 ms (ideal)"))
    finally:
        slow.stop()
    return out


TARGETS = {
    "runner, 64 in flight": Target(">=", 0.8),
    "runner, cached re-run": Target(">=", 20.0),
    "runner, 50 ms latency": Target(">=", 0.8),
}


def run(quick: bool = False) -> list[Row]:
    comparisons = _in_process(500, 300) if quick else _in_process()
    return [row_of(c, TARGETS[c.name]) for c in comparisons]


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print(format_table(run()))

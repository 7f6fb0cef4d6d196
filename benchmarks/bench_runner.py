"""The model runner against serve-model (its own process, on loopback).

- runner calls vs a bare asyncio loop over the ``openai`` client making the same calls
  (the client's own limit), zero added latency, 64 in flight, 5,000 calls;
- a fully cached re-run (replies from the store) vs the first run;
- with 50 ms latency: calls/s vs the ideal concurrency / latency (1,280 calls/s), next to the
  bare loop at the same latency and the CPU ceiling of client and server: on a few cores the
  client's and serve-model's own CPU per call, not the latency, bound the throughput.

Targets (issue 10, figure 5): 0.8, 20x and 0.8.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks._harness import Comparison, Measurement, measure, row_of
from benchmarks._table import Row, Target, format_table, rate
from fieldcheck.matchers._llm import PROMPTS
from fieldcheck.runner import ModelSpec, Runner, RunnerSettings
from fieldcheck.serve_model import free_port

CONCURRENCY = 64
LATENCY_S = 0.050


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
    def __init__(self, latency_ms: float = 0, responses: Path | None = None) -> None:
        self.port = free_port()
        argv = [sys.executable, "-m", "fieldcheck._cli.main", "serve-model"]
        argv += ["--port", str(self.port), "--latency-ms", str(latency_ms)]
        argv += ["--responses", str(responses)] if responses else []
        self.proc = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
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

    def cpu_seconds(self) -> float:
        """CPU time (user + system) the server process has used so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


@dataclass(frozen=True)
class _CpuRun:
    """One timed run with the CPU seconds per call of the client (this process) and the server."""

    seconds: float
    calls: int
    client_cpu: float
    server_cpu: float

    def ceiling(self, cores: int) -> float:
        """Calls/s the two processes' CPU allows: each is one thread (one core at most), and
        together they share ``cores``."""
        c, s = self.client_cpu / self.calls, self.server_cpu / self.calls
        return min(1 / c, 1 / s, cores / (c + s))


def _cpu_run(server: _Server, fn: Callable[[], None], calls: int) -> _CpuRun:
    server_start, client_start = server.cpu_seconds(), time.process_time()
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    return _CpuRun(
        seconds,
        calls,
        time.process_time() - client_start,
        server.cpu_seconds() - server_start,
    )


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
        # the runner's default retries (3), so a dropped connection under load fails neither side
        client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=3, timeout=60)
        limit = asyncio.Semaphore(CONCURRENCY)

        async def one(m: list[dict[str, str]]) -> str | None:
            async with limit:
                response = await client.chat.completions.create(
                    model="synthetic-careful",
                    messages=m,  # type: ignore[arg-type]
                    temperature=0,
                )
            return response.choices[0].message.content

        try:
            await asyncio.gather(*(one(m) for m in batches))
        finally:
            await client.close()

    asyncio.run(go())


def _alternating(
    ours: Callable[[], None], base: Callable[[], None], items: int, repeat: int
) -> tuple[Measurement, Measurement]:
    """Best of ``repeat`` runs of each side, taken in turns (ours, base, ours, ...) so that a
    change in the machine's load falls on both; then each side's peak heap."""
    best = {"ours": float("inf"), "base": float("inf")}
    for _ in range(repeat):
        for name, fn in (("ours", ours), ("base", base)):
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    peak = {
        name: measure(fn, items, repeat=0).peak_mib for name, fn in (("ours", ours), ("base", base))
    }
    return (
        Measurement(best["ours"], items, peak["ours"]),
        Measurement(best["base"], items, peak["base"]),
    )


def _in_process(n: int = 5000, m: int = 2000) -> tuple[list[Comparison], list[Row]]:
    out: list[Comparison] = []
    server = _Server()
    try:
        batches = _messages(n, "p")
        settings = RunnerSettings(concurrency=CONCURRENCY, use_cache=False)
        ours, base = _alternating(
            lambda: _runner_calls(server.base_url, batches, Runner(settings)),
            lambda: _bare_calls(server.base_url, batches),
            n,
            repeat=2,
        )
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
    slow = _Server(latency_ms=LATENCY_S * 1000)
    ideal = Measurement(seconds=m / (CONCURRENCY / LATENCY_S), items=m, peak_mib=0.0)
    try:
        batches = _messages(m, "s")
        settings = RunnerSettings(concurrency=CONCURRENCY, use_cache=False)
        runs: dict[str, _CpuRun] = {}
        for _ in range(2):  # in turns, the best of two each
            for name, fn in (
                ("ours", lambda: _runner_calls(slow.base_url, batches, Runner(settings))),
                ("bare", lambda: _bare_calls(slow.base_url, batches)),
            ):
                run = _cpu_run(slow, fn, m)
                if name not in runs or run.seconds < runs[name].seconds:
                    runs[name] = run
    finally:
        slow.stop()
    for name, label in (("ours", "runner"), ("bare", "bare openai loop")):
        run = runs[name]
        out.append(
            Comparison(
                f"{label}, 50 ms latency",
                "calls",
                Measurement(run.seconds, m, 0.0),
                ideal,
                "64 / 50 ms (ideal)",
            )
        )
    cores = os.cpu_count() or 1
    ours_run = runs["ours"]
    ceiling = ours_run.ceiling(cores)
    bare_run = runs["bare"]
    note = (
        f"CPU per call: runner process {ours_run.client_cpu / m * 1e3:.2f} ms (bare openai loop "
        f"{bare_run.client_cpu / m * 1e3:.2f} ms), serve-model {ours_run.server_cpu / m * 1e3:.2f}"
        f" ms; one core each at most, {cores} cores in all"
    )
    extra = Row(
        "CPU ceiling of runner + serve-model, 50 ms latency (calls)",
        f"{rate(ceiling)} calls/s",
        f"64 / 50 ms (ideal): {rate(CONCURRENCY / LATENCY_S)} calls/s",
        ceiling / (CONCURRENCY / LATENCY_S),
        note=note,
    )
    return out, [extra]


TARGETS = {
    "runner, 64 in flight": Target(">=", 0.8),
    "runner, cached re-run": Target(">=", 20.0),
    "runner, 50 ms latency": Target(">=", 0.8),
}


def run(quick: bool = False) -> list[Row]:
    comparisons, extra = _in_process(500, 300) if quick else _in_process()
    return [row_of(c, TARGETS.get(c.name)) for c in comparisons] + extra


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print(format_table(run()))

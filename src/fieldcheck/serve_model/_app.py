"""``fieldcheck serve-model`` (docs/running.md): an OpenAI-compatible server on 127.0.0.1 playing
synthetic models, each reply seeded by the digest of (model, messages) and labelled synthetic."""

from __future__ import annotations

import asyncio
import itertools
import random
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from fieldcheck.runner import estimate_tokens
from fieldcheck.serve_model import _json, _judge, _numeric, _slots
from fieldcheck.serve_model._base import SYNTHETIC_MODELS, Message, Responder, digest_seed

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
FINGERPRINT = "fieldcheck-synthetic"
FAULT_STATUSES = (429, 500, 502, 503)
# A model's latency as a multiple of --latency-ms: the models differ as real ones do.
LATENCY_FACTOR = {"synthetic-careful": 1.0, "synthetic-eager": 1.4, "synthetic-fast": 0.4}


def parse_fail_rates(text: str) -> dict[int, float]:
    """``429=0.1,500=0.05`` -> ``{429: 0.1, 500: 0.05}``; raises ValueError naming the bad part."""
    rates: dict[int, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        status_text, sep, rate_text = part.partition("=")
        try:
            status, rate = int(status_text), float(rate_text)
        except ValueError:
            raise ValueError(f"expected STATUS=RATE, got {part!r}") from None
        if not sep or status not in FAULT_STATUSES:
            raise ValueError(
                f"status must be one of {', '.join(map(str, FAULT_STATUSES))}, got {part!r}"
            )
        if not (0.0 <= rate <= 1.0):
            raise ValueError(f"rate must be in [0, 1], got {part!r}")
        rates[status] = rate
    if sum(rates.values()) > 1.0:
        raise ValueError("the fail rates add up to more than 1")
    return rates


@dataclass
class ServerState:
    responders: list[Responder]
    latency_ms: float = 0.0
    fail_rates: Mapping[int, float] = field(default_factory=dict)
    seed: int = 0
    requests: int = 0
    faults: int = 0

    def __post_init__(self) -> None:
        self._faults = random.Random(self.seed)
        self._lock = threading.Lock()

    def fault(self) -> int | None:
        with self._lock:
            draw = self._faults.random()
        edges = zip(self.fail_rates, itertools.accumulate(self.fail_rates.values()), strict=True)
        return next((status for status, edge in edges if draw < edge), None)

    def responder(self, messages: list[Message]) -> Responder | None:
        system = "\n".join(m.get("content") or "" for m in messages if m.get("role") == "system")
        return next((r for r in self.responders if r.prompt_id in system), None)


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    headers = {"Retry-After": "0"} if status == 429 else None
    body = {"error": {"message": message, "type": kind, "code": status}}
    return JSONResponse(body, status_code=status, headers=headers)


def create_app(
    *,
    responses_dir: Path | None = None,
    latency_ms: float = 0.0,
    fail_rates: Mapping[int, float] | None = None,
    seed: int = 0,
) -> FastAPI:
    """The serve-model app: responders built from ``responses_dir`` (default: ``examples/``)."""
    root = responses_dir or EXAMPLES
    responders = [r for module in (_slots, _numeric, _json, _judge) for r in module.build(root)]
    state = ServerState(responders, latency_ms, dict(fail_rates or {}), seed)
    app = FastAPI(title="fieldcheck serve-model (synthetic models)", docs_url=None, redoc_url=None)
    app.state.serve = state

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        data = [{"id": m, "object": "model", "owned_by": FINGERPRINT} for m in SYNTHETIC_MODELS]
        return {"object": "list", "data": data}

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(request: Request) -> Response:
        state.requests += 1
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            return _error(400, "the request body is not JSON")
        if not isinstance(body, dict):
            return _error(400, "the request body is not a JSON object")
        model = body.get("model")
        raw_messages = body.get("messages")
        if not isinstance(model, str) or not isinstance(raw_messages, list):
            return _error(400, "'model' (string) and 'messages' (list) are required")
        if model not in SYNTHETIC_MODELS:  # as a real endpoint: a typo is no believable score
            known = ", ".join(SYNTHETIC_MODELS)
            return _error(404, f"the model {model[:100]!r} does not exist (it serves {known})")
        messages: list[Message] = []
        for m in raw_messages:
            if not isinstance(m, dict) or not isinstance(m.get("content", ""), str):
                return _error(400, "each message needs a string 'content'")
            messages.append({"role": str(m.get("role", "")), "content": m.get("content") or ""})
        status = state.fault()
        if status is not None:
            state.faults += 1
            kind = "rate_limit_error" if status == 429 else "server_error"
            return _error(status, f"injected fault {status}", kind)
        seed = digest_seed(orjson.dumps([model, messages], option=orjson.OPT_SORT_KEYS))
        rng = random.Random(seed)  # the answer does not depend on --latency-ms
        if state.latency_ms:
            factor = LATENCY_FACTOR.get(model, 1.0)
            jitter = random.Random(seed ^ 0x5EED).uniform(0.7, 1.3)
            await asyncio.sleep(state.latency_ms / 1000 * factor * jitter)
        responder = state.responder(messages)
        text = "synthetic model: no responder knows this prompt"
        if responder is not None:
            text = responder.respond(messages, model, rng)
        prompt_tokens = estimate_tokens("".join(m["content"] for m in messages)) + 4 * len(messages)
        reply_message = {"role": "assistant", "content": text}
        reply = {
            "id": f"chatcmpl-synthetic-{state.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": FINGERPRINT,
            "choices": [{"index": 0, "message": reply_message, "finish_reason": "stop"}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": estimate_tokens(text),
                "total_tokens": prompt_tokens + estimate_tokens(text),
            },
        }
        # serialised here: FastAPI's encoder of a returned dict costs more than the reply itself
        return Response(orjson.dumps(reply), media_type="application/json")

    return app


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class BackgroundServer:
    """serve-model in a thread on a free loopback port (``make demo``, tests)."""

    host = "127.0.0.1"

    def __init__(self, app: FastAPI, *, port: int | None = None) -> None:
        import uvicorn

        self.port = port or free_port()
        self._server = uvicorn.Server(
            uvicorn.Config(
                app, host=self.host, port=self.port, log_level="warning", access_log=False
            )
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + 20.0
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"serve-model did not start on {self.host}:{self.port}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

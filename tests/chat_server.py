"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions protocol, scripted per test.

Tests pass ``reply(request_json) -> str | Reply`` and point the ``openai`` client at ``server.base_url``.
Every request body is recorded in ``server.requests`` (headers, lower-cased, in ``server.headers``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """A scripted answer: chat text, or an HTTP error status with a body."""

    content: str | None = None
    status: int = 200
    error_body: dict[str, Any] | None = None
    prompt_tokens: int = 10
    completion_tokens: int = 5
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)  # extra response headers
    usage: bool = True  # False: the reply carries no "usage" object
    no_choices: bool = False  # True: "choices" is empty
    finish_reason: str = "stop"
    fields: dict[str, Any] | None = None  # top-level fields of the completion, set as given
    body: bytes | None = None  # the body sent as is (a 200 that is not a chat completion)
    content_type: str = "application/json"
    trickle_s: float = 0.0  # send the body one byte at a time, this many seconds apart
    send_length: bool = True  # False: no Content-Length, the body ends when the connection does


Script = Callable[[dict[str, Any]], "str | Reply"]


@dataclass
class ChatServer:
    script: Script
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    in_flight: int = 0  # requests being answered right now
    max_in_flight: int = 0  # the most answered at once since start
    _httpd: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """Bodies of the requests that reached /chat/completions."""
        return [r for r in self.requests if "messages" in r]

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> ChatServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": "not found", "type": "invalid_request"}})
                    return
                with server._lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                self._counted = True
                try:
                    self._answer(body)
                finally:
                    self._leave()

            def _leave(self) -> None:
                # the request stops counting before its reply goes out: once the client has the
                # reply it may send its next request, which must not find this one still counted
                if getattr(self, "_counted", False):
                    self._counted = False
                    with server._lock:
                        server.in_flight -= 1

            def _answer(self, body: dict[str, Any]) -> None:
                reply = server.script(body)
                if isinstance(reply, str):
                    reply = Reply(content=reply)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.body is not None:
                    self._send_bytes(
                        200, reply.body, reply.content_type, reply.headers, length=reply.send_length
                    )
                    return
                if reply.status != 200:
                    self._send(
                        reply.status,
                        reply.error_body
                        or {"error": {"message": "scripted failure", "type": "server_error"}},
                        reply.headers,
                    )
                    return
                payload: dict[str, Any] = {
                    "id": f"chatcmpl-{len(server.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "scripted"),
                    "choices": []
                    if reply.no_choices
                    else [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": reply.content},
                            "finish_reason": reply.finish_reason,
                        }
                    ],
                }
                if reply.usage:
                    payload["usage"] = {
                        "prompt_tokens": reply.prompt_tokens,
                        "completion_tokens": reply.completion_tokens,
                        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                    }
                payload.update(reply.fields or {})
                data = json.dumps(payload).encode()
                self._send_bytes(
                    200, data, reply.content_type, reply.headers, reply.trickle_s, reply.send_length
                )

            def _send(
                self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
            ) -> None:
                self._send_bytes(status, json.dumps(payload).encode(), "application/json", headers)

            def _send_bytes(
                self,
                status: int,
                data: bytes,
                content_type: str,
                headers: dict[str, str] | None = None,
                trickle_s: float = 0.0,
                length: bool = True,
            ) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    if length:
                        self.send_header("Content-Length", str(len(data)))
                    else:
                        self.close_connection = True
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self._leave()
                    self.end_headers()
                    if not trickle_s:
                        self.wfile.write(data)
                        return
                    for i in range(len(data)):
                        self.wfile.write(data[i : i + 1])
                        self.wfile.flush()
                        time.sleep(trickle_s)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()


def user_text(request: dict[str, Any]) -> str:
    """The last user message of a chat request."""
    users = [m["content"] for m in request.get("messages", []) if m.get("role") == "user"]
    return users[-1] if users else ""

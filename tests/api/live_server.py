"""A real uvicorn server on a free loopback port, in a thread, for the API and browser tests."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import uvicorn
from fastapi import FastAPI

from chat_server import user_text


def walkthrough_judge(request: dict[str, Any]) -> str:
    """The spec walkthrough's LLM similarities: 0.92 for name, 0.88 for bio, else 0."""
    text = user_text(request)
    if "John Smyth" in text:
        return "0.92"
    if "Experienced senior engineer" in text:
        return '{"score": 0.88}'
    return "0"


@dataclass
class LiveServer:
    app: FastAPI
    server: uvicorn.Server
    thread: threading.Thread
    base_url: str

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def start_server(app: FastAPI, host: str = "127.0.0.1") -> LiveServer:
    """Serve ``app`` on ``host`` at a port the OS picks (bound before the thread starts)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60  # only against a hang: a loaded machine starts it late
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    return LiveServer(app, server, thread, f"http://{host}:{port}")


Serve = Callable[..., LiveServer]  # the ``serve`` fixture: ``serve(**settings) -> LiveServer``

"""Fixtures of the API tests: the app served by uvicorn on loopback, with the spec walkthrough's
scripted judge (tests/chat_server.py) as its FUZZY and SEMANTIC matcher and a temp store."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from live_server import LiveServer, Serve, start_server, walkthrough_judge

from chat_server import ChatServer, Script
from fieldcheck.api import ApiSettings, create_app


@pytest.fixture
def judge(chat_server: Callable[[Script], ChatServer]) -> ChatServer:
    return chat_server(walkthrough_judge)


@pytest.fixture
def serve(tmp_path: Path, judge: ChatServer) -> Iterator[Serve]:
    """``serve(**settings)``: a live server of ``create_app(ApiSettings(...))`` with the
    walkthrough judge, a fresh SQLite store and ``tmp_path/data`` as its data root."""
    started: list[LiveServer] = []
    (tmp_path / "data").mkdir()

    def start(**values: Any) -> LiveServer:
        settings: dict[str, Any] = {
            "database_url": f"sqlite:///{tmp_path / 'api.sqlite3'}",
            "data_root": tmp_path / "data",
            "matcher": "llm",
            "judge_base_url": judge.base_url,
            "judge_model": "judge-1",
            **values,
        }
        live = start_server(create_app(ApiSettings(**settings)))
        started.append(live)
        return live

    yield start
    for live in started:
        live.stop()


@pytest.fixture
def client(serve: Serve) -> Iterator[httpx.Client]:
    """An httpx client of a default live server (loopback, no token)."""
    live = serve()
    with httpx.Client(base_url=live.base_url, timeout=30) as http:
        yield http

"""Shared fixtures: an isolated cache directory and store (a fresh SQLite file per test), and the
scripted chat-completions server."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# a suite started in the background by a shell without job control (`make test &`) inherits
# an ignored SIGINT, which every Ctrl-C test (and the processes they start) would then ignore
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from chat_server import ChatServer, Script

SHARED = Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture(scope="session")
def _migrated_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty store at the newest migration, made once: each test starts from a copy (every
    scoring command records its run, and migrating a fresh file per test costs more)."""
    from fieldcheck.store import Store

    path = tmp_path_factory.mktemp("store-template") / "store.sqlite3"
    Store(f"sqlite:///{path}").close()
    return path


@pytest.fixture(scope="session", autouse=True)
def _isolated_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A store, cache and data folder for the whole session, set before any fixture runs: a
    module- or class-scoped fixture (made before ``_isolated_cache``) never writes to the user's
    own store under ``~/.local/share/fieldcheck``."""
    home = tmp_path_factory.mktemp("session-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FIELDCHECK_CACHE_DIR", str(home))
        patch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{home / 'store.sqlite3'}")
        patch.setenv("XDG_DATA_HOME", str(home / "data"))
        patch.delenv("FIELDCHECK_ARTIFACTS", raising=False)  # beside each test's store
        yield home


@pytest.fixture(autouse=True)
def _isolated_cache(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    _migrated_store: Path,
) -> None:
    cache = tmp_path_factory.mktemp("cache")
    shutil.copyfile(_migrated_store, cache / "store.sqlite3")
    monkeypatch.setenv("FIELDCHECK_CACHE_DIR", str(cache))
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{cache / 'store.sqlite3'}")
    monkeypatch.setenv("XDG_DATA_HOME", str(cache / "data"))
    for name in ("FIELDCHECK_JUDGE_API_KEY", "OPENAI_API_KEY", "FIELDCHECK_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def chat_server() -> Iterator[Callable[[Script], ChatServer]]:
    """Start scripted servers on 127.0.0.1: ``server = chat_server(lambda req: "0.9")``."""
    started: list[ChatServer] = []

    def start(script: Script) -> ChatServer:
        server = ChatServer(script).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared`` beside the repository (specs and the ConvFinQA samples; read only)."""
    return SHARED

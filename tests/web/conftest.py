"""Browser fixtures: Debian's Chromium (/usr/bin/chromium) driven by Playwright, headless, no
browser download; the app served by uvicorn on loopback with the walkthrough's scripted judge."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "api"))

from live_server import LiveServer, start_server, walkthrough_judge
from playwright.sync_api import Browser, Page, sync_playwright

from chat_server import ChatServer
from fieldcheck.api import ApiSettings, create_app

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Per module: Playwright's sync API keeps an event loop running in the thread while it is
    open, and a later test's ``asyncio.run`` (every CLI model run) would fail under it."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: the browser tests drive Debian's chromium package; "
            "`make test` installs it (apt-get install -y chromium)",
            pytrace=False,
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def live(tmp_path: Path, chat_server: object) -> Iterator[LiveServer]:
    judge = ChatServer(walkthrough_judge).start()
    settings = ApiSettings(
        database_url=f"sqlite:///{tmp_path / 'web.sqlite3'}",
        matcher="llm",
        judge_base_url=judge.base_url,
        judge_model="judge-1",
    )
    server = start_server(create_app(settings))
    yield server
    server.stop()
    judge.stop()


@pytest.fixture
def page(browser: Browser, live: LiveServer, tmp_path: Path) -> Iterator[Page]:
    """A fresh page of the live app; a JavaScript dialog (alert) anywhere fails the test."""
    context = browser.new_context(base_url=live.base_url, accept_downloads=True)
    opened = context.new_page()
    dialogs: list[str] = []

    def on_dialog(dialog: object) -> None:
        dialogs.append(getattr(dialog, "message", "?"))
        dialog.dismiss()  # type: ignore[attr-defined]

    opened.on("dialog", on_dialog)
    yield opened
    context.close()
    assert dialogs == [], f"a dialog opened: {dialogs}"

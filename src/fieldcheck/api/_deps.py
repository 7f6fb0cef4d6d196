"""The app's shared objects (settings, store, saved configuration, matchers, templates) as
typed FastAPI dependencies, so routers of later parts reach them the same way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.templating import Jinja2Templates

from fieldcheck.api._evaluation import Matchers
from fieldcheck.api._settings import ApiSettings
from fieldcheck.jsoneval import EvalConfig, SavedConfig
from fieldcheck.store import Store


@dataclass
class AppContext:
    """What ``create_app`` builds once and every request shares."""

    settings: ApiSettings
    store: Store
    saved: SavedConfig
    base_config: EvalConfig
    matchers: Matchers
    templates: Jinja2Templates


def _context(request: Request) -> AppContext:
    context: AppContext = request.app.state.fieldcheck
    return context


Context = Annotated[AppContext, Depends(_context)]

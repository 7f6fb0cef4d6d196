"""The app's shared objects (settings, store, saved configuration, matchers, templates) as
typed FastAPI dependencies, so routers of later parts reach them the same way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from fieldcheck.api._evaluation import Matchers
from fieldcheck.api._settings import ApiSettings
from fieldcheck.jsoneval import SavedConfig
from fieldcheck.store import Store


@dataclass
class AppContext:
    """What ``create_app`` builds once and every request shares."""

    settings: ApiSettings
    store: Store
    saved: SavedConfig
    matchers: Matchers
    templates: Jinja2Templates

    def render(self, request: Request, name: str, status: int = 200, **values: Any) -> HTMLResponse:
        """The page of template ``name`` with ``values`` (``active``, its menu item: Runs unless
        given)."""
        context = {"active": "/runs", **values}
        return self.templates.TemplateResponse(request, name, context, status_code=status)


def _context(request: Request) -> AppContext:
    context: AppContext = request.app.state.fieldcheck
    return context


Context = Annotated[AppContext, Depends(_context)]

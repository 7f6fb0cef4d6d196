"""``create_app``: the FastAPI app of ``fieldcheck serve`` (json-evaluation.md's API and its
Configuration and Test evaluation pages), one router per area over one shared context."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from fieldcheck._util.term import safe_bidi
from fieldcheck._version import __version__
from fieldcheck.api._deps import AppContext
from fieldcheck.api._errors import install_error_handlers
from fieldcheck.api._evaluation import Matchers
from fieldcheck.api._guard import Guard
from fieldcheck.api._settings import ApiSettings, check_binding
from fieldcheck.api.routes import compare, config, items, json, pages, runs, score
from fieldcheck.jsoneval import SavedConfig
from fieldcheck.runs import format_cell, format_latency, format_number, show_value
from fieldcheck.store import Store

WEB = Path(__file__).resolve().parents[1] / "web"
NAV: list[tuple[str, str]] = [
    ("Test evaluation", "/evaluate"),
    ("Configuration", "/configuration"),
    ("Runs", "/runs"),
]


class Verbatim(str):
    """A value a page keeps as it is (``|verbatim``): a form's value, a row's ``data-key``."""


def _shown(value: object) -> object:
    """Every value a template writes, its bidi controls shown escaped (``safe_bidi``), so a name
    cannot reorder what follows it; a ``Verbatim`` one as it is."""
    if isinstance(value, Verbatim) or not isinstance(value, str):
        return value
    return type(value)(safe_bidi(value))  # a str, or Markup (a filter's HTML) kept as it is


def templates() -> Jinja2Templates:
    """The web app's Jinja2 templates, autoescaped (Starlette turns it on for .html)."""
    found = Jinja2Templates(directory=str(WEB / "templates"))
    found.env.autoescape = True
    found.env.finalize = _shown
    found.env.filters["verbatim"] = Verbatim
    found.env.globals["nav"] = NAV
    found.env.globals["version"] = __version__
    found.env.globals["link"] = lambda url: url  # a link as served: the URL (the bundle's: a file)
    # the formatters every page uses (the bundle renders with this environment too)
    found.env.globals.update(
        cell=format_cell, number=format_number, show=show_value, latency=format_latency
    )
    return found


def create_app(settings: ApiSettings | None = None) -> FastAPI:
    """The app for ``settings`` (default: loopback, token from the environment); ValueError
    when bound beyond loopback without a token."""
    settings = settings or ApiSettings.from_env()
    check_binding(settings.host, settings.token)
    store = Store(settings.database_url)
    app = FastAPI(
        title="fieldcheck",
        version=__version__,
        description=(
            "Score JSON output against ground truth (completeness, hallucination, accuracy, "
            "safety, RQS) and keep the configuration the pages and calls use."
        ),
        docs_url=None,  # FastAPI's browsable docs load Swagger UI from a CDN: nothing may
        redoc_url=None,  # (the schema stays at /openapi.json)
    )
    app.state.fieldcheck = AppContext(
        settings=settings,
        store=store,
        saved=SavedConfig(store),
        matchers=Matchers(settings.matcher_config()),
        templates=templates(),
    )
    install_error_handlers(app)
    app.add_middleware(Guard, settings=settings)
    app.mount("/static", StaticFiles(directory=str(WEB / "static")), name="static")
    # items after runs: /api/runs/compare is not a run id
    for area in (json, config, pages, runs, items, score, compare):
        app.include_router(area.router)
        if hasattr(area, "pages"):
            app.include_router(area.pages)
    return app

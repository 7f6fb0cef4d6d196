"""An item's whole story (issue 28, "An item"): ``GET /api/runs/{id}/items/{key}`` and its page
``/runs/{id}/items/{key}``, which renders exactly the route's JSON (``runs.item_story``). The key
is the rest of the path, URL-quoted (a key may hold ``/``, ``?``, ``#``, spaces), or the ``key``
parameter of ``/runs/{id}/item`` (the keys ``.`` and ``..``, which a browser resolves away)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from fieldcheck.api._body import CheckedBodyRoute
from fieldcheck.api._deps import Context
from fieldcheck.api._errors import (
    INVALID,
    ITEMS_GONE,
    ApiError,
    error_responses,
    items_missing,
)
from fieldcheck.api._evaluation import client_paths
from fieldcheck.runs import item_story, show_value
from fieldcheck.store import ItemsMissing

router = APIRouter(
    prefix="/api/runs", tags=["runs"], route_class=CheckedBodyRoute, responses=error_responses()
)
pages = APIRouter(include_in_schema=False)
NO_ITEM = "No stored run has this id, or the run no item of this key (and model)."
ModelQ = Annotated[
    str | None,
    Query(max_length=255, description="The model's item, where several models have this key."),
]
KeyQ = Annotated[
    str,
    Query(
        max_length=4096,
        description="The item's key (a key ``.`` or ``..`` is addressed so: a browser resolves "
        "it in a path).",
    ),
]


@router.get(
    "/{run_id}/items/{key:path}",
    summary="One item's whole story",
    responses=error_responses({404: NO_ITEM, 410: ITEMS_GONE, 422: INVALID}),
)
def item_route(run_id: str, key: str, ctx: Context, model: ModelQ = None) -> dict[str, Any]:
    """Its verdicts told by its system (json: per field; slots: per slot; numeric: question,
    table, plan, checks, matches) as sections of values, tables and text, then its model call:
    the prompt messages as sent, the raw reply, tokens, latency, attempts and error. Numbers
    unrounded; ``result`` is the stored item as it is."""
    run = ctx.store.get_run(run_id) if len(run_id) <= 64 else None
    if run is None:
        raise ApiError(404, f"no run {run_id!r}", field="id")
    try:
        story = item_story(ctx.store, run, key, model)
    except KeyError:
        which = f" of model {model!r}" if model is not None else ""
        raise ApiError(404, f"no item {key!r}{which} in run {run.id}", field="key") from None
    shown: dict[str, Any] = client_paths(story, ctx.settings.data_root)
    return shown


@router.get(
    "/{run_id}/item",
    summary="One item's whole story, its key a parameter",
    responses=error_responses({404: NO_ITEM, 410: ITEMS_GONE, 422: INVALID}),
)
def item_by_key(run_id: str, ctx: Context, key: KeyQ, model: ModelQ = None) -> dict[str, Any]:
    """As ``/api/runs/{id}/items/{key}``, for any key, ``.`` and ``..`` included."""
    return item_route(run_id, key, ctx, model)


@pages.get("/runs/{run_id}/items/{key:path}")
def item_page(
    request: Request, run_id: str, key: str, ctx: Context, model: ModelQ = None
) -> HTMLResponse:
    status, story, error = 200, None, None
    try:
        story = item_route(run_id, key, ctx, model)
    except ItemsMissing as exc:
        status, error = 410, items_missing(exc)
    except ApiError as exc:
        status, error = exc.status, exc.message
    context = {"active": "/runs", "story": story, "error": error, "show": show_value}
    return ctx.templates.TemplateResponse(request, "item.html", context, status_code=status)


@pages.get("/runs/{run_id}/item")
def item_page_by_key(
    request: Request, run_id: str, key: KeyQ, ctx: Context, model: ModelQ = None
) -> HTMLResponse:
    return item_page(request, run_id, key, ctx, model)

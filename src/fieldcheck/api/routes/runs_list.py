"""The Runs page (``/runs``) and ``GET /api/runs`` (issue 28 page 1): one row per evaluation,
sorted by any column, filtered by system, model and dataset, paged. ``runs_list`` builds the
route's JSON and the page renders that dict alone, so the two agree (and a saved copy renders
the same page). Every figure comes from the run's row (``Store.finish_scored_run``): no items
file is opened."""

from __future__ import annotations

from pathlib import PurePath
from typing import Annotated, Any, Literal, get_args

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from fieldcheck import core
from fieldcheck.api._body import CheckedBodyRoute
from fieldcheck.api._deps import AppContext, Context
from fieldcheck.api._errors import INVALID, ApiError, error_responses
from fieldcheck.api._evaluation import client_paths
from fieldcheck.api.routes.runs import DateQ, LimitQ
from fieldcheck.runs import format_latency
from fieldcheck.store import RunInfo

router = APIRouter(
    prefix="/api/runs",
    tags=["runs"],
    route_class=CheckedBodyRoute,
    responses=error_responses(),
)
pages = APIRouter(include_in_schema=False)

Sort = Literal[
    "started",
    "system",
    "model",
    "dataset",
    "metric",
    "items",
    "failed",
    "call_errors",
    "tokens",
    "cost",
    "latency",
]
TEXT_SORTS = ("system", "model", "dataset")
"""Columns first sorted A to Z; the others (numbers, times) largest first."""
SHORT_SHA = 12
PAGE = 50


def _row(ctx: AppContext, run: RunInfo) -> dict[str, Any]:
    """A run as the list gives it: every field of ``GET /api/runs/{id}`` stored on its row,
    with its dataset's file name and short sha256 and its headline metric per model."""
    row: dict[str, Any] = client_paths(run.public_dict(), ctx.settings.data_root)
    system = core.find(run.system)
    row["dataset_name"] = PurePath(run.dataset).name if run.dataset else ""
    row["dataset_sha256_short"] = run.dataset_sha256[:SHORT_SHA]
    row["metric"] = {
        "name": core.headline_metric(system) if system else None,
        "values": core.headline_values(system, run.model, run.metrics, run.intervals)
        if system and run.metrics
        else [],
    }
    tokens = (run.input_tokens, run.output_tokens)
    row["tokens"] = None if None in tokens else sum(t or 0 for t in tokens)
    return row


def runs_list(
    ctx: AppContext,
    *,
    system: str | None = None,
    model: str | None = None,
    model_contains: str | None = None,
    dataset: str | None = None,
    since: Any = None,
    until: Any = None,
    sort: str = "started",
    order: str | None = None,
    limit: int = PAGE,
    offset: int = 0,
) -> dict[str, Any]:
    """The runs list's JSON: ``runs`` (one page), ``total`` (of the filters), the paging, sort
    and filters it was made with, and the systems a filter may name."""
    if system is not None and core.find(system) is None:
        raise ApiError(
            422, f"system: no system {system!r} ({', '.join(core.names())})", field="system"
        )
    order = order or ("asc" if sort in TEXT_SORTS else "desc")
    filters: dict[str, Any] = {
        "system": system,
        "model": model,
        "model_contains": model_contains or None,
        "dataset_contains": dataset or None,
        "since": since,
        "until": until,
    }
    runs = ctx.store.list_runs(
        **filters, sort=sort, newest_first=order == "desc", limit=limit, offset=offset
    )
    return {
        "total": ctx.store.count_runs(**filters),
        "limit": limit,
        "offset": offset,
        "sort": sort,
        "order": order,
        "filters": {
            "system": system,
            "model": model,
            "model_contains": model_contains or None,
            "dataset": dataset or None,
        },
        "systems": core.names(),
        "runs": [_row(ctx, r) for r in runs],
    }


@router.get(
    "",
    summary="The runs: one row per evaluation, sorted, filtered and paged",
    responses=error_responses({422: INVALID}),
)
def list_runs(
    ctx: Context,
    system: Annotated[
        str | None, Query(max_length=64, description="A registered system: json, slots, numeric.")
    ] = None,
    model: Annotated[
        str | None, Query(max_length=255, description="Runs of this model (one of a slot run's).")
    ] = None,
    model_contains: Annotated[
        str | None, Query(max_length=255, description="Runs whose model names hold this text.")
    ] = None,
    dataset: Annotated[
        str | None, Query(max_length=255, description="Runs whose dataset path holds this text.")
    ] = None,
    since: Annotated[DateQ, Query(description="Started at or after (ISO 8601).")] = None,
    until: Annotated[DateQ, Query(description="Started before (ISO 8601).")] = None,
    sort: Annotated[Sort, Query(description="The column to sort by (unknown values last).")] = (
        "started"
    ),
    order: Annotated[
        Literal["asc", "desc"] | None,
        Query(description="Default: asc for system, model and dataset, else desc."),
    ] = None,
    limit: LimitQ = PAGE,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> dict[str, Any]:
    """Each run with its dataset (file name, short sha256), headline metric with its 95%
    interval per model (json RQS, slots F1, numeric numerical-match accuracy), items, failed
    items, call errors, tokens, cost (priced models), mean latency and start; newest first."""
    return runs_list(
        ctx,
        system=system,
        model=model,
        model_contains=model_contains,
        dataset=dataset,
        since=since,
        until=until,
        sort=sort,
        order=order,
        limit=limit,
        offset=offset,
    )


def _page_query(given: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """The page's query as ``runs_list`` takes it, and what ``GET /api/runs`` would answer 422
    for each value it refuses (left out: the page lists the runs without it and says so)."""
    asked: dict[str, Any] = {}
    refused: list[str] = []
    system = given.get("system")
    if system and core.find(system) is None:
        refused.append(f"system: no system {system[:64]!r} ({', '.join(core.names())})")
    else:
        asked["system"] = system or None
    for name in ("model", "model_contains", "dataset"):
        value = given.get(name) or None
        if value is not None and len(value) > 255:
            refused.append(f"{name}: must have at most 255 characters")
        else:
            asked[name] = value
    sorts = get_args(Sort)
    sort = given.get("sort") or "started"
    if sort not in sorts:
        refused.append(f"sort: must be one of {', '.join(sorts)} (got {sort[:64]!r})")
        sort = "started"
    asked["sort"] = sort
    order = given.get("order") or None
    if order is not None and order not in ("asc", "desc"):
        refused.append(f"order: must be 'asc' or 'desc' (got {order[:64]!r})")
        order = None
    asked["order"] = order
    offset = given.get("offset") or "0"
    if offset.isdecimal() and int(offset) <= 10_000_000:
        asked["offset"] = int(offset)
    else:
        refused.append(f"offset: must be a whole number from 0 to 10000000 (got {offset[:64]!r})")
    return asked, refused


@pages.get("/runs")
def runs_page(request: Request, ctx: Context) -> HTMLResponse:
    """The list as a page: what ``GET /api/runs`` gives for the same query; a value the route
    would refuse (422) is left out and the page says which and why, with status 422."""
    asked, refused = _page_query(dict(request.query_params))
    data = runs_list(ctx, **asked)
    values = {"active": "/runs", "data": data, "latency": _latency, "money": _money}
    values["error"] = "; ".join(refused) if refused else None
    status = 422 if refused else 200
    return ctx.templates.TemplateResponse(request, "runs.html", values, status_code=status)


def _latency(seconds: float | None) -> str:
    return format_latency({"mean": seconds}) if seconds is not None else "-"


def _money(usd: float | None) -> str:
    return "-" if usd is None else f"${usd:.4g}"

"""``/api/runs`` and the Runs pages (issue 28 page 1): the runs in the store listed (every figure
from the run's row: no items file opened), compared, exported (streamed) and re-scored."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path, PurePath
from typing import Annotated, Any, Literal, get_args
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, StreamingResponse
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from fieldcheck import core
from fieldcheck._util.errors import MAX_SEED, InputError, input_error_of
from fieldcheck.api._body import MAX_BOOTSTRAP, api_router
from fieldcheck.api._deps import AppContext, Context
from fieldcheck.api._errors import (
    INVALID,
    ITEMS_GONE,
    NO_RUN,
    ApiError,
    error_responses,
    page_number,
)
from fieldcheck.api._evaluation import (
    client_paths,
    logged_warnings,
    path_namer,
    with_warnings,
)
from fieldcheck.api.routes.compare import compare_dict
from fieldcheck.jsoneval import parse_strategies
from fieldcheck.runs import format_count, format_latency, iter_export, rescore
from fieldcheck.store import RunInfo

router = api_router("/api/runs", "runs")
pages = APIRouter(include_in_schema=False)
MAX_PAGE = 500
PAGE = 50
SHORT_SHA = 12
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


class RescoreRequest(BaseModel):
    """A new configuration for a stored run (what is left out stays as the run had it)."""

    model_config = ConfigDict(extra="forbid")

    field_strategies: dict[str, str] | None = Field(None, description="json: field -> strategy.")
    weights: dict[str, float] | None = Field(None, description="json: RQS weights.")
    thresholds: dict[str, float] | None = Field(
        None, description="json: {fuzzy_threshold, semantic_threshold} in [0, 1]."
    )
    tp: Literal["presence", "exact", "fuzzy", "semantic"] | None = Field(
        None, description="slots: the TP rule."
    )
    threshold: float | None = Field(None, ge=0, le=1, description="slots: --tp threshold.")
    bootstrap: int | None = Field(None, ge=0, le=MAX_BOOTSTRAP)
    seed: int | None = Field(None, ge=0, le=MAX_SEED)


def _public(ctx: AppContext, run: RunInfo) -> dict[str, Any]:
    """The run as JSON, with no server path the client did not send (``client_paths``)."""
    shown: dict[str, Any] = client_paths(run.public_dict(), ctx.settings.data_root, run)
    return shown


def _get(ctx: AppContext, run_id: str) -> RunInfo:
    run = ctx.store.get_run(run_id) if len(run_id) <= 64 else None
    if run is None:
        raise ApiError(404, f"no run {run_id!r}", field="id")
    return run


def _iso_8601(value: Any) -> Any:
    """A date-time as its schema says (ISO 8601 text), not the Unix time pydantic also reads
    from a number (``since=5`` was 1970-01-01T00:00:05Z)."""
    if isinstance(value, str):
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise ValueError("must be an ISO 8601 date-time (2024-05-01T12:00:00Z)") from None
    return value


DateQ = Annotated[datetime | None, BeforeValidator(_iso_8601)]


def _row(ctx: AppContext, run: RunInfo) -> dict[str, Any]:
    """A run as the list gives it: every field of ``GET /api/runs/{id}`` stored on its row,
    with its dataset's file name and short sha256 and its headline metric per model."""
    row = _public(ctx, run)
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


class RunsQuery(BaseModel):
    """``GET /api/runs``'s query; the Runs page's and the bundle's, as they read it."""

    system: str | None = Query(
        None, max_length=64, description="A registered system: json, slots, numeric."
    )
    model: str | None = Query(
        None, max_length=255, description="Runs of this model (one of a slot run's)."
    )
    model_contains: str | None = Query(
        None, max_length=255, description="Runs whose model names hold this text."
    )
    dataset: str | None = Query(
        None, max_length=255, description="Runs whose dataset file name holds this text."
    )
    since: DateQ = Query(None, description="Started at or after (ISO 8601).")
    until: DateQ = Query(None, description="Started before (ISO 8601).")
    sort: Sort = Query("started", description="The column to sort by (unknown values last).")
    order: Literal["asc", "desc"] | None = Query(
        None, description="Default: asc for system, model and dataset, else desc."
    )
    limit: int = Query(PAGE, ge=1, le=MAX_PAGE)
    offset: int = Query(0, ge=0, le=10_000_000)


@router.get(
    "",
    summary="The runs: one row per evaluation, sorted, filtered and paged",
    responses=error_responses({422: INVALID}),
)
def list_runs(ctx: Context, query: Annotated[RunsQuery, Query()]) -> dict[str, Any]:
    """Each run with its dataset (file name, short sha256), headline metric with its 95%
    interval per model (json RQS, slots F1, numeric numerical-match accuracy), items, failed
    items, call errors, tokens, cost (priced models), mean latency and start; newest first."""
    system = query.system
    if system is not None and core.find(system) is None:
        raise ApiError(
            422, f"system: no system {system!r} ({', '.join(core.names())})", field="system"
        )
    order = query.order or ("asc" if query.sort in TEXT_SORTS else "desc")
    named = {"system": system, "model": query.model, "model_contains": query.model_contains or None}
    filters: dict[str, Any] = {
        **named,
        "dataset_contains": query.dataset or None,
        "since": query.since,
        "until": query.until,
    }
    runs = ctx.store.list_runs(
        **filters,
        sort=query.sort,
        newest_first=order == "desc",
        limit=query.limit,
        offset=query.offset,
    )
    return {
        "total": ctx.store.count_runs(**filters),
        "limit": query.limit,
        "offset": query.offset,
        "sort": query.sort,
        "order": order,
        "filters": {**named, "dataset": query.dataset or None},
        "systems": core.names(),
        "runs": [_row(ctx, r) for r in runs],
    }


@router.get(
    "/compare",
    summary="Runs of one system side by side (an alias of GET /api/compare)",
    deprecated=True,
    responses=error_responses(
        {404: NO_RUN, 410: ITEMS_GONE, 422: f"{INVALID} Also no id, over 20 ids, or mixed systems."}
    ),
)
def compare_alias(
    ctx: Context,
    ids: Annotated[list[str], Query(description="Run ids, repeated or comma-separated.")],
) -> dict[str, Any]:
    """``GET /api/compare?runs=...`` under its old name and parameter (the items they disagree
    on: the first 100)."""
    return compare_dict(ctx, ids, differ=True, offset=0, limit=100, field="ids")


@router.post(
    "/{run_id}/rescore",
    summary="Re-score a json or slot run as a new run",
    responses=error_responses(
        {
            404: NO_RUN,
            410: ITEMS_GONE,
            422: f"{INVALID} Also a run that cannot be re-scored (numeric, unfinished).",
        }
    ),
)
async def rescore_route(run_id: str, body: RescoreRequest, ctx: Context) -> dict[str, Any]:
    """No model asked again: the run's stored raw values scored again (with the server's matcher);
    the new run's parent is it."""
    run = _get(ctx, run_id)
    try:
        given = body.field_strategies
        strategies = parse_strategies(given) if given is not None else None
        child, warnings = await run_in_threadpool(
            _rescored,
            ctx,
            run.id,
            strategies=strategies,
            weights=body.weights,
            thresholds=body.thresholds,
            tp=body.tp,
            threshold=body.threshold,
            bootstrap=body.bootstrap,
            seed=body.seed,
        )
    except InputError as exc:
        raise ApiError(422, exc.one_line(), field=exc.field or "id") from None
    except ValidationError as exc:  # the configuration's validation: the field named
        error = input_error_of(exc)
        raise ApiError(422, error.one_line(), field=error.field or "body") from None
    except ValueError as exc:  # the configuration's validation
        raise ApiError(422, " ".join(str(exc).split())[:300], field="body") from None
    return with_warnings(_public(ctx, child), warnings)


def _rescored(ctx: AppContext, run_id: str, **options: Any) -> tuple[RunInfo, list[str]]:
    """``runs.rescore`` with the server's matcher (built in this worker thread on first use),
    never the judge the stored run names: a run's settings never point the server at a URL; and
    the warnings ``runs rescore`` prints."""
    with logged_warnings() as warnings:
        return rescore(ctx.store, run_id, **options, **ctx.matchers.extras()), warnings


@router.get(
    "/{run_id}/export",
    summary="A run's items as CSV or JSONL (streamed)",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"text/csv": {}, "application/x-ndjson": {}}},
        **error_responses({404: NO_RUN, 410: ITEMS_GONE, 422: INVALID}),
    },
)
def export_route(
    run_id: str, ctx: Context, format: Annotated[Literal["csv", "jsonl"], Query()] = "csv"
) -> StreamingResponse:
    run = _get(ctx, run_id)
    ctx.store.items_file(run.id)  # ItemsMissing (410) before the stream starts, not within it
    media = "text/csv" if format == "csv" else "application/x-ndjson"
    return StreamingResponse(
        iter_export(ctx.store, run.id, format, path_namer(ctx.settings.data_root, run)),
        media_type=media,
        headers={"content-disposition": f'attachment; filename="run-{run.id}.{format}"'},
    )


# pages ------------------------------------------------------------------------------------
def _plots(run: RunInfo) -> list[str]:
    """The plot files directly inside the run's output folder (none when it is gone)."""
    if not run.out_dir or not os.path.isdir(run.out_dir):
        return []
    return sorted(p.name for p in Path(run.out_dir).iterdir() if p.suffix == ".png" and p.is_file())


def _page_query(given: dict[str, str]) -> tuple[RunsQuery, list[str]]:
    """The page's query as ``list_runs`` takes it, and what ``GET /api/runs`` would answer 422
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
    for name, low, high, default in (("limit", 1, MAX_PAGE, PAGE), ("offset", 0, 10_000_000, 0)):
        number, problem = page_number(name, given.get(name) or str(default), low, high)
        if problem is None:
            asked[name] = number
        else:  # left out: the route's default
            refused.append(problem)
    return RunsQuery.model_construct(**asked), refused


@pages.get("/runs")
def runs_page(request: Request, ctx: Context) -> HTMLResponse:
    """The list as a page: what ``GET /api/runs`` gives for the same query; a value the route
    would refuse (422) is left out and the page says which and why, with status 422."""
    asked, refused = _page_query(dict(request.query_params))
    values = {"data": list_runs(ctx, asked), "latency": _latency, "money": _money}
    values["count"] = format_count  # items as runs list and the run page say them: 3 of 8
    values["page_size"] = PAGE  # the default limit, which the page's links leave out
    error = "; ".join(refused) if refused else None
    return ctx.render(request, "runs.html", 422 if refused else 200, error=error, **values)


def _latency(seconds: float | None) -> str:
    return format_latency({"mean": seconds}) if seconds is not None else "-"


def _money(usd: float | None) -> str:
    return "-" if usd is None else f"${usd:.4g}"


@pages.get("/runs/compare")
def compare_page(ids: Annotated[list[str] | None, Query()] = None) -> RedirectResponse:
    """The old address of the Compare page."""
    found = ",".join(i.strip() for part in ids or [] for i in part.split(",") if i.strip())
    return RedirectResponse(f"/compare?runs={quote(found, safe=',')}", status_code=307)


@pages.get("/runs/{run_id}/files/{name}")
def run_file(run_id: str, name: str, ctx: Context) -> FileResponse:
    """A plot of the run's output folder: a plain file name listed there, never a path out."""
    run = _get(ctx, run_id)
    if name not in _plots(run):
        raise ApiError(404, f"no plot {name!r} in the run's output folder", field="name")
    folder = Path(run.out_dir or "").resolve()
    path = (folder / name).resolve()
    if not path.is_relative_to(folder):
        raise ApiError(403, "outside the run's output folder", field="name")
    return FileResponse(path, media_type="image/png")

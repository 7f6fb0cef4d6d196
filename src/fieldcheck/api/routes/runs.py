"""``/api/runs`` and the Runs pages: the scored runs in the store, listed, shown, their items
paged and filtered (keyset on the indexed columns), compared, exported (streamed) and re-scored.
Thin shells over ``fieldcheck.runs`` and the store; every page value is autoescaped."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, StreamingResponse
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from fieldcheck._util.errors import InputError, input_error_of
from fieldcheck.api._body import CheckedBodyRoute
from fieldcheck.api._deps import AppContext, Context
from fieldcheck.api._errors import (
    INVALID,
    ITEMS_GONE,
    NO_RUN,
    ApiError,
    error_responses,
)
from fieldcheck.api._evaluation import client_paths
from fieldcheck.api.routes.compare import compare_dict
from fieldcheck.runs import (
    format_latency,
    iter_export,
    rescore,
)
from fieldcheck.store import RunInfo

router = APIRouter(
    prefix="/api/runs",
    tags=["runs"],
    route_class=CheckedBodyRoute,
    responses=error_responses(),
)
pages = APIRouter(include_in_schema=False)
MAX_PAGE = 500
PLOT_SUFFIXES = (".png",)


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
    bootstrap: int | None = Field(None, ge=0, le=100_000)
    seed: int | None = Field(None, ge=0, le=2**32 - 1)


def _public(ctx: AppContext, run: RunInfo) -> dict[str, Any]:
    """The run as JSON, with no server path under the data root (``client_paths``)."""
    shown: dict[str, Any] = client_paths(run.public_dict(), ctx.settings.data_root)
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
LimitQ = Annotated[int, Query(ge=1, le=MAX_PAGE)]


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
    """No model call: the run's stored raw values scored again; the new run's parent is it."""
    run = _get(ctx, run_id)
    try:
        strategies = None
        if body.field_strategies is not None:
            from fieldcheck.jsoneval import parse_strategies

            strategies = parse_strategies(body.field_strategies)
        child = await run_in_threadpool(
            rescore,
            ctx.store,
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
    return _public(ctx, child)


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
        iter_export(ctx.store, run.id, format),
        media_type=media,
        headers={"content-disposition": f'attachment; filename="run-{run.id}.{format}"'},
    )


# pages ------------------------------------------------------------------------------------
def _render(
    ctx: AppContext, request: Request, name: str, status: int = 200, **values: Any
) -> HTMLResponse:
    context = {"active": "/runs", "latency": format_latency, **values}
    return ctx.templates.TemplateResponse(request, name, context, status_code=status)


def _plots(run: RunInfo) -> list[str]:
    """The plot files directly inside the run's output folder (none when it is gone)."""
    if not run.out_dir or not os.path.isdir(run.out_dir):
        return []
    return sorted(
        p.name for p in Path(run.out_dir).iterdir() if p.suffix in PLOT_SUFFIXES and p.is_file()
    )


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

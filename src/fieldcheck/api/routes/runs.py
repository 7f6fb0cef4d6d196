"""``/api/runs`` and the Runs pages: the scored runs in the store, listed, shown, their items
paged and filtered (keyset on the indexed columns), compared, exported (streamed) and re-scored.
Thin shells over ``fieldcheck.runs`` and the store; every page value is autoescaped."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, StreamingResponse
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from fieldcheck import core
from fieldcheck._util.errors import InputError, input_error_of
from fieldcheck.api._body import CheckedBodyRoute
from fieldcheck.api._deps import AppContext, Context
from fieldcheck.api._errors import (
    INVALID,
    ITEMS_GONE,
    NO_RUN,
    ApiError,
    error_responses,
    items_missing,
)
from fieldcheck.api._evaluation import client_paths
from fieldcheck.api.routes.compare import compare_dict
from fieldcheck.runs import (
    compare_runs,
    format_cell,
    format_count,
    format_items,
    format_latency,
    format_number,
    iter_export,
    rescore,
)
from fieldcheck.store import ItemsMissing, RunInfo, StoredItem

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


def _page(
    ctx: AppContext, run: RunInfo, *, after: int, limit: int, **filters: Any
) -> dict[str, Any]:
    """A page of the run's items and their count, filtered (failed, tag, model, turn)."""
    items = ctx.store.page_items(run.id, after=after, limit=limit, **filters)
    return {
        "items": items,
        "total": ctx.store.count_items(run.id, **filters),
        "next_after": items[-1].seq if len(items) == limit else None,
    }


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
FailedQ = Annotated[bool | None, Query(description="Only failed items (true) or only passed.")]
FieldQ = Annotated[str | None, Query(max_length=512, description="json: records with this field.")]
TopicQ = Annotated[str | None, Query(max_length=512, description="slots: sessions of a topic.")]
ModelQ = Annotated[str | None, Query(max_length=255, description="slots: one model's sessions.")]
TurnQ = Annotated[int | None, Query(ge=0, le=10_000, description="numeric: turns of index.")]
AfterQ = Annotated[int, Query(ge=-1, le=2**31 - 1, description="Keyset: items after this seq.")]
LimitQ = Annotated[int, Query(ge=1, le=MAX_PAGE)]


@router.get(
    "",
    summary="The runs, newest first, paged and filtered",
    responses=error_responses({422: INVALID}),
)
def list_runs(
    ctx: Context,
    system: Annotated[
        str | None, Query(max_length=64, description="A registered system: json, slots, numeric.")
    ] = None,
    model: Annotated[str | None, Query(max_length=255)] = None,
    since: Annotated[DateQ, Query(description="Started at or after (ISO 8601).")] = None,
    until: Annotated[DateQ, Query(description="Started before (ISO 8601).")] = None,
    limit: LimitQ = 50,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> dict[str, Any]:
    if system is not None and core.find(system) is None:
        raise ApiError(
            422, f"system: no system {system!r} ({', '.join(core.names())})", field="system"
        )
    filters: dict[str, Any] = {"system": system, "model": model, "since": since, "until": until}
    runs = ctx.store.list_runs(**filters, limit=limit, offset=offset, newest_first=True)
    return {
        "total": ctx.store.count_runs(**filters),
        "limit": limit,
        "offset": offset,
        "runs": [_public(ctx, r) for r in runs],
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


@router.get(
    "/{run_id}",
    summary="One run",
    responses=error_responses({404: NO_RUN, 410: ITEMS_GONE, 422: INVALID}),
)
def get_run(run_id: str, ctx: Context) -> dict[str, Any]:
    run = _get(ctx, run_id)
    data = _public(ctx, run)
    data["failed_items"] = ctx.store.count_items(run.id, failed=True)
    scored = run.scored  # the calls alone of a model are never scored
    data["not_scored_items"] = ctx.store.count_not_scored(run.id) if scored else None
    data["items_in_flight"] = ctx.store.items_in_flight(run.id)
    return data


@router.get(
    "/{run_id}/items",
    summary="A run's items, paged (keyset) and filtered",
    responses=error_responses({404: NO_RUN, 410: ITEMS_GONE, 422: INVALID}),
)
def list_items(
    run_id: str,
    ctx: Context,
    failed: FailedQ = None,
    field: FieldQ = None,
    topic: TopicQ = None,
    model: ModelQ = None,
    turn: TurnQ = None,
    after: AfterQ = -1,
    limit: LimitQ = 100,
) -> dict[str, Any]:
    """Items in order with ``seq > after``; ``next_after`` gives the next page (null: last)."""
    run = _get(ctx, run_id)
    page = _page(
        ctx,
        run,
        failed=failed,
        tag=field if field is not None else topic,
        model=model,
        turn=turn,
        after=after,
        limit=limit,
    )
    page["items"] = client_paths([i.public_dict() for i in page["items"]], ctx.settings.data_root)
    return page


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


def _summary(system: str, item: StoredItem) -> list[tuple[str, Any]]:
    """The few values of an item shown in its row (the rest under its details), scores
    rounded for display."""
    kind = core.find(system)
    values = kind.item_summary(item.result) if kind else []
    return [(k, format_number(v) if isinstance(v, float) else v) for k, v in values]


@pages.get("/runs")
def runs_page(
    request: Request,
    ctx: Context,
    system: Annotated[str | None, Query(max_length=16)] = None,
    model: Annotated[str | None, Query(max_length=255)] = None,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> HTMLResponse:
    system = system if core.find(system) else None
    model = model or None
    runs = ctx.store.list_runs(
        system=system, model=model, limit=50, offset=offset, newest_first=True
    )
    total = ctx.store.count_runs(system=system, model=model)
    return _render(
        ctx,
        request,
        "runs.html",
        runs=runs,
        total=total,
        system=system or "",
        model=model or "",
        offset=offset,
        next_offset=offset + 50 if offset + 50 < total else None,
    )


@pages.get("/runs/compare")
def compare_page(ids: Annotated[list[str] | None, Query()] = None) -> RedirectResponse:
    """The old address of the Compare page."""
    found = ",".join(i.strip() for part in ids or [] for i in part.split(",") if i.strip())
    return RedirectResponse(f"/compare?runs={quote(found, safe=',')}", status_code=307)


@pages.get("/runs/{run_id}")
def run_page(
    request: Request,
    ctx: Context,
    run_id: str,
    failed: Annotated[str | None, Query(max_length=8)] = None,
    tag: Annotated[str | None, Query(max_length=512)] = None,
    model: Annotated[str | None, Query(max_length=255)] = None,
    turn: Annotated[str | None, Query(max_length=8)] = None,
    after: AfterQ = -1,
) -> HTMLResponse:
    try:
        run = _get(ctx, run_id)
    except ApiError as exc:
        return _render(ctx, request, "run.html", 404, run=None, error=exc.message)
    turn_number = int(turn) if turn and turn.isdigit() else None
    filters: dict[str, Any] = {
        "failed": True if failed else None,
        "tag": tag or None,
        "model": model or None,
        "turn": turn_number,
    }
    items_error = None
    try:
        page = _page(ctx, run, **filters, after=after, limit=50)
        tags = ctx.store.item_tags(run.id)
        item_counts = format_items(
            run,  # the calls alone of a model are never scored: its call errors are counted
            failed=ctx.store.count_items(run.id, failed=True) if run.scored else None,
            not_scored=ctx.store.count_not_scored(run.id) if run.scored else None,
            in_flight=ctx.store.items_in_flight(run.id),
        )
    except ItemsMissing as exc:  # the run and its metrics are shown, the message for its items
        items_error, tags = items_missing(exc), []
        page = {"items": [], "total": 0, "next_after": None}
        item_counts = f"{format_count(run.n_done, run.n_items)} items"
    query = {k: v for k, v in (("failed", failed), ("tag", tag), ("model", model)) if v}
    if turn_number is not None:
        query["turn"] = str(turn_number)
    kind = core.find(run.system)
    columns = kind.columns(run.model, run.metrics or {}, run.intervals or {}) if kind else []
    models = [model for model, _, _ in columns] if len(columns) > 1 else []
    root = ctx.settings.data_root  # its paths as the client names them (``client_paths``)
    items = [replace(i, result=client_paths(i.result, root)) for i in page["items"]]
    shown = client_paths({"inputs": run.inputs, "out_dir": run.out_dir}, root)
    return _render(
        ctx,
        request,
        "run.html",
        410 if items_error else 200,
        run=replace(run, **shown),
        error=None,
        items_error=items_error,
        table=compare_runs([run]),
        cell=format_cell,
        number=format_number,
        plots=_plots(run),
        items=[(i, _summary(run.system, i)) for i in items],
        total=page["total"],
        next_after=page["next_after"],
        query=query,
        filters={"failed": bool(failed), "tag": tag or "", "model": model or "", "turn": turn},
        tags=tags,
        models=models,
        item_counts=item_counts,
    )


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

"""``GET /api/compare`` and the Compare page: runs of one system (or a slots run's models) side by
side, as ``fieldcheck.runs.compare`` builds them; the page renders the route's dict."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from fieldcheck._util.errors import InputError
from fieldcheck.api._deps import AppContext, Context
from fieldcheck.api._errors import (
    INVALID,
    ITEMS_GONE,
    NO_RUN,
    ApiError,
    answered,
    error_responses,
    page_number,
)
from fieldcheck.runs import compare

router = APIRouter(prefix="/api/compare", tags=["runs"], responses=error_responses())
pages = APIRouter(include_in_schema=False)
MAX_COMPARE = 20
MAX_PAGE = 500

RunsQ = Annotated[
    list[str],
    Query(
        description="Run ids (or unique prefixes), comma-separated or repeated; one slots run "
        "compares its models."
    ),
]
DifferQ = Annotated[
    bool, Query(description="true: only the items the runs disagree on; false: every item.")
]
MAX_OFFSET = 2**31 - 1
OffsetQ = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="The matrix page's first row.")]
LimitQ = Annotated[int, Query(ge=1, le=MAX_PAGE, description="Rows of the matrix page.")]


def compare_dict(
    ctx: AppContext, ids: list[str], *, differ: bool | None, offset: int, limit: int, field: str
) -> dict[str, Any]:
    """The comparison of the runs ``ids`` name (``field`` the parameter named in errors): 422
    for none, too many or runs of mixed systems, 404 for an unknown run."""
    found = [i.strip() for part in ids for i in part.split(",") if i.strip()]
    if not found:
        raise ApiError(422, f"{field}: give the runs to compare", field=field)
    if len(found) > MAX_COMPARE:
        raise ApiError(422, f"{field}: at most {MAX_COMPARE} runs", field=field)
    runs = []
    for ref in found:
        run = ctx.store.find_run(ref) if 4 <= len(ref) <= 64 else None
        if run is None:
            raise ApiError(404, f"no run {ref!r}", field=field)
        runs.append(run)
    try:
        return compare(ctx.store, runs, differ=differ, offset=offset, limit=limit)
    except InputError as exc:
        raise ApiError(422, exc.one_line(), field=field) from None


def _heat(value: Any) -> str:
    """A cell colour for a rate in [0, 1]: red (0) to green (1); none for a count."""
    if not isinstance(value, float):
        return ""
    hue = round(120 * max(0.0, min(1.0, float(value))))
    return f"background: hsl({hue}, 70%, 85%)"


@router.get(
    "",
    summary="Runs side by side: paired differences, warnings and the items they disagree on",
    responses=error_responses(
        {404: NO_RUN, 410: ITEMS_GONE, 422: f"{INVALID} Also no run, over 20, or mixed systems."}
    ),
)
async def compare_route(
    ctx: Context, runs: RunsQ, differ: DifferQ = True, offset: OffsetQ = 0, limit: LimitQ = 100
) -> dict[str, Any]:
    """Each metric with its 95% interval per run (per model of a slots run), the paired
    difference of the headline metric against the first column with its p-value, a warning
    when the datasets or the signature settings differ, and the item matrix (paged)."""
    return await run_in_threadpool(
        compare_dict, ctx, runs, differ=differ, offset=offset, limit=limit, field="runs"
    )


@pages.get("/compare")
async def compare_page(
    request: Request,
    ctx: Context,
    runs: Annotated[list[str] | None, Query()] = None,
    differ: str | None = None,
    offset: str = "0",
) -> HTMLResponse:
    """The route's comparison rendered; an ``offset`` it refuses is left out (the first page
    shown) and said, with status 422, as the Runs page does."""
    only = differ not in ("false", "0", "off")
    start, refused = page_number("offset", offset, 0, MAX_OFFSET)
    table, status, error = await run_in_threadpool(
        answered, compare_dict, ctx, runs or [], differ=only, offset=start or 0, limit=100,
        field="runs",
    )  # fmt: skip
    if refused is not None:
        status, error = (422, refused) if error is None else (status, f"{refused}; {error}")
    ids = ",".join(r["id"] for r in table["runs"]) if table else ""
    return ctx.render(
        request, "compare.html", status, table=table, error=error, ids=ids, heat=_heat
    )

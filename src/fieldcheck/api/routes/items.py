"""A run, its item table and an item (issue 28 pages 2 and 3): ``GET /api/runs/{id}`` (the run,
its metrics with intervals, its plots), ``GET /api/runs/{id}/items`` (its items searched,
filtered, sorted and paged with DuckDB: user text only as bound parameters, sort names only from
the system's columns), ``GET /api/runs/{id}/items/{key}`` (an item's whole story: the key the
rest of the path, or the ``key`` parameter of ``/item`` for ``.`` and ``..``) and the pages that
render exactly those dicts."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel

from fieldcheck import core
from fieldcheck._util.errors import KEPT_ERRORS
from fieldcheck.api._body import api_router
from fieldcheck.api._deps import AppContext, Context
from fieldcheck.api._errors import INVALID, ITEMS_GONE, NO_RUN, ApiError, answered, error_responses
from fieldcheck.api._errors import items_missing as items_missing_text
from fieldcheck.api._evaluation import client_paths
from fieldcheck.api.routes.runs import MAX_PAGE, _get, _plots, _public
from fieldcheck.runs import compare_runs, format_items, item_counts, item_story, item_url
from fieldcheck.store import ARTIFACTS_ENV, ERROR, ItemColumn, ItemsMissing, RunInfo

router = api_router("/api/runs", "runs")
pages = APIRouter(include_in_schema=False)
NO_ITEM = "No stored run has this id, or the run no item of this key (and model)."
ItemModelQ = Annotated[
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
def item_route(run_id: str, key: str, ctx: Context, model: ItemModelQ = None) -> dict[str, Any]:
    """Its verdicts told by its system (json: per field; slots: per slot; numeric: question,
    table, plan, checks, matches) as sections of values, tables and text, then its model call:
    the prompt messages as sent, the raw reply, tokens, latency, attempts and error. Numbers
    unrounded; ``result`` is the stored item as it is."""
    run = _get(ctx, run_id)
    try:
        story = item_story(ctx.store, run, key, model)
    except KeyError:
        which = f" of model {model!r}" if model is not None else ""
        raise ApiError(404, f"no item {key!r}{which} in run {run.id}", field="key") from None
    shown: dict[str, Any] = client_paths(story, ctx.settings.data_root, run)
    return shown


@router.get(
    "/{run_id}/item",
    summary="One item's whole story, its key a parameter",
    responses=error_responses({404: NO_ITEM, 410: ITEMS_GONE, 422: INVALID}),
)
def item_by_key(run_id: str, ctx: Context, key: KeyQ, model: ItemModelQ = None) -> dict[str, Any]:
    """As ``/api/runs/{id}/items/{key}``, for any key, ``.`` and ``..`` included."""
    return item_route(run_id, key, ctx, model)


@pages.get("/runs/{run_id}/items/{key:path}")
def item_page(
    request: Request, run_id: str, key: str, ctx: Context, model: ItemModelQ = None
) -> HTMLResponse:
    story, status, error = answered(item_route, run_id, key, ctx, model)
    return ctx.render(request, "item.html", status, story=story, error=error)


@pages.get("/runs/{run_id}/item")
def item_page_by_key(
    request: Request, run_id: str, key: KeyQ, ctx: Context, model: ItemModelQ = None
) -> HTMLResponse:
    return item_page(request, run_id, key, ctx, model)


PAGE = 50  # the run page's items per page
CHOICES = 200  # a filter's choices at most


def run_view(ctx: AppContext, run: RunInfo) -> dict[str, Any]:
    """The run as JSON with its item counts, metrics and 95% intervals, plots and counts sentence;
    ``items_missing`` says why its items cannot be read and where they were expected (or null)."""
    data = _public(ctx, run)
    data["items_missing"], journal = None, False
    try:
        counts, journal = item_counts(ctx.store, run)
        data.update(counts)
    except ItemsMissing as exc:  # where: under the root, as the client may name it (api.md)
        where = exc.path.relative_to(ctx.store.artifacts).as_posix()
        data["failed_items"], data["not_scored_items"] = run.n_failed, None
        data["items_in_flight"] = False
        data["items_missing"] = {
            "message": items_missing_text(exc),
            "expected": f"{where} under the artifacts root ({ARTIFACTS_ENV})",
        }
    data["items_text"] = format_items(
        run,
        failed=data["failed_items"] if run.scored else None,
        not_scored=data["not_scored_items"],
        in_flight=journal,
    )
    data["table"] = compare_runs([run])
    data["plots"] = [
        {"name": name, "url": f"/runs/{run.id}/files/{quote(name, safe='')}"}
        for name in _plots(run)
    ]
    data["plots_note"] = _plots_note(run, [p["name"] for p in data["plots"]])
    data["input_problems"] = client_paths(_input_problems(run), ctx.settings.data_root, run)
    return data


PROBLEM_COLUMNS = ("file", "line", "record", "field", "reason", "value")


def _input_problems(run: RunInfo) -> dict[str, Any] | None:
    """The input lines the run refused, as the CLI prints them after ``error:`` (file, line,
    record, field, reason, value): the first ``KEPT_ERRORS`` of the problems file its system
    writes in the run folder (``problems_file``), their count and the file's name; None when
    there are none, the system shows them among its items (json) or the file is not there."""
    kind = core.find(run.system)
    name = getattr(kind, "problems_file", None)
    if not name or not run.out_dir or run.status != "finished":
        return None
    path = Path(run.out_dir) / name
    shown: list[dict[str, Any]] = []
    total = 0
    try:
        with path.open(encoding="utf-8", errors="replace", newline="") as lines:
            rows = csv.DictReader(lines) if path.suffix == ".csv" else _jsonl(lines)
            for row in rows:
                total += 1
                if len(shown) < KEPT_ERRORS and isinstance(row, dict):
                    shown.append({k: row.get(k) or None for k in PROBLEM_COLUMNS})
    except (OSError, ValueError):  # gone, or not a file this version wrote
        return None
    for row in shown:  # a CSV's line is text
        row["line"] = int(row["line"]) if str(row["line"]).isdecimal() else row["line"]
    return {"total": total, "listed_in": name, "problems": shown} if total else None


def _jsonl(lines: Iterable[str]) -> Iterator[Any]:
    return (json.loads(line) for line in lines if line.strip())


def _plots_note(run: RunInfo, shown: list[str]) -> str | None:
    """Why plots the run wrote are not shown: it has not finished, its output folder is gone,
    or the plots its report.md names were moved out of it (a new user's finding)."""
    if not run.out_dir:
        return None
    if run.status != "finished":  # its folder is still the partial one, without plots
        return f"No plots: the run has not finished ({run.status})."
    folder = Path(run.out_dir)
    if not folder.is_dir():
        return "No plots: the run's output folder is gone."
    try:
        report = (folder / "report.md").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    named = re.findall(r"\]\(([^()/\\\s]+\.png)\)", report)
    missing = [n for n in dict.fromkeys(named) if n not in shown]
    if not missing:
        return None
    embedded = "; its report.html embeds them" if (folder / "report.html").is_file() else ""
    return f"Plots not in the output folder (moved or deleted): {', '.join(missing)}{embedded}."


def _columns(run: RunInfo) -> tuple[ItemColumn, ...]:
    kind = core.find(run.system)
    return kind.item_table if kind else ()


def _sorts(run: RunInfo) -> dict[str, str]:
    """The sort names a run's table takes and the DuckDB expression of each (the whitelist)."""
    return {"seq": "seq", "key": "key", **{c.name: c.order or c.sql for c in _columns(run)}}


class ItemsQuery(BaseModel):
    """How a page of a run's items is asked: ``GET /api/runs/{id}/items``'s query (``field`` or
    ``topic`` is the system's tag), the run page's, the bundle's."""

    q: str | None = Query(
        None, max_length=200, description="Case-insensitive text in the key or the item's JSON."
    )
    sort: str = Query(
        "seq", max_length=64, description="seq, key or a column of the system's table."
    )
    order: Literal["asc", "desc"] = "asc"
    failed: bool | None = Query(None, description="Only failed items (true) or only passed.")
    field: str | None = Query(None, max_length=512, description="json: records with this field.")
    topic: str | None = Query(None, max_length=512, description="slots: sessions of a topic.")
    model: str | None = Query(None, max_length=255, description="slots: one model's sessions.")
    turn: int | None = Query(None, ge=0, le=10_000, description="numeric: turns of index.")
    error_type: str | None = Query(
        None, max_length=64, description="Items not scored for this error type."
    )
    failure_mode: str | None = Query(
        None, max_length=64, description="numeric: turns of this mode."
    )
    after: int = Query(
        -1, ge=-1, le=2**31 - 1, description="Keyset (seq order): items after this seq."
    )
    offset: int = Query(0, ge=0, le=10_000_000, description="Items skipped (sorted pages).")
    limit: int = Query(100, ge=1, le=MAX_PAGE)


def items_view(ctx: AppContext, run: RunInfo, query: ItemsQuery) -> dict[str, Any]:
    """A page of the run's item table and how it was asked (columns, filters, items, total, next
    pages); a 422 naming the parameter for a sort or filter the run's table has not."""
    errors = ctx.store.item_values(run.id, "error_type", limit=CHOICES)
    columns = tuple(c for c in _columns(run) if errors or c != ERROR)  # none: no error column
    sorts = _sorts(run)
    if query.sort not in sorts:
        shown = f"{', '.join(sorts)} (got {query.sort!r})"
        raise ApiError(422, f"sort: one of {shown}", field="sort")
    keyset = query.sort == "seq" and query.order == "asc"
    if query.after != -1 and not keyset:
        raise ApiError(422, "after: keyset pages are in seq order; use offset", field="after")
    by_name = {c.name: c for c in columns if c.filter}
    asked = {"failure_mode": query.failure_mode}  # the system's own filters (turn is indexed)
    equals = []
    for name, value in asked.items():
        if value is None:
            continue
        if name not in by_name:
            raise ApiError(422, f"{name}: {run.system} items have no {name}", field=name)
        equals.append((by_name[name].sql, value))
    where: dict[str, Any] = {
        "failed": query.failed,
        "tag": query.field if query.field is not None else query.topic,
        "model": query.model,
        "turn": query.turn,
        "error_type": query.error_type,
        "q": query.q or None,
        "equals": tuple(equals),
    }
    items = ctx.store.page_items(
        run.id,
        after=query.after,
        limit=query.limit,
        offset=query.offset,
        order=None if query.sort == "seq" else sorts[query.sort],
        descending=query.order == "desc",
        values=[c.sql for c in columns],
        **where,
    )
    total = ctx.store.count_items(run.id, **where)
    shown = client_paths([i.public_dict() for i in items], ctx.settings.data_root, run)
    for row, item in zip(shown, items, strict=True):
        # an item in flight has no scored values; its call error type is known
        row["values"] = item.shown or [item.error_type if c == ERROR else None for c in columns]
        row["href"] = item_url(run.id, item.key)
    return {
        "run": run.id,
        "q": query.q or "",
        "sort": query.sort,
        "order": query.order,
        "columns": [{"name": "key", "label": "key", "kind": "key"}]
        + [{"name": c.name, "label": c.label, "kind": c.kind} for c in columns],
        "filters": _filters(ctx, run, columns, where, asked, errors),
        "items": shown,
        "total": total,
        "limit": query.limit,
        "offset": query.offset,
        "next_after": items[-1].seq if len(items) == query.limit and keyset else None,
        "next_offset": query.offset + query.limit if query.offset + query.limit < total else None,
    }


def _filters(
    ctx: AppContext,
    run: RunInfo,
    columns: tuple[ItemColumn, ...],
    where: dict[str, Any],
    asked: dict[str, Any],
    errors: list[Any],
) -> list[dict[str, Any]]:
    """The table's filters with their choices and values: failed, the system's tag, model (of
    several), its filter columns and error type (where any item has one)."""
    kind = core.find(run.system)
    flags = [{"value": True, "label": "failed"}, {"value": False, "label": "passed"}]
    found = [{"name": "failed", "label": "failed", "value": where["failed"], "choices": flags}]
    if kind is not None and kind.item_tag is not None:
        tags = ctx.store.item_tags(run.id, limit=CHOICES)
        found.append(_filter(kind.item_tag, kind.item_tag, where["tag"], tags))
    models = ctx.store.item_values(run.id, "model", limit=CHOICES)
    if len(models) > 1:
        found.append(_filter("model", "model", where["model"], models))
    for c in columns:
        if c.filter:
            value = where["turn"] if c.name == "turn" else asked.get(c.name)
            values = ctx.store.item_values(run.id, c.sql, limit=CHOICES)
            found.append(_filter(c.name, c.label, value, values))
    if errors:
        found.append(_filter("error_type", "error type", where["error_type"], errors))
    return found


def _filter(name: str, label: str, value: Any, choices: list[Any]) -> dict[str, Any]:
    listed = [{"value": v, "label": str(v)} for v in choices]
    return {"name": name, "label": label, "value": value, "choices": listed}


@router.get(
    "/{run_id}",
    summary="One run: its counts, metrics with intervals and plots",
    responses=error_responses({404: NO_RUN, 422: INVALID}),
)
def get_run(run_id: str, ctx: Context) -> dict[str, Any]:
    """The run from its row; ``items_missing`` says when its items file is not under the
    artifacts root (its items routes answer 410), and where it was expected."""
    return run_view(ctx, _get(ctx, run_id))


@router.get(
    "/{run_id}/items",
    summary="A run's items: searched, filtered, sorted and paged",
    responses=error_responses({404: NO_RUN, 410: ITEMS_GONE, 422: INVALID}),
)
def list_items(run_id: str, ctx: Context, query: Annotated[ItemsQuery, Query()]) -> dict[str, Any]:
    """Items in seq order with ``seq > after`` (``next_after`` gives the next page, null at
    the last), or sorted by a column of the system's table (``columns``) and paged by
    ``offset`` (``next_offset``); ``q`` a case-insensitive substring of the key or the item's
    JSON text; each item's ``values`` in column order."""
    return items_view(ctx, _get(ctx, run_id), query)


# the page ---------------------------------------------------------------------------------
@pages.get("/runs/{run_id}")
def run_page(request: Request, ctx: Context, run_id: str) -> HTMLResponse:
    """``run_view`` and ``items_view`` of the page's query rendered (a value it cannot read left
    out, as a form leaves it empty; ``tag`` is the old page's field or topic)."""
    try:
        run = _get(ctx, run_id)
    except ApiError as exc:
        return ctx.render(request, "run.html", 404, run=None, error=exc.message)
    given = {k: v[:512] for k, v in request.query_params.items() if v}

    def number(name: str, default: int) -> int:
        text = given.get(name, "")
        return min(int(text), 10_000_000) if text.isdecimal() else default

    asked = ItemsQuery.model_construct(  # read as a form leaves it, not validated
        q=given.get("q") or None,
        sort=given.get("sort", "seq"),
        order="desc" if given.get("order") == "desc" else "asc",
        failed={"true": True, "1": True, "false": False}.get(given.get("failed", "")),
        field=given.get("field") or given.get("topic") or given.get("tag"),
        model=given.get("model"),
        turn=int(given["turn"][:6]) if given.get("turn", "").isdecimal() else None,
        error_type=given.get("error_type"),
        failure_mode=given.get("failure_mode"),
        after=number("after", -1),
        offset=number("offset", 0),
        limit=PAGE,
    )
    status, items, items_error = 200, None, None
    data = run_view(ctx, run)
    missing = data["items_missing"]
    if missing:  # the run and its metrics are shown, and why its items are not
        items_error = f"Items unavailable: {missing['message']} (expected at {missing['expected']})"
    elif len(asked.q or "") > 200:  # as the route says it: no search of a cut text
        status, items_error = 422, "q: a search of at most 200 characters"
    else:
        items, status, items_error = answered(items_view, ctx, run, asked)
    root = ctx.settings.data_root  # its paths as the client names them (``client_paths``)
    data.update(client_paths({"inputs": run.inputs, "out_dir": run.out_dir}, root, run))
    links = _links(run.id, items) if items else {}
    return ctx.render(
        request,
        "run.html",
        status,
        **{"run": data, "items": items, "links": links},
        **{"items_error": items_error, "table": data["table"]},
    )


def _query(items: dict[str, Any], **changed: Any) -> dict[str, Any]:
    """The page's query: its search, sort and filters as they are, with ``changed``."""
    query: dict[str, Any] = {"q": items["q"], "sort": items["sort"], "order": items["order"]}
    for f in items["filters"]:
        value = f["value"]
        query[f["name"]] = str(value).lower() if isinstance(value, bool) else value
    query.update(changed)
    defaults = {"q": "", "sort": "seq", "order": "asc", "offset": 0}
    return {k: v for k, v in query.items() if v is not None and defaults.get(k) != v}


def _links(run_id: str, items: dict[str, Any]) -> dict[str, Any]:
    """The page's links: each column's sort (its other order when it is the sort), the next,
    previous, first and last pages (by offset: the page knows where it is); ``past_end`` when
    the offset is past the last item that matches."""

    def url(query: dict[str, Any]) -> str:  # no "?" before an empty query
        return f"/runs/{run_id}" + (f"?{urlencode(query)}" if query else "")

    sorts = {}
    for c in items["columns"]:
        again = c["name"] == items["sort"] and items["order"] == "asc"
        sorts[c["name"]] = url(_query(items, sort=c["name"], order="desc" if again else "asc"))
    following = _query(items, offset=items["next_offset"]) if items["next_offset"] else None
    last = (items["total"] - 1) // items["limit"] * items["limit"] if items["total"] else 0
    earlier = max(0, min(items["offset"] - items["limit"], last))  # past the end: the last page
    return {
        "sort": sorts,
        "next": url(following) if following is not None else None,
        "previous": url(_query(items, offset=earlier)) if items["offset"] else None,
        "first": url(_query(items)),
        "last": url(_query(items, offset=last)) if items["offset"] != last else None,
        "past_end": items["offset"] >= items["total"] > 0,
    }

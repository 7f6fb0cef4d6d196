"""``fieldcheck view --bundle`` (issue 28, "A portable bundle"): the pages of some runs as a static
site that opens from ``file://``, rendered from the routes' dicts (docs/decisions.md)."""

from __future__ import annotations

import hashlib
import posixpath
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import parse_qs, unquote

from markupsafe import Markup

from fieldcheck import core
from fieldcheck._util.jsonio import dumps
from fieldcheck._util.term import safe_bidi
from fieldcheck.api._app import WEB
from fieldcheck.api._deps import AppContext
from fieldcheck.api._errors import answered
from fieldcheck.api.routes.compare import MAX_COMPARE, _heat, compare_dict
from fieldcheck.api.routes.items import ItemsQuery, _sorts, item_route, items_view, run_view
from fieldcheck.api.routes.runs import RunsQuery, _latency, _money, _row, list_runs
from fieldcheck.reports import RunFolder
from fieldcheck.runs import format_count, format_number
from fieldcheck.store import RunInfo

STATIC = ("app.css", "bundle.js")
_PLAIN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _digest(*parts: str | None) -> str:
    """A file name for untrusted text (a key may hold ``/``, ``..``, ``#``, any unicode)."""
    text = "\0".join("" if p is None else p for p in parts)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _run_dir(run_id: str) -> str:
    return f"runs/{run_id if _PLAIN_ID.fullmatch(run_id) else _digest(run_id)}"


def route_of(url: str) -> tuple[Any, ...] | None:
    """The page a server URL names as a key of the bundle's files (``("run", id)``...); None for
    one a bundle never holds (an export, a filtered list, a matrix page after the first)."""
    path, _, query = str(url).partition("?")
    asked = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
    parts = path.split("/")
    if path == "/runs":
        return ("runs",)
    if path == "/compare":
        if asked.get("differ", "true") != "true" or asked.get("offset", "0") != "0":
            return None
        return ("compare", tuple(i for i in asked.get("runs", "").split(",") if i))
    api = parts[1:2] == ["api"]
    parts = parts[1:] if api else parts
    if len(parts) < 3 or parts[1] != "runs":
        return None
    run_id = unquote(parts[2])
    if len(parts) == 3 and not api:
        return ("run", run_id)
    if len(parts) == 5 and parts[3] == "items":
        return ("item.json" if api else "item", run_id, unquote(parts[4]), asked.get("model"))
    if len(parts) == 4 and parts[3] == "item" and "key" in asked:  # keys . and .. (runs.item_url)
        return ("item.json" if api else "item", run_id, asked["key"], asked.get("model"))
    if len(parts) == 5 and parts[3] == "files" and not api:
        return ("file", run_id, unquote(parts[4]))
    return None


@dataclass
class Bundle:
    """The site being written: ``files`` maps a page's key (``route_of``) to its file inside
    the folder; the pages are planned first, so every link finds its file."""

    ctx: AppContext
    folder: RunFolder
    max_items: int
    files: dict[tuple[Any, ...], str] = field(default_factory=dict)
    compares: list[dict[str, Any]] = field(default_factory=list)

    def link_from(self, page: str) -> Callable[[str], str]:
        """The templates' ``link`` on the page at ``page``: a URL as a path relative to it."""
        here = posixpath.dirname(page) or "."

        def link(url: str) -> str:
            url = url.unescape() if isinstance(url, Markup) else str(url)
            route = route_of(url)
            target = self.files.get(route) if route is not None else None
            if route is not None and route[0] == "item" and target is None:
                target = self.files.get((*route[:3], None))
            if target is None:
                return posixpath.relpath("unavailable.html", here) + "#" + url
            return posixpath.relpath(target, here)

        return link

    def render(self, page: str, template: str, **values: Any) -> None:
        """``template`` rendered as the server does (links relative to ``page``), written there."""
        up = posixpath.relpath("static", posixpath.dirname(page) or ".")
        context = {
            "active": "/runs",
            "nav": [("Runs", "/runs")],
            "link": self.link_from(page),
            "url_for": lambda _name, path: f"{up}/{path}",
            **values,
        }
        html = self.ctx.templates.env.get_template(template).render(context)
        self.folder.write_text(page, html)


def write_bundle(
    ctx: AppContext,
    folder: RunFolder,
    runs: Sequence[RunInfo],
    *,
    max_items: int,
    compare: str | int = "all",
    progress: core.Progress | None = None,
) -> dict[str, Any]:
    """The bundle of ``runs`` written into ``folder`` (the caller finishes it): the runs list, each
    run's first ``max_items`` items and the Compare pages ``compare`` asks (``_compared``); what
    it holds, for the command's lines."""
    step = progress or (lambda _phase, _done, _total: None)
    site = Bundle(ctx, folder, max_items)
    site.files[("runs",)] = "index.html"
    tables = {}
    for n, run in enumerate(runs, 1):
        tables[run.id] = _plan_run(site, run)
        step("runs", n, len(runs))
    wanted, bounded = _compared(runs, compare)
    _plan_compares(site, wanted, step)
    n_items, total = 0, len(runs) + len(site.compares)
    for n, run in enumerate(runs, 1):
        n_items += _write_run(site, run, *tables[run.id])
        step("writing", n, total)
    for n, entry in enumerate(site.compares, len(runs) + 1):
        table = entry.pop("table")
        ids = ",".join(r["id"] for r in table["runs"])
        site.render(entry["page"], "bundle/compare.html", table=table, ids=ids, heat=_heat)
        step("writing", n, total)
    listed = list_runs(ctx, RunsQuery.model_construct(limit=1)) | {
        "runs": [
            _portable(_row(ctx, r)) for r in sorted(runs, key=lambda r: r.started_at, reverse=True)
        ],
        "total": len(runs),
        "limit": max(1, len(runs)),
    }
    shown = [{"label": c["label"], "ids": c["ids"], "href": c["page"]} for c in site.compares]
    pages = {c["ids"]: c["href"] for c in shown}
    site.render(
        "index.html",
        "bundle/runs.html",
        data=listed,
        compares=shown,
        pages=pages,
        money=_money,
        latency=_latency,
        count=format_count,
        page_size=listed["limit"],  # every run on the one page: no limit in its links
    )
    site.render("unavailable.html", "bundle/unavailable.html")
    for name in STATIC:
        with folder.atomic(f"static/{name}") as path:
            shutil.copyfile(WEB / "static" / name, path)
    return {"runs": len(runs), "items": n_items, "compares": len(site.compares), **bounded}


def _plan_run(
    site: Bundle, run: RunInfo
) -> tuple[dict[str, Any], dict[str, Any] | None, str | None]:
    """The run's page dicts (``run_view``, ``items_view`` of its first items) and its files."""
    base = _run_dir(run.id)
    site.files[("run", run.id)] = f"{base}/index.html"
    data = _portable(run_view(site.ctx, run))
    for n, plot in enumerate(data["plots"]):
        site.files[("file", run.id, plot["name"])] = f"{base}/files/plot-{n}.png"
    first = ItemsQuery.model_construct(limit=site.max_items)
    items, _, error = answered(items_view, site.ctx, run, first)
    if items is None:
        return data, None, error
    for row in items["items"]:
        name = f"{base}/items/{_digest(row['key'], row['model'])}"
        for kind, suffix in (("item", ".html"), ("item.json", ".json")):
            site.files[(kind, run.id, row["key"], row["model"])] = name + suffix
            site.files.setdefault((kind, run.id, row["key"], None), name + suffix)
    return data, items, None


def _portable(run: dict[str, Any]) -> dict[str, Any]:
    """A run's page dict with no local folder, as the bundle is sent to others: its inputs and
    dataset by file name, its output folder left out (docs/runs.md "A portable bundle")."""
    inputs = [{**i, "path": PurePath(i["path"]).name} for i in run.get("inputs") or ()]
    dataset = PurePath(run["dataset"]).name if run.get("dataset") else run.get("dataset")
    return {**run, "inputs": inputs, "dataset": dataset, "out_dir": None}


def _compared(
    runs: Sequence[RunInfo], compare: str | int
) -> tuple[list[list[str]], dict[str, int]]:
    """The runs of each Compare page: ``all``, each pair of runs of one system in the order
    given and one of all of them when more than two (as many as the route takes); ``first``,
    each run with the first of its system named; ``none``, no page; a number N, ``all`` for a
    system of at most N runs and ``first`` above. Unless ``none``, one of each run that holds
    several models (slots). With them, where N made ``first``: its runs and the pages ``all``
    would have made."""
    groups: dict[str, list[str]] = {}
    for run in runs:
        groups.setdefault(run.system, []).append(run.id)
    wanted = [] if compare == "none" else [[r.id] for r in runs if _models(r) > 1]
    bounded = {"bounded_runs": 0, "bounded_pages": 0}
    for ids in groups.values():
        every = [[a, b] for i, a in enumerate(ids) for b in ids[i + 1 :]]
        every += [ids] if 2 < len(ids) <= MAX_COMPARE else []
        chosen = compare if isinstance(compare, str) else "all" if len(ids) <= compare else "first"
        if chosen == "first" != compare:  # made first by the number
            bounded["bounded_runs"] += len(ids)
            bounded["bounded_pages"] += len(every)
        wanted += {"all": every, "first": [[ids[0], b] for b in ids[1:]]}.get(chosen, [])
    return wanted, bounded


def _plan_compares(site: Bundle, wanted: list[list[str]], step: core.Progress) -> None:
    """The Compare page of each of ``wanted`` the route answers, and its file."""
    for n, ids in enumerate(wanted):
        step("comparing", n, len(wanted))
        table, _, _ = answered(
            compare_dict, site.ctx, ids, differ=True, offset=0, limit=site.max_items, field="runs"
        )
        if table is None:
            continue
        page = f"compare/{_digest(*ids)}.html"
        site.files[("compare", tuple(ids))] = page
        label = " vs ".join(f"{c['label']}" for c in table["columns"])
        site.compares.append({"ids": ",".join(ids), "label": label, "page": page, "table": table})
    step("comparing", len(wanted), len(wanted))


def _models(run: RunInfo) -> int:
    kind = core.find(run.system)
    return len(kind.columns(run.model, run.metrics or {}, run.intervals or {})) if kind else 0


def _write_run(
    site: Bundle,
    run: RunInfo,
    data: dict[str, Any],
    items: dict[str, Any] | None,
    error: str | None,
) -> int:
    """The run's page, its plots, its items' script and pages; the number of item pages."""
    ctx, base = site.ctx, _run_dir(run.id)
    page = f"{base}/index.html"
    for plot in data["plots"]:
        target = site.files[("file", run.id, plot["name"])]
        with site.folder.atomic(target) as path:
            shutil.copyfile(Path(run.out_dir or "") / plot["name"], path)
    site.render(
        page,
        "bundle/run.html",
        run=data,
        items=items,
        items_error=error,
        table=data["table"],
        in_bundle=len(items["items"]) if items else 0,
        total=items["total"] if items else 0,  # unfiltered: all the run's items
        max_items=site.max_items,
    )
    if items is None:
        return 0
    site.folder.write_text(f"{base}/items.js", _items_script(site, run, items, page))
    for row in items["items"]:
        key, model = row["key"], row["model"]
        story = item_route(run.id, key, ctx, model)
        name = site.files[("item", run.id, key, model)]
        site.render(name, "item.html", story=story)
        site.folder.write_text(name[: -len(".html")] + ".json", dumps(story, indent=True) + "\n")
    return len(items["items"])


def _items_script(site: Bundle, run: RunInfo, items: dict[str, Any], page: str) -> str:
    """The run's item rows as ``bundle.js`` searches, filters and sorts them (as ``GET
    /api/runs/{id}/items`` does): a script, since ``fetch`` cannot load from ``file://``."""
    link = site.link_from(page)
    columns = items["columns"][1:]
    sorts = _sorts(run)
    exprs = ["tags", "failed_tags"] + [sorts[c["name"]] for c in columns]
    extra = site.ctx.store.page_items(run.id, limit=site.max_items, values=exprs)
    kind = core.find(run.system)
    rows = []
    for row, more in zip(items["items"], extra, strict=True):
        tags, failed_tags, *order = more.shown or [(), (), *[None] * len(columns)]  # in flight
        rows.append(
            {
                **{k: row[k] for k in ("key", "seq", "failed", "model", "turn", "error_type")},
                "href": link(row["href"]),
                "values": row["values"],
                "shown": safe_bidi(row["key"]),  # the pages' text (``api._app._shown``)
                "cells": [
                    safe_bidi(_cell(c, v, row)) for c, v in zip(columns, row["values"], strict=True)
                ],
                "order": order,
                "tags": list(tags or ()),
                "failed_tags": list(failed_tags or ()),
                "text": dumps(row["result"]),
            }
        )
    data = {
        "columns": items["columns"],
        "filters": items["filters"],
        "tag": kind.item_tag if kind is not None else None,
        "rows": rows,
    }
    text = dumps(data).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return "window.fieldcheckItems = " + text + ";\n"  # JSON is a JavaScript expression


def _cell(column: dict[str, Any], value: Any, row: dict[str, Any]) -> str:
    """A table cell as run.html shows it."""
    if value is None:
        return "not scored" if column["name"] == "failed" and row["failed"] is None else "–"
    if column["kind"] == "flag":
        return "yes" if value else "no"
    if column["kind"] == "number":
        return format_number(value)
    return str(value)

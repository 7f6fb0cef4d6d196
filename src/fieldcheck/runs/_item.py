"""One item's whole story (issue 28, "An item"; docs/runs.md) for the API, the item page and
``runs show --item``: the system's verdicts (``System.item_story``), then the model call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

from fieldcheck import core
from fieldcheck._util.jsonio import dumps
from fieldcheck.reports import section, text_block, tone, values_block
from fieldcheck.runs._compare import format_number
from fieldcheck.store import RunInfo, Store

DOT_KEYS = (".", "..")
FOLDED_CHARS = 600
"""A prompt message longer than this is folded on the item's page (a document, a schema)."""


def item_url(run_id: str, key: str, model: str | None = None) -> str:
    """The item page's URL, the key quoted whole; a key ``.`` or ``..`` (a browser resolves it
    as a path segment, ``%2E`` too) as the parameter of ``/runs/{id}/item?key=``."""
    query = {"model": model} if model is not None else {}
    if key in DOT_KEYS:
        return f"/runs/{run_id}/item?{urlencode({'key': key, **query})}"
    url = f"/runs/{run_id}/items/{quote(key, safe='')}"
    return f"{url}?{urlencode(query)}" if query else url


def item_story(store: Store, run: RunInfo, key: str, model: str | None = None) -> dict[str, Any]:
    """The story of run ``run``'s item ``key`` (``model``'s, when several models have one):
    KeyError when there is none. ``ItemsMissing`` when the run's items file is gone."""
    found = store.find_items(run.id, [key])
    mine = [i for i in found if model is None or i.model == model]
    if not mine:
        raise KeyError(key)
    stored = mine[0]
    item = stored.public_dict()
    kind = core.find(run.system)
    related: dict[str, Mapping[str, Any]] = {}
    sections: list[dict[str, Any]] = []
    if kind is not None and run.scored:
        keys = [k for k in kind.related_keys(item) if k != key]
        if keys:
            others = store.find_items(run.id, keys)
            related = {i.key: i.public_dict() for i in others if i.model == stored.model}
        sections = kind.item_story(item, run.settings or {}, related)
    call = (stored.result or {}).get("call")
    if isinstance(call, Mapping):
        sections += call_sections(call)
    verdict = {None: "not scored", True: "failed", False: "passed"}[stored.failed]
    models = sorted({i.model for i in found if i.model is not None})
    return {
        "run": {
            "id": run.id,
            "system": run.system,
            "title": kind.title if kind is not None else run.system,
            "item": kind.item if kind is not None else "item",
            "model": run.model,
            "url": f"/runs/{run.id}",
        },
        "key": stored.key,
        "model": stored.model,
        "models": [{"name": m, "url": item_url(run.id, stored.key, m)} for m in models],
        "seq": stored.seq,
        "turn": stored.turn,
        "failed": stored.failed,
        "verdict": verdict if run.scored else "not scored",
        "error_type": stored.error_type,
        "url": item_url(run.id, stored.key, model),
        "api_url": "/api" + item_url(run.id, stored.key, model),
        "related": [
            {"key": k, "url": item_url(run.id, k, model), "failed": r.get("failed")}
            for k, r in related.items()
        ],
        "sections": sections,
        "result": stored.result,
    }


def call_sections(call: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The model call of an item (``runner.item_calls``): its totals, then each call as sent
    and answered: the prompt messages, the raw reply, tokens, latency, attempts, the error."""
    calls = [c for c in call.get("calls") or () if isinstance(c, Mapping)]
    tokens_in = sum(int(c.get("input_tokens") or 0) for c in calls)
    tokens_out = sum(int(c.get("output_tokens") or 0) for c in calls)
    totals = [
        ["error", call.get("error_type")],
        ["calls", len(calls)],
        ["answered from the cache", call.get("cached_calls")],
        ["latency (s)", call.get("latency_s")],
        ["input tokens", tokens_in],
        ["output tokens", tokens_out],
    ]
    out = [section("call", "Model call", values_block(totals, [tone(not call.get("error_type"))]))]
    for n, c in enumerate(calls, 1):
        error = c.get("error_type")
        values = [
            ["error", f"{error}: {c.get('error_message') or ''}" if error else None],
            ["attempts", c.get("attempts")],
            ["latency (s)", c.get("latency_s")],
            ["input tokens", c.get("input_tokens")],
            ["output tokens", c.get("output_tokens")],
            ["tokens estimated", c.get("tokens_estimated")],
            ["from the cache", c.get("cached")],
            ["cut by the token limit", c.get("truncated")],
        ]
        blocks = [values_block(values, [tone(not error)])]
        for message in c.get("messages") or ():
            if isinstance(message, Mapping):
                content = message.get("content")
                text = content if isinstance(content, str) else dumps(content)
                label = f"prompt: {message.get('role')}"
                blocks.append(text_block(label, text, folded=len(text) > FOLDED_CHARS))
        reply = c.get("text")
        blocks.append(text_block("raw reply", reply if reply is not None else "(none)", code=True))
        title = f"Call {n} of {len(calls)}" if len(calls) > 1 else "The call"
        out.append(section(f"call-{n}", title, *blocks))
    return out


def show_value(value: Any) -> str:
    """A story's value as printed: numbers to 4 places, trailing zeros dropped (2003, 0.85),
    yes/no, "-" for none, a flat list joined by "; ", deeper values as compact JSON."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        shown = format_number(value)
        return shown.rstrip("0").rstrip(".") if "." in shown else shown
    if isinstance(value, str):
        return value
    if isinstance(value, list) and not any(isinstance(v, list | dict) for v in value):
        return "; ".join(map(show_value, value)) if value else "(none)"
    if isinstance(value, Sequence | Mapping):
        return dumps(value)
    return str(value)

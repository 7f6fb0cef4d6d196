"""The runs list's figures from the runner's journal of a run and its ``calls`` runs, kept on
its row (migration 0008, docs/decisions.md) so that listing runs opens no items file."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import orjson
import sqlalchemy as sa

from fieldcheck.metrics import cost_usd

FIGURES = ("n_call_errors", "input_tokens", "output_tokens", "cost_usd", "latency_mean_s")
"""The columns ``journal_figures`` gives (None each for a run that made no model call)."""

_PARTS = sa.text(
    "SELECT id, settings FROM runs WHERE id = :run OR (parent_id = :run AND kind = 'calls')"
)
_CALLS = sa.text(
    "SELECT run_id, count(*), sum(CASE WHEN error_type IN :errors THEN 1 ELSE 0 END), "
    "sum(CASE WHEN error_type IN :errors THEN 0 WHEN calls > 0 THEN 1 ELSE 0 END) "
    "FROM run_journal WHERE run_id IN :runs GROUP BY run_id"
).bindparams(
    sa.bindparam("runs", expanding=True),
    sa.bindparam("errors", expanding=True, type_=sa.String()),  # empty: still text on PostgreSQL
)
# the seconds of each answered call, summed here as ``latency_stats`` sums them (``math.fsum``:
# SQL's sum differs from the run's own files in the last digits)
_SECONDS = sa.text(
    "SELECT latency_s FROM run_journal WHERE run_id IN :runs AND calls > 0 AND latency_s IS NOT "
    "NULL AND (error_type IS NULL OR error_type NOT IN :errors)"
).bindparams(
    sa.bindparam("runs", expanding=True),
    sa.bindparam("errors", expanding=True, type_=sa.String()),
)
# each call of an item's log (cached ones carry the tokens of the call that filled the cache)
_TOKENS = {
    "sqlite": "SELECT j.run_id, sum(json_extract(e.value, '$.input_tokens')), "
    "sum(json_extract(e.value, '$.output_tokens')) FROM run_journal j, json_each(j.call_log) e "
    "WHERE j.run_id IN :runs AND j.call_log IS NOT NULL GROUP BY j.run_id",
    "postgresql": "SELECT j.run_id, sum((e ->> 'input_tokens')::bigint), "
    "sum((e ->> 'output_tokens')::bigint) FROM run_journal j CROSS JOIN LATERAL "
    "jsonb_array_elements(j.call_log::jsonb) e WHERE j.run_id IN :runs AND j.call_log IS NOT "
    "NULL GROUP BY j.run_id",
}


def journal_figures(connection: Any, run_id: str, call_errors: Sequence[str]) -> dict[str, Any]:
    """``FIGURES`` of run ``run_id`` from its journal (``call_errors``: the runner's failed
    calls), each as the run's own files give it: the mean latency by ``math.fsum``, the cost by
    ``metrics.cost_usd`` of the totals; the cost None unless every model that used tokens has
    its prices."""
    parts = {r: _prices(s) for r, s in connection.execute(_PARTS, {"run": run_id})}
    asked = {"runs": list(parts), "errors": list(call_errors)}
    calls = list(connection.execute(_CALLS, asked))
    if not calls:
        return dict.fromkeys(FIGURES)
    called = sum(int(c[3] or 0) for c in calls)
    seconds = (float(r[0]) for r in connection.execute(_SECONDS, asked))
    latency = math.fsum(seconds) / called if called else None
    found: dict[str, Any] = dict.fromkeys(FIGURES)
    found |= {"n_call_errors": sum(int(c[2] or 0) for c in calls), "latency_mean_s": latency}
    query = _TOKENS.get(connection.dialect.name)
    if query is None:
        return found
    tokens = connection.execute(
        sa.text(query).bindparams(sa.bindparam("runs", expanding=True)), {"runs": list(parts)}
    )
    given = made = 0
    by_prices: dict[tuple[Any, Any], list[int]] = {}  # the tokens at each prices (a run's one)
    for run, tokens_in, tokens_out in tokens:
        tokens_in, tokens_out = int(tokens_in or 0), int(tokens_out or 0)
        given, made = given + tokens_in, made + tokens_out
        held = by_prices.setdefault(parts.get(run) or (None, None), [0, 0])
        held[0], held[1] = held[0] + tokens_in, held[1] + tokens_out
    found["input_tokens"], found["output_tokens"] = given, made
    if by_prices and all(None not in prices for prices in by_prices):
        # the run's own figure: its totals at its prices (``cost_usd``, as its files give it)
        found["cost_usd"] = math.fsum(cost_usd(n[0], n[1], *p) for p, n in by_prices.items())
    return found


def _prices(settings: str | None) -> tuple[float | None, float | None]:
    """A model run's prices (USD per 1M input and output tokens) from its stored settings."""
    try:
        spec = (orjson.loads(settings) if settings else {}).get("model_spec") or {}
    except (orjson.JSONDecodeError, AttributeError):
        return None, None
    return spec.get("price_in"), spec.get("price_out")

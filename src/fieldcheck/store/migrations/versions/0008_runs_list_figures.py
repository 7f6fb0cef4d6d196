"""The runs list's figures on each run's row (issue 28), back-filled from the metrics, the items
file and the journal (``_figures``), and each run's ``dataset`` its system's dataset input."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa
from alembic import context, op

from fieldcheck.store import _parquet
from fieldcheck.store._figures import journal_figures
from fieldcheck.store._records import artifacts_root

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_COLUMNS = (
    ("headline", sa.Float()),
    ("n_failed", sa.Integer()),
    ("n_call_errors", sa.Integer()),
    ("input_tokens", sa.BigInteger()),
    ("output_tokens", sa.BigInteger()),
    ("cost_usd", sa.Float()),
    ("latency_mean_s", sa.Float()),
)
# frozen history: how each system stored its metrics and named its inputs when 0008 was written
_DATASET = {"json": ("documents", "batch"), "slots": ("gold",), "numeric": ("data",)}
# the runner's error types of a failed call (not ``invalid_reply``, not numeric's ``invalid_plan``)
_CALL_ERRORS = (
    "rate_limited",
    "server_error",
    "timeout",
    "connection",
    "bad_request",
    "context_length",
    "bad_response",
)
# the metrics holding given predictions' tokens and cost (a run that made no model call)
_USAGE = {"numeric": ("total_input_tokens", "total_output_tokens", "total_cost_usd")}
_RUNS = "SELECT id, system, kind, metrics, inputs FROM runs WHERE kind <> 'calls' ORDER BY id"


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        for name, kind in _COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))
    bind = op.get_bind()
    root = Path(
        context.config.attributes.get("artifacts")
        or artifacts_root(bind.engine.url.render_as_string(hide_password=False))
    )
    duck = None
    update = sa.text(
        "UPDATE runs SET " + ", ".join(f"{n} = :{n}" for n, _ in _COLUMNS) + ", dataset = "
        ":dataset, dataset_sha256 = :dataset_sha256 WHERE id = :id"
    )
    for run, system, kind, metrics, inputs in list(bind.execute(sa.text(_RUNS))):
        values: dict[str, Any] = {"id": run, **journal_figures(bind, run, _CALL_ERRORS)}
        found = _loads(metrics)
        values["headline"] = _headline(system, found)
        values["latency_mean_s"] = values["latency_mean_s"] or _latency(system, found)
        for name, metric in zip(
            ("input_tokens", "output_tokens", "cost_usd"), _USAGE.get(system, ()), strict=False
        ):
            given = _number(found.get(metric)) if isinstance(found, dict) else None
            if values[name] is None and given is not None:
                values[name] = given if name == "cost_usd" else int(given)
        values["n_failed"] = None
        path = _parquet.located(root / "runs" / run) if _parquet.RUN_ID.fullmatch(run) else None
        if path is not None and kind not in ("model-run", "calls"):
            if duck is None:
                import duckdb

                duck = duckdb.connect()
            values["n_failed"] = _parquet.count(
                duck, path, failed=True, tag=None, model=None, turn=None
            )
        values |= _dataset(system, _loads(inputs), bind, run)
        bind.execute(update, values)
    if duck is not None:
        duck.close()


def _loads(text: str | None) -> Any:
    try:
        return orjson.loads(text) if text else None
    except orjson.JSONDecodeError:
        return None


def _columns(system: str, metrics: Any) -> list[dict[str, Any]]:
    """A run's stored metrics by model: a slot run's each, another run's one."""
    if not isinstance(metrics, dict):
        return []
    if system == "slots":
        return [m for m in (metrics.get("models") or {}).values() if isinstance(m, dict)]
    return [metrics]


def _number(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _headline(system: str, metrics: Any) -> float | None:
    """RQS (json), the best model's F1 (slots), numerical-match accuracy (numeric)."""
    if system == "json":
        found = [_number(((metrics or {}).get("means") or {}).get("rqs"))]
    else:
        name = "f1" if system == "slots" else "numerical_match_accuracy"
        found = [_number(m.get(name)) for m in _columns(system, metrics)]
    values = [v for v in found if v is not None]
    return max(values) if values else None


def _latency(system: str, metrics: Any) -> float | None:
    """The mean of each model's mean latency summary (slots ``latency``, else ``latency_s``)."""
    key = "latency" if system == "slots" else "latency_s"
    means = [_number((m.get(key) or {}).get("mean")) for m in _columns(system, metrics)]
    found = [m for m in means if m is not None]
    return math.fsum(found) / len(found) if found else None


def _dataset(system: str, inputs: Any, bind: Any, run: str) -> dict[str, Any]:
    """The run's dataset input (path and sha256), else its dataset as it was stored."""
    for role in _DATASET.get(system, ()):
        for given in inputs if isinstance(inputs, list) else ():
            if isinstance(given, dict) and given.get("name") == role:
                return {
                    "dataset": str(given.get("path") or ""),
                    "dataset_sha256": str(given.get("sha256") or ""),
                }
    row = bind.execute(
        sa.text("SELECT dataset, dataset_sha256 FROM runs WHERE id = :id"), {"id": run}
    ).one()
    return {"dataset": row[0], "dataset_sha256": row[1]}


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        for name, _ in reversed(_COLUMNS):
            batch.drop_column(name)

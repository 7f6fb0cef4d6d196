"""One run per evaluation (issue 27): the runner's journal gets its own table, and each pair of a
model run and its scored run, inferred as docs/decisions.md says, becomes one run; none dropped."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

from fieldcheck._util.models import label_models

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_JOURNAL_COLUMNS = (
    "run_id, item_key, seq, error_type, calls, cached_calls, latency_s, result, call_log, "
    "finished_at"
)


def upgrade() -> None:
    op.create_table(
        "run_journal",
        sa.Column(
            "run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("item_key", sa.Text, primary_key=True),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("error_type", sa.String(32), nullable=True),
        sa.Column("calls", sa.Integer, nullable=False, server_default="0"),
        sa.Column("cached_calls", sa.Integer, nullable=False, server_default="0"),
        sa.Column("latency_s", sa.Float, nullable=False, server_default="0"),
        sa.Column("result", sa.Text, nullable=False),
        sa.Column("call_log", sa.Text, nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
    )
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("former_id", sa.String(32), nullable=True))
    op.create_index("ix_runs_former_id", "runs", ["former_id"])
    bind = op.get_bind()
    bind.execute(
        sa.text(
            f"INSERT INTO run_journal ({_JOURNAL_COLUMNS}) SELECT {_JOURNAL_COLUMNS} FROM "
            "run_items WHERE run_id IN (SELECT id FROM runs WHERE kind = 'model-run')"
        )
    )
    for scored, models in _pairs(bind):
        _merge(bind, scored, models)
    bind.execute(sa.text("UPDATE runs SET kind = 'score' WHERE kind = 'scored'"))


def _pairs(bind: Any) -> list[tuple[Any, list[Any]]]:
    """Each scored run of a model command with the model runs it scored (docs/decisions.md)."""
    rows = bind.execute(
        sa.text(
            "SELECT id, kind, system, task, model, dataset_sha256, inputs, status, started_at, "
            "finished_at FROM runs WHERE kind IN ('model-run', 'scored') ORDER BY started_at"
        )
    ).all()
    model_runs = [r for r in rows if r.kind == "model-run" and r.status == "finished"]
    taken: set[str] = set()
    pairs = []
    for s in rows:
        if s.kind != "scored" or s.task != "run":
            continue
        digests = {i.get("sha256") for i in json.loads(s.inputs or "[]")} - {None, ""}
        found = []
        for name in label_models(s.model) if s.system == "slots" else [s.model]:
            candidates = [
                m
                for m in model_runs
                if m.id not in taken
                and (m.system, m.model) == (s.system, name)
                and m.finished_at is not None
                and str(m.finished_at) <= str(s.started_at)
                and (s.system == "slots" or m.dataset_sha256 in digests)
            ]
            if candidates:
                m = max(candidates, key=lambda m: str(m.finished_at))
                taken.add(m.id)
                found.append(m)
        if found:
            pairs.append((s, found))
    return pairs


def _call_keys(system: str, model: str, key: str) -> str:
    """The scored item's key of a journal item: a slot session's is ``model/user/session``."""
    if system != "slots":
        return key
    try:
        user, session = json.loads(key)
    except (ValueError, TypeError):
        return key
    return f"{model}/{user}/{session}"


def _merge(bind: Any, scored: Any, models: list[Any]) -> None:
    target = models[0]
    calls: dict[str, dict[str, Any]] = {}
    for m in models:
        for j in bind.execute(
            sa.text(
                "SELECT item_key, error_type, calls, cached_calls, latency_s, result, call_log "
                "FROM run_journal WHERE run_id = :id"
            ),
            {"id": m.id},
        ):
            calls[_call_keys(m.system, m.model, j.item_key)] = {
                "key": j.item_key,
                "error_type": j.error_type,
                "calls": json.loads(j.call_log) if j.call_log else [],
                "cached_calls": j.cached_calls,
                "latency_s": j.latency_s,
                "result": json.loads(j.result),
            }
    bind.execute(
        sa.text("DELETE FROM run_items WHERE run_id IN :ids").bindparams(
            sa.bindparam("ids", expanding=True)
        ),
        {"ids": [m.id for m in models]},
    )
    items = bind.execute(
        sa.text("SELECT item_key, result FROM run_items WHERE run_id = :id"), {"id": scored.id}
    ).all()
    for item in items:
        call = calls.get(item.item_key)
        if call is not None:
            result = json.loads(item.result)
            result["call"] = call
            bind.execute(
                sa.text("UPDATE run_items SET result = :r WHERE run_id = :id AND item_key = :k"),
                {"r": _text(result), "id": scored.id, "k": item.item_key},
            )
    settings = bind.execute(
        sa.text("SELECT id, settings FROM runs WHERE id IN (:m, :s)"),
        {"m": target.id, "s": scored.id},
    ).all()
    merged = {}
    for run_id in (target.id, scored.id):
        merged.update(json.loads(next(r.settings for r in settings if r.id == run_id)))
    # named after every model it scores, as the scored run was (not its first model's run):
    # 0009 repairs the rows an earlier 0006 named after the first model only
    bind.execute(
        sa.text(
            "UPDATE runs SET (kind, model, settings, signature, status, finished_at, n_items, "
            "n_done, n_errors, out_dir, inputs, metrics, intervals, former_id) = (SELECT 'run', "
            "s.model, :settings, s.signature, s.status, s.finished_at, s.n_items, s.n_done, "
            "s.n_errors, s.out_dir, s.inputs, s.metrics, s.intervals, s.id FROM runs s "
            "WHERE s.id = :s) WHERE id = :m"
        ),
        {"settings": _text(merged), "s": scored.id, "m": target.id},
    )
    for table in ("run_items", "run_item_tags"):
        bind.execute(
            sa.text(f"UPDATE {table} SET run_id = :m WHERE run_id = :s"),
            {"m": target.id, "s": scored.id},
        )
    for other in models[1:]:
        bind.execute(
            sa.text("UPDATE runs SET kind = 'calls', parent_id = :m WHERE id = :o"),
            {"m": target.id, "o": other.id},
        )
    bind.execute(sa.text("DELETE FROM runs WHERE id = :s"), {"s": scored.id})


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def downgrade() -> None:
    """The journal and ``former_id`` go; merged runs stay merged (as ``scored`` runs)."""
    op.execute("UPDATE runs SET kind = 'scored' WHERE kind IN ('run', 'score')")
    op.execute("UPDATE runs SET kind = 'model-run' WHERE kind = 'calls'")
    op.drop_index("ix_runs_former_id", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("former_id")
    op.drop_table("run_journal")

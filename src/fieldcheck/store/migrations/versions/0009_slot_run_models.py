"""A slots run merged by 0006 before 0006 named it after every model it scores: its row named only
the first model (``careful`` for ``careful, eager``), so ``runs list --model eager`` missed it.
Its models are its metrics' (in the order given), else its model run's and its ``calls`` runs';
the row is named by ``models_label``. Nothing else changes; a second run changes nothing."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

from fieldcheck._util.models import label_models, models_label

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    merged = bind.execute(
        sa.text(
            "SELECT id, model, metrics FROM runs WHERE system = 'slots' AND kind = 'run' "
            "AND former_id IS NOT NULL ORDER BY id"
        )
    ).all()
    for run in merged:
        names = _metric_models(run.metrics) or [
            run.model,
            *bind.execute(
                sa.text(
                    "SELECT model FROM runs WHERE parent_id = :id AND kind = 'calls' "
                    "ORDER BY started_at, id"
                ),
                {"id": run.id},
            ).scalars(),
        ]
        model = models_label(names)
        if label_models(run.model) != [names[0]] or model == run.model:
            continue  # named already (by the fixed 0006, or by a re-score into it)
        bind.execute(
            sa.text("UPDATE runs SET model = :m WHERE id = :id"), {"m": model, "id": run.id}
        )


def _metric_models(metrics: str | None) -> list[str]:
    """The models of a slots run's metrics (``{"models": {name: ...}}``), in their order."""
    try:
        found: Any = json.loads(metrics) if metrics else None
    except ValueError:
        return []
    models = found.get("models") if isinstance(found, dict) else None
    return [str(n) for n in models] if isinstance(models, dict) else []


def downgrade() -> None:
    """Nothing to undo: the rows keep their models' names."""

"""Scored runs: a run keeps its kind, parent, inputs, output folder, metrics and intervals; an
item its failed flag, model, turn and tags (``run_item_tags``), indexed for the items filters."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(
            sa.Column("kind", sa.String(16), nullable=False, server_default="model-run")
        )
        batch.add_column(sa.Column("parent_id", sa.String(32), nullable=True))
        batch.add_column(sa.Column("out_dir", sa.Text, nullable=True))
        batch.add_column(sa.Column("inputs", sa.Text, nullable=True))
        batch.add_column(sa.Column("metrics", sa.Text, nullable=True))
        batch.add_column(sa.Column("intervals", sa.Text, nullable=True))
    op.create_index("ix_runs_system_started", "runs", ["system", "started_at"])
    op.create_index("ix_runs_started", "runs", ["started_at"])
    with op.batch_alter_table("run_items") as batch:
        batch.add_column(sa.Column("failed", sa.Boolean, nullable=True))
        batch.add_column(sa.Column("model", sa.String(255), nullable=True))
        batch.add_column(sa.Column("turn", sa.Integer, nullable=True))
    op.create_index("ix_run_items_seq", "run_items", ["run_id", "seq"])
    op.create_index("ix_run_items_failed", "run_items", ["run_id", "failed", "seq"])
    op.create_index("ix_run_items_turn", "run_items", ["run_id", "turn", "seq"])
    op.create_index("ix_run_items_model", "run_items", ["run_id", "model", "seq"])
    op.create_table(
        "run_item_tags",
        sa.Column(
            "run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("name", sa.String(512), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("failed", sa.Boolean, nullable=False),
    )
    op.create_index("ix_run_item_tags_failed", "run_item_tags", ["run_id", "name", "failed", "seq"])


def downgrade() -> None:
    op.drop_index("ix_run_item_tags_failed", table_name="run_item_tags")
    op.drop_table("run_item_tags")
    for name in (
        "ix_run_items_model",
        "ix_run_items_turn",
        "ix_run_items_failed",
        "ix_run_items_seq",
    ):
        op.drop_index(name, table_name="run_items")
    with op.batch_alter_table("run_items") as batch:
        for column in ("turn", "model", "failed"):
            batch.drop_column(column)
    op.drop_index("ix_runs_started", table_name="runs")
    op.drop_index("ix_runs_system_started", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        for column in ("intervals", "metrics", "inputs", "out_dir", "parent_id", "kind"):
            batch.drop_column(column)

"""Runs, their items and the response cache."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("run_key", sa.String(64), nullable=False, index=True),
        sa.Column("system", sa.String(32), nullable=False),
        sa.Column("task", sa.String(64), nullable=False),
        sa.Column("dataset", sa.Text, nullable=False),
        sa.Column("dataset_sha256", sa.String(64), nullable=False),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("endpoint", sa.Text, nullable=False),
        sa.Column("settings", sa.Text, nullable=False),
        sa.Column("signature", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("pid", sa.Integer, nullable=True),
        sa.Column("host", sa.String(255), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("n_items", sa.Integer, nullable=False, server_default="0"),
        sa.Column("n_done", sa.Integer, nullable=False, server_default="0"),
        sa.Column("n_errors", sa.Integer, nullable=False, server_default="0"),
    )
    op.create_table(
        "run_items",
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
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "response_cache",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("response_cache")
    op.drop_table("run_items")
    op.drop_table("runs")

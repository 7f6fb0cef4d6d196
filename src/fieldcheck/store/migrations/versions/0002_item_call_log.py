"""Each item keeps the log of its model calls (latency, tokens, attempts, reply, error)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("run_items") as batch:
        batch.add_column(sa.Column("call_log", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("run_items") as batch:
        batch.drop_column("call_log")

"""Items' turn and model indexes hold only the items that have one: a JSON record has neither,
and their entries made inserting JSON items 12-30% slower (docs/decisions.md)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_INDEXES = {"ix_run_items_turn": "turn", "ix_run_items_model": "model"}


def upgrade() -> None:
    for name, column in _INDEXES.items():
        op.drop_index(name, table_name="run_items")
        where = sa.text(f"{column} IS NOT NULL")
        op.create_index(
            name,
            "run_items",
            ["run_id", column, "seq"],
            sqlite_where=where,
            postgresql_where=where,
        )


def downgrade() -> None:
    for name, column in _INDEXES.items():
        op.drop_index(name, table_name="run_items")
        op.create_index(name, "run_items", ["run_id", column, "seq"])

"""Items in Parquet (issue 27 item 5): each run stored before it keeps its items as SQL rows
(``run_items``, ``run_item_tags``); they become the run's ``items.parquet`` under the artifacts
root, written as a run of today writes it (``_parquet.ItemsWriter``: the same columns, tags and
``seq`` order, each item's JSON text as it was), and the two tables go.

Nothing is dropped: the migration stops, the database left at 0006 with its rows, when an item
keeps model calls the runner's journal does not hold (0006 copied every model run's there), a
tag names no item, a run id is not a folder name, the files cannot be written, or the store is
not a SQLite file and neither ``FIELDCHECK_ARTIFACTS`` nor the store's ``artifacts`` names the
root (a team's shared root, which a default beside one user's files is not).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import context, op

from fieldcheck.store import _parquet
from fieldcheck.store._records import ARTIFACTS_ENV, artifacts_root

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_CALLS = "(i.calls <> 0 OR i.cached_calls <> 0 OR i.latency_s <> 0 OR i.call_log IS NOT NULL)"
_IN_JOURNAL = (
    "SELECT 1 FROM run_journal j WHERE j.run_id = i.run_id AND j.item_key = i.item_key AND "
    "j.calls = i.calls AND j.cached_calls = i.cached_calls AND j.latency_s = i.latency_s AND "
    "(j.call_log = i.call_log OR (j.call_log IS NULL AND i.call_log IS NULL))"
)
_LOST = {
    "items whose model calls the journal does not hold": (
        f"SELECT DISTINCT i.run_id FROM run_items i WHERE {_CALLS} AND NOT EXISTS ({_IN_JOURNAL})"
    ),
    "tags of no item": (
        "SELECT DISTINCT t.run_id FROM run_item_tags t WHERE NOT EXISTS (SELECT 1 FROM "
        "run_items i WHERE i.run_id = t.run_id AND i.seq = t.seq)"
    ),
}
_ITEMS = sa.text(
    "SELECT item_key, seq, error_type, failed, model, turn, result FROM run_items "
    "WHERE run_id = :run ORDER BY seq, item_key"
).execution_options(yield_per=5000)
_TAGS = sa.text(
    "SELECT name, seq, failed FROM run_item_tags WHERE run_id = :run ORDER BY seq, name"
).execution_options(yield_per=5000)


def upgrade() -> None:
    bind = op.get_bind()
    runs = list(bind.scalars(sa.text("SELECT DISTINCT run_id FROM run_items ORDER BY run_id")))
    if runs:
        _convert(bind, runs)
    op.execute("DELETE FROM run_item_tags")  # on SQLite, begins the transaction the drops join
    op.execute("DELETE FROM run_items")
    op.drop_table("run_item_tags")
    op.drop_table("run_items")


def _convert(bind: Any, runs: list[str]) -> None:
    """Write each run's items file, or raise (nothing written kept) saying what would be lost."""
    for what, query in _LOST.items():
        if found := list(bind.scalars(sa.text(query))):
            raise RuntimeError(f"runs {', '.join(found[:5])} have {what}: {_KEPT}")
    if bad := [r for r in runs if not _parquet.RUN_ID.fullmatch(r)]:
        raise RuntimeError(f"run ids {', '.join(bad[:5])} are not folder names: {_KEPT}")
    root = _root(bind)
    written: list[Path] = []
    try:
        for run in runs:
            written.append(root / "runs" / run)
            _write(bind, run, written[-1])
    except Exception:
        for folder in written:
            _parquet.remove(folder)
        raise


_KEPT = "the store stays at revision 0006, its items SQL rows, until they can be converted"


def _root(bind: Any) -> Path:
    """The store's artifacts root: the ``Store``'s (``config.attributes``), else the setting's
    or the SQLite file's (``artifacts_root``)."""
    given = context.config.attributes.get("artifacts")
    if given is not None:
        return Path(given)
    url = bind.engine.url
    if not url.get_backend_name().startswith("sqlite") and not os.environ.get(ARTIFACTS_ENV):
        raise RuntimeError(
            f"set {ARTIFACTS_ENV} to this database's shared artifacts root: its runs stored "
            f"before issue 27 are moved there from SQL rows; {_KEPT}"
        )
    return artifacts_root(url.render_as_string(hide_password=False))


def _write(bind: Any, run: str, folder: Path) -> None:
    """Run ``run``'s rows as its items file; its tags (in ``seq`` order) go with its items."""
    _parquet.remove(folder)  # an earlier, failed attempt's
    writer = _parquet.ItemsWriter(folder)
    tags = iter(bind.execute(_TAGS, {"run": run}))
    tag = next(tags, None)
    for part in bind.execute(_ITEMS, {"run": run}).partitions():
        rows = [(k, s, e, None if f is None else bool(f), m, t, r) for k, s, e, f, m, t, r in part]
        held = []
        while tag is not None and tag.seq <= rows[-1][1]:
            held.append((tag.name, tag.seq, bool(tag.failed)))
            tag = next(tags, None)
        writer.write(rows, held)
    writer.close()
    _parquet.publish(folder)


def downgrade() -> None:
    """The tables come back empty: the items stay in their files, which 0006's reader read
    first."""
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
        sa.Column("call_log", sa.Text, nullable=True),
        sa.Column("failed", sa.Boolean, nullable=True),
        sa.Column("model", sa.String(255), nullable=True),
        sa.Column("turn", sa.Integer, nullable=True),
    )
    op.create_index("ix_run_items_seq", "run_items", ["run_id", "seq"])
    op.create_index("ix_run_items_failed", "run_items", ["run_id", "failed", "seq"])
    for column in ("turn", "model"):
        where = sa.text(f"{column} IS NOT NULL")
        op.create_index(
            f"ix_run_items_{column}",
            "run_items",
            ["run_id", column, "seq"],
            sqlite_where=where,
            postgresql_where=where,
        )
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

"""Items in Parquet (issue 27 item 5): each old run's SQL rows become its ``items.parquet``, the
tables go; stops, rows kept, when anything would be lost (docs/decisions.md)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import context, op

from fieldcheck.store import _parquet
from fieldcheck.store._records import ARTIFACTS_ENV, NotUpgraded, artifacts_root

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_LOST = {  # what a conversion would lose: the runs that have it
    "items whose calls the journal does not hold": "SELECT DISTINCT i.run_id FROM run_items i "
    "WHERE (i.calls <> 0 OR i.call_log IS NOT NULL) AND NOT EXISTS (SELECT 1 FROM run_journal "
    "j WHERE j.run_id = i.run_id AND j.item_key = i.item_key AND j.calls = i.calls AND "
    "j.cached_calls = i.cached_calls AND j.latency_s = i.latency_s AND (j.call_log = "
    "i.call_log OR (j.call_log IS NULL AND i.call_log IS NULL)))",
    "tags of no item": "SELECT DISTINCT t.run_id FROM run_item_tags t WHERE NOT EXISTS (SELECT "
    "1 FROM run_items i WHERE i.run_id = t.run_id AND i.seq = t.seq)",
}
_KEPT = "its items stay SQL rows until they can be converted"
_ITEMS = (
    "SELECT item_key, seq, error_type, failed, model, turn, result FROM run_items WHERE "
    "run_id = :run ORDER BY seq, item_key"
)
_TAGS = "SELECT name, seq, failed FROM run_item_tags WHERE run_id = :run ORDER BY seq, name"


def upgrade() -> None:
    bind = op.get_bind()
    runs = list(bind.scalars(sa.text("SELECT DISTINCT run_id FROM run_items ORDER BY run_id")))
    for what, query in _LOST.items() if runs else ():
        if found := list(bind.scalars(sa.text(query))):
            raise NotUpgraded(f"runs {', '.join(found[:5])} have {what}: {_KEPT}")
    if bad := [r for r in runs if not _parquet.RUN_ID.fullmatch(r)]:
        raise NotUpgraded(f"run ids {', '.join(bad[:5])} are not folder names: {_KEPT}")
    for run in runs:
        _write(bind, run, _root(bind) / "runs" / run)
    op.execute("DELETE FROM run_item_tags")  # on SQLite, begins the transaction the drops join
    op.execute("DELETE FROM run_items")
    op.drop_table("run_item_tags")
    op.drop_table("run_items")


def _root(bind: Any) -> Path:
    """The ``Store``'s artifacts root (``config.attributes``), else ``artifacts_root``'s."""
    given = context.config.attributes.get("artifacts")
    url = bind.engine.url
    if given is None and url.get_backend_name() != "sqlite" and not os.environ.get(ARTIFACTS_ENV):
        raise NotUpgraded(
            f"set {ARTIFACTS_ENV} to this database's shared artifacts root: the items of its "
            f"older runs are moved there from SQL rows; {_KEPT}"
        )
    return Path(given or artifacts_root(url.render_as_string(hide_password=False)))


def _write(bind: Any, run: str, folder: Path) -> None:
    """Run ``run``'s rows and tags as its items file, made in a folder of this attempt's own and
    renamed into place (two processes write the same file; a failure removes only its own)."""

    mine = folder / f"0007-{uuid.uuid4().hex[:12]}.tmp"
    try:
        _items(bind, run, mine)
        (mine / _parquet.ITEMS).replace(folder / _parquet.ITEMS)
    finally:
        _parquet.remove(mine)


def _items(bind: Any, run: str, folder: Path) -> None:
    writer = _parquet.ItemsWriter(folder)
    tags = iter(_streamed(bind, _TAGS, run))
    tag = next(tags, None)
    for part in _streamed(bind, _ITEMS, run).partitions():
        rows = [(k, s, e, None if f is None else bool(f), m, t, r) for k, s, e, f, m, t, r in part]
        held = []
        while tag is not None and tag.seq <= rows[-1][1]:
            held.append((tag.name, tag.seq, bool(tag.failed)))
            tag = next(tags, None)
        writer.write(rows, held)
    writer.close()
    _parquet.publish(folder)


def _streamed(bind: Any, query: str, run: str) -> Any:
    """The rows of ``query`` for ``run``, fetched 5,000 at a time (a run of a million items)."""
    return bind.execute(sa.text(query).execution_options(yield_per=5000), {"run": run})


def downgrade() -> None:
    raise NotImplementedError("0007 moved old runs' items into files: restore a copy of 0006")

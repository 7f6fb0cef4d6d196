"""The store's saved configuration (migration 0003): None until saved, replaced on save, kept
across a reopen, and the earlier tables untouched."""

from __future__ import annotations

from pathlib import Path

from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

from fieldcheck.store import Store
from fieldcheck.store._store import MIGRATIONS


def test_saved_config_round_trip_and_reopen(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.sqlite3'}"
    store = Store(url)
    assert store.get_config("strategies") is None
    store.put_config("strategies", {"name": "FUZZY"})
    store.put_config("strategies", {"name": "EXACT", "bio": "SEMANTIC"})
    store.put_config("weights", {"accuracy": 1.0})
    store.close()
    again = Store(url)
    assert again.get_config("strategies") == {"bio": "SEMANTIC", "name": "EXACT"}
    assert list(again.get_config("strategies")) == ["name", "bio"]  # the user's order, kept
    assert again.get_config("weights") == {"accuracy": 1.0}
    tables = set(inspect(again.engine).get_table_names())
    assert {"runs", "run_journal", "response_cache", "saved_config"} <= tables
    with again.engine.connect() as connection:
        version = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
        rows = connection.execute(text("SELECT count(*) FROM saved_config")).scalar()
    assert (version, rows) == (ScriptDirectory(str(MIGRATIONS)).get_current_head(), 2)

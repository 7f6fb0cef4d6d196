"""Migration 0008 (issue 28's runs list): a store at 0007 holding real runs (a priced model
run with a call error, a numeric, two json batches and a two-model slot run) gets, for each,
the figures a run recorded today gets when it finishes: headline metric, failed items, call
errors, tokens, cost, mean latency and its system's dataset input."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))

from runs_list_data import reply, store_runs

from fieldcheck.store import ARTIFACTS_ENV, Store
from fieldcheck.store._store import MIGRATIONS

FIGURES = (
    "headline",
    "n_failed",
    "n_call_errors",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "latency_mean_s",
    "dataset",
    "dataset_sha256",
)


def _downgrade_to_0007(url: str) -> None:
    """The store as fieldcheck left it at 0007: no figure columns, and each run's ``dataset``
    as the runner or the first input named it then."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    engine = create_engine(url)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0007")
        connection.execute(text("UPDATE runs SET dataset = 'before', dataset_sha256 = ''"))
        columns = set(connection.execute(text("SELECT * FROM runs LIMIT 0")).keys())
    engine.dispose()
    assert "headline" not in columns and "n_failed" not in columns


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_0008_back_fills_what_a_run_recorded_today_keeps(
    backend: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    chat_server: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ARTIFACTS_ENV, str(tmp_path / "artifacts"))
    url = (
        f"sqlite:///{tmp_path / 'old.sqlite3'}"
        if backend == "sqlite"
        else str(request.getfixturevalue("pg_url"))
    )
    ids = store_runs(tmp_path, chat_server(reply), monkeypatch, url)
    store = Store(url)
    recorded = {r.id: {f: getattr(r, f) for f in FIGURES} for r in store.list_runs()}
    store.close()
    assert len(recorded) == 5 and recorded[ids["json"]]["n_call_errors"] == 1
    assert recorded[ids["json"]]["input_tokens"] == 200
    assert Path(str(recorded[ids["slots"]]["dataset"])).name == "gold.jsonl"
    _downgrade_to_0007(url)

    store = Store(url)  # upgraded to 0008 on open
    back_filled = {r.id: {f: getattr(r, f) for f in FIGURES} for r in store.list_runs()}
    with store.engine.connect() as c:
        assert c.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0009"
    assert back_filled == recorded
    by_metric = [r.id for r in store.list_runs(sort="metric", newest_first=True)]
    assert by_metric[0] == ids["slots"]  # its best model's F1 is 1.0
    store.close()

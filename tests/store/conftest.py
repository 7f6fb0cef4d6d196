"""The store on both backends: a fresh SQLite file, and a fresh database on a real PostgreSQL
server that pytest-postgresql starts on loopback from Debian's ``postgresql`` package (once per
test worker). Without the server binaries the PostgreSQL tests fail saying what to install."""

from __future__ import annotations

import glob
import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_postgresql import factories

from fieldcheck.store import Store

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # runs_data, shared with the CLI, API and page tests
WRAPPER = HERE / "pg_ctl_as_postgres.sh"
INSTALL = (
    "PostgreSQL's server binaries (pg_ctl, initdb, postgres) are not installed: the store tests "
    "run on a real PostgreSQL. Install Debian's package: 'apt-get install postgresql' (make test "
    "does it when pg_ctl is missing)."
)


def find_pg_ctl() -> str | None:
    """pg_ctl on PATH, else the newest of Debian's /usr/lib/postgresql/<version>/bin."""
    found = shutil.which("pg_ctl")
    if found:
        return os.path.realpath(found)
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    return versions[-1] if versions else None


PG_CTL = find_pg_ctl()
if PG_CTL:
    os.environ["FIELDCHECK_PG_CTL"] = PG_CTL
    WRAPPER.chmod(0o755)

postgresql_proc = factories.postgresql_proc(
    executable=str(WRAPPER), host="127.0.0.1", port=None, unixsocketdir="/tmp"
)


@pytest.fixture
def pg_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, empty database on the worker's PostgreSQL server, dropped afterwards."""
    if PG_CTL is None:
        pytest.fail(INSTALL, pytrace=False)
    import psycopg

    proc: Any = request.getfixturevalue("postgresql_proc")
    name = f"fc_{uuid.uuid4().hex[:12]}"
    dsn = f"host={proc.host} port={proc.port} user={proc.user} dbname=postgres"
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    yield f"postgresql+psycopg://{proc.user}@{proc.host}:{proc.port}/{name}"
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The store on each backend."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'runs.sqlite3'}"
    else:
        url = request.getfixturevalue("pg_url")
    opened = Store(url)
    yield opened
    opened.close()

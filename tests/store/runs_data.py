"""Small hand-checked output folders of the three systems, made by the real commands, for the
store, CLI, API and page tests of scored runs."""

from __future__ import annotations

from pathlib import Path

import orjson
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck.store._store import MIGRATIONS

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "<img src=x onerror=alert(1)>"

# json: r1 all matched; r2 city differs (EXACT); r3 misses the hostile field.
JSON_RECORDS = [
    {
        "id": "r1",
        "ground_truth": {"name": "Ann", "city": "Oslo"},
        "output": {"name": "Ann", "city": "Oslo"},
    },
    {
        "id": "r2",
        "ground_truth": {"name": "Bob", "city": "Rome"},
        "output": {"name": "Bob", "city": "Roma"},
    },
    {"id": "r3", "ground_truth": {"name": "Cy", HOSTILE: "v"}, "output": {"name": "Cy"}},
]
EXACT = {"name": "EXACT", "city": "EXACT", HOSTILE: "EXACT"}
# slots: two sessions; model a predicts everything (one value differs), b misses one slot.
GOLD = [
    {"user": "u1", "session": 1, "topic": "basic", "field": "name", "values": ["Ann"]},
    {"user": "u1", "session": 1, "topic": "work", "field": "job", "values": ["nurse"]},
    {"user": "u2", "session": 1, "topic": "basic", "field": "name", "values": ["Bob"]},
]
PRED_A = [
    {"user": "u1", "session": 1, "topic": "basic", "field": "name", "values": ["Ann"]},
    {"user": "u1", "session": 1, "topic": "work", "field": "job", "values": ["doctor"]},
    {"user": "u2", "session": 1, "topic": "basic", "field": "name", "values": ["Bob"]},
]
PRED_B = [
    {"user": "u1", "session": 1, "topic": "basic", "field": "name", "values": ["Ann"]},
    {"user": "u2", "session": 1, "topic": "basic", "field": "name", "values": ["Bob"]},
]


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def _cli(*args: str) -> None:
    """Run a scoring command without recording it (the tests store its folder themselves)."""
    result = CliRunner().invoke(app, [*args, "--no-store"])
    if result.exit_code not in (0, 3):
        raise AssertionError(
            f"fieldcheck {' '.join(args)}: exit {result.exit_code}\n{result.output}"
        )


def json_folder(
    root: Path, name: str = "json-run", records: list[dict[str, object]] | None = None
) -> tuple[Path, Path]:
    """(output folder of ``json batch``, its batch file)."""
    batch = _jsonl(root / f"{name}.jsonl", records or JSON_RECORDS)
    strategies = root / f"{name}.strategies.json"
    strategies.write_bytes(orjson.dumps(EXACT))
    out = root / name
    _cli(
        "json",
        "batch",
        str(batch),
        "--out",
        str(out),
        "--bootstrap",
        "50",
        "--strategies",
        str(strategies),
    )
    return out, batch


def slots_folder(root: Path) -> tuple[Path, list[tuple[str, Path]]]:
    """(output folder of ``slots score`` with models a and b, its inputs)."""
    gold = _jsonl(root / "gold.jsonl", GOLD)
    a = _jsonl(root / "pred_a.jsonl", PRED_A)
    b = _jsonl(root / "pred_b.jsonl", PRED_B)
    out = root / "slots-run"
    _cli(
        "slots",
        "score",
        "--gold",
        str(gold),
        "--pred",
        f"a={a}",
        "--pred",
        f"b={b}",
        "--out",
        str(out),
        "--bootstrap",
        "50",
    )
    return out, [("gold", gold), ("pred:a", a), ("pred:b", b)]


def numeric_folder(root: Path) -> Path:
    """The output folder of ``numeric score`` on the bundled example (model a)."""
    out = root / "numeric-run"
    _cli(
        "numeric",
        "score",
        "--data",
        str(ROOT / "examples/numeric/data.json"),
        "--predictions",
        str(ROOT / "examples/numeric/predictions_model_a.jsonl"),
        "--out",
        str(out),
        "--bootstrap",
        "50",
    )
    return out


def upgrade_to(url: str, revision: str) -> None:
    """Bring the database at ``url`` to Alembic ``revision`` (a store as an older fieldcheck
    left it)."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    engine = create_engine(url)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
    engine.dispose()

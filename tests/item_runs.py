"""Real runs of the three systems for the item pages' tests (issue 28, "An item"): ``json run``,
``slots run`` and ``numeric evaluate`` through the CLI against ``serve-model`` (synthetic models,
real HTTP), recorded in the store of ``FIELDCHECK_DATABASE_URL``. The JSON batch's first record
has the key ``HOSTILE_KEY`` (``/``, spaces, ``?``, ``#``)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck.store import RunInfo, Store

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
HOSTILE_KEY = "inv 0001/a b?c#d"
MODEL = "synthetic-fast"  # its seeded errors make failed fields, missed slots and repair rounds


def _cli(*args: str) -> None:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code in (0, 3), (args, result.output, repr(result.exception))


def make_runs(tmp: Path) -> dict[str, RunInfo]:
    """The three systems' runs by system name: json of 8 records (examples/json/strategies.json
    its field strategies) and numeric of 6 ConvFinQA conversations (model ``MODEL``), slots of
    ``MODEL`` and synthetic-careful in one run."""
    from fieldcheck.serve_model import BackgroundServer, create_app

    lines = (EXAMPLES / "json" / "documents.jsonl").read_text().splitlines()[:8]
    first = json.loads(lines[0])
    lines[0] = json.dumps({**first, "id": HOSTILE_KEY})
    batch = tmp / "documents.jsonl"
    batch.write_text("\n".join(lines) + "\n")
    with BackgroundServer(create_app(latency_ms=0)) as server:
        model = ("--base-url", server.base_url, "--model", MODEL, "--bootstrap", "20")
        strategies = str(EXAMPLES / "json" / "strategies.json")
        _cli(
            "json",
            "run",
            str(batch),
            "--strategies",
            strategies,
            "--flatten",
            "--out",
            str(tmp / "json"),
            *model,
        )
        slots = EXAMPLES / "slots"
        _cli(
            "slots",
            "run",
            "--conversations",
            str(slots / "conversations.synthetic.jsonl"),
            "--gold",
            str(slots / "gold.synthetic.jsonl"),
            "--out",
            str(tmp / "slots"),
            *model,
            "--model",
            "synthetic-careful",
        )
        data = EXAMPLES / "convfinqa" / "dev.json"
        _cli(
            "numeric",
            "evaluate",
            "--data",
            str(data),
            "--sample-size",
            "6",
            "--out",
            str(tmp / "numeric"),
            *model,
        )
    store = Store()
    runs = {r.system: r for r in store.list_runs()}
    store.close()
    assert sorted(runs) == ["json", "numeric", "slots"]
    return runs

"""Runs to compare: ``json run`` of models a and b against the chat server fixture, whose
replies differ on known records (tests/api/test_compare_api.py, tests/web/test_compare_page.py)."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from chat_server import ChatServer
from fieldcheck._cli.main import app

GT = {f"r{i}": {"name": f"N{i}", "city": "Oslo"} for i in range(8)}
WRONG = {"a": {"r1"}, "b": {"r1", "r2", "r5"}}  # the records each model gets wrong
REWORDED = {"b": {"r6"}}  # right, with another value: the name written with a trailing space


def reply(body: dict[str, Any]) -> str:
    key = re.findall(r"doc (r\d)", body["messages"][-1]["content"])[0]
    model = body["model"]
    city = "Rome" if key in WRONG.get(model, ()) else "Oslo"
    name = GT[key]["name"] + (" " if key in REWORDED.get(model, ()) else "")
    return json.dumps({"city": city, "name": name})


def json_runs(
    tmp_path: Path, server: ChatServer, *extra: str, data: Path | None = None
) -> list[str]:
    """The run ids of one ``json run`` of models a and b (city EXACT; name FUZZY: a trailing
    space still matches)."""
    if data is None:
        data = tmp_path / "docs.jsonl"
        lines = [{"id": k, "document": f"doc {k}", "ground_truth": v} for k, v in GT.items()]
        data.write_text("".join(json.dumps(line) + "\n" for line in lines))
    strategies = tmp_path / "strategies.json"
    strategies.write_text(json.dumps({"city": "EXACT", "name": "FUZZY"}))
    out = tmp_path / f"out{len(list(tmp_path.glob('out*')))}"
    args = ["json", "run", str(data), "--base-url", server.base_url, "--model", "a"]
    args += ["--model", "b", "--strategies", str(strategies), "--out", str(out)]
    args += ["--no-progress", "--bootstrap", "20", *extra]
    result = invoke(args)
    assert result.exit_code == 0, result.stderr
    return re.findall(r"stored as run ([0-9a-f]{12})", result.stdout + result.stderr)


def invoke(args: list[str]) -> Result:
    """The CLI run in a thread of its own: a Playwright page runs an event loop in the test's
    thread, and a model run's ``asyncio.run`` cannot start inside it."""
    found: list[Result] = []
    thread = threading.Thread(target=lambda: found.append(CliRunner().invoke(app, args)))
    thread.start()
    thread.join()
    return found[0]

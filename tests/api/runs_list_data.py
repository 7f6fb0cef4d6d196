"""Runs of the three systems made by the real commands into one store, for the runs list's
API and page tests: a priced ``json run`` against the chat server (r1's call fails, r2 is
wrong), a ``numeric score``, two imported ``json batch`` folders and a two-model ``slots
score``."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from runs_data import json_folder, slots_folder

from chat_server import ChatServer, Reply
from fieldcheck._cli.main import app
from fieldcheck.runs import record_folder
from fieldcheck.store import Store

GT = {f"r{i}": {"name": f"N{i}", "city": "Oslo"} for i in range(6)}


def reply(body: dict[str, Any]) -> str | Reply:
    """r1's call fails (HTTP 500, no retry); r2 answers the wrong city; r3's reply is no JSON
    (the model's failure, not the call's); the rest are right."""
    key = re.findall(r"doc (r\d)", body["messages"][-1]["content"])[0]
    if key == "r1":
        return Reply(status=500, error_body={"error": {"message": "down"}})
    if key == "r3":
        return Reply("I cannot read this document.", prompt_tokens=40)
    city = "Rome" if key == "r2" else "Oslo"
    return Reply(json.dumps({"name": GT[key]["name"], "city": city}), prompt_tokens=40)


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "300"})
    return result.exit_code, result.stdout + result.stderr


def shown(run_id: str) -> dict[str, Any]:
    """``runs show RUN --items 100 --json``: what the CLI says of the run."""
    code, out = cli("runs", "show", run_id, "--items", "100", "--json")
    assert code == 0, out
    data: dict[str, Any] = json.loads(out)
    return data


def store_runs(
    tmp_path: Path, server: ChatServer, monkeypatch: pytest.MonkeyPatch, database: str
) -> dict[str, str]:
    """The five runs in ``database`` (a URL, or a SQLite file's name in ``tmp_path``), by
    name (json: the model run)."""
    url = database if "://" in database else f"sqlite:///{tmp_path / database}"
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", url)
    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "".join(
            json.dumps({"id": k, "document": f"doc {k}", "ground_truth": v}) + "\n"
            for k, v in GT.items()
        )
    )
    args = ["json", "run", str(docs), "--base-url", server.base_url, "--model", "m"]
    args += ["--out", str(tmp_path / "run"), "--price-in", "2", "--price-out", "10"]
    code, out = cli(*args, "--max-retries", "0", "--no-progress", "--bootstrap", "50")
    assert code == 3, f"{code}: {out}"  # a call failed
    examples = Path(__file__).resolve().parents[2] / "examples" / "numeric"
    args = ["numeric", "score", "--data", str(examples / "data.json"), "--predictions"]
    args += [str(examples / "predictions_model_a.jsonl"), "--out", str(tmp_path / "numeric")]
    code, out = cli(*args, "--bootstrap", "50", "--price-in", "2.5", "--price-out", "10")
    assert code == 0, out
    store = Store()
    ids = {r.system: r.id for r in store.list_runs()}
    out_a, batch = json_folder(tmp_path, "alpha-batch")
    ids["alpha"] = record_folder(store, out_a, inputs=[("batch", batch)], model="alpha").id
    ids["beta"] = record_folder(store, json_folder(tmp_path, "b")[0], model="beta").id
    slots_out, inputs = slots_folder(tmp_path)
    ids["slots"] = record_folder(store, slots_out, inputs=inputs).id
    store.close()
    return ids

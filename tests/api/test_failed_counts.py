"""Issue 26, item 4: "failed" means one thing per system (its glossary in docs/json.md,
docs/numeric.md, docs/slots.md): the count a scoring command prints and writes is the count the
store keeps, ``fieldcheck runs show`` prints, the API gives (the run and its ``failed`` filter)
and the run's page shows. Items that could not be scored are neither failed nor passed: they
are counted apart as "not scored", everywhere under that name."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

import httpx
import orjson
from live_server import Serve
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck.store import Store

ROOT = Path(__file__).resolve().parents[2]
EXACT = {"name": "EXACT", "city": "EXACT"}
JSON_LINES = [
    # right: not failed
    {
        "id": "r1",
        "ground_truth": {"name": "Ann", "city": "Oslo"},
        "output": {"name": "Ann", "city": "Oslo"},
    },
    # a wrong field: failed
    {
        "id": "r2",
        "ground_truth": {"name": "Bob", "city": "Rome"},
        "output": {"name": "Bob", "city": "Roma"},
    },
    # a missing field: failed
    {"id": "r3", "ground_truth": {"name": "Cy", "city": "Bern"}, "output": {"name": "Cy"}},
    # not an object: failed
    {"id": "r4", "ground_truth": {"name": "Di", "city": "Graz"}, "output": "no idea"},
    # right, with an extra key: failed (hallucinated)
    {"id": "r5", "ground_truth": {"name": "Ed"}, "output": {"name": "Ed", "age": 3}},
    # right: not failed
    {"id": "r6", "ground_truth": {"name": "Flo"}, "output": {"name": "Flo"}},
]


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})
    return result.exit_code, result.stdout, result.stderr


def _store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'counts.sqlite3'}"


def _run_id(stdout: str) -> str:
    found = re.search(r"stored as run (\w+)", stdout)
    assert found, stdout
    return found.group(1)


def _everywhere(serve: Serve, tmp_path: Path, run_id: str) -> dict[str, Any]:
    """The run's failed and not-scored counts as the store, `runs show`, the API (the run and
    its ``failed`` filter) and the run's page give them."""
    store = Store(_store_url(tmp_path))
    counts: dict[str, Any] = {
        "store": (store.count_items(run_id, failed=True), store.count_not_scored(run_id)),
        "passed": store.count_items(run_id, failed=False),
    }
    store.close()
    code, stdout, _ = cli("runs", "show", run_id)
    assert code == 0
    shown = re.search(r"items: \d+ \((\d+) failed, (\d+) not scored\)", stdout)
    assert shown, stdout
    counts["runs show"] = (int(shown.group(1)), int(shown.group(2)))
    code, stdout, _ = cli("runs", "show", run_id, "--json")
    data = orjson.loads(stdout)
    counts["runs show --json"] = (data["failed_items"], data["not_scored_items"])
    live = serve(database_url=_store_url(tmp_path))
    with httpx.Client(base_url=live.base_url, timeout=30) as http:
        run = http.get(f"/api/runs/{run_id}").json()
        counts["api run"] = (run["failed_items"], run["not_scored_items"])
        failed = http.get(f"/api/runs/{run_id}/items", params={"failed": "true"}).json()
        passed = http.get(f"/api/runs/{run_id}/items", params={"failed": "false"}).json()
        counts["api filter"] = (failed["total"], run["n_items"] - failed["total"] - passed["total"])
        page = http.get(f"/runs/{run_id}").text
        on_page = re.search(r"items \((\d+) failed, (\d+) not scored\)", page)
        assert on_page, page
        counts["page"] = (int(on_page.group(1)), int(on_page.group(2)))
        counts["page rows"] = len(re.findall(r'data-column="failed"[^>]*>not scored</td>', page))
        counts["failed keys"] = {i["key"] for i in failed["items"]}
    return counts


def test_json_batch_failed_is_the_stores_failed_everywhere(
    serve: Serve, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", _store_url(tmp_path))
    data = tmp_path / "batch.jsonl"
    lines = [orjson.dumps(line).decode() for line in JSON_LINES]
    lines.insert(2, "{not json")  # line 3: not scored
    data.write_text("\n".join(lines) + "\n")
    strategies = tmp_path / "strategies.json"
    strategies.write_bytes(orjson.dumps(EXACT))
    out = tmp_path / "out"
    code, stdout, stderr = cli(
        "json", "batch", str(data), "--out", str(out), "--strategies", str(strategies)
    )
    assert code == 3, stderr  # a line could not be scored
    # r2, r3, r4, r5 failed; r1, r6 right; line 3 not scored
    assert "failed: 4   not scored: 1   not an object: 1" in stdout
    summary = orjson.loads((out / "summary.json").read_bytes())
    counts = ("records", "scored", "failed", "not_scored")
    assert [summary[k] for k in counts] == [7, 6, 4, 1]
    assert "- failed: 4\n- not scored: 1\n" in (out / "report.md").read_text()
    got = _everywhere(serve, tmp_path, _run_id(stdout))
    assert got.pop("passed") == 2 and got.pop("page rows") == 1
    assert got.pop("failed keys") == {"r2", "r3", "r4", "r5"}
    assert set(got.values()) == {(4, 1)}, got


def test_numeric_score_failed_turns_are_the_stores_failed_everywhere(
    serve: Serve, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", _store_url(tmp_path))
    predictions = []
    for raw in (ROOT / "examples/numeric/predictions_model_a.jsonl").read_bytes().splitlines():
        p = orjson.loads(raw)
        where = (p["conversation_id"], p["turn"])
        if where == ("Single_EX00/2023/page_10.pdf", 3):  # gold 0.2017: percentage points
            p["answer"] = "20.17"  # a general match, not a numerical match: failed (scale)
        if where == ("Single_EX03/2023/page_13.pdf", 0):
            p["error"] = {"type": "server_error", "message": "HTTP 500"}  # a call error
        predictions.append(orjson.dumps(p))
    preds = tmp_path / "predictions.jsonl"
    preds.write_bytes(b"\n".join(predictions) + b"\n")
    out = tmp_path / "out"
    code, stdout, stderr = cli(
        "numeric",
        "score",
        "--data",
        str(ROOT / "examples/numeric/data.json"),
        "--predictions",
        str(preds),
        "--out",
        str(out),
        "--bootstrap",
        "0",
    )
    assert code == 3, stderr  # a turn not scored because of its call error
    stats = orjson.loads((out / "statistics.json").read_bytes())
    # the example's 7 wrong turns, and Single_EX00's turn 3 (it was right), of 50 scored turns
    assert (stats["num_scored_turns"], stats["num_failed_turns"]) == (50, 8)
    assert stats["num_turns_not_scored_call_errors"] == 1
    assert stats["general_match_accuracy"] * 50 == 43  # the scale turn is a general match
    assert sum(stats["failure_modes"].values()) == 8
    with (out / "errors.csv").open(newline="") as handle:
        errors = {f"{r['conversation_id']}#{r['turn_idx']}" for r in csv.DictReader(handle)}
    assert len(errors) == 8 and "Single_EX00/2023/page_10.pdf#3" in errors
    rows = [line for line in stdout.splitlines() if "failed turns" in line]
    assert [c.strip() for c in rows[0].strip("│┃ ").split("│")][:2] == [
        "failed turns (not a numerical match)",
        "8",
    ]
    got = _everywhere(serve, tmp_path, _run_id(stdout))
    assert got.pop("passed") == 51 - 8 - 1 and got.pop("page rows") == 1
    assert got.pop("failed keys") == errors  # the same turns: those with a failure mode
    assert set(got.values()) == {(8, 1)}, got

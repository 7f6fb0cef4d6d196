"""A json run whose endpoint is down (every item a connection error, the run failed, its items
called and never scored) beside a scored run: the comparison says there is none rather than
"0 of 0 records differ" and warns of no setting the failed run never recorded; its items show
their error type in a column and a filter; its counts say the items were never scored, not
"in flight"; the bundle shows the same, and refuses a run whose items file is gone."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from compare_runs import invoke, json_runs, reply
from fieldcheck.store import artifacts_root


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def runs(tmp_path: Path, chat_server: Any) -> tuple[str, str]:
    """(a scored run of model a, a failed run of model a on the same records)."""
    scored = json_runs(tmp_path, chat_server(reply))[0]
    args = ["json", "run", str(tmp_path / "docs.jsonl"), "--model", "a", "--no-progress"]
    args += [
        "--base-url",
        f"http://127.0.0.1:{closed_port()}/v1",
        "--max-retries",
        "0",
        "--concurrency",
        "1",
    ]
    down = invoke([*args, "--out", str(tmp_path / "down")])
    assert down.exit_code == 2, down.stderr
    listed = json.loads(invoke(["runs", "list", "--json"]).stdout)
    [failed] = [r["id"] for r in listed if r["status"] == "failed"]
    return scored, failed


def test_a_failed_runs_comparison_items_and_counts_say_what_is_true(
    serve: Any, runs: tuple[str, str]
) -> None:
    scored, failed = runs
    live = serve(database_url=os.environ["FIELDCHECK_DATABASE_URL"])
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        found = http.get("/api/compare", params={"runs": f"{scored},{failed}"}).json()
        assert found["not_scored"] == [failed]
        assert found["note"] == f"no record comparison: run {failed} (failed) is not scored"
        assert (found["matrix"], found["paired"]) == (None, [])
        assert found["warnings"] == []  # the failed run recorded its runner's settings only
        page = http.get("/compare", params={"runs": f"{scored},{failed}"}).text
        assert f"No record comparison: run {failed} (failed) is not scored" in page
        assert "records differ" not in page and "records paired" not in page

        items = http.get(f"/api/runs/{failed}/items").json()
        assert [c["name"] for c in items["columns"]][-1] == "error_type"
        assert [i["values"][-1] for i in items["items"]] == ["connection"] * 3
        errors = next(f for f in items["filters"] if f["name"] == "error_type")
        assert [c["value"] for c in errors["choices"]] == ["connection"]
        by_type = {
            t: http.get(f"/api/runs/{failed}/items", params={"error_type": t}).json()["total"]
            for t in ("connection", "timeout")
        }
        assert by_type == {"connection": 3, "timeout": 0}
        scored_items = http.get(f"/api/runs/{scored}/items").json()
        assert "error_type" not in [c["name"] for c in scored_items["columns"]]

        run = http.get(f"/api/runs/{failed}").json()
        assert (run["items_in_flight"], run["failed_items"], run["not_scored_items"]) == (
            False,
            0,
            3,
        )
        assert run["items_text"] == "3 of 8 items (called, never scored: the run failed)"
        assert "in flight" not in http.get(f"/runs/{failed}").text
    shown = invoke(["runs", "show", failed])
    assert "items: 3 of 8 (called, never scored: the run failed)" in shown.stdout
    compared = invoke(["runs", "compare", scored, failed, "--differ"])
    assert f"no record comparison: run {failed} (failed) is not scored" in compared.stdout
    assert "differ" not in compared.stdout.split("comparison:")[-1]


def test_a_run_stopped_before_scoring_lists_its_call_errors(
    serve: Any, runs: tuple[str, str]
) -> None:
    """The runs list counts a failed run's call errors from its journal (3 connection errors),
    as it counts a scored run's; they were set only when a run was scored, so a run whose
    endpoint was down showed "-" (a new user's finding)."""
    _, failed = runs
    live = serve(database_url=os.environ["FIELDCHECK_DATABASE_URL"])
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        rows = {r["id"]: r for r in http.get("/api/runs").json()["runs"]}
        page = http.get("/runs").text
    row = rows[failed]
    assert (row["status"], row["n_call_errors"], row["latency_mean_s"]) == ("failed", 3, None)
    cells = re.search(rf"<tr[^>]*>(?:(?!</tr>).)*{failed}(?:(?!</tr>).)*</tr>", page, re.S)
    assert cells is not None
    numbers = re.findall(r'<td class="num">([^<]*)</td>', cells.group(0))
    assert numbers[1:3] == ["-", "3"], numbers  # failed (never scored), call errors
    # items as runs list and the run page count them (the page said the planned 8)
    assert numbers[0] == "3 of 8", numbers


def test_the_bundle_of_a_failed_run_and_of_a_run_whose_items_are_gone(
    tmp_path: Path, runs: tuple[str, str]
) -> None:
    scored, failed = runs
    folder = Path(json.loads(invoke(["runs", "show", scored, "--json"]).stdout)["out_dir"])
    kept = sorted(p.name for p in folder.glob("*.png"))
    assert kept == ["plot_field_match_rate.png", "plot_score_distribution.png"]
    (folder / kept[1]).rename(tmp_path / kept[1])  # moved: the page says so
    out = tmp_path / "bundle"
    made = invoke(["view", "--bundle", str(out), scored, failed])
    assert made.exit_code == 0, made.stderr
    [compare] = list((out / "compare").glob("*.html"))
    text = compare.read_text()
    assert f"No record comparison: run {failed} (failed) is not scored" in text
    assert 'id="item-matrix"' not in text and "records differ" not in text
    script = (out / "runs" / failed / "items.js").read_text()
    data = json.loads(script.removeprefix("window.fieldcheckItems = ").rstrip(";\n"))
    assert data["columns"][-1]["name"] == "error_type"
    assert [r["cells"][-1] for r in data["rows"]] == ["connection"] * 3
    assert "error_type" in [f["name"] for f in data["filters"]]
    assert (
        "called, never scored: the run failed" in (out / "runs" / failed / "index.html").read_text()
    )
    page = (out / "runs" / scored / "index.html").read_text()
    assert len(list((out / "runs" / scored / "files").glob("*.png"))) == 1
    note = re.search(r'<p class="hint" id="plots-note"[^>]*>([^<]*)</p>', page)
    assert note, page
    assert note[1] == (
        "Plots not in the output folder (moved or deleted): plot_score_distribution.png; "
        "its report.html embeds them."
    )

    items = artifacts_root(os.environ["FIELDCHECK_DATABASE_URL"]) / "runs" / scored
    items.rename(items.with_name("moved"))
    gone = tmp_path / "gone"
    refused = invoke(["view", "--bundle", str(gone), scored, failed])
    assert refused.exit_code == 2
    line = " ".join(refused.stderr.split())
    assert re.search(rf"RUN: the items of run {scored} are not at \S+{scored}", line), line
    assert not gone.exists() and not gone.with_name("gone.fieldcheck-partial").exists()


def test_python_dash_m_fieldcheck_runs_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fieldcheck", "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "Usage: python -m fieldcheck" in done.stdout and "view" in done.stdout


def test_a_bundle_that_fails_while_written_leaves_no_partial_folder(
    tmp_path: Path, runs: tuple[str, str]
) -> None:
    """A read error mid-way (a plot that cannot be read: EIO) exits 1 with one line and removes
    the partial folder this process made: it is no run to resume."""
    scored, failed = runs
    folder = Path(json.loads(invoke(["runs", "show", scored, "--json"]).stdout)["out_dir"])
    (folder / "plot_zz.png").symlink_to("/proc/self/mem")  # a regular file whose read fails
    out = tmp_path / "broken"
    result = invoke(["view", "--bundle", str(out), scored, failed])
    assert result.exit_code == 1, result.output
    assert "error: cannot write the bundle: [Errno 5] Input/output error" in result.stderr
    assert not out.exists() and not out.with_name("broken.fieldcheck-partial").exists()


def test_the_plots_note_of_a_run_that_has_not_finished(tmp_path: Path) -> None:
    """A failed or interrupted run's folder is still its partial one: its page says it has not
    finished, not that its output folder is gone (a tester's finding)."""
    from types import SimpleNamespace

    from fieldcheck.api.routes.items import _plots_note

    (tmp_path / "run.fieldcheck-partial").mkdir()
    for status in ("failed", "interrupted", "running"):
        run = SimpleNamespace(out_dir=str(tmp_path / "run"), status=status)
        assert _plots_note(run, []) == f"No plots: the run has not finished ({status})."  # type: ignore[arg-type]
    gone = SimpleNamespace(out_dir=str(tmp_path / "run"), status="finished")
    assert _plots_note(gone, []) == "No plots: the run's output folder is gone."  # type: ignore[arg-type]

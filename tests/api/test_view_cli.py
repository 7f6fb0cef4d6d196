"""``fieldcheck view`` (issue 28 point 5): ``--bundle DIR`` follows the output-folder rule (new or
empty, written beside it and renamed into place, nothing of the user's touched), refuses an
unknown run, keeps hostile keys' files inside DIR and holds the first ``--max-items`` items of a
run; without ``--bundle`` it serves the pages and prints the page to open."""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from runs_data import json_folder

from compare_runs import GT, json_runs, reply
from fieldcheck._cli import view_cmd
from fieldcheck._cli.main import app
from fieldcheck._util.console import SafeConsole
from fieldcheck.runs import record_folder
from fieldcheck.store import Store

HOSTILE = {k: f"../{k}/a?b#c é<i>" for k in GT}  # a key: a path out, a query, unicode, HTML
HOSTILE["r2"] = ".."  # a browser resolves it away: the server links it as /runs/ID/item?key=..


@pytest.fixture
def two_runs(tmp_path: Path, chat_server: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Models a and b on records whose keys hold ``..``, ``/``, ``?``, ``#`` and unicode."""
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{tmp_path / 'view.sqlite3'}")
    data = tmp_path / "hostile.jsonl"
    lines = [{"id": HOSTILE[k], "document": f"doc {k}", "ground_truth": v} for k, v in GT.items()]
    data.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return json_runs(tmp_path, chat_server(reply), data=data)


def view(*args: str) -> Any:
    return CliRunner().invoke(app, ["view", *args])


def test_a_bundle_needs_a_new_or_empty_folder_and_known_runs(
    tmp_path: Path, two_runs: list[str]
) -> None:
    held = tmp_path / "held"
    held.mkdir()
    (held / "notes.txt").write_text("mine")
    result = view("--bundle", str(held), *two_runs)
    assert result.exit_code == 2
    assert f"--bundle: {held} holds files (notes.txt); give a new or empty folder" in " ".join(
        result.stderr.split()
    )
    assert [p.name for p in held.iterdir()] == ["notes.txt"]
    assert (held / "notes.txt").read_text() == "mine"
    assert not (tmp_path / "held.fieldcheck-partial").exists()

    new = tmp_path / "new"
    unknown = view("--bundle", str(new), two_runs[0], "ffffffffffff")
    assert unknown.exit_code == 2
    assert "RUN: no run 'ffffffffffff' in the store" in unknown.stderr
    nothing = view("--bundle", str(new))
    assert nothing.exit_code == 2 and "RUN: give the runs to put in the bundle" in nothing.stderr
    assert not new.exists() and not (tmp_path / "new.fieldcheck-partial").exists()


def test_hostile_keys_stay_inside_the_bundle_and_max_items_holds_the_first(
    tmp_path: Path, two_runs: list[str]
) -> None:
    out = tmp_path / "empty"
    out.mkdir()  # an empty folder is taken
    result = view("--bundle", str(out), "--max-items", "3", *two_runs)
    assert result.exit_code == 0, result.output
    assert (
        result.stdout.strip() == f"wrote {out / 'index.html'}: 2 runs, 6 item pages, 1 comparison"
    )
    assert not (tmp_path / "empty.fieldcheck-partial").exists()
    assert json.loads((out / "run.json").read_text())["complete"] is True
    files = [p for p in out.rglob("*") if p.is_file()]
    assert all(p.resolve().is_relative_to(out.resolve()) and not p.is_symlink() for p in files)
    for run in two_runs:
        pages = sorted(p.name for p in (out / "runs" / run / "items").iterdir())
        assert len(pages) == 6 and all(re.fullmatch(r"[0-9a-f]{24}\.(html|json)", n) for n in pages)
        script = (out / "runs" / run / "items.js").read_text()
        rows = json.loads(script.removeprefix("window.fieldcheckItems = ").rstrip(";\n"))["rows"]
        assert [r["key"] for r in rows] == [HOSTILE[k] for k in ("r0", "r1", "r2")]
        assert all(r["href"].startswith("items/") for r in rows)
        page = (out / "runs" / run / "index.html").read_text()
        assert "This bundle holds the first 3 of the run's 8 items" in page
    written = [p.read_text() for p in files if p.suffix == ".html"]
    assert not any("<i>" in page for page in written)
    assert any(HOSTILE["r0"].replace("<i>", "&lt;i&gt;") in page for page in written)
    stories = [json.loads(p.read_text()) for p in (out / "runs" / two_runs[0]).rglob("*.json")]
    assert sorted(s["key"] for s in stories) == sorted(HOSTILE[k] for k in ("r0", "r1", "r2"))
    # the comparison links an item the bundle holds to its page, one beyond the cap elsewhere
    [compare] = (out / "compare").iterdir()
    html = compare.read_text()
    held = re.search(r'<tr data-key="\.\.">.*?href="([^"]+)"', html, re.S)
    assert held and held.group(1).startswith(f"../runs/{two_runs[0]}/items/")
    beyond = re.search(r'<tr data-key="[^"]*r5/[^"]*">.*?href="([^"]+)"', html, re.S)
    assert beyond and beyond.group(1).startswith("../unavailable.html#/runs/")


def test_view_without_bundle_serves_the_run_page(tmp_path: Path, two_runs: list[str]) -> None:
    """The real command in a child process: it prints the page to open and serves it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    child = subprocess.Popen(
        [sys.executable, "-m", "fieldcheck._cli.main", "view", two_runs[0], "--port", str(port)],
        env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        line = child.stdout.readline().strip()
        assert line == f"open http://127.0.0.1:{port}/runs/{two_runs[0]}"
        deadline = time.monotonic() + 60
        while True:
            try:
                response = httpx.get(line.removeprefix("open "), timeout=1)
                break
            except httpx.TransportError:
                assert child.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        assert response.status_code == 200 and f"<code>{two_runs[0]}</code>" in response.text
    finally:
        child.terminate()
        child.communicate(timeout=30)


def test_view_of_runs_of_two_systems_says_they_cannot_be_compared(
    tmp_path: Path, two_runs: list[str]
) -> None:
    """A trial found ``view JSON_RUN NUMERIC_RUN`` printing a Compare page that refuses them."""
    examples = Path(__file__).resolve().parents[2] / "examples" / "numeric"
    scored = CliRunner().invoke(
        app,
        ["numeric", "score", "--data", str(examples / "data.json"),
         "--predictions", str(examples / "predictions_model_a.jsonl"),
         "--out", str(tmp_path / "numeric"), "--bootstrap", "0"],
    )  # fmt: skip
    assert scored.exit_code == 0, scored.output
    numeric_id = re.search(r"stored as run ([0-9a-f]{12})", scored.output)
    assert numeric_id is not None, scored.output
    result = view(two_runs[0], numeric_id.group(1), "--port", "1")
    assert result.exit_code == 2
    assert "runs of different systems cannot be compared" in " ".join(result.output.split())
    assert "open http" not in result.output


def test_a_bundle_names_no_local_folder(tmp_path: Path, two_runs: list[str]) -> None:
    # the bundle is sent to others: it held every input's and output folder's absolute path
    # (the dataset's title=, the run page's output folder; a new-user trial)
    out = tmp_path / "sent"
    result = view("--bundle", str(out), *two_runs)
    assert result.exit_code == 0, result.output
    local = [str(tmp_path), str(tmp_path.resolve())]
    named = [
        p.relative_to(out).as_posix()
        for p in out.rglob("*")
        if p.is_file() and p.suffix != ".png" and any(s in p.read_text() for s in local)
    ]
    assert named == []
    listed = (out / "index.html").read_text()
    assert listed.count('<td class="dataset" title="hostile.jsonl">hostile.jsonl<br>') == 2
    page = (out / "runs" / two_runs[0] / "index.html").read_text()
    assert "output folder" not in page
    assert re.search(r"<th scope=\"row\">documents</th><td><code>hostile.jsonl</code>", page)


@pytest.fixture
def four_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Four json runs of one batch folder (models m0..m3), in the store."""
    url = f"sqlite:///{tmp_path / 'many.sqlite3'}"
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", url)
    out, batch = json_folder(tmp_path, "many")
    store = Store(url)
    runs = [record_folder(store, out, inputs=[("batch", batch)], model=f"m{n}") for n in range(4)]
    store.close()
    return [r.id for r in runs]


def held(out: Path) -> list[str]:
    """The runs of each Compare page the bundle's Runs page knows."""
    pages = re.search(r"data-pages='([^']*)'", (out / "index.html").read_text())
    return sorted(json.loads(pages.group(1).replace("&#34;", '"'))) if pages else []


def test_more_runs_of_a_system_than_compare_all_are_compared_with_the_first(
    tmp_path: Path, four_runs: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 300 runs made 44,850 Compare pages (half an hour, ~0.8 GB) with no warning (s37 trial F6)
    assert "all up to 20 runs of a system, first above" in " ".join(
        view("--help").stdout.replace("│", " ").split()
    )
    monkeypatch.setattr(view_cmd, "COMPARE_ALL", 3)
    a, b, c, d = four_runs
    bounded = view("--bundle", str(tmp_path / "bounded"), "--max-items", "1", *four_runs)
    assert bounded.exit_code == 0, bounded.output
    assert bounded.stderr == (
        "compared each run with the first of its system: 4 runs would make 7 pages; "
        "--compare all to make them all\n"
    )
    assert bounded.stdout.endswith(": 4 runs, 4 item pages, 3 comparisons\n")
    assert held(tmp_path / "bounded") == sorted([f"{a},{b}", f"{a},{c}", f"{a},{d}"])
    three = view("--bundle", str(tmp_path / "three"), "--max-items", "1", b, c, d)
    assert three.exit_code == 0 and three.stderr == "", three.output
    assert held(tmp_path / "three") == sorted([f"{b},{c}", f"{b},{d}", f"{c},{d}", f"{b},{c},{d}"])
    every = view(
        "--bundle", str(tmp_path / "all"), "--compare", "all", "--max-items", "1", d, a, b, c
    )
    assert every.exit_code == 0 and every.stderr == "", every.output
    assert every.stdout.endswith(": 4 runs, 4 item pages, 7 comparisons\n")
    first = view(
        "--bundle", str(tmp_path / "first"), "--compare", "first", "--max-items", "1", c, a, b
    )
    assert first.exit_code == 0 and first.stderr == "", first.output
    assert held(tmp_path / "first") == sorted([f"{c},{a}", f"{c},{b}"])
    none = view("--bundle", str(tmp_path / "none"), "--compare", "none", *four_runs)
    assert none.exit_code == 0 and none.stderr == "", none.output
    assert none.stdout.endswith(" 0 comparisons\n") and held(tmp_path / "none") == []
    assert not (tmp_path / "none" / "compare").exists()
    wrong = view("--bundle", str(tmp_path / "wrong"), "--compare", "most", a, b)
    assert wrong.exit_code == 2 and not (tmp_path / "wrong").exists()
    assert "--compare: must be all, first or none (got 'most')" in " ".join(wrong.stderr.split())


def test_a_bundle_shows_a_progress_bar_on_a_terminal_unless_no_progress(
    tmp_path: Path, four_runs: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shown: list[io.StringIO] = []

    def terminal(**options: Any) -> SafeConsole:
        shown.append(io.StringIO())
        return SafeConsole(file=shown[-1], force_terminal=True, width=100)

    monkeypatch.setattr(view_cmd, "SafeConsole", terminal)
    result = view("--bundle", str(tmp_path / "bar"), *four_runs)
    assert result.exit_code == 0, result.output
    drawn = shown[-1].getvalue()
    for phase, total in (("runs", 4), ("comparing", 7), ("writing", 11)):
        assert re.search(rf"{phase} .*{total}/{total}", drawn), drawn
    quiet = view("--bundle", str(tmp_path / "quiet"), "--no-progress", *four_runs)
    assert quiet.exit_code == 0, quiet.output
    assert shown[-1].getvalue() == ""

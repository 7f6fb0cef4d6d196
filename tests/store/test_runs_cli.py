"""``fieldcheck runs``: list, show, compare, export, rescore, import and delete, with the CLI's
conventions (one-line usage errors naming the option, exit 2, --json prints JSON only)."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
import pytest
from runs_data import HOSTILE, ROOT, json_folder, numeric_folder, slots_folder
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck.runs import record_folder
from fieldcheck.store import Store


def runs(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["runs", *args])
    return result.exit_code, result.stdout, result.stderr


def test_list_show_and_json_output(tmp_path: Path) -> None:
    out, batch = json_folder(tmp_path)
    code, stdout, _ = runs(
        "import", str(out), "--input", f"batch={batch}", "--model", "m1", "--json"
    )
    assert code == 0
    run_id = orjson.loads(stdout)["id"]
    code, stdout, _ = runs("list", "--json")
    listed = orjson.loads(stdout)
    assert code == 0 and [(r["id"], r["model"], r["n_items"]) for r in listed] == [
        (run_id, "m1", 3)
    ]
    code, stdout, _ = runs("show", run_id[:6], "--json")
    shown = orjson.loads(stdout)
    assert (shown["id"], shown["failed_items"], shown["inputs"][0]["name"]) == (run_id, 2, "batch")
    code, stdout, _ = runs("show", run_id)
    assert code == 0 and "accuracy" in stdout and "0.8333" in stdout
    assert runs("list", "--system", "slots", "--json")[1].strip() == "[]"


def test_an_empty_stores_list_names_the_store() -> None:
    """``runs list`` on a store without runs says which store it read (after ``make demo``,
    whose runs are in its own store, a bare "0 run(s)" left a new user guessing)."""
    code, stdout, _ = runs("list")
    assert code == 0 and stdout == (
        f"0 runs in {os.environ['FIELDCHECK_DATABASE_URL']} (FIELDCHECK_DATABASE_URL chooses)\n"
    )
    assert runs("list", "--system", "slots")[1].endswith("0 run(s)\n")


def test_the_list_gives_a_run_one_line_of_80_columns(tmp_path: Path) -> None:
    """`runs list` outside a terminal (80 columns): each run on one line, whole (ids and times
    were broken over three lines); a parent column once a run is a re-score, past 80 columns
    when the line needs it."""
    out, batch = json_folder(tmp_path)
    code, stdout, _ = runs(
        "import", str(out), "--input", f"batch={batch}", "--model", "synthetic-careful", "--json"
    )
    run_id = orjson.loads(stdout)["id"]
    code, stdout, _ = runs("list")
    lines = stdout.splitlines()
    assert code == 0 and lines[0].split() == [
        "id", "system", "kind", "model", "status", "started", "(UTC)", "items"
    ]  # fmt: skip
    assert re.fullmatch(
        rf"{run_id} json +score synthetic-careful +finished \d{{4}}-\d\d-\d\d \d\d:\d\d +3",
        lines[1],
    )
    assert lines[2:] == ["1 run(s)"] and max(map(len, lines)) <= 80
    child = orjson.loads(runs("rescore", run_id, "--json")[1])["id"]
    lines = runs("list")[1].splitlines()
    # past 80 columns rather than folded: the model column was squeezed to 3 characters a line
    # ("syn/the/tic/-ca/ref/ul", a tester's finding); a pipe gets a run a line, whole
    assert lines[0].split()[-1] == "parent" and len(lines) == 4
    assert lines[1].startswith(child) and lines[1].endswith(run_id)
    assert " synthetic-careful " in lines[1] and " synthetic-careful " in lines[2]


def test_a_piped_list_cuts_a_long_model_name_in_its_middle(tmp_path: Path) -> None:
    # a 2,000-character model name made every line of a piped list 2,100 characters wide
    out, batch = json_folder(tmp_path)
    name = "A" * 1000 + "B" * 988 + "-version-0042"
    code, _, _ = runs("import", str(out), "--input", f"batch={batch}", "--model", name)
    assert code == 0
    code, stdout, _ = runs("list")
    lines = stdout.splitlines()
    assert code == 0 and len(lines) == 3 and max(map(len, lines)) <= 120
    assert f" {'A' * 47}…version-0042 finished " in lines[1]
    assert runs("list", "--json")[1].count(name) == 1  # JSON keeps it whole


def test_list_filters_as_the_api_does_and_reads_a_time_in_any_zone(tmp_path: Path) -> None:
    """``runs list`` takes GET /api/runs's filters: --dataset, --since, --until (a time in
    another zone compared as that instant: SQLite compared the text, so 12:00+05:00 came after
    a run started at 11:00 UTC) and --limit (the newest, and of how many)."""
    ids = []
    for model in ("m1", "m2", "m3"):
        out, batch = json_folder(tmp_path, f"data-{model}")
        imported = runs("import", str(out), "--input", f"batch={batch}", "--model", model, "--json")
        ids.append(orjson.loads(imported[1])["id"])
    now = datetime.now(UTC)
    ahead, behind = timezone(timedelta(hours=5)), timezone(timedelta(hours=-5))
    a_minute_ago = (now - timedelta(minutes=1)).astimezone(ahead).isoformat()
    in_a_minute = (now + timedelta(minutes=1)).astimezone(behind).isoformat()

    def listed(*args: str) -> list[str]:
        code, stdout, stderr = runs("list", *args, "--json")
        assert code == 0, stderr
        return [r["id"] for r in orjson.loads(stdout)]

    assert listed("--since", a_minute_ago) == ids[::-1]
    assert listed("--since", in_a_minute) == []
    assert listed("--until", in_a_minute) == ids[::-1]
    assert listed("--until", a_minute_ago) == []
    assert listed("--since", now.date().isoformat()) == ids[::-1]
    assert listed("--dataset", "DATA-", "--limit", "2") == ids[:0:-1]
    assert listed("--dataset", "data-m1") == ids[:1]
    code, stdout, _ = runs("list", "--limit", "1")
    assert code == 0 and stdout.splitlines()[1].startswith(ids[2]) and "1 of 3 runs" in stdout
    code, _, stderr = runs("list", "--since", "yesterday")
    assert code == 2 and stderr.startswith("error: --since: must be an ISO 8601 date or time")
    code, _, stderr = runs("list", "--limit", "0")
    assert code == 2 and "--limit" in stderr


def test_usage_errors_are_one_line_naming_the_option(tmp_path: Path) -> None:
    code, _, stderr = runs("show", "nope")
    assert code == 2 and stderr.startswith("error: RUN: no run 'nope' in the store")
    assert len(stderr.strip().splitlines()) == 1
    code, _, stderr = runs("list", "--system", "other")
    assert (
        code == 2 and "error: --system: must be one of json, slots, numeric (got 'other')" in stderr
    )
    out, _ = json_folder(tmp_path)
    run_id = orjson.loads(runs("import", str(out), "--json")[1])["id"]
    code, _, stderr = runs("export", run_id, "--format", "xml")
    assert code == 2 and "error: --format: must be csv, jsonl or parquet" in stderr
    code, _, stderr = runs("rescore", run_id, "--weights", "speed=1")
    assert code == 2 and stderr.startswith("error: --weights: weights: expected name=value")
    code, _, stderr = runs("import", str(tmp_path), "--json")
    assert code == 2 and "error: DIR:" in stderr and "not an output folder" in stderr


def test_compare_refuses_mixed_systems_and_shows_paired_p_values(tmp_path: Path) -> None:
    store = Store()
    a = record_folder(store, json_folder(tmp_path, "a")[0])
    slots_out, inputs = slots_folder(tmp_path)
    s1 = record_folder(store, slots_out, inputs=inputs)
    code, _, stderr = runs("compare", a.id, s1.id)
    assert code == 2 and "runs of different systems cannot be compared" in stderr
    code, stdout, _ = runs("rescore", s1.id, "--tp", "exact", "--json")
    s2 = orjson.loads(stdout)
    assert code == 0 and s2["parent_id"] == s1.id and s2["settings"]["tp"] == "exact"
    code, stdout, _ = runs("compare", s1.id, s2["id"], "--json")
    table = orjson.loads(stdout)
    f1 = next(r for r in table["metrics"] if r["name"] == "f1")["values"]
    # presence a, b then exact a, b: 1, 0.8, 2/3, 0.8
    assert [round(v["estimate"], 4) for v in f1] == [1.0, 0.8, 0.6667, 0.8]
    assert [p["run"] for p in table["paired_f1"]] == [s1.id, s2["id"]]
    code, stdout, _ = runs("compare", s1.id, s2["id"])
    assert code == 0 and "Paired bootstrap of F1" in stdout and "Per-topic F1" in stdout


def test_export_csv_neutralises_formulas_and_jsonl_round_trips(tmp_path: Path) -> None:
    records = [
        {"id": '=HYPERLINK("x")', "ground_truth": {"a": "1"}, "output": {"a": "1"}},
        {"id": "r2", "ground_truth": {HOSTILE: "v"}, "output": {}},
        {"id": "\r=1+1", "ground_truth": {"a": "1"}, "output": {"a": "1"}},  # a lone CR
    ]
    out, batch = json_folder(tmp_path, "f", records)
    run_id = orjson.loads(runs("import", str(out), "--input", f"batch={batch}", "--json")[1])["id"]
    target = tmp_path / "items.csv"
    assert runs("export", run_id, "--format", "csv", "--out", str(target))[0] == 0
    with target.open(newline="", encoding="utf-8") as handle:  # as a spreadsheet reads it
        rows = list(csv.DictReader(handle))
    # the CR is quoted inside its cell: one row per item, no row starting with "=1+1"
    assert [r["key"] for r in rows] == ['\'=HYPERLINK("x")', "r2", "'\r=1+1"]
    assert [r["failed"] for r in rows] == ["False", "True", "False"]
    code, stdout, _ = runs("export", run_id, "--format", "jsonl")
    assert code == 0
    lines = [orjson.loads(line) for line in stdout.splitlines()]
    assert [line["key"] for line in lines] == ['=HYPERLINK("x")', "r2", "\r=1+1"]
    assert lines[1]["result"]["ground_truth"] == {HOSTILE: "v"}


def _on_a_terminal(command: list[str]) -> bytes:
    """What ``command`` writes to its stdout when that is a terminal (a pty)."""
    primary, secondary = os.openpty()
    with subprocess.Popen(command, stdout=secondary) as process:
        os.close(secondary)
        shown = b""
        while True:
            try:
                block = os.read(primary, 1 << 16)
            except OSError:  # EIO: the process closed the terminal
                break
            if not block:
                break
            shown += block
    os.close(primary)
    assert process.returncode == 0
    return shown


def test_export_to_a_terminal_escapes_control_characters_a_pipe_gets_the_bytes(
    tmp_path: Path,
) -> None:
    """``runs export`` without ``--out`` wrote an id's ESC/OSC sequences raw to the terminal
    (``--format jsonl`` its U+202E): on a terminal they are shown escaped, as ``runs show``
    shows them; a pipe still gets the exported bytes unchanged (a CSV file's controls are
    escaped in the file itself)."""
    hostile = "\x1b]0;PWNED\x07\x1b[2Jx\u202e"
    records = [{"id": hostile, "ground_truth": {"a": "1"}, "output": {"a": "1"}}]
    out, batch = json_folder(tmp_path, "f", records)
    run_id = orjson.loads(runs("import", str(out), "--input", f"batch={batch}", "--json")[1])["id"]
    for fmt, escaped in (
        ("csv", b"\\x1b]0;PWNED\\x07\\x1b[2Jx\\u202e"),
        ("jsonl", b"\\u001b]0;PWNED\\u0007\\u001b[2Jx\\u202e"),
    ):
        command = [sys.executable, "-m", "fieldcheck", "runs", "export", run_id, "--format", fmt]
        piped = subprocess.run(command, capture_output=True, check=True).stdout
        assert runs("export", run_id, "--format", fmt, "--out", str(tmp_path / fmt))[0] == 0
        assert piped == (tmp_path / fmt).read_bytes()
        # the bytes as exported: a CSV cell holds controls escaped (reports.neutralise_cell)
        assert (escaped if fmt == "csv" else "\u202e".encode()) in piped
        shown = _on_a_terminal(command)
        assert escaped in shown, shown
        assert b"\x1b" not in shown and b"\x07" not in shown and "\u202e".encode() not in shown
        assert shown.count(b"\n") == piped.count(b"\n")


def test_rescore_numeric_is_refused_and_delete(tmp_path: Path) -> None:
    """The help says why for the reason the code has: its items keep each turn's plan (the help
    said they keep none: a tester's finding), numeric scoring takes no option to change."""
    run = record_folder(Store(), numeric_folder(tmp_path))
    code, _, stderr = runs("rescore", run.id)
    assert code == 2 and "numeric runs cannot be re-scored" in stderr
    assert all(item.result["plan"]["steps"] for item in Store().iter_items(run.id))
    shown = " ".join(re.sub(r"[│ ]+", " ", runs("rescore", "--help")[1]).split())
    assert "their turns keep plan and answer, but numeric scoring takes no option" in shown
    assert "no plan" not in shown
    code, stdout, _ = runs("delete", run.id)
    assert code == 0 and f"deleted run {run.id}" in stdout
    assert runs("show", run.id)[0] == 2


def test_a_broken_store_is_a_one_line_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for url in (f"sqlite:///{tmp_path}", "nosuchdialect://x", f"sqlite:///{tmp_path}/no/s.db"):
        monkeypatch.setenv("FIELDCHECK_DATABASE_URL", url)
        for args in (["list"], ["show", "abcd"], ["delete", "abcd"]):
            code, _, stderr = runs(*args)
            assert code == 2 and "FIELDCHECK_DATABASE_URL: cannot open the store" in stderr
            assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr


def test_a_prefix_must_name_one_run_and_have_four_characters(tmp_path: Path) -> None:
    from sqlalchemy import text

    store = Store()
    ids = []
    for name in ("abcd0001", "abcd0002", "abce0003"):
        run = store.create_scored_run(
            system="json",
            model="m",
            task="score",
            inputs=[],
            settings={},
            signature="s",
            out_dir=None,
        )
        with store.engine.begin() as connection:
            connection.execute(
                text("UPDATE runs SET id = :new WHERE id = :old"), {"new": name, "old": run.id}
            )
        ids.append(name)
    code, _, stderr = runs("show", "abcd")
    assert code == 2 and "'abcd' names several runs: abcd0001, abcd0002" in stderr
    assert runs("show", "abce")[0] == 0
    assert runs("show", "ABCE")[0] == 2  # case-sensitive on every backend
    code, _, stderr = runs("delete", "abc")
    assert code == 2 and "a prefix needs at least 4 characters" in stderr
    assert store.get_run("abce0003") is not None


def test_rescore_takes_the_json_thresholds(tmp_path: Path) -> None:
    out, batch = json_folder(tmp_path)
    run_id = orjson.loads(runs("import", str(out), "--input", f"batch={batch}", "--json")[1])["id"]
    fuzzy = tmp_path / "fuzzy.json"
    fuzzy.write_bytes(orjson.dumps({"name": "EXACT", "city": "FUZZY"}))
    base = ("rescore", run_id, "--strategies", str(fuzzy), "--bootstrap", "0", "--json")
    strict = orjson.loads(runs(*base)[1])  # Rome/Roma: similarity 0.75 < 0.85
    loose = orjson.loads(runs(*base, "--fuzzy-threshold", "0.7")[1])
    assert strict["metrics"]["means"]["accuracy"] == pytest.approx(2.5 / 3)
    assert loose["metrics"]["means"]["accuracy"] == 1.0
    assert loose["settings"]["config"]["fuzzy_threshold"] == 0.7
    code, _, stderr = runs("rescore", run_id, "--tp", "exact")
    assert code == 2 and "--tp and --threshold re-score slot runs" in stderr


def test_item_counts_say_how_many_are_done_and_a_model_runs_call_errors() -> None:
    """`runs show`, `runs list` and the run page count a run's items by ``format_items``: an
    interrupted run says how many of its planned items are done (it showed the planned 40 as
    its items), and a model run, whose answers are never scored, its call errors (it showed
    "0 failed" beside 9 bad responses; tester findings)."""
    from types import SimpleNamespace

    from fieldcheck.runs import format_count, format_items

    scored = SimpleNamespace(kind="score", n_done=51, n_items=51, n_errors=0)
    assert format_items(scored, failed=8, not_scored=1) == "51 items (8 failed, 1 not scored)"
    assert format_items(scored, failed=8, not_scored=1, noun=False) == "51 (8 failed, 1 not scored)"
    model = SimpleNamespace(kind="model-run", n_done=9, n_items=40, n_errors=3)
    assert format_items(model, failed=0, not_scored=None) == "9 of 40 items (3 with a call error)"
    assert format_count(40, 40) == "40" and format_count(9, 40) == "9 of 40"


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_export_never_replaces_a_file_it_did_not_make(tmp_path: Path, fmt: str) -> None:
    out, batch = json_folder(tmp_path)
    run_id = orjson.loads(runs("import", str(out), "--input", f"batch={batch}", "--json")[1])["id"]
    mine = tmp_path / f"mine.{fmt}"
    mine.write_text("a user's file")
    (tmp_path / f"mine.{fmt}.part").write_text("another of theirs")  # the old fixed scratch name
    code, _, stderr = runs("export", run_id, "--format", fmt, "--out", str(mine))
    assert code == 2 and len(stderr.strip().splitlines()) == 1
    assert f"error: --out: {mine} exists and is not an empty file" in stderr
    assert mine.read_text() == "a user's file"
    assert runs("export", run_id, "--format", fmt, "--out", str(tmp_path))[0] == 2  # a folder
    empty = tmp_path / f"empty.{fmt}"
    empty.touch()  # an empty file (mktemp's) is taken: nothing in it is lost
    assert runs("export", run_id, "--format", fmt, "--out", str(empty))[0] == 0
    assert empty.stat().st_size > 0
    # nothing of the export's own is left beside it; the user's .part is untouched
    assert (tmp_path / f"mine.{fmt}.part").read_text() == "another of theirs"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".part")) == [
        f"mine.{fmt}.part"
    ]


def test_the_librarys_parquet_export_never_replaces_a_file_either(tmp_path: Path) -> None:
    # ``runs.write_parquet`` (and ``Store.export_parquet``) replaced a file at ``out`` that
    # the CLI refuses (a new-user trial's finding): the same rule, as FileExistsError
    from fieldcheck.runs import write_parquet
    from fieldcheck.store import Store

    out, batch = json_folder(tmp_path)
    run_id = orjson.loads(runs("import", str(out), "--input", f"batch={batch}", "--json")[1])["id"]
    mine, store = tmp_path / "mine.parquet", Store()
    mine.write_text("a user's file")
    for export in (write_parquet, Store.export_parquet):
        with pytest.raises(FileExistsError, match=f"^{mine} exists and is not an empty file"):
            export(store, run_id, mine)
    assert mine.read_text() == "a user's file"
    empty = tmp_path / "empty.parquet"
    empty.touch()  # taken, as the CLI takes it
    write_parquet(store, run_id, empty)
    assert empty.stat().st_size > 0


def test_delete_refuses_a_run_with_re_scores_and_names_them(tmp_path: Path) -> None:
    out, batch = json_folder(tmp_path)
    run_id = orjson.loads(runs("import", str(out), "--input", f"batch={batch}", "--json")[1])["id"]
    child = orjson.loads(runs("rescore", run_id, "--fuzzy-threshold", "0.5", "--json")[1])["id"]
    code, _, stderr = runs("delete", run_id)
    assert code == 2 and len(stderr.strip().splitlines()) == 1
    assert f"error: RUN: run {run_id} has re-scores: {child}; delete them first" in stderr
    assert runs("show", child, "--json")[0] == 0 and runs("show", run_id)[0] == 0
    assert runs("delete", child)[0] == 0 and runs("delete", run_id)[0] == 0
    assert runs("list", "--json")[1].strip() == "[]"


def test_import_of_a_slots_folder_reads_its_sessions_from_the_inputs_run_json_names(
    tmp_path: Path,
) -> None:
    """A slots folder holds no per-session data: its items come from the gold and prediction
    files its run.json names (when they are still there, unchanged), as --input gives them;
    without them the line says how to give them (a tester's finding: 0 items, unsaid)."""
    out, inputs = slots_folder(tmp_path)
    code, stdout, _ = runs("import", str(out), "--json")
    found = orjson.loads(stdout)
    assert code == 0 and found["n_items"] == 4  # 2 models x 2 gold sessions
    other = Store(f"sqlite:///{tmp_path / 'other.sqlite3'}")  # this store holds the folder now
    given = record_folder(other, out, inputs=inputs)
    keys = [i.key for i in Store().items(found["id"])]
    assert (
        keys == [i.key for i in other.items(given.id)] == ["a/u1/1", "a/u2/1", "b/u1/1", "b/u2/1"]
    )
    failed = [i.key for i in Store().page_items(found["id"], failed=True)]
    assert failed == ["b/u1/1"]  # b misses the job slot (a's "doctor" is a TP under presence)
    shown = orjson.loads(runs("show", found["id"], "--json")[1])
    assert [(i["name"], i["sha256"]) for i in shown["inputs"]] == [
        (name, other.get_run(given.id).inputs[n]["sha256"]) for n, (name, _) in enumerate(inputs)
    ]
    assert runs("delete", found["id"])[0] == 0  # imported again below
    dict(inputs)["pred:b"].write_text("")  # changed since: not read, and the line says so
    code, stdout, stderr = runs("import", str(out))
    assert (code, stdout) == (2, "") and "no file was given, nor is one unchanged where its " in (
        stderr
    )
    assert "run.json names it, for pred:b; give each with --input (or none, to" in stderr
    for name in ("gold", "pred:a"):
        dict(inputs)[name].write_text("")
    code, stdout, _ = runs("import", str(out))  # none at hand: its metrics alone, said so
    assert code == 0 and (
        "(slots, 0 items: none in the folder's files, nor an input to read them from (--input, "
        "or unchanged where its run.json names it); to store them, delete this run and import "
        "the folder again with its inputs)"
    ) in " ".join(stdout.split())


def test_an_old_slots_folder_given_some_of_its_inputs_is_refused_naming_the_others(
    tmp_path: Path,
) -> None:
    """A slots folder without run.json (an older fieldcheck's) given the gold and one model's
    predictions of its two: one usage line naming the missing role, nothing stored (a new-user
    trial's finding: stored as 0 items, blaming inputs "gone or changed?", and the import with
    every input then refused as already stored); given every input, its sessions are stored."""
    out, inputs = slots_folder(tmp_path)
    (out / "run.json").unlink()
    given = [f"--input={role}={path}" for role, path in inputs]
    code, stdout, stderr = runs("import", str(out), *given[:2])
    assert (code, stdout) == (2, "") and len(stderr.strip().splitlines()) == 1
    assert f"error: --input: {out} scored a, b: its sessions are read from the gold" in stderr
    assert "names it, for pred:b; give each with --input (or none, to store its metrics" in stderr
    assert Store().list_runs() == []
    code, stdout, _ = runs("import", str(out), *given, "--json")
    assert code == 0 and orjson.loads(stdout)["n_items"] == 4


def test_an_input_other_than_the_file_the_run_was_scored_from_is_refused(
    tmp_path: Path,
) -> None:
    """An ``--input`` whose sha256 is not the one run.json names under its role is one usage
    line naming it, exit 2, nothing stored (a tester's finding: the other file's sessions were
    stored as the items beside the folder's metrics, tp 1 against its F1 0.684)."""
    out, inputs = slots_folder(tmp_path)
    other = tmp_path / "other.jsonl"
    other.write_bytes(dict(inputs)["pred:a"].read_bytes()[:-1] + b" \n")
    code, stdout, stderr = runs("import", str(out), "--input", f"pred:a={other}")
    assert code == 2 and stdout == "" and len(stderr.strip().splitlines()) == 1
    assert (
        f"error: --input: pred:a={other}: its sha256 differs from the run's pred:a in "
        f"{out / 'run.json'}" in stderr
    )
    # a role the run never scored was ignored in silence
    code, stdout, stderr = runs("import", str(out), "--input", f"pred:zzz={other}")
    assert code == 2 and stdout == "" and len(stderr.strip().splitlines()) == 1
    assert f"error: --input: pred:zzz={other}: {out / 'run.json'} names no input pred:zzz" in (
        stderr
    )
    out, batch = json_folder(tmp_path)
    changed = tmp_path / "changed.jsonl"
    changed.write_bytes(batch.read_bytes().replace(b"Oslo", b"Roma", 1))
    assert changed.read_bytes() != batch.read_bytes()
    code, stdout, stderr = runs("import", str(out), "--input", f"batch={changed}")
    assert code == 2 and f"batch={changed}: its sha256 differs from the run's batch" in stderr
    assert Store().list_runs() == []
    assert runs("import", str(out), "--input", f"batch={batch}")[0] == 0  # the file it scored


def test_model_names_the_model_of_an_imported_slots_folder_of_one_model(tmp_path: Path) -> None:
    """``runs import --model`` stores a slots folder's one model under that name, its metrics
    and items too, as it names a json or numeric run (a tester's finding: it was ignored, the
    run named after the folder's model); a folder of several models is one usage line."""
    out, inputs = slots_folder(tmp_path)
    code, _, stderr = runs("import", str(out), "--model", "c")
    assert code == 2 and "error: --model: names one model, and " in stderr
    assert f"{out} holds the slots of 2 (a, b), each under its own name" in stderr
    one = tmp_path / "one"
    _cli_no_store(
        "slots", "score", "--gold", str(dict(inputs)["gold"]), "--pred",
        f"a={dict(inputs)['pred:a']}", "--out", str(one), "--bootstrap", "0",
    )  # fmt: skip
    code, stdout, stderr = runs("import", str(one), "--model", "a2", "--json")
    assert code == 0, stderr
    run = Store().get_run(orjson.loads(stdout)["id"])
    assert run is not None and run.model == "a2" and list(run.metrics["models"]) == ["a2"]
    assert [i.key for i in Store().items(run.id)] == ["a2/u1/1", "a2/u2/1"]
    assert runs("import", str(one), "--model", "a2")[0] == 2  # stored under that name
    code, stdout, _ = runs("import", str(one), "--model", "a", "--json")
    keys = [i.key for i in Store().items(orjson.loads(stdout)["id"])]
    assert code == 0 and keys == ["a/u1/1", "a/u2/1"]


def _cli_no_store(*args: str) -> None:
    result = CliRunner().invoke(app, [*args, "--no-store"])
    assert result.exit_code == 0, result.output


def test_import_of_a_json_folder_whose_batch_had_a_bad_line_skips_it(tmp_path: Path) -> None:
    """The batch file run.json names is read back as ``json batch`` read it: a line that is not
    JSON is skipped (its errors.jsonl lists it, stored as its item), where it was a traceback,
    exit 1 (a tester's finding)."""
    batch = tmp_path / "bad.jsonl"
    batch.write_bytes(b'{"id":"a","ground_truth":{"x":1},"output":{"x":1}}\n{"id":"b",\n')
    out = tmp_path / "bad"
    result = CliRunner().invoke(app, ["json", "batch", str(batch), "--out", str(out), "--no-store"])
    assert result.exit_code == 3, result.output  # a bad line
    code, stdout, stderr = runs("import", str(out), "--json")
    assert code == 0, stderr
    run_id = orjson.loads(stdout)["id"]
    items = {i.key: i.result for i in Store().items(run_id)}
    assert list(items) == ["a", "line 2"] and items["a"]["output"] == {"x": 1}
    assert items["line 2"]["error"]["line"] == 2


def test_delete_removes_the_items_file_and_works_when_it_is_gone(tmp_path: Path) -> None:
    store = Store()
    runs_made = [record_folder(store, json_folder(tmp_path, name)[0]) for name in ("a", "b")]
    folders = [store.run_folder(r.id) for r in runs_made]
    assert all((f / "items.parquet").is_file() for f in folders)
    assert runs("delete", runs_made[0].id)[0] == 0
    assert not folders[0].exists()  # the file fieldcheck wrote, and its folder
    (folders[1] / "items.parquet").unlink()  # gone already (the artifacts root moved)
    assert runs("show", runs_made[1].id)[0] == 2  # ItemsMissing: one line
    code, stdout, stderr = runs("delete", runs_made[1].id)
    assert code == 0 and f"deleted run {runs_made[1].id}" in stdout, stderr
    assert not folders[1].exists() and runs("list", "--json")[1].strip() == "[]"


def test_an_imported_json_folder_is_re_scored_with_the_strategies_it_was_scored_with(
    tmp_path: Path,
) -> None:
    """run.json keeps the settings a run was scored with, so ``runs import`` then ``runs
    rescore`` with nothing changed gives the folder's numbers (a tester's finding: the
    strategies were taken from the first record, which lacks two of the strategies' fields,
    and the re-score moved accuracy 0.9287 -> 0.9263)."""
    examples = Path(__file__).resolve().parents[2] / "examples" / "json"
    out = tmp_path / "batch"
    args = ["json", "batch", str(examples / "invoices.jsonl"), "--strategies"]
    args += [str(examples / "strategies.json"), "--flatten", "--no-store", "--out", str(out)]
    assert CliRunner().invoke(app, args).exit_code == 0
    summary = orjson.loads((out / "summary.json").read_bytes())
    imported = record_folder(Store(), out)
    assert imported.settings["config"]["strategies"]["customer.name"] == "FUZZY"
    result = CliRunner().invoke(app, ["runs", "rescore", imported.id, "--json"])
    assert result.exit_code == 0, result.stderr
    child = Store().get_run(orjson.loads(result.stdout)["id"])
    assert child is not None
    assert child.metrics["means"] == summary["means"]
    assert child.metrics["means"]["accuracy"] == pytest.approx(0.9287, abs=5e-5)


def test_a_folder_already_stored_is_not_imported_again_unless_another_model_is_asked(
    tmp_path: Path,
) -> None:
    """``runs import`` of a folder the store holds (imported before, or stored by the command
    that wrote it) is one usage line naming that run, exit 2, and stores nothing (a tester's
    finding: the second import stored the same run twice); ``--model`` stores it under another
    name."""
    out, _ = json_folder(tmp_path)
    code, stdout, _ = runs("import", str(out), "--json")
    assert code == 0
    first = orjson.loads(stdout)["id"]
    code, stdout, stderr = runs("import", str(out))
    assert code == 2 and stdout == "" and len(stderr.strip().splitlines()) == 1
    assert f"error: DIR: {out}: already stored as run {first} (fieldcheck runs show {first})" in (
        stderr
    )
    assert [r.id for r in Store().list_runs()] == [first]
    code, stdout, _ = runs("import", str(out), "--model", "other", "--json")
    assert code == 0 and orjson.loads(stdout)["model"] == "other"
    assert runs("import", str(out), "--model", "other")[0] == 2
    assert len(Store().list_runs()) == 2

    scored = tmp_path / "scored"  # stored by json batch itself
    args = ["json", "batch", str(json_folder(tmp_path, "b")[1]), "--out", str(scored)]
    assert CliRunner().invoke(app, args).exit_code == 0
    [run] = [r for r in Store().list_runs() if r.out_dir == str(scored.resolve())]
    code, _, stderr = runs("import", str(scored))
    assert code == 2 and f"already stored as run {run.id}" in stderr


def test_show_prints_the_settings_short(tmp_path: Path) -> None:
    """Text ``runs show`` says what a run was scored with, as ``--json`` does (a tester's
    finding: no settings in the text): a line per setting, a nested object's keys dotted, a
    deeper one on one line with the first five entries and a count, unset ones left out."""
    out, _ = json_folder(tmp_path)
    json_id = orjson.loads(runs("import", str(out), "--json")[1])["id"]
    slots_out, inputs = slots_folder(tmp_path)
    slots_id = record_folder(Store(), slots_out, inputs=inputs).id
    code, stdout, _ = runs("show", slots_id)
    assert code == 0
    assert [line for line in stdout.splitlines() if line.startswith("setting")] == [
        "setting bootstrap: 50",
        "setting seed: 0",
        "setting tp: presence",  # threshold: null, not shown
    ]
    code, stdout, _ = runs("show", json_id)
    shown = dict(
        line.removeprefix("setting ").split(": ", 1)
        for line in stdout.splitlines()
        if line.startswith("setting ")
    )
    stored = Store().get_run(json_id).settings
    assert shown["bootstrap"] == "50" and shown["config.fuzzy_threshold"] == "0.85"
    assert shown["config.flatten"] == "false"
    assert shown["config.strategies"] == ", ".join(
        f"{k}={v}" for k, v in stored["config"]["strategies"].items()
    )
    assert shown["config.weights"].startswith("accuracy=")
    assert "config.judge_model" not in shown and stored["config"]["judge_model"] is None

    many = {f"f{i}": "EXACT" for i in range(7)}  # a deeper object of 7: five and a count
    from fieldcheck._cli.runs_cmd import _settings_lines

    assert _settings_lines({"config": {"strategies": many}}) == [
        ("config.strategies", "f0=EXACT, f1=EXACT, f2=EXACT, f3=EXACT, f4=EXACT and 2 more")
    ]


@contextmanager
def _unremovable(folder: Path) -> Iterator[None]:
    """Nothing in ``folder`` can be removed: mode 0o555, or, for root (whom a mode does not
    stop), the immutable flag (a read-only artifacts root, as a user meets it); a root that
    cannot set it fails the test, never skips it."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(0o755)
        return
    done = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True)
    assert done.returncode == 0, f"as root the test needs chattr +i: {done.stderr.strip()}"
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_delete_of_a_run_whose_items_cannot_be_removed_deletes_nothing(tmp_path: Path) -> None:
    """The item files are removed after the commit, so they are checked before it: on a
    read-only artifacts root the run stays, with its items, and the usage line says why (a
    tester's finding: the run was gone and its files stayed, after a traceback)."""
    store = Store()
    run = record_folder(store, json_folder(tmp_path)[0])
    folder = store.run_folder(run.id)
    with _unremovable(folder):
        code, stdout, stderr = runs("delete", run.id)
    assert code == 2 and stdout == "" and len(stderr.strip().splitlines()) == 1
    assert f"error: FIELDCHECK_ARTIFACTS: cannot remove the items of run {run.id}" in stderr
    assert "nothing was deleted" in stderr
    assert store.get_run(run.id) is not None and (folder / "items.parquet").is_file()
    assert store.count_items(run.id) == 3
    assert runs("delete", run.id)[0] == 0  # writable again
    assert store.get_run(run.id) is None and not folder.exists()


def test_import_names_the_model_the_run_was_stored_under(
    tmp_path: Path, chat_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``runs import`` of a folder, into another store, stores the run under the model its
    command stored it under (run.json's models; ``numeric score``'s predictions file), not the
    folder's name; a folder of several models names each model's folder, whose run is its
    model's."""
    plan = '{"steps": [{"tool": "extract", "value": 6135.4, "source": "text"}]}'
    server = chat_server(lambda _: plan)
    data = ROOT / "examples/numeric/data.json"
    out = tmp_path / "evaluated"
    args = ["numeric", "evaluate", "--data", str(data), "--base-url", server.base_url]
    args += ["--sample-size", "1", "--bootstrap", "0", "--no-progress", "--max-retries", "0"]
    for models, folder in ((["m"], out), (["m", "m2"], tmp_path / "two")):
        chosen = [part for m in models for part in ("--model", f"{m}=scripted")]
        result = CliRunner().invoke(app, [*args, *chosen, "--out", str(folder)])
        assert result.exit_code in (0, 3), result.output
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{tmp_path / 'other.sqlite3'}")
    imported = {
        name: orjson.loads(runs("import", str(folder), "--json")[1])["model"]
        for name, folder in (
            ("evaluate", out),
            ("score", numeric_folder(tmp_path)),
            ("second model", tmp_path / "two" / "m2"),
        )
    }
    assert imported == {"evaluate": "m", "score": "predictions_model_a", "second model": "m2"}
    code, _, stderr = runs("import", str(tmp_path / "two"))
    assert code == 2 and "holds a run per model; import each model's folder:" in stderr
    assert f"{tmp_path / 'two' / 'm'}, {tmp_path / 'two' / 'm2'}" in " ".join(stderr.split())


def test_an_imported_numeric_folder_compares_with_its_native_run_without_warnings(
    tmp_path: Path,
) -> None:
    """`runs import` of a `numeric score` folder stores the run's signature as scoring does, so
    `runs compare` with the native run finds no settings that differ (it warned "bootstrap,
    bootstrap_seed" differ: '1000' read from the signature's text against 1000; a tester's
    finding)."""
    examples = Path(__file__).resolve().parents[2] / "examples" / "numeric"
    out = tmp_path / "num"
    result = CliRunner().invoke(
        app,
        [
            "numeric", "score", "--data", str(examples / "data.json"),
            "--predictions", str(examples / "predictions_model_a.jsonl"), "--out", str(out),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    native = Store().list_runs(system="numeric")[0].id
    code, stdout, _ = runs("import", str(out), "--model", "again", "--json")
    imported = orjson.loads(stdout)["id"]
    code, stdout, _ = runs("compare", native, imported, "--json")
    assert code == 0 and orjson.loads(stdout)["warnings"] == []
    shown = [orjson.loads(runs("show", r, "--json")[1])["signature"] for r in (native, imported)]
    assert shown[0] == shown[1] and orjson.loads(shown[0])["settings"]["bootstrap"] == 1000


def test_a_priced_numeric_runs_cost_and_latency_in_the_store_are_its_files(
    tmp_path: Path, chat_server: Any
) -> None:
    """The runs list's cost and mean latency of a ``numeric evaluate`` run are the very numbers
    of its statistics.json (a tester's finding: 0.0076457999999999995 against 0.0076458, the
    store's cost formula another than the run's; ``metrics.cost_usd`` is now both's)."""
    from chat_server import Reply

    plan = '{"steps": [{"tool": "extract", "value": 6135.4, "source": "text"}]}'
    server = chat_server(lambda _: Reply(plan, prompt_tokens=44120, completion_tokens=1713))
    out = tmp_path / "evaluated"
    args = ["numeric", "evaluate", "--data", str(ROOT / "examples/numeric/data.json")]
    args += ["--base-url", server.base_url, "--model", "m=scripted", "--sample-size", "1"]
    args += ["--bootstrap", "0", "--no-progress", "--price-in", "0.15", "--price-out", "0.6"]
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    stats = orjson.loads((out / "statistics.json").read_bytes())
    [run] = Store().list_runs()
    calls = stats["total_input_tokens"] // 44120
    assert (run.input_tokens, run.output_tokens) == (44120 * calls, 1713 * calls) and calls > 1
    tokens_in, tokens_out = 44120 * calls, 1713 * calls
    assert run.cost_usd == stats["total_cost_usd"] == (tokens_in * 0.15 + tokens_out * 0.6) / 1e6
    assert run.latency_mean_s == stats["latency_s"]["mean"]

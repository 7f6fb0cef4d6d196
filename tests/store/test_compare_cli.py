"""``fieldcheck runs compare --differ``: the records two models' ``json run`` runs disagree on,
the paired difference and the warnings, in text and in ``--json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from compare_runs import json_runs, reply
from fieldcheck._cli.main import app


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, result.stdout, result.stderr


def test_runs_compare_differ_lists_the_disagreements(tmp_path: Path, chat_server: Any) -> None:
    server = chat_server(reply)
    a, b = json_runs(tmp_path, server)
    code, out, err = cli("runs", "compare", a, b, "--differ", "--json")
    assert code == 0, err
    found = json.loads(out)
    assert [r["key"] for r in found["matrix"]["rows"]] == ["r2", "r5", "r6"]
    assert [[c["right"] for c in r["cells"]] for r in found["matrix"]["rows"]] == [
        [True, False],
        [True, False],
        [True, True],  # r6: another value, both right
    ]
    [paired] = found["paired"]
    assert (paired["metric"], paired["items"]) == ("rqs", 8)

    code, out, _ = cli("runs", "compare", a, b, "--differ", "--limit", "2")
    assert code == 0
    assert "3 of 8 records differ (first 2)" in out
    matrix = out[out.index("3 of 8 records differ") :]
    lines = [line for line in matrix.splitlines() if line.startswith("│ r")]
    assert [line.split("│")[1].strip() for line in lines] == ["r2", "r5"]
    assert "wrong" in lines[0] and "Rome" in out and "Paired difference of rqs" in out
    assert "warning:" not in out

    code, out, _ = cli("runs", "compare", a, b, "--json")
    assert code == 0 and json.loads(out)["matrix"] is None  # without --differ: not computed

    c, _ = json_runs(tmp_path, server, "--fuzzy-threshold", "0.5")
    code, out, _ = cli("runs", "compare", a, c)
    assert code == 0
    warned = "warning: the runs differ in signature settings: fuzzy_threshold: [0.85, 0.5]"
    assert out.splitlines()[0] == warned  # each setting with its value per run (docs/runs.md)
    code, out, _ = cli("runs", "compare", a, c, "--json")
    [warning] = json.loads(out)["warnings"]
    assert (warning["names"], warning["values"]) == (
        ["fuzzy_threshold"],
        {"fuzzy_threshold": [0.85, 0.5]},
    )


def _cells(text: str, column: int) -> str:
    """The text of a Rich table's column, its folded pieces joined (spaces dropped)."""
    pieces = [line.split("│")[column + 1] for line in text.splitlines() if line.count("│") > column]
    return "".join(piece.strip() for piece in pieces).replace(" ", "")


def _value(text: str, label: str) -> str:
    """A two-column table's value of ``label``, its folded lines joined (spaces dropped)."""
    found: list[str] = []
    for line in text.splitlines():
        cells = line.split("│")
        if len(cells) < 4:
            continue
        if cells[1].strip() == label or (found and not cells[1].strip()):
            found.append(cells[2].strip())
        elif found:
            break
    return "".join(found).replace(" ", "")


def test_show_item_and_compare_differ_read_at_80_columns(tmp_path: Path) -> None:
    """At 80 columns no line is wider, and every value is there whole: a record's fields, too
    wide side by side, are told one field at a time; a slot session's slots likewise; the
    compare matrix folds a long key and value instead of cutting them."""
    from runs_data import slots_folder

    from fieldcheck.runs import record_folder
    from fieldcheck.store import Store

    street = "A very long street name that goes on and on 12345"
    truth = {
        f"record-{i:03d}-with-a-rather-long-key": {"street": street, "city": "Oslo"}
        for i in range(4)
    }
    ids = []
    for name, city in (("a", "Oslo"), ("b", "Bergen-upon-the-long-fjord-" + "y" * 70)):
        rows = [
            {"id": k, "ground_truth": v, "output": {**v, "city": city if i % 2 else "Oslo"}}
            for i, (k, v) in enumerate(truth.items())
        ]
        batch = tmp_path / f"{name}.jsonl"
        batch.write_text("".join(json.dumps(r) + "\n" for r in rows))
        result = CliRunner().invoke(
            app, ["json", "batch", str(batch), "--out", str(tmp_path / name), "--bootstrap", "0"]
        )
        assert result.exit_code == 0, result.output
        ids.append(result.output.split("stored as run ")[1][:12])

    def at_80(*args: str) -> str:
        result = CliRunner().invoke(app, list(args), env={"COLUMNS": "80"})
        assert result.exit_code == 0, result.output
        widths = [len(line) for line in result.stdout.splitlines()]
        assert max(widths) <= 80, max(widths)
        return result.stdout

    key = "record-001-with-a-rather-long-key"
    out = at_80("runs", "show", ids[1], "--item", key)
    for field, value in (("city", "Bergen-upon-the-long-fjord-" + "y" * 70), ("street", street)):
        told = out[out.index(f"field: {field}\n") :]
        told = told[: told.index("└")]
        assert _value(told, "output") == value.replace(" ", ""), field
        gold = street if field == "street" else "Oslo"
        assert _value(told, "ground truth") == gold.replace(" ", ""), field
    assert "no match" in out[out.index("field: city") : out.index("field: street")]

    out = at_80("runs", "compare", *ids, "--differ")
    matrix = out[out.index("2 of 4 records differ") :]
    keys = "record-001-with-a-rather-long-key" + "record-003-with-a-rather-long-key"
    assert _cells(matrix, 0) == keys  # the heading is drawn with other lines
    assert _cells(matrix, 1).count("right") == 2 and _cells(matrix, 2).count("wrong") == 2
    assert _cells(matrix, 2).count('wrong{"street":"' + street.replace(" ", "")) == 2  # 60 chars

    store = Store()
    out_folder, inputs = slots_folder(tmp_path)
    run = record_folder(store, out_folder, inputs=inputs)
    store.close()
    out = at_80("runs", "show", run.id, "--item", "b/u1/1")
    job = out[out.index("topic: work") :]
    assert "nurse" in job and "FN (missed)" in job


def test_a_dataset_role_only_one_run_has_does_not_make_the_runs_differ() -> None:
    """A slots score run (gold, predictions) against a slots run (conversations, gold) on the same
    gold: no dataset warning (it warned always: a tester's finding); another gold still warns."""
    from types import SimpleNamespace

    from fieldcheck.runs._compare import _warnings

    def run(rid: str, *inputs: tuple[str, str]) -> Any:
        listed = [{"name": n, "sha256": sha, "path": f"/d/{n}.jsonl"} for n, sha in inputs]
        return SimpleNamespace(id=rid, inputs=listed, signature="{}")

    roles = ("gold", "conversations")
    scored = run("a", ("gold", "g1"), ("pred:m", "p1"))
    ran = run("b", ("conversations", "c1"), ("gold", "g1"))
    assert _warnings([scored, ran], roles, ()) == []
    other = run("c", ("conversations", "c1"), ("gold", "g2"))
    [warning] = _warnings([scored, other], roles, ())
    assert warning["message"] == (
        "the runs differ in dataset (a: gold gold.jsonl sha256 g1; c: gold gold.jsonl sha256 g2)"
    )
    [both] = _warnings([ran, run("d", ("conversations", "c2"), ("gold", "g1"))], roles, ())
    assert "b: conversations conversations.jsonl sha256 c1, gold gold.jsonl" in both["message"]


def test_signature_values_that_mean_the_same_do_not_make_the_runs_differ() -> None:
    """An interrupted numeric run signs its runner's settings (`sample_size` None, no sample),
    the finished one its scoring's (`"all"`): the same setting, no warning (a new user's
    finding: "the runs differ in signature settings: sample_size"); another size still warns."""
    from types import SimpleNamespace

    from fieldcheck import core
    from fieldcheck._util.signature import Signature
    from fieldcheck.runs._compare import _warnings

    numeric = core.get("numeric")

    def run(rid: str, **settings: Any) -> Any:
        signature = Signature(system="numeric", settings=settings).model_dump_json()
        return SimpleNamespace(id=rid, inputs=[], signature=signature)

    interrupted = run("a", split="dev", sample_size=None, sample_seed=None)
    finished = run("b", split="dev", sample_size="all", sample_seed="first")
    same = numeric.same_settings
    assert _warnings([interrupted, finished], ("data",), numeric.model_settings, None, same) == []
    sampled = run("c", split="dev", sample_size=10, sample_seed=3)
    [warning] = _warnings([interrupted, sampled], ("data",), numeric.model_settings, None, same)
    assert warning["message"] == (
        "the runs differ in signature settings: sample_seed: [null, 3]; sample_size: [null, 10]"
    )
    assert warning["values"]["sample_size"] == [None, 10]


def test_the_settings_warning_names_each_value_long_ones_cut_in_their_middle() -> None:
    """docs/runs.md: each differing setting named with its value per run; a value over 40
    characters (a digest) keeps its start and its end; the text is JSON (a control character
    escaped), the values in ``values`` as stored."""
    from types import SimpleNamespace

    from fieldcheck._util.signature import Signature
    from fieldcheck.runs._compare import _warnings

    def run(rid: str, **settings: Any) -> Any:
        signature = Signature(system="json", settings=settings).model_dump_json()
        return SimpleNamespace(id=rid, inputs=[], signature=signature)

    long_a, long_b = "sha256:" + "0" * 56 + "aaaa1111", "sha256:" + "0" * 56 + "bbbb2222"
    a = run("a", strategies=long_a, note="<b>\x1b[31m", weights={"accuracy": 0.45}, seed=0)
    b = run("b", strategies=long_b, note="plain", weights={"accuracy": 0.5}, seed=0)
    [warning] = _warnings([a, b], (), ())
    assert warning["message"] == (
        'the runs differ in signature settings: note: ["<b>\\u001b[31m", "plain"]; '
        'strategies: ["sha256:0000000000000000000…000aaaa1111", '
        '"sha256:0000000000000000000…000bbbb2222"]; weights.accuracy: [0.45, 0.5]'
    )
    assert warning["values"]["strategies"] == [long_a, long_b]
    assert warning["names"] == ["note", "strategies", "weights.accuracy"]


def test_compare_differ_of_slot_sessions_shows_a_slot_a_line_in_natural_order(
    tmp_path: Path,
) -> None:
    """A slots run's models side by side: each cell shows a slot a line (the separator was
    printed as the two characters ``\\n`` and one 60-character cut ran over several slots,
    cutting a name in its middle), and sessions sort by number (``u1/2`` before ``u1/10``; they
    sorted as text), in the text and in ``--json``."""
    rows = {"gold": [], "a": [], "b": []}
    for session in (10, 2, 1):
        for field, value in (("favourite_place", "the old harbour"), ("name", "Ann")):
            line = {"user": "u1", "session": session, "topic": "basic", "field": field}
            rows["gold"].append(line | {"values": [value]})
            rows["a"].append(line | {"values": [value]})
            rows["b"].append(line | {"values": [value + " b"]})
    paths = {}
    for name, lines in rows.items():
        paths[name] = tmp_path / f"{name}.jsonl"
        paths[name].write_text("".join(json.dumps(r) + "\n" for r in lines))
    code, out, err = cli(
        "slots", "score", "--gold", str(paths["gold"]), "--pred", f"a={paths['a']}",
        "--pred", f"b={paths['b']}", "--tp", "exact", "--bootstrap", "0", "--out",
        str(tmp_path / "run"),
    )  # fmt: skip
    assert code == 0, out + err
    run = out.split("stored as run ")[1][:12]
    code, out, err = cli("runs", "compare", run, "--differ")
    assert code == 0, out + err
    assert "\\n" not in out
    keys = [line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│ u1/")]
    assert keys == ["u1/1", "u1/2", "u1/10"]
    cells = [line for line in out.splitlines() if "basic." in line]
    assert sum("basic.favourite_place: the old harbour b" in c for c in cells) == 3
    assert sum("basic.name: Ann b" in c for c in cells) == 3
    code, out, err = cli("runs", "compare", run, "--differ", "--json")
    assert [r["key"] for r in json.loads(out)["matrix"]["rows"]] == ["u1/1", "u1/2", "u1/10"]

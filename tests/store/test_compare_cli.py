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
    assert out.splitlines()[0] == "warning: the runs differ in signature settings: fuzzy_threshold"

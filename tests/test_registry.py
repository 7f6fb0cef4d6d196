"""The System registry (issue 27 items 1 and 2): a small fourth system (label classification
accuracy), registered in this one file, is scored by ``fieldcheck score`` and ``POST
/api/score/label`` through the one pipeline, then listed, filtered, compared, exported and shown
like the built-in ones, with no change to the CLI, ``runs``, the API or the pages."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from fieldcheck import core
from fieldcheck._cli.main import app as cli_app
from fieldcheck._util.errors import UsageProblem
from fieldcheck.api import ApiSettings, create_app
from fieldcheck.reports import RunFolder, Scored, Views
from fieldcheck.runs import compare_runs, iter_export
from fieldcheck.store import ItemColumns, RunInfo, RunRecorder, Store

ROOT = Path(__file__).resolve().parents[1]


def _per_label(metrics: Mapping[str, Any]) -> Mapping[str, Any]:
    return metrics.get("per_label") or {}


class LabelSystem(Views):
    """Accuracy of predicted labels: the smallest system the registry takes (its view methods
    are ``reports.Views``' defaults)."""

    name = "label"
    title = "Label accuracy"
    item = "example"
    inputs = (("data", 'JSONL: one {"id", "label", "predicted"} per line'),)
    headline = ("accuracy",)
    breakdowns = (("Accuracy by label", "label", _per_label),)
    export_columns = (("gold", '$."gold"', "VARCHAR"), ("predicted", '$."predicted"', "VARCHAR"))

    def item_columns(self, item: Mapping[str, Any]) -> ItemColumns:
        right = item["right"] if "right" in item else item["gold"] == item["predicted"]
        return ItemColumns(item["key"], not right)

    @contextmanager
    def prepare(
        self,
        inputs: Sequence[tuple[str, Path]],
        settings: Mapping[str, Any],
        *,
        beside: Path,
        progress: Any,
        extras: Mapping[str, Any],
    ) -> Iterator[list[dict[str, Any]]]:
        """Every line read and checked before anything is written; ``ignore_case`` the one
        setting."""
        if not isinstance(settings.get("ignore_case", False), bool):
            raise UsageProblem("must be true or false", "ignore_case")
        path = dict(inputs)["data"]
        items = []
        for number, line in enumerate(path.read_text().splitlines(), 1):
            try:
                record = json.loads(line)
                items.append(
                    {"key": record["id"], "gold": record["label"], "predicted": record["predicted"]}
                )
            except (ValueError, KeyError) as exc:
                raise UsageProblem(f"{path}:{number}: not a record ({exc})", "data") from None
        yield items

    def score(
        self,
        read: list[dict[str, Any]],
        folder: RunFolder,
        settings: Mapping[str, Any],
        *,
        recorder: RunRecorder | None,
        progress: Any,
        executor: Any = None,
    ) -> Scored:
        fold = str.casefold if settings.get("ignore_case") else str
        items = [{**i, "right": fold(i["gold"]) == fold(i["predicted"])} for i in read]
        accuracy = sum(i["right"] for i in items) / len(items)
        summary = {"accuracy": accuracy, "n": len(items)}
        path = folder.write_summary("summary.json", summary)
        if recorder is not None:
            recorder.add_items(items, self.item_columns)
        return Scored(
            result=summary,
            files={"summary": path},
            metrics=summary,
            intervals={},
            signature={"ignore_case": bool(settings.get("ignore_case"))},
            failed=False,
            gate={"": {"accuracy": accuracy}},
            summary={**summary, "complete": True},
        )


ITEMS = [("cat", "cat"), ("dog", "cat"), ("dog", "dog"), ("cat", "cat")]


@pytest.fixture
def label_system() -> Iterator[LabelSystem]:
    system = LabelSystem()
    core.register(system)
    yield system
    core.unregister(system.name)


def _run(store: Store, model: str, predictions: list[tuple[str, str]]) -> RunInfo:
    """A run of the label system scored here (accuracy and per-label accuracy by hand)."""
    recorder = RunRecorder.open(
        store, system="label", inputs=[], settings={}, signature=None, out=None, model=model
    )
    items = [{"key": f"i{n}", "gold": g, "predicted": p} for n, (g, p) in enumerate(predictions)]
    recorder.add_items(items, core.get("label").item_columns)
    right = [g == p for g, p in predictions]
    per_label = {
        label: sum(r for (g, _), r in zip(predictions, right, strict=True) if g == label)
        / sum(g == label for g, _ in predictions)
        for label in sorted({g for g, _ in predictions})
    }
    accuracy = sum(right) / len(right)
    return recorder.finish(
        metrics={"accuracy": accuracy, "per_label": per_label},
        intervals={"accuracy": {"low": accuracy / 2, "high": 1.0}},
    )


def test_registry_lists_built_in_systems_and_refuses_a_non_system() -> None:
    assert core.names()[:3] == ["json", "slots", "numeric"]
    assert all(isinstance(core.get(n), core.System) for n in ("json", "slots", "numeric"))
    with pytest.raises(TypeError, match="does not implement"):
        core.register(object())  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="no system 'label'"):
        core.get("label")


def test_a_fourth_system_is_compared_exported_listed_and_shown(
    label_system: LabelSystem, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'label.sqlite3'}"
    store = Store(url)
    a = _run(store, "model-a", ITEMS)  # 3 of 4 right; cat 2/2, dog 1/2
    b = _run(store, "model-b", [("cat", "dog"), ("dog", "dog"), ("dog", "dog"), ("cat", "dog")])
    assert core.names()[-1] == "label"

    table = compare_runs([a, b])
    assert table["system"] == "label"
    assert [c["model"] for c in table["columns"]] == ["model-a", "model-b"]
    [accuracy] = table["metrics"]
    assert accuracy["name"] == "accuracy"
    assert [(v["estimate"], v["low"]) for v in accuracy["values"]] == [(0.75, 0.375), (0.5, 0.25)]
    [by_label] = table["tables"]
    assert by_label["title"] == "Accuracy by label"
    assert by_label["rows"] == [
        {"name": "cat", "values": [1.0, 0.0]},
        {"name": "dog", "values": [0.5, 1.0]},
    ]

    text = b"".join(iter_export(store, a.id, "csv")).decode()
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][-3:] == ["gold", "predicted", "result"]
    assert [(r[0], r[2], r[-3], r[-2]) for r in rows[1:]] == [
        ("i0", "False", "cat", "cat"),
        ("i1", "True", "dog", "cat"),
        ("i2", "False", "dog", "dog"),
        ("i3", "False", "cat", "cat"),
    ]
    store.close()

    app = create_app(ApiSettings(database_url=url, data_root=tmp_path))
    client = TestClient(app, base_url="http://127.0.0.1")
    listed = client.get("/api/runs", params={"system": "label"}).json()
    assert sorted(r["model"] for r in listed["runs"]) == ["model-a", "model-b"]
    unknown = client.get("/api/runs", params={"system": "nope"})
    assert unknown.status_code == 422 and unknown.json()["field"] == "system"
    compared = client.get("/api/runs/compare", params={"ids": f"{a.id},{b.id}"}).json()
    assert compared["metrics"][0]["values"][1]["estimate"] == 0.5
    page = client.get(f"/runs/{a.id}").text
    assert "Accuracy by label" in page and "predicted" in page
    assert client.get("/runs", params={"system": "label"}).text.count("model-") >= 2


# id, label, predicted: a, c and d right; e right only when case is ignored (cat vs Cat)
LINES = [("a", "cat", "cat"), ("b", "dog", "cat"), ("c", "dog", "dog"), ("d", "bird", "bird")]
LINES.append(("e", "cat", "Cat"))
EXACT, IGNORING_CASE = 3 / 5, 4 / 5


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli_app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, result.stdout, result.stderr


def _labels(tmp_path: Path) -> Path:
    path = tmp_path / "preds.jsonl"
    path.write_text(
        "".join(json.dumps({"id": i, "label": g, "predicted": p}) + "\n" for i, g, p in LINES)
    )
    return path


def test_a_fourth_system_is_scored_by_the_cli_and_the_api_and_compared(
    label_system: LabelSystem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``fieldcheck score label data=FILE`` and ``POST /api/score/label`` run the same pipeline
    into the same store: same metrics for the same inputs and settings, runs compared and shown
    with no line of the CLI, the API or the pages about this system."""
    monkeypatch.chdir(tmp_path)  # the runs without --out go to ./fieldcheck-runs/
    url = f"sqlite:///{tmp_path / 'label.sqlite3'}"
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", url)
    data = _labels(tmp_path)
    out = tmp_path / "cli-run"
    code, stdout, stderr = _cli(
        "score", "label", f"data={data}", "--settings", '{"ignore_case": true}', "--out", str(out)
    )
    assert code == 0, stderr
    assert "accuracy" in stdout and "0.8000" in stdout
    [cli_id] = re.findall(r"stored as run ([0-9a-f]+)", stdout)
    assert json.loads((out / "summary.json").read_text()) == {
        "accuracy": IGNORING_CASE,
        "n": 5,
        "complete": True,
    }
    run_json = json.loads((out / "run.json").read_text())
    assert (run_json["system"], run_json["complete"], run_json["command"]) == (
        "label",
        True,
        "score label",
    )
    assert [(i["role"], i["path"]) for i in run_json["inputs"]] == [("data", str(data))]

    code, stdout, _ = _cli("score", "label", f"data={data}", "--no-store", "--json")
    assert code == 0 and json.loads(stdout) == {"accuracy": EXACT, "n": 5, "complete": True}
    code, stdout, stderr = _cli(
        "score", "label", f"data={data}", "--no-store", "--fail-under", "accuracy=0.7"
    )
    assert code == 4 and "fail-under: accuracy 0.6000 < 0.7" in stderr

    root = tmp_path / "root"
    root.mkdir()
    client = TestClient(create_app(ApiSettings(database_url=url, data_root=root)))
    client.base_url = "http://127.0.0.1"  # type: ignore[assignment]

    def post(settings: str) -> Any:
        sent = {"data": ("preds.jsonl", data.read_bytes())}
        return client.post("/api/score/label", files=sent, data={"settings": settings})

    answer = post('{"ignore_case": false}')
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["metrics"] == {"accuracy": EXACT, "n": 5}
    assert (body["system"], body["failed"], body["files"]) == ("label", False, ["summary.json"])
    assert body["signature"] == {"ignore_case": False} and body["intervals"] == {}
    api_id = body["run_id"]
    [kept] = (root / "fieldcheck-runs").iterdir()  # the upload and the run folder, kept
    assert (kept / "inputs" / "data" / "preds.jsonl").read_bytes() == data.read_bytes()
    assert json.loads((kept / "run" / "summary.json").read_text())["accuracy"] == EXACT

    same = post('{"ignore_case": true}').json()  # the CLI's inputs and settings: its metrics
    store = Store(url)
    cli_run = store.get_run(cli_id)
    assert cli_run is not None and same["metrics"] == cli_run.metrics == {
        "accuracy": IGNORING_CASE,
        "n": 5,
    }
    api_run = store.get_run(api_id)
    assert api_run is not None and (api_run.system, api_run.model) == ("label", "preds")
    store.close()

    code, stdout, _ = _cli("runs", "compare", cli_id, api_id, "--json")
    assert code == 0
    [accuracy] = json.loads(stdout)["metrics"]
    assert [v["estimate"] for v in accuracy["values"]] == [IGNORING_CASE, EXACT]
    failed = client.get(f"/api/runs/{api_id}/items", params={"failed": "true"}).json()
    assert [i["key"] for i in failed["items"]] == ["b", "e"]  # e fails when case counts
    page = client.get(f"/runs/{api_id}").text
    assert "accuracy" in page and "0.6000" in page and "bird" in page
    # without ``rescore`` and ``import_folder`` (core.Rescores, core.Imports) it says so
    code, _, stderr = _cli("runs", "rescore", cli_id)
    assert code == 2 and "label runs cannot be re-scored (only json and slots" in stderr
    code, _, stderr = _cli("runs", "import", str(out))
    assert code == 2 and "label runs cannot be imported" in stderr


def test_the_api_refuses_what_the_fourth_system_cannot_score(
    label_system: LabelSystem, tmp_path: Path
) -> None:
    """Unknown system 404 naming the known ones; a role it does not take, one missing, a
    setting or a line it refuses 422 naming it (the upload's name, never the server's path),
    its uploads removed again; no data root 403."""
    data = _labels(tmp_path)
    root = tmp_path / "root"
    root.mkdir()
    url = f"sqlite:///{tmp_path / 'label.sqlite3'}"
    client = TestClient(create_app(ApiSettings(database_url=url, data_root=root)))
    client.base_url = "http://127.0.0.1"  # type: ignore[assignment]
    sent = {"data": ("preds.jsonl", data.read_bytes())}

    unknown = client.post("/api/score/nope", files=sent)
    assert unknown.status_code == 404
    assert unknown.json() == {
        "detail": "no system 'nope' (known: json, slots, numeric, label)",
        "field": "system",
    }
    other = client.post("/api/score/label", files={**sent, "gold": ("g.jsonl", b"{}")})
    assert other.status_code == 422
    assert other.json() == {"detail": "label has no input gold (it takes data)", "field": "gold"}
    none = client.post("/api/score/label", files={"x": ("g.jsonl", b"{}")}, data={})
    assert none.json()["field"] == "x"
    missing = client.post("/api/score/label", data={"settings": "{}"})
    assert missing.status_code == 422
    assert missing.json() == {"detail": "label needs data (it takes data)", "field": "data"}
    setting = client.post("/api/score/label", files=sent, data={"settings": '{"ignore_case": 1}'})
    assert setting.status_code == 422
    assert setting.json() == {"detail": "must be true or false", "field": "settings.ignore_case"}
    not_json = client.post("/api/score/label", files=sent, data={"settings": "[1"})
    assert (not_json.status_code, not_json.json()["field"]) == (422, "settings")
    bad = {"data": ("mine.jsonl", b'{"id": "a", "label": "x", "predicted": "x"}\nnot json\n')}
    line = client.post("/api/score/label", files=bad)
    assert line.status_code == 422
    detail = line.json()["detail"]
    assert detail.startswith("mine.jsonl:2: not a record") and str(root) not in detail
    assert list((root / "fieldcheck-runs").iterdir()) == []  # a refused request keeps nothing

    unrooted = TestClient(create_app(ApiSettings(database_url=url)))
    unrooted.base_url = "http://127.0.0.1"  # type: ignore[assignment]
    refused = unrooted.post("/api/score/label", files=sent)
    assert refused.status_code == 403 and "--data-root" in refused.json()["detail"]


def test_the_cli_says_what_the_fourth_system_takes(
    label_system: LabelSystem, tmp_path: Path
) -> None:
    """``fieldcheck score --help`` lists the registered systems with their roles; a wrong
    system, role, file or setting is one usage line, exit 2, nothing written."""
    code, stdout, _ = _cli("score", "--help")
    assert code == 0
    assert 'label (Label accuracy): data: JSONL: one {"id", "label", "predicted"} per line' in (
        " ".join(stdout.split())
    )
    data = _labels(tmp_path)
    out = tmp_path / "out"
    cases = [
        (["nope", f"data={data}"], "SYSTEM: no system 'nope' (known: json, slots, numeric, label)"),
        (["label", str(data)], f"ROLE=FILE: expected ROLE=FILE (got '{data}')"),
        (["label", f"gold={data}"], "gold: label has no input gold (it takes data)"),
        (["label", "gold=x"], "gold: label has no input gold (it takes data)"),  # role first
        (["label"], "data: label needs data (it takes data)"),
        (["label", f"data={tmp_path / 'gone.jsonl'}"], f"data: {tmp_path / 'gone.jsonl'}: no such"),
        (["label", f"data={data}", "--settings", "[1"], "--settings: invalid JSON"),
        (
            ["label", f"data={data}", "--settings", '{"ignore_case": true, "ignore_case": false}'],
            "--settings: the key 'ignore_case' is given twice",
        ),
        (
            ["label", f"data={data}", "--settings", '{"ignore_case": 1}'],
            "ignore_case (in --settings): must be",
        ),
        (["label", f"data={data}", "--fail-under", "f1=0.5"], "METRIC one of accuracy"),
    ]
    for args, line in cases:
        code, stdout, stderr = _cli("score", *args, "--out", str(out))
        assert (code, stdout) == (2, ""), (args, stderr)
        assert line in stderr and stderr.startswith("error: "), (args, stderr)
        assert not out.exists() and not Path(f"{out}.fieldcheck-partial").exists()
    (tmp_path / "s.json").write_text('{"ignore_case": true}')
    code, stdout, _ = _cli(
        "score",
        "label",
        f"data={data}",
        "--settings",
        f"@{tmp_path / 's.json'}",
        "--no-store",
        "--json",
        "--out",
        str(out),
    )
    assert code == 0 and json.loads(stdout)["accuracy"] == IGNORING_CASE


def test_the_roles_and_the_model_label_follow_the_systems_inputs() -> None:
    """Every plain role once, a ``ROLE:NAME`` role once per model at least; the model label is
    the names, else the stem of the system's last role (the model's outputs), in any order."""
    per_model: Any = SimpleNamespace(name="two", inputs=(("gold", "g"), ("pred:NAME", "p")))
    pair: Any = SimpleNamespace(name="pair", inputs=(("data", "d"), ("predictions", "p")))
    core.check_roles(per_model, ["gold", "pred:a", "pred:b"])
    refused = [
        (per_model, ["gold"], "two needs pred:NAME (it takes gold, pred:NAME)", "pred:NAME"),
        (
            per_model,
            ["gold", "pred:"],
            "two has no input pred: (it takes gold, pred:NAME)",
            "pred:",
        ),
        (pair, ["data", "data", "predictions"], "data given twice (give each input once)", "data"),
        (pair, ["predictions"], "pair needs data (it takes data, predictions)", "data"),
    ]
    for system, roles, message, param in refused:
        with pytest.raises(UsageProblem) as caught:
            core.check_roles(system, roles)
        assert (caught.value.message, caught.value.param) == (message, param)
    given = [("predictions", Path("out/model-a.jsonl")), ("data", Path("dev.json"))]
    assert core.model_label(pair, given) == ("model-a", [])
    named = [("gold", Path("g.jsonl")), ("pred:a", Path("x.jsonl")), ("pred:b", Path("y.jsonl"))]
    assert core.model_label(per_model, named) == ("a, b", ["a", "b"])


def test_an_installed_package_adds_a_system_by_its_entry_point(tmp_path: Path) -> None:
    """A package that declares ``[project.entry-points."fieldcheck.systems"] label =
    "labelsys:SYSTEM"`` is found by a fresh ``fieldcheck`` process: scored by ``fieldcheck
    score``, listed by ``runs list --system``; a declared system that cannot be loaded is
    named, and the built-in ones still work."""
    import os
    import subprocess
    import sys

    site = tmp_path / "site"
    (site / "labelsys-0.1.dist-info").mkdir(parents=True)
    (site / "labelsys-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: labelsys\nVersion: 0.1\n"
    )
    (site / "labelsys-0.1.dist-info" / "entry_points.txt").write_text(
        "[fieldcheck.systems]\nlabel = labelsys:SYSTEM\nbroken = labelsys:MISSING\n"
    )
    (site / "labelsys.py").write_text(
        "from test_registry import LabelSystem\nSYSTEM = LabelSystem()\n"
    )
    data = tmp_path / "labels.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"i{n}", "label": g, "predicted": p}) + "\n"
            for n, (g, p) in enumerate(ITEMS)
        )
    )
    paths = [str(site), str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    env["FIELDCHECK_DATABASE_URL"] = f"sqlite:///{tmp_path / 'db.sqlite3'}"

    def fieldcheck(*args: str) -> subprocess.CompletedProcess[str]:
        code = "from fieldcheck._cli.entry import main; main()"
        return subprocess.run(
            [sys.executable, "-c", code, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    scored = fieldcheck("score", "label", f"data={data}", "--out", str(tmp_path / "out"), "--json")
    assert scored.returncode == 0, scored.stderr
    assert json.loads(scored.stdout)["accuracy"] == 0.75  # 3 of the 4 ITEMS right
    listed = fieldcheck("runs", "list", "--system", "label", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["system"] for r in json.loads(listed.stdout)] == ["label"]
    broken = fieldcheck("score", "broken", f"data={data}", "--out", str(tmp_path / "b"))
    assert broken.returncode == 2 and "labelsys:MISSING" in broken.stderr
    assert not (tmp_path / "b").exists()


def test_the_built_in_systems_through_fieldcheck_score_as_their_own_commands(
    tmp_path: Path,
) -> None:
    """A tester's findings on ``fieldcheck score`` with the built-in systems: slots takes a
    model's latency and judge files when given, never needs them, and names the model once;
    json refuses a setting it does not take and a floor on a lower-is-better metric; numeric
    takes the floors its own command takes."""
    slots, numeric, json_dir = (
        ROOT / "examples" / "slots",
        ROOT / "examples" / "numeric",
        ROOT / "examples" / "json",
    )
    gold = slots / "gold.synthetic.jsonl"
    pred = slots / "pred_synthetic-careful.synthetic.jsonl"
    latency = slots / "latency_synthetic-careful.synthetic.jsonl"
    code, stdout, stderr = _cli(
        "score",
        "slots",
        f"gold={gold}",
        f"pred:careful={pred}",
        f"latency:careful={latency}",
        "--out",
        str(tmp_path / "s"),
        "--json",
    )
    assert code == 0, stderr
    f1 = json.loads(stdout)["models"]["careful"]["f1"]
    own = _cli(
        "slots", "score", "--gold", str(gold), "--pred", f"careful={pred}",
        "--latency", f"careful={latency}", "--out", str(tmp_path / "own"), "--json",
    )  # fmt: skip
    assert own[0] == 0 and json.loads(own[1])["models"]["careful"]["f1"] == f1 > 0.9
    stored = [
        r for r in Store().list_runs(system="slots") if r.out_dir == str((tmp_path / "s").resolve())
    ]
    assert [r.model for r in stored] == ["careful"]
    batch = json_dir / "invoices.jsonl"
    refused = [
        (
            ["json", f"batch={batch}", "--settings", '{"bogus": 1}'],
            "bogus (in --settings): json takes the settings",
        ),
        (["json", f"batch={batch}", "--fail-under", "hallucination=0.1"], "lower-is-better"),
        (
            [
                "numeric",
                f"data={numeric / 'data.json'}",
                f"predictions={numeric / 'predictions_model_a.jsonl'}",
                "--fail-under",
                "avg_operations_per_turn=0.5",
            ],
            "METRIC one of",
        ),
    ]
    for args, line in refused:
        code, stdout, stderr = _cli("score", *args, "--out", str(tmp_path / "r"))
        assert code == 2 and line in stderr, (args, stderr)
    assert not (tmp_path / "r").exists()


def test_core_run_refuses_a_system_without_a_model_task_and_roles_it_does_not_run(
    tmp_path: Path, label_system: LabelSystem
) -> None:
    """``core.run`` before anything is read or written: the label system has no ``run_model``
    (its name said), and json's run reads documents first and no ``batch``."""
    from fieldcheck.runner import ModelSpec, Runner

    specs, out = [ModelSpec(name="m", model="m", base_url="http://127.0.0.1:9/v1")], tmp_path / "o"
    with pytest.raises(UsageProblem, match="label runs no model"):
        core.run("label", [("labels", tmp_path)], {}, specs, Runner(), out=out, command="x")
    with pytest.raises(UsageProblem) as found:
        core.run("json", [("batch", tmp_path)], {}, specs, Runner(), out=out, command="x")
    assert found.value.message == "a json run takes documents, schema (got batch)"
    assert not isinstance(label_system, core.Runs) and isinstance(core.get("json"), core.Runs)
    assert not out.exists()


def test_fieldcheck_score_names_a_bad_setting_by_its_key_in_settings(tmp_path: Path) -> None:
    """The systems' checks name their own commands' options (``--bootstrap``, ``--tp``,
    ``--price-in``, ``--gold``); ``fieldcheck score`` has none of them: its usage line names the
    key in ``--settings`` (nested: ``config.weights``) or the input's role (a tester's finding:
    ``error: --bootstrap: ...`` for ``--settings '{"bootstrap": -1}'``)."""
    slots, numeric = ROOT / "examples" / "slots", ROOT / "examples" / "numeric"
    batch = ROOT / "examples" / "json" / "invoices.jsonl"
    json_in = ["json", f"batch={batch}"]
    slots_in = ["slots", f"gold={slots / 'gold.synthetic.jsonl'}"]
    slots_in.append(f"pred:a={slots / 'pred_synthetic-fast.synthetic.jsonl'}")
    numeric_in = ["numeric", f"data={numeric / 'data.json'}"]
    numeric_in.append(f"predictions={numeric / 'predictions_model_a.jsonl'}")
    cases = [
        (json_in, {"bootstrap": -1}, "bootstrap (in --settings): must be a whole number >= 0"),
        (json_in, {"config": {"weights": 3}}, "config.weights (in --settings): weights must be"),
        (slots_in, {"tp": "x"}, "tp (in --settings): 'x' is not one of 'presence'"),
        (slots_in, {"bootstrap": -1}, "bootstrap (in --settings): must be a whole number >= 0"),
        (slots_in, {"seed": -1}, "seed (in --settings): must be a whole number >= 0 (got -1)"),
        (numeric_in, {"seed": -1}, "seed (in --settings): must be a whole number >= 0 (got -1)"),
        (
            numeric_in,
            {"price_in": 1},
            "price_in/price_out (in --settings): give price_in and price_out together",
        ),
        (numeric_in, {"seed": "x"}, "seed (in --settings): must be a whole number >= 0 (got 'x')"),
        (
            ["slots", f"gold={slots / 'gold.synthetic.jsonl'}", f"pred:a={batch}"],
            {},
            "pred:a: ",  # the role as given (it said pred:NAME)
        ),
    ]
    for args, settings, line in cases:
        code, stdout, stderr = _cli(
            "score", *args, "--settings", json.dumps(settings), "--out", str(tmp_path / "r")
        )
        assert code == 2 and stdout == "", (args, stderr)
        assert f"error: {line}" in stderr and "--bootstrap" not in stderr, (args, stderr)
        assert len(stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_fieldcheck_score_names_its_own_out_option_as_itself(tmp_path: Path) -> None:
    """``--out`` is the generic command's own option: a non-empty one is named ``--out``, not a
    key in --settings (a tester's finding: ``out (in --settings): ... holds files``)."""
    out = tmp_path / "r"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    batch = ROOT / "examples" / "json" / "invoices.jsonl"
    code, stdout, stderr = _cli("score", "json", f"batch={batch}", "--out", str(out))
    assert code == 2 and stdout == "", stderr
    assert stderr.startswith("error: --out: ") and "--settings" not in stderr, stderr
    assert (out / "mine.txt").read_text() == "keep"


def test_fieldcheck_score_shows_the_input_problems_its_systems_own_commands_show(
    tmp_path: Path,
) -> None:
    """A tester's finding: ``fieldcheck score SYSTEM`` exited 3 on a bad input line with no
    ``error:`` line; it shows the problems on the one path the systems' own commands use
    (``Scored.problems``): the same lines on stderr, exit 3."""
    slots, numeric = ROOT / "examples" / "slots", ROOT / "examples" / "numeric"

    def with_bad_line(source: Path, line: str) -> Path:
        path = tmp_path / f"bad_{source.name}"
        path.write_text(source.read_text("utf-8") + line + "\n", encoding="utf-8")
        return path

    batch = with_bad_line(ROOT / "examples" / "json" / "invoices.jsonl", '{"id": "x"}')
    pred = with_bad_line(
        slots / "pred_synthetic-fast.synthetic.jsonl",
        '{"user": "u1", "session": "3", "topic": "t", "field": "f", "values": ["a"]}',
    )
    predictions = with_bad_line(
        numeric / "predictions_model_a.jsonl", '{"conversation_id": "x", "turn": "a"}'
    )
    systems = [
        (["json", f"batch={batch}"], ["json", "batch", str(batch)], "record x: field"),
        (
            ["slots", f"gold={slots / 'gold.synthetic.jsonl'}", f"pred:fast={pred}"],
            [
                "slots",
                "score",
                "--gold",
                str(slots / "gold.synthetic.jsonl"),
                "--pred",
                f"fast={pred}",
            ],
            "field 'session': must be a valid integer (got '3')",
        ),
        (
            ["numeric", f"data={numeric / 'data.json'}", f"predictions={predictions}"],
            [
                "numeric",
                "score",
                "--data",
                str(numeric / "data.json"),
                "--predictions",
                str(predictions),
            ],
            "field 'turn'",
        ),
    ]
    for generic, own, problem in systems:
        code, _, stderr = _cli(
            "score", *generic, "--settings", '{"bootstrap": 0}', "--no-store", "--out",
            str(tmp_path / f"g-{generic[0]}"),
        )  # fmt: skip
        shown = [line for line in stderr.splitlines() if line.startswith("error: ")]
        assert code == 3 and len(shown) == 1 and problem in shown[0], (generic, stderr)
        assert str(tmp_path / "bad_") in shown[0]  # file:line, as given
        code, _, stderr = _cli(
            *own, "--bootstrap", "0", "--no-store", "--out", str(tmp_path / f"o-{generic[0]}")
        )
        assert code == 3 and shown == [
            line for line in stderr.splitlines() if line.startswith("error: ")
        ], (own, stderr)

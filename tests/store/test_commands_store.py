"""Every scoring command records its run in the store (issue 11): the run, its inputs and
metrics, one item per record, session or turn; ``--no-store`` records nothing and leaves the
files the same; a store that cannot be written is one warning, not a failed run. JSON commands
use the configuration saved in the store when not given their own."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from runs_data import EXACT, JSON_RECORDS, _jsonl
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck.store import Store

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def scored_runs(store: Store) -> list:  # type: ignore[type-arg]
    return [r for r in store.list_runs() if r.kind == "score"]


def printed_ids(*texts: str) -> set[str]:
    """The run ids a command printed (``run ID``, ``stored as run ID``, ``runs show ID``)."""
    return {m for text in texts for m in re.findall(r"\b([0-9a-f]{12})\b", text)}


def _outputs(out: Path) -> dict[str, bytes]:
    return {
        name: (out / name).read_bytes()
        for name in ("records.jsonl", "errors.jsonl", "fields.csv", "summary.json")
    }


def test_json_batch_records_its_run_and_no_store_records_nothing(tmp_path: Path) -> None:
    batch = _jsonl(tmp_path / "batch.jsonl", JSON_RECORDS)
    strategies = tmp_path / "strategies.json"
    strategies.write_bytes(orjson.dumps(EXACT))
    common = ("--bootstrap", "50", "--strategies", str(strategies))
    code, stdout, _ = cli("json", "batch", str(batch), "--out", str(tmp_path / "a"), *common)
    assert code == 0
    store = Store()
    [run] = scored_runs(store)
    summary = orjson.loads((tmp_path / "a" / "summary.json").read_bytes())
    assert (run.system, run.status, run.model, run.n_items) == ("json", "finished", "batch", 3)
    assert run.metrics["means"] == summary["means"]
    assert run.intervals["accuracy"] == summary["ci"]["accuracy"]
    assert orjson.loads(run.signature) == summary["signature"]
    assert run.inputs[0]["name"] == "batch" and run.out_dir == str((tmp_path / "a").resolve())
    # r2 fails on city, r3 misses the hostile field: the items and their filters
    assert [i.key for i in store.page_items(run.id, failed=True)] == ["r2", "r3"]
    assert [i.key for i in store.page_items(run.id, tag="city")] == ["r2"]
    assert store.items(run.id)[1].result["ground_truth"] == {"name": "Bob", "city": "Rome"}
    assert f"stored as run {run.id}" in stdout

    code, stdout, _ = cli(
        "json", "batch", str(batch), "--out", str(tmp_path / "b"), *common, "--no-store"
    )
    assert code == 0 and "stored as run" not in stdout
    assert [r.id for r in scored_runs(store)] == [run.id]
    assert _outputs(tmp_path / "a") == _outputs(tmp_path / "b")


def test_a_store_that_cannot_be_written_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = _jsonl(tmp_path / "batch.jsonl", JSON_RECORDS)
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{tmp_path}/no/such/dir/s.sqlite3")
    code, stdout, stderr = cli(
        "json", "batch", str(batch), "--out", str(tmp_path / "out"), "--bootstrap", "0"
    )
    assert code == 0, stderr
    # one warning: neither the saved configuration nor the run's record
    assert stderr.count("warning:") == 1 and "the run is not stored" in stderr
    assert "stored as run" not in stdout
    assert len((tmp_path / "out" / "records.jsonl").read_bytes().splitlines()) == 3


def test_json_score_uses_the_saved_strategies_unless_given_or_no_store(tmp_path: Path) -> None:
    Store().put_config("strategies", {"city": "IGNORE"})
    gt, out = tmp_path / "gt.json", tmp_path / "out.json"
    gt.write_bytes(orjson.dumps({"name": "Bob", "city": "Rome"}))
    out.write_bytes(orjson.dumps({"name": "Bob", "city": "Roma"}))

    code, stdout, stderr = cli("json", "score", str(gt), str(out), "--json")
    assert code == 0
    assert orjson.loads(stdout)["fields"]["city"]["strategy"] == "IGNORE"
    assert "using the configuration saved in the store: strategies (1 fields)" in stderr

    code, stdout, stderr = cli("json", "score", str(gt), str(out), "--json", "--no-store")
    assert code == 0 and orjson.loads(stdout)["fields"]["city"]["strategy"] != "IGNORE"
    assert "saved" not in stderr

    given = tmp_path / "given.json"
    given.write_bytes(orjson.dumps({"city": "EXACT"}))
    code, stdout, _ = cli("json", "score", str(gt), str(out), "--json", "--strategies", str(given))
    assert code == 0 and orjson.loads(stdout)["fields"]["city"] == {
        "strategy": "EXACT",
        "similarity": 0.0,
        "score": 0.0,
    }


def test_saved_thresholds_apply_only_where_no_option_is_given(tmp_path: Path) -> None:
    Store().put_config("thresholds", {"fuzzy_threshold": 0.5, "semantic_threshold": 0.6})
    gt, out = tmp_path / "gt.json", tmp_path / "out.json"
    gt.write_bytes(orjson.dumps({"city": "Rome"}))
    out.write_bytes(orjson.dumps({"city": "Roma"}))  # FUZZY similarity 0.75
    strategies = tmp_path / "s.json"
    strategies.write_bytes(orjson.dumps({"city": "FUZZY"}))
    base = ("json", "score", str(gt), str(out), "--json", "--strategies", str(strategies))
    code, stdout, _ = cli(*base)
    assert code == 0 and orjson.loads(stdout)["fields"]["city"]["score"] == 1.0  # 0.75 >= 0.5
    code, stdout, _ = cli(*base, "--fuzzy-threshold", "0.8")
    assert code == 0 and orjson.loads(stdout)["fields"]["city"]["score"] == 0.0  # 0.75 < given 0.8


def test_slots_score_records_a_session_item_per_model(tmp_path: Path) -> None:
    from runs_data import GOLD, PRED_A, PRED_B

    gold = _jsonl(tmp_path / "gold.jsonl", GOLD)
    a, b = _jsonl(tmp_path / "a.jsonl", PRED_A), _jsonl(tmp_path / "b.jsonl", PRED_B)
    out = tmp_path / "out"
    args = ("--gold", str(gold), "--pred", f"a={a}", "--pred", f"b={b}", "--bootstrap", "50")
    code, stdout, stderr = cli("slots", "score", *args, "--out", str(out))
    assert code == 0, stderr
    assert "stored as run" in stdout
    store = Store()
    [run] = scored_runs(store)
    info = orjson.loads((out / "run.json").read_bytes())  # the folder names its stored run
    assert (info["complete"], info["runs"], info["models"]) == (True, [run.id], ["a", "b"])
    metrics = orjson.loads((out / "metrics.json").read_bytes())
    assert (run.system, run.model, run.n_items) == ("slots", "a, b", 4)  # 2 models x 2 sessions
    assert run.metrics["models"]["a"]["f1"] == metrics["models"]["a"]["f1"]
    assert run.intervals["b"] == metrics["models"]["b"]["ci"]
    # a: u1's job differs (work), still a TP under --tp presence; b misses u1's job (an FN)
    assert [i.key for i in store.page_items(run.id, failed=True)] == ["b/u1/1"]
    # failed on work: b alone (a session fails on a topic where it has an FP or FN there)
    assert [i.key for i in store.page_items(run.id, tag="work", failed=True)] == ["b/u1/1"]
    assert [i.key for i in store.page_items(run.id, tag="work", failed=False)] == ["a/u1/1"]
    assert [i.key for i in store.page_items(run.id, model="b")] == ["b/u1/1", "b/u2/1"]
    assert [name for name, _ in [(i["name"], 0) for i in run.inputs]] == [
        "gold",
        "pred:a",
        "pred:b",
    ]
    code, _, _ = cli("slots", "score", *args, "--out", str(tmp_path / "o2"), "--no-store")
    assert code == 0 and len(scored_runs(store)) == 1


def test_every_run_command_records_one_run_per_evaluation(tmp_path: Path) -> None:
    """json run, slots run and numeric evaluate against serve-model (synthetic models): each
    is one run in the store (issue 27), the id it prints, with the summary file's numbers and
    items that keep both the model's call (prompt, raw reply) and the verdicts; --no-store
    adds none."""
    from fieldcheck.serve_model import BackgroundServer, create_app

    examples = ROOT / "examples"
    with BackgroundServer(create_app(latency_ms=0)) as server:
        url = server.base_url
        model = ("--base-url", url, "--model", "careful=synthetic-careful", "--bootstrap", "20")
        code, out, err = cli(
            "json",
            "run",
            str(examples / "json" / "documents.jsonl"),
            "--out",
            str(tmp_path / "json"),
            *model,
        )
        assert code in (0, 3), err
        printed = {"json": printed_ids(out, err)}
        code, out, err = cli(
            "slots",
            "run",
            "--conversations",
            str(examples / "slots" / "conversations.synthetic.jsonl"),
            "--gold",
            str(examples / "slots" / "gold.synthetic.jsonl"),
            "--out",
            str(tmp_path / "slots"),
            *model,
        )
        assert code in (0, 3), err
        printed["slots"] = printed_ids(out, err)
        dev = ROOT.parent / "shared" / "data" / "convfinqa" / "dev.json"
        code, out, err = cli(
            "numeric",
            "evaluate",
            "--data",
            str(dev),
            "--sample-size",
            "3",
            "--out",
            str(tmp_path / "numeric"),
            *model,
        )
        assert code in (0, 3), err
        printed["numeric"] = printed_ids(out, err)
        store = Store()
        listed = store.list_runs()
        runs = {r.system: r for r in listed}
        assert len(listed) == 3 and sorted(runs) == ["json", "numeric", "slots"]
        assert {r.kind for r in listed} == {"run"} and {r.status for r in listed} == {"finished"}
        assert printed == {name: {run.id} for name, run in runs.items()}
        json_summary = orjson.loads((tmp_path / "json" / "careful" / "summary.json").read_bytes())
        assert runs["json"].metrics["means"] == json_summary["means"]
        assert runs["json"].n_items == json_summary["records"]
        slots_metrics = orjson.loads((tmp_path / "slots" / "metrics.json").read_bytes())
        assert (
            runs["slots"].metrics["models"]["careful"]["f1"]
            == (slots_metrics["models"]["careful"]["f1"])
        )
        statistics = orjson.loads((tmp_path / "numeric" / "statistics.json").read_bytes())
        assert runs["numeric"].metrics["num_turns"] == statistics["num_turns"]
        assert runs["numeric"].n_items == statistics["num_turns"]
        verdicts = {"json": "fields", "slots": "counts", "numeric": "numerical_match"}
        for system, run in runs.items():
            item = store.page_items(run.id, limit=1)[0].result
            [call] = item["call"]["calls"][:1]
            assert verdicts[system] in item, system  # the scored row
            assert call["text"] and call["attempts"] >= 1, system  # the raw reply
            assert call["messages"][-1]["role"] == "user", system  # the prompt

        code, _, err = cli(
            "json",
            "run",
            str(examples / "json" / "documents.jsonl"),
            "--out",
            str(tmp_path / "json2"),
            *model,
            "--no-store",
        )
        assert code in (0, 3), err
        assert len(store.list_runs()) == 3


def test_the_demos_serve_command_opens_its_own_store() -> None:
    import shlex

    from fieldcheck._demo import serve_command

    words = shlex.split(serve_command("sqlite:////tmp/demo out/fieldcheck.sqlite3"))
    assert words[0] == "FIELDCHECK_DATABASE_URL=sqlite:////tmp/demo out/fieldcheck.sqlite3"
    assert words[1].endswith("fieldcheck") and words[2:] == ["serve"]
    secret = serve_command("postgresql+psycopg://me:s3cret@db.example/fc")
    assert "s3cret" not in secret and "FIELDCHECK_DATABASE_URL" in secret


def _writer_pids(parent: int) -> list[int]:
    """The pool processes (``fieldcheck._util.executor.LocalPool``) started by ``parent``."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == parent and b"multiprocessing.spawn" in cmdline:
            pids.append(int(stat.parent.name))
    return pids


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


# ``json batch`` whose recorder, once a part written by its pool process is counted in the store,
# says so (the file named by FIELDCHECK_TEST_COUNTED) and waits there, once, for a signal: the test
# signals a run certainly in the middle of writing, whatever the machine's load.
_HELD_BATCH = """
import os, sys, time
from pathlib import Path
from fieldcheck.store._recorder import RunRecorder
counted = RunRecorder._counted
said = Path(os.environ["FIELDCHECK_TEST_COUNTED"])
def held(self, written):
    counted(self, written)
    if not said.exists() and self.store.get_run(self.run.id).n_items:
        said.touch()  # once: the stop's own counting goes on
        while True:  # until the test's signal raises here; not pause(), which a signal landing
            time.sleep(0.05)  # just before it would leave waiting for good
RunRecorder._counted = held
from fieldcheck._cli.main import main
sys.argv = ["fieldcheck", *sys.argv[1:]]
main()
"""


@pytest.mark.slow
def test_a_ctrl_c_stops_the_pool_and_keeps_the_items_written(tmp_path: Path) -> None:
    """json batch of 16 MiB (its items written by a pool process from the start), stopped by
    SIGINT once items are in the store: exit 130, the run interrupted with the items stored so
    far, the pool's process stopped; SIGTERM (timeout, a cancelled CI job) the same; a run
    killed outright leaves no pool process behind."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from fieldcheck.store._recorder import PROCESS_INPUT_BYTES

    data = tmp_path / "big.jsonl"
    gt = {"a": "x" * 150, "b": [1, 2], "c": "Osaka"}
    with data.open("wb") as handle:
        i = 0
        while handle.tell() < 2 * PROCESS_INPUT_BYTES:  # several tasks (TASK_BYTES) of items
            output = gt if i % 3 else {**gt, "b": [1, 3]}  # wrong, with no model to load
            handle.write(orjson.dumps({"id": i, "ground_truth": gt, "output": output}) + b"\n")
            i += 1
    url = f"sqlite:///{tmp_path}/s.sqlite3"
    command = [sys.executable, "-c", _HELD_BATCH, "json", "batch", str(data)]
    store = Store(url)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        out, counted = tmp_path / f"out{sig}", tmp_path / f"counted{sig}"
        env = {
            **os.environ,
            "FIELDCHECK_DATABASE_URL": url,
            "FIELDCHECK_TEST_COUNTED": str(counted),
        }
        proc = subprocess.Popen(
            [*command, "--out", str(out)], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 120  # only against a hang: the run waits for the signal
        while not counted.exists():
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, f"{sig!r}: no part was counted"
            time.sleep(0.05)
        writers = _writer_pids(proc.pid)
        [run] = store.list_runs(system="json")
        assert writers and run.status == "running" and run.n_items > 0
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=120)
        run = store.list_runs(system="json")[0]
        if sig != signal.SIGKILL:
            assert proc.returncode == 130, stderr
            assert "interrupted" in stderr and not list(out.glob("*.fieldcheck-tmp-*"))
            assert run.status == "interrupted" and 0 < run.n_items < i
            assert store.count_items(run.id) == run.n_items
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(map(_gone, writers)):
            time.sleep(0.05)
        assert all(map(_gone, writers))  # stopped with its run, or at the end of its input
        store.delete_run(run.id)
    store.close()


@pytest.mark.parametrize("system", ["slots", "numeric"])
def test_a_run_whose_folder_cannot_be_put_in_place_is_stored_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, system: str
) -> None:
    """--out filled by someone else during the run: the rename into place fails, exit 1, the
    intruder's file is kept, and the stored run is ``failed``: the folder is put in place
    before the store says ``finished`` (a tester's finding: slots stored ``finished`` beside
    exit 1)."""
    from runs_data import GOLD, PRED_A

    from fieldcheck.reports import RunFolder

    real_finish = RunFolder.finish
    out = tmp_path / "out"

    def filled_first(folder: RunFolder) -> None:
        out.mkdir(exist_ok=True)
        (out / "intruder.txt").write_text("mine")
        real_finish(folder)

    monkeypatch.setattr(RunFolder, "finish", filled_first)
    if system == "slots":
        gold, a = _jsonl(tmp_path / "gold.jsonl", GOLD), _jsonl(tmp_path / "a.jsonl", PRED_A)
        args = ["slots", "score", "--gold", str(gold), "--pred", f"a={a}"]
    else:
        examples = ROOT / "examples" / "numeric"
        args = ["numeric", "score", "--data", str(examples / "data.json")]
        args += ["--predictions", str(examples / "predictions_model_a.jsonl")]
    code, stdout, stderr = cli(*args, "--bootstrap", "20", "--out", str(out))
    assert code == 1, stderr
    assert (
        f"cannot write {out}: it was filled during the run; the complete run is in "
        f"{out}.fieldcheck-partial" in " ".join(stderr.split())
    )
    assert [p.name for p in out.iterdir()] == ["intruder.txt"]
    assert (out / "intruder.txt").read_text() == "mine"
    assert "stored as run" not in stdout
    [run] = scored_runs(Store())
    assert (run.system, run.status) == (system, "failed")


def test_a_ctrl_c_while_the_folder_is_put_in_place_keeps_the_run_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real SIGINT just as the complete folder is renamed into place: the folder and the
    stored run are finished together (metrics kept), then the command stops with 130 (a
    tester's finding: the folder was complete, its stored run ``interrupted`` without
    metrics)."""
    import os
    import signal

    from fieldcheck.reports import RunFolder

    real_finish = RunFolder.finish

    def interrupted_first(folder: RunFolder) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        real_finish(folder)

    monkeypatch.setattr(RunFolder, "finish", interrupted_first)
    data, out = _jsonl(tmp_path / "d.jsonl", JSON_RECORDS), tmp_path / "out"
    code, _, stderr = cli("json", "batch", str(data), "--bootstrap", "0", "--out", str(out))
    assert code == 130, stderr
    assert orjson.loads((out / "run.json").read_bytes())["complete"] is True
    [run] = scored_runs(Store())
    assert run.status == "finished" and run.metrics["means"]["rqs"] is not None


def _scoring_args(system: str, tmp_path: Path) -> list[str]:
    """A small scoring command of ``system`` (its own inputs under ``tmp_path``)."""
    from runs_data import GOLD, PRED_A

    if system == "json":
        return ["json", "batch", str(_jsonl(tmp_path / "d.jsonl", JSON_RECORDS))]
    if system == "slots":
        gold, a = _jsonl(tmp_path / "gold.jsonl", GOLD), _jsonl(tmp_path / "a.jsonl", PRED_A)
        return ["slots", "score", "--gold", str(gold), "--pred", f"a={a}"]
    examples = ROOT / "examples" / "numeric"
    return [
        *("numeric", "score", "--data", str(examples / "data.json")),
        *("--predictions", str(examples / "predictions_model_a.jsonl")),
    ]


@pytest.mark.parametrize("system", ["json", "slots", "numeric"])
def test_a_resumed_scoring_finishes_its_interrupted_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, system: str
) -> None:
    """A scoring command stopped by Ctrl-C once its items are stored, then the same command
    again (the folder continued): the store holds one run, the interrupted one finished under
    its id with the items once (a tester's finding: the interrupted run stayed beside a new
    finished one)."""
    from fieldcheck.core import _pipeline

    real = _pipeline.finish_run

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    args = [*_scoring_args(system, tmp_path), "--bootstrap", "20", "--out", str(tmp_path / "o")]
    monkeypatch.setattr(_pipeline, "finish_run", interrupted)
    code, _, stderr = cli(*args)
    assert code == 130, stderr
    [first] = scored_runs(Store())
    assert first.status == "interrupted" and first.n_items > 0
    partial = orjson.loads((tmp_path / "o.fieldcheck-partial" / "run.json").read_bytes())
    assert partial["runs"] == [first.id] and partial["complete"] is False

    monkeypatch.setattr(_pipeline, "finish_run", real)
    code, stdout, stderr = cli(*args)
    assert code == 0, stderr
    [run] = scored_runs(Store())
    assert (run.id, run.status, run.n_items) == (first.id, "finished", first.n_items)
    assert printed_ids(stdout) == {run.id} and run.metrics
    assert Store().count_items(run.id) == run.n_items
    assert orjson.loads((tmp_path / "o" / "run.json").read_bytes())["runs"] == [run.id]


def test_serve_on_a_shared_store_without_an_artifacts_root_warns_where_its_items_go(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``fieldcheck serve`` on a PostgreSQL store without FIELDCHECK_ARTIFACTS said nothing, and
    the runs it stored were 410 for every other server of the store (their items in this
    machine's own folder; a new-user trial's finding): it warns at start, naming that folder;
    with FIELDCHECK_ARTIFACTS set, or on a SQLite file, it does not."""
    import socket

    import uvicorn

    served: list[object] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **_: served.append(app))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("FIELDCHECK_ARTIFACTS", raising=False)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    said = {}
    for name, url, artifacts in (
        ("unset", pg_url, None),
        ("set", pg_url, str(tmp_path / "shared")),
        ("sqlite", f"sqlite:///{tmp_path / 's.sqlite3'}", None),
    ):
        monkeypatch.setenv("FIELDCHECK_DATABASE_URL", url)
        if artifacts:
            monkeypatch.setenv("FIELDCHECK_ARTIFACTS", artifacts)
        result = CliRunner().invoke(app, ["serve", "--port", port])
        monkeypatch.delenv("FIELDCHECK_ARTIFACTS", raising=False)
        assert result.exit_code == 0, result.output
        said[name] = " ".join(result.stderr.split())
    assert len(served) == 3
    folder = tmp_path / "xdg" / "fieldcheck" / "artifacts"
    assert said["unset"].startswith(
        f"warning: FIELDCHECK_ARTIFACTS is not set: the items of the runs stored in "
        f"{pg_url} go to {folder} on this machine alone"
    ), said["unset"]
    assert "warning" not in said["set"] and "warning" not in said["sqlite"]
    assert all("serving fieldcheck at" in line for line in said.values())

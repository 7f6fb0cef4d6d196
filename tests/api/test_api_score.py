"""``POST /api/score/json`` (issue 27 item 2): a JSON batch uploaded to the generic route gives
the metrics ``fieldcheck json batch`` gives for the same file, the saved configuration merged by
the json system's one rule. Needs the json system's ``prepare``/``score`` (the lead's branch):
on a branch without them it fails at the first assertion (the route answers 422/500)."""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

import httpx
import pytest
from live_server import Serve
from test_api import cli_json, write

from chat_server import ChatServer
from walkthrough import WALK_AIO, WALK_GT, WALK_STRATEGIES


def test_api_score_json_needs_json_prepare_and_gives_the_cli_numbers(
    serve: Serve, judge: ChatServer, tmp_path: Path
) -> None:
    live = serve()
    rows = [
        {"id": "walk", "ground_truth": WALK_GT, "output": WALK_AIO},  # RQS 0.7375
        # EXACT: case counts: accuracy 0, completeness 1, RQS 0.25 + 0.15 = 0.4
        {"id": "same", "ground_truth": {"email": "a@b.c"}, "output": {"email": "A@b.c"}},
    ]
    data = write(tmp_path / "walk.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    strategies = write(tmp_path / "s.json", WALK_STRATEGIES)
    expected = cli_json(
        judge, "json", "batch", str(data), "--out", str(tmp_path / "out"),
        "--strategies", str(strategies), "--bootstrap", "50", "--no-store", "--json",
    )  # fmt: skip
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        http.put("/api/config/strategies", json=WALK_STRATEGIES)  # saved: settings leave it out
        answer = http.post(
            "/api/score/json",
            files={"batch": ("walk.jsonl", data.read_bytes())},
            data={"settings": json.dumps({"bootstrap": 50})},
        )
        assert answer.status_code == 200, answer.text
        body = answer.json()
        run = http.get(f"/api/runs/{body['run_id']}").json()
    means = body["metrics"]["means"]
    assert math.isclose(means["rqs"], (0.7375 + 0.4) / 2)
    assert (means["accuracy"], means["completeness"]) == ((1.0 + 0.0) / 2, (0.75 + 1.0) / 2)
    assert body["metrics"]["means"] == expected["means"]
    assert body["intervals"] == expected["ci"]
    assert (body["system"], body["failed"]) == ("json", False)
    assert {"summary.json", "records.jsonl", "fields.csv"} <= set(body["files"])
    assert (run["system"], run["n_items"], run["metrics"]) == ("json", 2, body["metrics"])
    assert run["settings"]["config"]["strategies"] == {
        k: v.upper() for k, v in WALK_STRATEGIES.items()
    }


def test_api_score_refuses_another_matcher_or_judge_and_never_calls_it(
    serve: Serve, judge: ChatServer, chat_server: Any, tmp_path: Path
) -> None:
    """Settings naming another matcher or judge than the server's are a 422 naming the key (they
    were scored with the server's judge in silence; a tester's finding): the other judge is never
    called. The server's own matcher settings, as `runs show` gives them, are taken."""
    asked: list[str] = []
    other = chat_server(lambda body: asked.append("called") or "0.1")
    live = serve()
    line = {"id": 1, "ground_truth": {"name": "John Smith"}, "output": {"name": "John Smyth"}}
    batch = json.dumps(line).encode() + b"\n"
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        for key, value in (("judge_base_url", other.base_url), ("judge_model", "other-judge")):
            config = {"strategies": {"name": "FUZZY"}, "matcher": "llm", key: value}
            answer = http.post(
                "/api/score/json",
                files={"batch": ("one.jsonl", batch)},
                data={"settings": json.dumps({"bootstrap": 0, "config": config})},
            )
            assert answer.status_code == 422, answer.text
            assert answer.json()["field"] == f"settings.config.{key}"
            assert "a request cannot choose the matcher or its judge" in answer.json()["detail"]
        settings = {"bootstrap": 0, "config": {"strategies": {"name": "FUZZY"}}}
        answer = http.post(
            "/api/score/json",
            files={"batch": ("one.jsonl", batch)},
            data={"settings": json.dumps(settings)},
        )
        assert answer.status_code == 200, answer.text
        run = http.get(f"/api/runs/{answer.json()['run_id']}").json()
        stored = run["settings"]["config"]
        assert (stored["judge_base_url"], stored["judge_model"]) == (judge.base_url, "judge-1")
        again = http.post(  # the stored settings as they are: the server's judge, taken
            "/api/score/json",
            files={"batch": ("one.jsonl", batch)},
            data={"settings": json.dumps(run["settings"])},
        )
        assert again.status_code == 200, again.text
    assert asked == []


_SLOTS = {
    role: (f"{role[:4]}.jsonl", json.dumps(line | {"values": [value]}).encode() + b"\n")
    for role, value in (("gold", "Ann"), ("pred:a", "Anne"))
    for line in [{"user": "u", "session": 1, "topic": "t", "field": "name"}]
}


@pytest.mark.parametrize(
    "settings",
    [
        {"judge_model": "any", "judge_base_url": "LOGGER"},
        {"judge_model": "judge-1", "judge_base_url": "LOGGER"},
        {"judge_model": "other", "judge_base_url": "SERVER'S"},
        {"api_key": "sk-mine", "base_url": "LOGGER"},
    ],
)
@pytest.mark.parametrize("server_judge", [False, True])
def test_api_score_slots_refuses_a_judge_url_or_key_and_never_calls_it(
    serve: Serve,
    judge: ChatServer,
    chat_server: Any,
    monkeypatch: pytest.MonkeyPatch,
    settings: dict[str, str],
    server_judge: bool,
) -> None:
    """slots' own settings ``judge_base_url``/``judge_model`` naming another judge than the
    server's, or any URL- or key-like setting, are a 422 as json's config is: the server called
    the URL a request named, sending its own OPENAI_API_KEY (a tester's finding). The logging
    server receives nothing, whether or not the server has a judge of its own."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server-secret")
    logger = chat_server(lambda body: "0.9")
    url = {"LOGGER": logger.base_url, "SERVER'S": judge.base_url}
    given = {k: url.get(v, v) for k, v in settings.items()}
    own = {} if server_judge else {"matcher": "local", "judge_base_url": None, "judge_model": None}
    live = serve(**own)
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        answer = http.post("/api/score/slots", files=_SLOTS, data={"settings": json.dumps(given)})
        assert answer.status_code == 422, answer.text
        field = answer.json()["field"]
        assert field in {f"settings.{k}" for k in settings}
        assert "a request cannot choose the matcher or its judge" in answer.json()["detail"]
        assert http.get("/api/runs").json()["total"] == 0  # nothing began
    assert (logger.requests, logger.headers) == ([], [])
    assert judge.requests == []


def test_api_score_slots_takes_the_servers_own_judge(serve: Serve, judge: ChatServer) -> None:
    """Settings naming the server's own judge (as `runs show` gives them) are taken: the slots
    are judged by it."""
    live = serve()
    given = {"judge_model": "judge-1", "judge_base_url": judge.base_url, "bootstrap": 0}
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        answer = http.post("/api/score/slots", files=_SLOTS, data={"settings": json.dumps(given)})
    assert answer.status_code == 200, answer.text
    assert len(judge.chat_requests) == 1


@pytest.mark.parametrize(
    ("system", "files"),
    [
        (
            "json",
            {"batch": ("b.jsonl", b'{"id": "a", "ground_truth": {"x": 1}, "output": {"x": 1}}\n')},
        ),
        ("slots", {"gold": ("g.jsonl", b"{}\n"), "pred:a": ("p.jsonl", b"{}\n")}),
    ],
)
@pytest.mark.parametrize(
    ("key", "value", "top"),
    [("bootstrap", 100_000_000, 100_000), ("seed", 2**64, 2**64 - 1), ("seed", -1, 2**64 - 1)],
)
def test_api_score_refuses_a_bootstrap_or_seed_past_the_apis_limit(
    serve: Serve, system: str, files: dict[str, Any], key: str, value: int, top: int
) -> None:
    """``settings.bootstrap`` above 100,000 (the other routes' limit) is a 422 before any work:
    10**8 resamples made a 55 GiB array and a 500, 10**9 grew the server to 15 GB (a tester's
    finding); a seed past 2**64 - 1 (the CLI's limit) likewise."""
    live = serve()
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        answer = http.post(
            f"/api/score/{system}", files=files, data={"settings": json.dumps({key: value})}
        )
        assert answer.status_code == 422, answer.text
        assert answer.json()["field"] == f"settings.{key}"
        assert answer.json()["detail"] == (
            f"settings.{key}: must be a whole number from 0 to {top} (got {value})"
        )
        assert http.get("/api/runs").json()["total"] == 0  # nothing began


def test_api_score_takes_the_seeds_the_cli_takes(serve: Serve) -> None:
    """A seed above 2**32 - 1 is scored and stored as given, as ``--seed`` takes it (one
    product: the API refused what the CLI took)."""
    live = serve()
    batch = b'{"id": "a", "ground_truth": {"x": 1}, "output": {"x": 2}}\n'
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        answer = http.post(
            "/api/score/json",
            files={"batch": ("b.jsonl", batch)},
            data={"settings": json.dumps({"seed": 2**64 - 1, "bootstrap": 10})},
        )
        assert answer.status_code == 200, answer.text
        run = http.get(f"/api/runs/{answer.json()['run_id']}").json()
    assert run["settings"]["seed"] == 2**64 - 1


def test_api_score_names_a_bad_line_by_the_file_sent_never_the_server_path(
    serve: Serve, tmp_path: Path
) -> None:
    """A bad line's message in the answer's metrics names the upload as the client sent it
    (``walk.jsonl:2``), not where the server keeps it under its data root (docs/api.md: a
    message never holds a server path the client did not send; a tester's finding)."""
    live = serve()
    good = {"id": "a", "ground_truth": {"x": 1}, "output": {"x": 1}}
    data = write(tmp_path / "walk.jsonl", json.dumps(good) + "\n{not json\n")
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        answer = http.post(
            "/api/score/json",
            files={"batch": ("walk.jsonl", data.read_bytes())},
            data={"settings": json.dumps({"bootstrap": 0})},
        )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["failed"] is True
    assert "walk.jsonl:2" in json.dumps(body["metrics"])
    assert str(tmp_path / "data") not in answer.text


def test_api_score_names_a_bad_setting_by_its_key_and_never_a_cli_option(
    serve: Serve, tmp_path: Path
) -> None:
    """A refused setting is the 422's field ``settings.KEY`` and its message names the key, not
    the system's own command's option (``--bootstrap``; a tester's finding)."""
    live = serve()
    data = write(tmp_path / "b.jsonl", json.dumps({"id": "a", "ground_truth": {}}) + "\n")
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        answer = http.post(
            "/api/score/json",
            files={"batch": ("b.jsonl", data.read_bytes())},
            data={"settings": json.dumps({"bootstrap": -1})},
        )
    assert answer.status_code == 422, answer.text
    body = answer.json()
    assert body["field"] == "settings.bootstrap", body
    assert "--" not in json.dumps(body)


def test_api_score_refuses_a_setting_given_twice(serve: Serve, tmp_path: Path) -> None:
    """A key given twice in ``settings`` (a strategy at any depth, too) is a 422 naming it: the
    last one would otherwise win without a word, as ``--settings`` refuses it."""
    live = serve()
    data = write(tmp_path / "b.jsonl", json.dumps({"id": "a", "ground_truth": {}}) + "\n")
    text = '{"bootstrap": 0, "config": {"strategies": {"name": "FUZZY", "name": "EXACT"}}}'
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        answer = http.post(
            "/api/score/json",
            files={"batch": ("b.jsonl", data.read_bytes())},
            data={"settings": text},
        )
        runs = http.get("/api/runs").json()["runs"]
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == "settings", answer.text
    assert "settings: the key 'name' is given twice" in answer.text
    assert runs == []


def _score_walk(http: httpx.Client, lines: bytes) -> httpx.Response:
    """``lines`` scored by ``POST /api/score/json`` as the upload ``walk.jsonl``, no bootstrap."""
    answer = http.post(
        "/api/score/json",
        files={"batch": ("walk.jsonl", lines)},
        data={"settings": json.dumps({"bootstrap": 0})},
    )
    assert answer.status_code == 200, answer.text
    return answer


def test_the_runs_of_uploads_name_the_files_sent_never_the_data_root(
    serve: Serve, tmp_path: Path
) -> None:
    """``GET /api/runs`` showed an API run's dataset (and inputs, output folder, error lines) as
    the server path of its upload under the data root; they are named as the client sent them:
    the upload by its file name, the run folder relative to the data root, in the list, the run,
    a re-score and the run's page."""
    live = serve()
    root = str((tmp_path / "data").resolve())
    good = {"id": "a", "ground_truth": {"x": 1}, "output": {"x": 1}}
    lines = (json.dumps(good) + "\n{not json\n").encode()
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        generic = _score_walk(http, lines)
        upload = http.post("/api/json/batch?bootstrap=0", files={"file": ("mine.jsonl", lines)})
        assert upload.status_code == 200, upload.text
        listed = http.get("/api/runs")
        run = http.get(f"/api/runs/{generic.json()['run_id']}")
        child = http.post(f"/api/runs/{upload.json()['run_id']}/rescore", json={"bootstrap": 0})
        page = http.get(f"/runs/{generic.json()['run_id']}")
    runs = {r["id"]: r for r in listed.json()["runs"]}
    shown = runs[generic.json()["run_id"]]
    assert shown["dataset"] == "walk.jsonl" and shown["inputs"][0]["path"] == "walk.jsonl"
    assert shown["out_dir"].startswith("fieldcheck-runs/api-json-") and shown["out_dir"].endswith(
        "/run"
    )
    assert runs[upload.json()["run_id"]]["dataset"] == "mine.jsonl"
    assert "walk.jsonl:2" in json.dumps(run.json()["metrics"])
    assert child.status_code == 200 and child.json()["dataset"] == "mine.jsonl"
    assert page.status_code == 200 and "walk.jsonl" in page.text
    for answer in (listed, run, child, page):
        assert root not in answer.text


def test_two_roles_that_clean_to_one_folder_are_kept_apart(serve: Serve, tmp_path: Path) -> None:
    """``pred:gpt 4`` and ``pred:gpt:4`` both clean to the folder ``pred_gpt_4``: with the same
    upload file name the second upload met the first's file (FileExistsError, a 500 that left a
    half-written folder); it is kept in ``pred_gpt_4-2``, as ``slots run`` keeps model folders
    apart, and both models are scored."""
    live = serve()
    slots = Path(__file__).parents[2] / "examples" / "slots"
    sent = [
        ("gold", ("gold.jsonl", (slots / "gold.synthetic.jsonl").read_bytes())),
        ("pred:gpt 4", ("pred.jsonl", (slots / "pred_synthetic-careful.synthetic.jsonl").read_bytes())),
        ("pred:gpt:4", ("pred.jsonl", (slots / "pred_synthetic-eager.synthetic.jsonl").read_bytes())),
    ]  # fmt: skip
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        answer = http.post("/api/score/slots", files=sent, data={"settings": "{}"})
    assert answer.status_code == 200, answer.text
    assert set(answer.json()["metrics"]["models"]) == {"gpt 4", "gpt:4"}
    (folder,) = (tmp_path / "data" / "fieldcheck-runs").iterdir()
    inputs = folder / "inputs"
    assert sorted(p.name for p in inputs.iterdir()) == ["gold", "pred_gpt_4", "pred_gpt_4-2"]
    careful = (slots / "pred_synthetic-careful.synthetic.jsonl").read_bytes()
    assert (inputs / "pred_gpt_4" / "pred.jsonl").read_bytes() == careful


def test_a_side_file_of_an_unknown_model_names_its_role_never_an_option(
    serve: Serve, tmp_path: Path
) -> None:
    """`latency:other` (or `judge:other`) without `pred:other` is a 422 naming that role, its
    message naming the models by role, not `--pred`, on the API and `fieldcheck score slots`;
    `slots score` keeps its own options (a new user's finding: `"field": "latency:NAME"`)."""
    from typer.testing import CliRunner

    from fieldcheck._cli.main import app as cli

    live = serve()
    slots = Path(__file__).parents[2] / "examples" / "slots"
    gold = slots / "gold.synthetic.jsonl"
    pred = slots / "pred_synthetic-careful.synthetic.jsonl"
    side = write(tmp_path / "lat.jsonl", '{"user": "u1", "session": 1, "seconds": 1.5}\n')
    said = "unknown model 'other'; models given with pred:NAME: careful"
    for role in ("latency:other", "judge:other"):
        sent = [
            ("gold", ("gold.jsonl", gold.read_bytes())),
            ("pred:careful", ("pred.jsonl", pred.read_bytes())),
            (role, ("lat.jsonl", side.read_bytes())),
        ]
        with httpx.Client(base_url=live.base_url, timeout=60) as http:
            answer = http.post("/api/score/slots", files=sent, data={"settings": "{}"})
        assert answer.status_code == 422, answer.text
        assert answer.json() == {"detail": said, "field": role}
    runner = CliRunner()
    generic = runner.invoke(
        cli,
        ["score", "slots", f"gold={gold}", f"pred:careful={pred}", f"latency:other={side}",
         "--no-store", "--out", str(tmp_path / "o")],
    )  # fmt: skip
    assert generic.exit_code == 2
    assert f"latency:other: {said}" in " ".join(generic.output.split())
    own = runner.invoke(
        cli,
        ["slots", "score", "--gold", str(gold), "--pred", f"careful={pred}",
         "--latency", f"other={side}", "--no-store", "--out", str(tmp_path / "o2")],
    )  # fmt: skip
    assert own.exit_code == 2
    assert "--latency: unknown model 'other'; models given with --pred: careful" in " ".join(
        own.output.split()
    )


def test_a_strategy_for_a_nested_path_never_applied_is_said_in_every_answer(
    serve: Serve,
) -> None:
    """A saved strategy for `vendor.name` (the Configuration page's "dotted path") is not applied
    without flatten: the evaluate, batch and score answers carry the CLI's warning in
    `warnings`, the Test evaluation page shows it; with flatten, or no such strategy, the
    answers are as before, no `warnings` (a new user's finding: nothing said so)."""
    live = serve()
    truth = {"vendor": {"name": "Acme"}, "total": 3}
    output = {"vendor": {"name": "ACME"}, "total": 3}
    line = json.dumps({"id": "a", "ground_truth": truth, "output": output}) + "\n"
    said = "the strategy config names fields that no ground truth has: 'vendor.name'"
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        plain = http.post("/api/json/evaluate", json={"ground_truth": truth, "output": output})
        assert "warnings" not in plain.json()
        assert http.put("/api/config/strategies", json={"vendor.name": "FUZZY"}).status_code == 200
        one = http.post("/api/json/evaluate", json={"ground_truth": truth, "output": output})
        flat = http.post(
            "/api/json/evaluate", json={"ground_truth": truth, "output": output, "flatten": True}
        )
        batch = http.post("/api/json/batch", files={"file": ("b.jsonl", line.encode())})
        score = http.post(
            "/api/score/json", files={"batch": ("b.jsonl", line.encode())}, data={"settings": "{}"}
        )
        page = http.post(
            "/evaluate",
            files={"ground_truth": (None, json.dumps(truth)), "output": (None, json.dumps(output))},
        )
    api_line = f"{said} (nested paths need flatten)"
    assert one.status_code == 200 and one.json()["warnings"] == [api_line]
    same = {k: v for k, v in plain.json().items() if k != "signature"}
    assert {k: v for k, v in one.json().items() if k not in ("warnings", "signature")} == same
    assert flat.status_code == 200 and "warnings" not in flat.json()
    assert batch.status_code == 200 and batch.json()["warnings"] == [api_line]
    assert score.status_code == 200 and score.json()["warnings"] == [api_line]
    assert page.status_code == 200
    shown = html.unescape(page.text)
    assert f"warning: {said} (nested paths need flatten, which this page does not do)" in shown


def test_the_api_export_names_the_upload_never_the_data_root_and_no_error_type_is_cut_mid_word(
    serve: Serve, tmp_path: Path
) -> None:
    """``GET /api/runs/ID/export`` gave a bad line's item with the server's data-root path of the
    upload (``.../fieldcheck-runs/.../inputs/batch/walk.jsonl``) and its ``error_type`` cut at 32
    characters mid-word (``invalid JSON: unexpected end of ``; a tester's finding): the export
    names the upload as the client sent it, and an error type is the reason's head."""
    live = serve()
    root = str((tmp_path / "data").resolve())
    good = {"id": "a", "ground_truth": {"x": 1}, "output": {"x": 1}}
    lines = (json.dumps(good) + '\n{"id": "b", "ground\n').encode()
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        run_id = _score_walk(http, lines).json()["run_id"]
        exports = [http.get(f"/api/runs/{run_id}/export?format={f}") for f in ("jsonl", "csv")]
    rows = [json.loads(line) for line in exports[0].text.splitlines()]
    (bad,) = [r for r in rows if r["error_type"]]
    assert bad["error_type"] == "invalid JSON", bad
    assert bad["result"]["error"]["file"] == "walk.jsonl", bad
    assert bad["result"]["error"]["message"].startswith("walk.jsonl:2: invalid JSON"), bad
    assert "walk.jsonl:2: invalid JSON" in exports[1].text
    for export in exports:
        assert export.status_code == 200 and root not in export.text, export.text


def test_a_bad_line_of_a_slots_or_numeric_upload_is_located_in_the_answer(
    serve: Serve, tmp_path: Path
) -> None:
    """A slots or numeric upload with a bad line answered ``failed: true`` and never said which
    line (json's answer has it in ``metrics.errors``; a new-user trial's finding): the answer's
    ``errors`` holds the CLI's ``error:`` line (file as sent, line, field), no server path."""
    live = serve()
    root = str((tmp_path / "data").resolve())
    examples = Path(__file__).parents[2] / "examples"
    gold = (examples / "slots" / "gold.synthetic.jsonl").read_bytes().splitlines(keepends=True)
    bad = {"user": "u1", "session": "three", "topic": "basic_info", "field": "x", "values": ["a"]}
    gold_text = b"".join(gold[:3]) + json.dumps(bad).encode() + b"\n"
    pred = (examples / "slots" / "pred_synthetic-careful.synthetic.jsonl").read_bytes()
    preds = (examples / "numeric" / "predictions_model_a.jsonl").read_bytes().splitlines(True)
    pred_text = b"".join(preds[:3]) + b'{"id": 5, "bogus\n' + b"".join(preds[3:])
    data = (examples / "numeric" / "data.json").read_bytes()
    settings = {"settings": json.dumps({"bootstrap": 0})}
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        slots = http.post(
            "/api/score/slots",
            files=[("gold", ("bad_gold.jsonl", gold_text)), ("pred:careful", ("p.jsonl", pred))],
            data=settings,
        )
        numeric = http.post(
            "/api/score/numeric",
            files=[("data", ("data.json", data)), ("predictions", ("bad_pred.jsonl", pred_text))],
            data=settings,
        )
    for answer in (slots, numeric):
        assert answer.status_code == 200 and answer.json()["failed"] is True, answer.text
        assert root not in answer.text
    (slots_error,) = slots.json()["errors"]
    assert slots_error.startswith("bad_gold.jsonl:4: field 'session'"), slots_error
    (numeric_error,) = numeric.json()["errors"]
    assert numeric_error.startswith("bad_pred.jsonl:4:"), numeric_error


def test_a_numeric_setting_named_like_a_role_is_named_as_a_setting_in_the_cli_words(
    serve: Serve,
) -> None:
    """numeric's settings ``data`` or ``predictions`` were answered ``"field": "data"`` (the
    upload's role: the user looked at a good file) in pydantic's words (``Extra inputs are not
    permitted``; a new-user trial's finding): a refused setting is ``settings.KEY``, an unknown
    one with the settings numeric takes, as json and slots say it, a bad value ``must be``."""
    live = serve()
    examples = Path(__file__).parents[2] / "examples" / "numeric"
    files = [
        ("data", ("data.json", (examples / "data.json").read_bytes())),
        ("predictions", ("p.jsonl", (examples / "predictions_model_a.jsonl").read_bytes())),
    ]
    answers = {}
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        for given in ({"data": "x"}, {"predictions": 1}, {"sample_size": "some"}):
            answer = http.post(
                "/api/score/numeric", files=files, data={"settings": json.dumps(given)}
            )
            assert answer.status_code == 422, answer.text
            answers[next(iter(given))] = answer.json()
    taken = "numeric takes the settings split, sample_size, seed, price_in, price_out, bootstrap"
    assert answers["data"] == {"detail": f"{taken} (got data)", "field": "settings.data"}
    assert answers["predictions"]["field"] == "settings.predictions"
    assert answers["sample_size"] == {
        "detail": "must be a valid integer (got 'some')",
        "field": "settings.sample_size",
    }


def test_a_bad_pred_file_is_named_by_the_role_sent(serve: Serve, tmp_path: Path) -> None:
    """A ``pred:eager`` upload with no valid record was a 422 naming ``"field": "pred:NAME"``,
    not the form field the client sent (a new-user trial's finding)."""
    live = serve()
    slots = Path(__file__).parents[2] / "examples" / "slots"
    sent = [
        ("gold", ("gold.jsonl", (slots / "gold.synthetic.jsonl").read_bytes())),
        ("pred:careful", ("p.jsonl", (slots / "pred_synthetic-careful.synthetic.jsonl").read_bytes())),
        ("pred:eager", ("lat.csv", b"user,session,seconds\nu1,1,1.5\n")),
    ]  # fmt: skip
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        answer = http.post("/api/score/slots", files=sent, data={"settings": "{}"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == "pred:eager", answer.text
    assert answer.json()["detail"].startswith("lat.csv: no valid record"), answer.text


def test_the_run_page_of_a_slots_or_numeric_upload_lists_its_refused_lines(
    serve: Serve, tmp_path: Path
) -> None:
    """The run page (and ``GET /api/runs/{id}``) of a slots or numeric upload with bad lines
    said nothing of them (json's show as items not scored; a new-user trial's finding): it
    lists each one as the CLI prints it (file as stored, line, record, field, reason, value),
    escaped, their count, and the run folder's file that holds them all; no server path."""
    live = serve()
    root = str((tmp_path / "data").resolve())
    examples = Path(__file__).parents[2] / "examples"
    gold = (examples / "slots" / "gold.synthetic.jsonl").read_bytes()
    bad = {"user": "u1", "session": "three", "topic": "basic_info", "field": "x", "values": ["a"]}
    gold_text = gold + json.dumps(bad).encode() + b"\nnot json\n"
    pred = (examples / "slots" / "pred_synthetic-careful.synthetic.jsonl").read_bytes()
    preds = (examples / "numeric" / "predictions_model_a.jsonl").read_bytes()
    hostile = {"conversation_id": "<b>x</b>", "turn": 0, "answer": "1"}
    pred_text = preds + json.dumps(hostile).encode() + b"\n"
    data = (examples / "numeric" / "data.json").read_bytes()
    settings = {"settings": json.dumps({"bootstrap": 0})}
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        slots = http.post(
            "/api/score/slots",
            files=[("gold", ("bad_gold.jsonl", gold_text)), ("pred:careful", ("p.jsonl", pred))],
            data=settings,
        ).json()
        numeric = http.post(
            "/api/score/numeric",
            files=[("data", ("data.json", data)), ("predictions", ("bad_pred.jsonl", pred_text))],
            data=settings,
        ).json()
        runs = {
            name: http.get(f"/api/runs/{a['run_id']}") for name, a in (("s", slots), ("n", numeric))
        }
        pages = {
            name: http.get(f"/runs/{a['run_id']}").text
            for name, a in (("s", slots), ("n", numeric))
        }
    listed = runs["s"].json()["input_problems"]
    assert listed["total"] == 2 and listed["listed_in"] == "errors.jsonl"
    assert listed["problems"][0] == {
        "file": "bad_gold.jsonl",
        "line": 70,
        "record": None,
        "field": "session",
        "reason": "must be a valid integer",
        "value": "'three'",
    }
    assert listed["problems"][1]["line"] == 71
    assert listed["problems"][1]["reason"].startswith("invalid JSON")
    (numeric_problem,) = runs["n"].json()["input_problems"]["problems"]
    assert numeric_problem["file"] == "bad_pred.jsonl" and numeric_problem["record"] == "<b>x</b>"
    assert numeric_problem["field"] == "conversation_id" and numeric_problem["line"] == 52
    assert "2 input problem(s)" in pages["s"] and "<td>must be a valid integer</td>" in pages["s"]
    assert '<code>bad_gold.jsonl</code></td><td class="num">70</td>' in pages["s"]
    assert "<td>&lt;b&gt;x&lt;/b&gt;</td>" in pages["n"] and "<b>x</b>" not in pages["n"]
    for text in (*pages.values(), *(r.text for r in runs.values())):
        assert root not in text


def test_a_very_long_value_is_cut_in_the_item_table_and_folded_on_the_item_page(
    serve: Serve, tmp_path: Path
) -> None:
    """A numeric upload whose question held 40 MB made a run page of 42 MB (its item table's
    cell whole) and an item page Chromium took two minutes to lay out (a new-user trial's
    finding): the table shows the first 300 characters and the length, the item page folds a
    value or text past 10,000 characters (a closed fold is not laid out), still whole in it."""
    live = serve()
    examples = Path(__file__).parents[2] / "examples" / "numeric"
    data = json.loads((examples / "data.json").read_text(encoding="utf-8"))
    first = data["dev"][0]
    question = "how much <b>" + "x" * 20_000 + " end?"
    first["dialogue"]["conv_questions"][0] = question
    preds = (examples / "predictions_model_a.jsonl").read_bytes()
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        answer = http.post(
            "/api/score/numeric",
            files=[
                ("data", ("data.json", json.dumps(data).encode())),
                ("predictions", ("p.jsonl", preds)),
            ],
            data={"settings": json.dumps({"bootstrap": 0})},
        ).json()
        run = answer["run_id"]
        key = f"{first['id']}#0"
        items = http.get(f"/api/runs/{run}/items", params={"limit": 500}).json()["items"]
        (item,) = [i for i in items if i["key"] == key]
        page = http.get(f"/runs/{run}").text
        item_page = http.get(item["href"]).text
    shown = html.escape(question[:300], quote=False) + "… (20017 characters"
    assert shown in page and "x" * 301 not in page
    folded = "<details><summary><figcaption>question · 20017 characters</figcaption>"
    assert folded in item_page
    assert html.escape(question, quote=False) in item_page  # whole, inside the fold

"""The HTTP API against a real uvicorn server on loopback (json-evaluation.md's API): the same
numbers as the CLI, the saved configuration, validation messages, 413, the data root, the token."""

from __future__ import annotations

import hashlib
import html
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
from live_server import Serve
from typer.testing import CliRunner

from chat_server import ChatServer, Reply
from fieldcheck._cli.main import app as cli
from fieldcheck.api import ApiSettings, check_binding, create_app, is_loopback, needs_token
from walkthrough import WALK_AIO, WALK_GT, WALK_STRATEGIES

ALLOWED = "EXACT, FUZZY, SEMANTIC, IGNORE"


def walk_body(**extra: Any) -> dict[str, Any]:
    return {"ground_truth": WALK_GT, "output": WALK_AIO, **extra}


def cli_json(judge: ChatServer, *args: str) -> Any:
    result = CliRunner().invoke(
        cli,
        [*args, "--matcher", "llm", "--judge-base-url", judge.base_url, "--judge-model", "judge-1"],
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def write(path: Path, value: Any) -> Path:
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    return path


def batch_lines() -> str:
    """Three records: the walkthrough (RQS 0.7375), a perfect one (1.0), a text output (0.0)."""
    rows = [
        {"id": "walk", "ground_truth": WALK_GT, "output": WALK_AIO},
        {"id": "same", "ground_truth": {"email": "a@b.c"}, "output": {"email": "A@b.c"}},
        {"id": "text", "ground_truth": {"email": "a@b.c"}, "output": "no JSON here"},
    ]
    return "".join(json.dumps(r) + "\n" for r in rows)


# evaluate --------------------------------------------------------------------------------------
def test_evaluate_is_the_cli_score_json(
    client: httpx.Client, judge: ChatServer, tmp_path: Path
) -> None:
    response = client.post("/api/json/evaluate", json=walk_body(field_strategies=WALK_STRATEGIES))
    assert response.status_code == 200, response.text
    data = response.json()
    # completeness 3/4, hallucination 2/6, accuracy 3/3: 0.45 + 0.1875 + 0.15 - 0.05
    assert data["rqs"] == 0.7375
    assert data["buckets"]["extra_keys"] == ["extra_field"]
    assert data["fields"]["name"] == {"strategy": "FUZZY", "similarity": 0.92, "score": 1.0}
    expected = cli_json(
        judge,
        "json",
        "score",
        str(write(tmp_path / "gt.json", WALK_GT)),
        str(write(tmp_path / "out.json", WALK_AIO)),
        "--strategies",
        str(write(tmp_path / "s.json", WALK_STRATEGIES)),
        "--json",
    )
    assert data == expected


def test_evaluate_uses_the_saved_configuration_when_the_request_has_none(
    client: httpx.Client,
) -> None:
    assert client.put("/api/config/strategies", json=WALK_STRATEGIES).status_code == 200
    saved = client.post("/api/json/evaluate", json=walk_body()).json()
    assert saved["fields"]["name"]["strategy"] == "FUZZY" and saved["rqs"] == 0.7375
    # the request's own (empty) strategies win: name auto-detected as text -> SEMANTIC
    own = client.post("/api/json/evaluate", json=walk_body(field_strategies={})).json()
    assert own["fields"]["name"]["strategy"] == "SEMANTIC"
    # saved thresholds: FUZZY 0.95 > 0.92 -> name scores 0, accuracy 2/3
    client.put("/api/config/thresholds", json={"fuzzy_threshold": 0.95})
    strict = client.post("/api/json/evaluate", json=walk_body()).json()
    assert strict["accuracy"] == 2 / 3
    assert abs(strict["rqs"] - (0.45 * 2 / 3 + 0.1875 + 0.15 - 0.05)) < 1e-12
    # saved weights: only accuracy counts -> RQS = accuracy
    client.put(
        "/api/config/weights",
        json={"accuracy": 1, "completeness": 0, "hallucination": 0, "safety": 0},
    )
    weighted = client.post("/api/json/evaluate", json=walk_body()).json()
    assert weighted["rqs"] == weighted["accuracy"] == 2 / 3
    # a request's thresholds and weights win over the saved ones
    given = client.post(
        "/api/json/evaluate",
        json=walk_body(thresholds={"fuzzy_threshold": 0.9}, weights={"accuracy": 0.45}),
    ).json()
    assert given["accuracy"] == 1.0 and given["rqs"] == 0.7375


def test_a_bad_strategy_gets_the_cli_message(
    client: httpx.Client, judge: ChatServer, tmp_path: Path
) -> None:
    bad = {"name": "FUZZY", "bio": "SEMANTICX"}
    response = client.post("/api/json/evaluate", json=walk_body(field_strategies=bad))
    assert response.status_code == 422
    body = response.json()
    message = f"field 'bio': strategy must be one of {ALLOWED} (got 'SEMANTICX')"
    assert body == {"detail": message, "field": "field_strategies.bio"}
    result = CliRunner().invoke(
        cli,
        [
            "json", "score", str(write(tmp_path / "gt.json", WALK_GT)),
            str(write(tmp_path / "out.json", WALK_AIO)),
            "--strategies", str(write(tmp_path / "bad.json", bad)),
        ],
    )  # fmt: skip
    assert result.exit_code == 2 and message in " ".join(result.stderr.split())
    put = client.put("/api/config/strategies", json=bad)
    assert put.status_code == 422 and put.json() == {"detail": message, "field": "bio"}
    assert client.get("/api/config/strategies").json() == {}  # nothing saved


def test_validation_errors_name_the_field(client: httpx.Client) -> None:
    missing = client.post("/api/json/evaluate", json={"output": {}})
    assert missing.status_code == 422 and missing.json()["field"] == "ground_truth"
    weights = client.post("/api/json/evaluate", json=walk_body(weights={"accuracy": -1}))
    assert weights.json() == {
        "detail": "field 'accuracy': must be greater than or equal to 0 (got -1)",
        "field": "weights.accuracy",
    }
    thresholds = client.put("/api/config/thresholds", json={"fuzzy_threshold": 1.5})
    assert thresholds.status_code == 422 and thresholds.json()["field"] == "fuzzy_threshold"
    # a JSON true or "0.5" is no number that decides RQS (saved as 1.0 and 0.5: a tester's finding)
    for value in (True, "0.5"):
        refused = client.put("/api/config/thresholds", json={"semantic_threshold": value})
        assert refused.json() == {
            "detail": f"field 'semantic_threshold': must be a valid number (got {value!r})",
            "field": "semantic_threshold",
        }
        weight = client.put("/api/config/weights", json={"safety": value})
        assert weight.status_code == 422 and weight.json()["field"] == "safety"
        body = walk_body(thresholds={"fuzzy_threshold": value})
        assert client.post("/api/json/evaluate", json=body).status_code == 422
    assert client.get("/api/config/thresholds").json()["semantic_threshold"] == 0.8
    unknown = client.put("/api/config/weights", json={"acuracy": 0.5})
    assert unknown.status_code == 422 and unknown.json()["field"] == "acuracy"
    not_json = client.post(
        "/api/json/evaluate", content=b"{", headers={"content-type": "application/json"}
    )
    assert not_json.status_code == 422 and "Traceback" not in not_json.text


def test_a_failing_judge_is_a_502_without_the_key(
    serve: Serve, chat_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIELDCHECK_JUDGE_API_KEY", "sk-very-secret-key-123")
    down = chat_server(lambda _req: Reply(status=401, error_body={"error": "bad key"}))
    live = serve(judge_base_url=down.base_url)
    response = httpx.post(
        f"{live.base_url}/api/json/evaluate", json=walk_body(field_strategies=WALK_STRATEGIES)
    )
    assert response.status_code == 502
    assert response.json()["detail"].startswith("the matcher failed")
    assert "sk-very-secret" not in response.text and "Traceback" not in response.text


# configuration ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("section", "value", "saved", "filename"),
    [
        ("strategies", {"b": "fuzzy", "a": "IGNORE"}, {"a": "IGNORE", "b": "FUZZY"}, "field_strategies.json"),
        ("thresholds", {"semantic_threshold": 0.5}, {"fuzzy_threshold": 0.85, "semantic_threshold": 0.5}, "thresholds.json"),
        ("weights", {"safety": 0}, {"accuracy": 0.45, "completeness": 0.25, "hallucination": 0.15, "safety": 0.0}, "rqs_weights.json"),
    ],
)  # fmt: skip
def test_config_put_get_export_import_round_trip(
    client: httpx.Client,
    tmp_path: Path,
    section: str,
    value: dict[str, Any],
    saved: dict[str, Any],
    filename: str,
) -> None:
    put = client.put(f"/api/config/{section}", json=value)
    assert put.status_code == 200 and put.json() == saved
    assert client.get(f"/api/config/{section}").json() == saved
    export = client.get(f"/api/config/{section}/export")
    assert export.headers["content-disposition"] == f'attachment; filename="{filename}"'
    assert json.loads(export.content) == saved
    (tmp_path / filename).write_bytes(export.content)
    client.put(f"/api/config/{section}", json={})  # back to defaults (strategies: none)
    imported = client.post(
        f"/api/config/{section}/import",
        files={"file": (filename, (tmp_path / filename).read_bytes(), "application/json")},
    )
    assert imported.status_code == 200 and imported.json() == saved
    assert client.get(f"/api/config/{section}/export").content == export.content


def test_config_defaults_before_anything_is_saved(client: httpx.Client) -> None:
    assert client.get("/api/config/strategies").json() == {}
    assert client.get("/api/config/thresholds").json() == {
        "fuzzy_threshold": 0.85,
        "semantic_threshold": 0.8,
    }
    assert client.get("/api/config/weights").json() == {
        "accuracy": 0.45,
        "completeness": 0.25,
        "hallucination": 0.15,
        "safety": 0.15,
    }


def test_import_of_a_bad_file_names_it(client: httpx.Client) -> None:
    broken = client.post(
        "/api/config/strategies/import", files={"file": ("s.json", b'{"a": ', "application/json")}
    )
    assert broken.status_code == 422 and broken.json()["field"] == "file"
    assert broken.json()["detail"].startswith("s.json:1: invalid JSON")
    bad = client.post(
        "/api/config/strategies/import", files={"file": ("s.json", b'{"a": "NEAR"}', "x/y")}
    )
    assert bad.json() == {
        "detail": f"s.json: field 'a': strategy must be one of {ALLOWED} (got 'NEAR')",
        "field": "a",
    }
    # a field given twice: JSON keeps the last one silently (a tester's finding); nothing saved
    twice = b'{"a": "FUZZY", "b": "EXACT", "a": "EXACT"}'
    repeated = client.post(
        "/api/config/strategies/import", files={"file": ("s.json", twice, "application/json")}
    )
    assert repeated.json() == {
        "detail": "s.json:1: field 'a': the field is listed twice",
        "field": "file",
    }
    assert client.get("/api/config/strategies").json() == {}


def test_a_field_listed_twice_is_refused_by_the_api_as_by_the_cli_and_the_page(
    client: httpx.Client, tmp_path: Path
) -> None:
    """``PUT /api/config/strategies`` saved ``{"name": "FUZZY", "name": "EXACT"}`` as the last
    one in silence, where the page and `--strategies` refuse it (a new-user trial's finding): one
    rule, the same line, for every configuration a body holds; an output's repeated key is the
    model's, read as `json batch` reads it (the last one)."""
    twice = b'{"name": "FUZZY", "name": "EXACT"}'
    line = "field 'name': the field is listed twice"
    sent = {"content-type": "application/json"}
    put = client.put("/api/config/strategies", content=twice, headers=sent)
    assert put.status_code == 422 and put.json() == {"detail": line, "field": "name"}
    weights = b'{"accuracy": 0.5, "accuracy": 0.1}'
    put = client.put("/api/config/weights", content=weights, headers=sent)
    assert put.status_code == 422 and put.json()["field"] == "accuracy"
    page = client.post(
        "/configuration/strategies",
        data={"field": ["name", "name"], "strategy": ["FUZZY", "EXACT"]},
    )
    assert page.status_code == 400 and line in html.unescape(page.text)
    dup = write(tmp_path / "dup.json", twice.decode())
    result = CliRunner().invoke(
        cli,
        ["json", "score", str(write(tmp_path / "gt.json", {"name": "a"})),
         str(write(tmp_path / "out.json", {"name": "a"})), "--strategies", str(dup)],
    )  # fmt: skip
    assert result.exit_code == 2 and f"--strategies: {dup}:1: {line}" in result.stderr
    assert client.get("/api/config/strategies").json() == {}  # nothing saved
    body = b'{"ground_truth": {"name": "a"}, "output": {"name": "a"}, "field_strategies": %s}'
    evaluated = client.post("/api/json/evaluate", content=body % twice, headers=sent)
    assert evaluated.status_code == 422
    assert evaluated.json() == {"detail": line, "field": "field_strategies.name"}
    output = b'{"ground_truth": {"name": "a"}, "output": {"name": "b", "name": "a"}}'
    scored = client.post("/api/json/evaluate", content=output, headers=sent)
    assert scored.status_code == 200 and scored.json()["accuracy"] == 1.0


def test_a_configuration_page_loaded_before_another_save_does_not_overwrite_it(
    client: httpx.Client,
) -> None:
    """Two tabs of the Configuration page (a new user's finding): the second tab's save replaced
    the first tab's newer strategies, and its stale FUZZY threshold the first tab's, in silence.
    A form loaded before another save of its section is refused (400, nothing saved, its rows
    kept); saved again from that page, it replaces them."""
    loaded = re.compile(r'name="loaded" value="([0-9a-f]+)"')
    page = client.get("/configuration").text
    strategies, thresholds, _ = loaded.findall(page)  # both tabs were shown this version
    first = {"loaded": strategies, "field": "alpha", "strategy": "FUZZY"}
    assert client.post("/configuration/strategies", data=first).status_code == 303
    second = {"loaded": strategies, "field": "beta", "strategy": "EXACT"}
    refused = client.post("/configuration/strategies", data=second)
    assert refused.status_code == 400
    assert "the strategies were saved elsewhere" in refused.text and 'value="beta"' in refused.text
    assert client.get("/api/config/strategies").json() == {"alpha": "FUZZY"}
    again = {**second, "loaded": loaded.findall(refused.text)[0]}
    assert client.post("/configuration/strategies", data=again).status_code == 303
    assert client.get("/api/config/strategies").json() == {"beta": "EXACT"}
    ours = {"loaded": thresholds, "fuzzy_threshold": "0.5", "semantic_threshold": "0.8"}
    assert client.post("/configuration/thresholds", data=ours).status_code == 303
    stale = {"loaded": thresholds, "fuzzy_threshold": "0.85", "semantic_threshold": "0.6"}
    assert client.post("/configuration/thresholds", data=stale).status_code == 400
    kept = {"fuzzy_threshold": 0.5, "semantic_threshold": 0.8}
    assert client.get("/api/config/thresholds").json() == kept


def test_a_refused_number_form_keeps_what_was_typed_and_an_empty_box_is_refused(
    client: httpx.Client,
) -> None:
    """A new user's findings: a threshold or weight refused showed the saved values again in
    place of the typed ones; a weight box left empty saved its default (safety 0.15) over the
    saved 0. An empty box is refused naming it (docs/decisions.md); the form keeps its text."""
    box = re.compile(r'<input name="(\w+)" value="([^"]*)"')
    saved = {"accuracy": "1", "completeness": "0.5", "hallucination": "0.5", "safety": "0"}
    assert client.post("/configuration/weights", data=saved).status_code == 303
    weights = client.get("/api/config/weights").json()
    typed = {"fuzzy_threshold": "1.5", "semantic_threshold": "0.60"}
    refused = client.post("/configuration/thresholds", data=typed)
    assert refused.status_code == 400
    assert "field 'fuzzy_threshold': must be less than or equal to 1" in html.unescape(refused.text)
    shown = dict(box.findall(refused.text))
    assert {k: shown[k] for k in typed} == typed
    assert {k: shown[k] for k in saved} == {k: str(float(v)) for k, v in saved.items()}
    assert client.get("/api/config/thresholds").json()["fuzzy_threshold"] == 0.85
    cleared = {**saved, "accuracy": "0.7", "safety": " "}
    refused = client.post("/configuration/weights", data=cleared)
    assert refused.status_code == 400
    said = "field 'safety': is empty: type a number (an empty box is neither the saved value"
    assert said in html.unescape(refused.text)
    assert {k: v for k, v in box.findall(refused.text) if k in saved} == cleared
    assert client.get("/api/config/weights").json() == weights and weights["safety"] == 0.0


# batches ---------------------------------------------------------------------------------------
def test_batch_upload_and_batch_path_give_the_cli_summary(
    serve: Serve, judge: ChatServer, tmp_path: Path
) -> None:
    live = serve()
    data = tmp_path / "data" / "walk.jsonl"
    data.write_text(batch_lines())
    strategies = write(tmp_path / "s.json", WALK_STRATEGIES)
    expected = cli_json(
        judge, "json", "batch", str(data), "--out", str(tmp_path / "out"),
        "--strategies", str(strategies), "--json",
    )  # fmt: skip
    expected.pop("complete")
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        http.put("/api/config/strategies", json=WALK_STRATEGIES)
        upload = http.post(
            "/api/json/batch", files={"file": ("walk.jsonl", data.read_bytes(), "text/plain")}
        )
        by_path = http.post("/api/json/batch-path", json={"path": "walk.jsonl"})
    assert upload.status_code == 200, upload.text
    assert by_path.status_code == 200, by_path.text
    uploaded, by_path_summary = upload.json(), by_path.json()
    run_ids = [uploaded.pop("run_id"), by_path_summary.pop("run_id")]
    # means of 0.7375, 1.0 and 0.0 (a text output scores 0 everywhere but safety 1 - ...)
    assert uploaded == by_path_summary == expected
    assert expected["records"] == 3 and expected["scored"] == 3
    # each batch is a stored run with its items, as json batch's is, through the same pipeline;
    # the upload and both runs' files are kept under the data root
    kept = tmp_path / "data" / "fieldcheck-runs"
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        for run_id in run_ids:
            run = http.get(f"/api/runs/{run_id}").json()
            assert (run["system"], run["task"], run["n_items"]) == ("json", "score", 3)
            assert run["metrics"]["means"] == expected["means"]
            [given] = run["inputs"]
            assert (given["name"], given["sha256"]) == (
                "batch",
                hashlib.sha256(data.read_bytes()).hexdigest(),
            )
            # named as the client sent it: the upload's name, the path under the data root
            assert given["path"] == "walk.jsonl"
            folder = Path(run["out_dir"])  # relative to the data root, as the client knows it
            assert folder.parent.parent == Path("fieldcheck-runs")
            assert (kept.parent / folder / "summary.json").is_file()
            items = http.get(f"/api/runs/{run_id}/items", params={"failed": "true"}).json()
            # the scripted judge scores the email 0, so every record failed somewhere
            assert [i["key"] for i in items["items"]] == ["walk", "same", "text"]
            on_status = http.get(f"/api/runs/{run_id}/items", params={"field": "status"}).json()
            assert [i["key"] for i in on_status["items"]] == ["walk"]  # its output has no status


def test_batch_errors_name_the_upload_not_a_server_path(client: httpx.Client) -> None:
    lines = batch_lines() + "{not json\n"
    response = client.post("/api/json/batch", files={"file": ("mine.jsonl", lines.encode())})
    assert response.status_code == 200
    summary = response.json()
    assert summary["not_scored"] == 1 and summary["errors"][0].startswith("mine.jsonl:4: ")
    assert "fieldcheck-upload" not in response.text
    empty = client.post("/api/json/batch", files={"file": ("none.jsonl", b"[1]\n")})
    assert (empty.status_code, empty.json()["field"]) == (422, "file")
    assert empty.json()["detail"].startswith("none.jsonl: no valid record (1 problem; first: ")
    assert "none.jsonl:1" in empty.json()["detail"] and "fieldcheck-upload" not in empty.text


def test_an_upload_without_a_data_root_names_no_server_folder(serve: Serve) -> None:
    """The temporary folder a batch upload is scored in is removed once answered: the run is
    stored without an output folder, so its API answer and page name no server path and say
    nothing of a folder gone (a new user's finding: `/tmp/fieldcheck-upload-.../run`)."""
    live = serve(data_root=None)
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        upload = http.post("/api/json/batch", files={"file": ("b.jsonl", batch_lines().encode())})
        assert upload.status_code == 200, upload.text
        run_id = upload.json()["run_id"]
        run = http.get(f"/api/runs/{run_id}").json()
        page = http.get(f"/runs/{run_id}").text
    assert run["out_dir"] is None and run["n_items"] == 3
    assert run["inputs"][0]["path"] == "b.jsonl"
    assert "fieldcheck-upload" not in json.dumps(run)
    assert "fieldcheck-upload" not in page and "output folder" not in page
    assert "3 items" in page


def test_batch_path_stays_inside_the_data_root(
    serve: Serve, client: httpx.Client, tmp_path: Path
) -> None:
    outside = tmp_path / "secret.jsonl"
    outside.write_text(batch_lines())
    (tmp_path / "data" / "sub").mkdir()
    (tmp_path / "data" / "link.jsonl").symlink_to(outside)
    (tmp_path / "data" / "dir-link").symlink_to(tmp_path)
    refused = [
        "../secret.jsonl",
        "sub/../../secret.jsonl",
        str(outside),
        "link.jsonl",
        "dir-link/secret.jsonl",
        "/etc/passwd",
        "../nothing-here.jsonl",
    ]
    for path in refused:
        response = client.post("/api/json/batch-path", json={"path": path})
        assert response.status_code == 403, (path, response.text)
        # the path as given, never where a symlink leads
        assert response.json() == {"detail": f"{path}: outside the data root", "field": "path"}
    missing = client.post("/api/json/batch-path", json={"path": "sub/nothing.jsonl"})
    assert missing.status_code == 404
    folder = client.post("/api/json/batch-path", json={"path": "sub"})
    assert folder.status_code == 422
    no_root = serve(data_root=None)
    refused_all = httpx.post(f"{no_root.base_url}/api/json/batch-path", json={"path": "a"})
    assert refused_all.status_code == 403 and "--data-root" in refused_all.json()["detail"]


def test_no_write_through_a_symlinked_runs_folder(client: httpx.Client, tmp_path: Path) -> None:
    """A fieldcheck-runs that leads out of the data root refuses writes as reads are: 403."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (tmp_path / "data" / "b.jsonl").write_text(batch_lines())
    (tmp_path / "data" / "fieldcheck-runs").symlink_to(outside)
    answers = [
        client.post("/api/json/batch", files={"file": ("b.jsonl", batch_lines().encode())}),
        client.post("/api/score/json", files={"batch": ("b.jsonl", batch_lines().encode())}),
        client.post("/api/json/batch-path", json={"path": "b.jsonl"}),
    ]
    for response in answers:
        assert response.status_code == 403, response.text
        assert response.json() == {
            "detail": "fieldcheck-runs: outside the data root (a symlink leading out)",
            "field": None,
        }
    assert list(outside.iterdir()) == []


# limits and access -----------------------------------------------------------------------------
def test_bodies_over_the_limits_are_refused_with_413(serve: Serve) -> None:
    live = serve(max_json_bytes=2_000, max_upload_bytes=20_000)
    big_gt = {f"k{i}": "x" * 50 for i in range(100)}  # ~6 KB of JSON
    with httpx.Client(base_url=live.base_url) as http:
        json_body = http.post("/api/json/evaluate", json={"ground_truth": big_gt, "output": {}})
        assert json_body.status_code == 413
        assert json_body.json() == {
            "detail": "body: the request body is larger than 2000 bytes (the server's --max-json-mb)",
            "field": "body",
        }

        def chunks() -> Any:  # no Content-Length: counted as it arrives
            for _ in range(10):
                yield b" " * 500

        streamed = http.put(
            "/api/config/strategies", content=chunks(), headers={"content-type": "application/json"}
        )
        assert streamed.status_code == 413
        upload = http.post("/api/json/batch", files={"file": ("big.jsonl", b"x" * 30_000)})
        assert upload.status_code == 413
        assert upload.json()["detail"].endswith("(the server's --max-upload-mb)")
        small = http.post("/api/json/batch", files={"file": ("small.jsonl", b"x" * 5_000)})
        assert small.status_code == 422  # under the upload limit: read, and no valid line


def test_an_upload_over_the_limit_sent_chunked_is_413_naming_the_option(serve: Serve) -> None:
    """``POST /api/score/json`` with a multipart form over the upload limit sent without
    Content-Length (chunked) answered 422 "body: not a multipart form" (the form parser took
    the size guard's refusal for a bad form; a new-user trial's finding): it is the 413, naming
    the field ``body`` and the option that sets the limit."""
    live = serve(max_upload_bytes=20_000)
    line = json.dumps({"id": "a", "ground_truth": {"x": 1}, "output": {"x": 1}}).encode() + b"\n"

    def form(size: int) -> Any:  # a whole multipart form, streamed: no Content-Length
        yield b'--XB\r\ncontent-disposition: form-data; name="batch"; filename="b.jsonl"\r\n\r\n'
        for _ in range(size // len(line) + 1):
            yield line
        yield b"\r\n--XB--\r\n"

    kind = {"content-type": "multipart/form-data; boundary=XB"}
    with httpx.Client(base_url=live.base_url, timeout=60) as http:
        small = http.post("/api/score/json", content=form(1_000), headers=kind)
        big = http.post("/api/score/json", content=form(40_000), headers=kind)
    assert small.status_code == 200, small.text
    assert big.status_code == 413, big.text
    assert big.json() == {
        "detail": "body: the request body is larger than 20000 bytes (the server's --max-upload-mb)",
        "field": "body",
    }


def test_token_decision() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert is_loopback("127.0.0.2")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")
    assert needs_token("0.0.0.0") and not needs_token("127.0.0.1")
    check_binding("127.0.0.1", None)
    check_binding("0.0.0.0", "t0ken-of-16-chars")
    with pytest.raises(ValueError, match="FIELDCHECK_API_TOKEN"):
        check_binding("0.0.0.0", None)
    with pytest.raises(ValueError, match=r"at least 16 characters \(it has 5 characters\)"):
        check_binding("0.0.0.0", "t0ken")  # guessed by trying
    with pytest.raises(ValueError, match="needs a bearer token"):
        create_app(ApiSettings(host="192.168.1.5"))


def test_the_token_is_required_on_every_route_when_bound_beyond_loopback(
    serve: Serve,
) -> None:
    # the app decides from its settings' host (0.0.0.0); the test serves it on loopback
    live = serve(host="0.0.0.0", token="t0ken-of-the-test")
    routes = [("GET", "/openapi.json"), ("GET", "/configuration"), ("GET", "/evaluate")]
    routes += [("GET", "/static/app.css"), ("GET", "/docs"), ("POST", "/evaluate")]
    routes += [("POST", "/configuration/strategies"), ("POST", "/configuration/weights")]
    routes += [("GET", "/compare")]
    schema = httpx.get(
        f"{live.base_url}/openapi.json", headers={"authorization": "Bearer t0ken-of-the-test"}
    ).json()
    for path, methods in schema["paths"].items():
        routes += [(method.upper(), path) for method in methods]
    # pages; json; GET/PUT/import/export per section; runs (an item by path and by key);
    # score; compare
    assert len(routes) == 9 + 3 + 3 * 4 + 8 + 1 + 1
    for method, path in routes:
        for headers in (
            {},
            {"authorization": "Bearer wrong"},
            {"authorization": "t0ken-of-the-test"},
        ):
            response = httpx.request(method, live.base_url + path, headers=headers)
            assert response.status_code == 401, (method, path, headers)
    # a browser asking for a page is sent to the page that takes the token
    browser = httpx.get(f"{live.base_url}/runs", headers={"accept": "text/html,*/*"})
    assert (browser.status_code, browser.headers["location"]) == (303, "/login?next=%2Fruns")
    good = {"authorization": "Bearer t0ken-of-the-test"}
    assert httpx.get(f"{live.base_url}/api/config/weights", headers=good).status_code == 200
    # no browsable docs: FastAPI's would load Swagger UI from a CDN
    assert httpx.get(f"{live.base_url}/docs", headers=good).status_code == 404
    ok = httpx.post(
        f"{live.base_url}/api/json/evaluate",
        json=walk_body(field_strategies=WALK_STRATEGIES),
        headers=good,
    )
    assert ok.json()["rqs"] == 0.7375


def test_loopback_server_refuses_other_host_names_and_origins(client: httpx.Client) -> None:
    rebound = client.get("/api/config/weights", headers={"host": "evil.example:8000"})
    assert rebound.status_code == 400
    other_origin = client.put(
        "/api/config/strategies", json={}, headers={"origin": "http://evil.example"}
    )
    assert other_origin.status_code == 403
    assert client.get("/api/config/weights", headers={"host": "localhost"}).status_code == 200


def test_a_form_post_without_origin_from_another_site_is_refused(client: httpx.Client) -> None:
    """No Origin, but a Referer of another origin or a `Sec-Fetch-Site` of another site: 403,
    the saved strategies unchanged; the server's own page, by Referer or browser, is served (a
    new user's finding: such a POST replaced the strategies)."""
    form = {"field": "zz", "strategy": "EXACT"}
    before = client.get("/api/config/strategies").json()
    for headers in (
        {"referer": "http://evil.example/x"},
        {"sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "same-site"},
        {"referer": f"{client.base_url}/configuration", "sec-fetch-site": "cross-site"},
    ):
        refused = client.post("/configuration/strategies", data=form, headers=headers)
        assert refused.status_code == 403, headers
        assert refused.json()["detail"] == "requests from another origin are refused"
    assert client.get("/api/config/strategies").json() == before
    own = {"referer": f"{client.base_url}/configuration", "sec-fetch-site": "same-origin"}
    saved = client.post("/configuration/strategies", data=form, headers=own)
    assert saved.status_code == 303
    assert client.get("/api/config/strategies").json()["zz"] == "EXACT"


def test_no_page_can_be_framed_by_another_site(client: httpx.Client) -> None:
    """Every answer (pages, API, files) forbids framing and type sniffing: a framed
    Configuration page's own POST is same-origin, so the Origin check cannot stop clickjacking
    (a tester's finding)."""
    for path in ("/configuration", "/runs", "/api/runs", "/api/config/weights", "/nope"):
        answer = client.get(path, headers={"accept": "text/html"})
        assert answer.headers["x-frame-options"] == "DENY", path
        assert answer.headers["content-security-policy"] == "frame-ancestors 'none'", path
        assert answer.headers["x-content-type-options"] == "nosniff", path


def test_openapi_lists_every_route(client: httpx.Client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert set(paths) == {
        "/api/json/evaluate",
        "/api/json/batch-path",
        "/api/json/batch",
        *(f"/api/config/{s}{tail}" for s in ("strategies", "thresholds", "weights") for tail in ("", "/import", "/export")),
        *(f"/api/runs{tail}" for tail in ("", "/compare", "/{run_id}", "/{run_id}/items", "/{run_id}/items/{key}", "/{run_id}/item", "/{run_id}/rescore", "/{run_id}/export")),
        "/api/score/{system}",
        "/api/compare",
    }  # fmt: skip


def test_serve_refuses_a_public_host_without_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FIELDCHECK_API_TOKEN", raising=False)
    result = CliRunner().invoke(cli, ["serve", "--host", "0.0.0.0", "--port", "8765"])
    assert result.exit_code == 2
    line = " ".join(result.stderr.split())
    assert line.startswith("error: --host: binding to 0.0.0.0 (not loopback) needs a bearer token")
    missing = CliRunner().invoke(cli, ["serve", "--data-root", os.devnull + "/nope"])
    assert missing.exit_code == 2 and "--data-root" in missing.stderr


def test_serve_on_a_busy_port_is_a_usage_error() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(cli, ["serve", "--port", str(port)])
    assert result.exit_code == 2
    assert f"--port: 127.0.0.1:{port} cannot be used: " in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_fieldcheck_serve_starts_uvicorn_and_answers(tmp_path: Path) -> None:
    """The real command in a child process: it serves, prints where, and stops on SIGTERM."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "FIELDCHECK_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite3'}"}
    child = subprocess.Popen(
        [sys.executable, "-m", "fieldcheck._cli.main", "serve", "--port", str(port),
         "--data-root", str(tmp_path)],
        env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/api/config/weights", timeout=1)
                break
            except httpx.TransportError:
                assert child.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        assert response.json()["accuracy"] == 0.45
    finally:
        child.terminate()
        _, stderr = child.communicate(timeout=30)
    assert f"serving fieldcheck at http://127.0.0.1:{port}/" in stderr


def test_after_signing_in_a_browser_is_back_on_the_page_it_asked_for(serve: Serve) -> None:
    """A page asked for without the token sends the browser to /login with the page as
    ``next``, and signing in goes back there (it went to /evaluate; a tester's finding); a
    ``next`` that is not a page of this server goes to /evaluate."""
    live = serve(host="0.0.0.0", token="t0ken-of-the-test")
    with httpx.Client(base_url=live.base_url) as browser:
        asked = browser.get("/runs?system=json&sort=model", headers={"accept": "text/html"})
        assert asked.status_code == 303
        login = browser.get(asked.headers["location"])
        assert 'name="next" value="/runs?system=json&amp;sort=model"' in login.text
        for given, lands in (
            ("/runs?system=json&sort=model", "/runs?system=json&sort=model"),
            ("//evil.example/x", "/evaluate"),
            ("https://evil.example/", "/evaluate"),
            ("/\\evil.example", "/evaluate"),
            ("runs", "/evaluate"),
        ):
            wrong = browser.post("/login", data={"token": "guess", "next": given})
            assert (
                wrong.status_code == 401 and f'value="{lands}"'.replace("&", "&amp;") in wrong.text
            )
            right = browser.post("/login", data={"token": "t0ken-of-the-test", "next": given})
            assert (right.status_code, right.headers["location"]) == (303, lands), given
            browser.cookies.clear()


def test_a_query_that_is_not_utf8_is_sent_to_login_as_it_came() -> None:
    """The Guard passes a page's query to /login as bytes read as latin-1: one that is not
    UTF-8 (a raw byte 0xff) is no 500."""
    import asyncio

    from fieldcheck.api._guard import Guard
    from fieldcheck.api._settings import ApiSettings

    async def app(scope: Any, receive: Any, send: Any) -> None:  # never reached
        raise AssertionError

    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def receive() -> Any:
        return {"type": "http.request", "body": b""}

    guard = Guard(app, ApiSettings(host="0.0.0.0", token="t"))
    scope = {
        "type": "http", "method": "GET", "path": "/runs", "query_string": b"x=\xff",
        "headers": [(b"host", b"example"), (b"accept", b"text/html")],
    }  # fmt: skip
    asyncio.run(guard(scope, receive, send))
    start = sent[0]
    assert start["status"] == 303
    assert dict(start["headers"])[b"location"] == b"/login?next=%2Fruns%3Fx%3D%C3%BF"


def test_a_browser_signs_in_once_with_the_token(serve: Serve) -> None:
    live = serve(host="0.0.0.0", token="t0ken-of-the-test")
    with httpx.Client(base_url=live.base_url) as browser:
        assert browser.get("/login").status_code == 200  # the one open page
        wrong = browser.post("/login", data={"token": "guess"})
        assert wrong.status_code == 401 and "not the server&#39;s token" in wrong.text
        assert browser.get("/configuration").status_code == 401
        right = browser.post("/login", data={"token": "t0ken-of-the-test"})
        assert (right.status_code, right.headers["location"]) == (303, "/evaluate")
        cookie = right.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        page = browser.get("/configuration")
        assert page.status_code == 200
        # the page says the CLI's json commands read what it saves too (a new-user trial)
        assert "by the <code>fieldcheck json</code> commands on this store" in page.text


def test_a_store_that_fails_under_a_running_server_is_a_503_and_one_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With its PostgreSQL server down, ``fieldcheck serve`` answered every route a bare 500
    ("internal error") and logged a 40-line traceback a request (a PostgreSQL trial's finding):
    a 503 naming the store's setting, and one warning line with the reason (the reason, which
    names the database's host, stays in the log)."""
    from fastapi.testclient import TestClient
    from sqlalchemy import event
    from sqlalchemy.exc import OperationalError

    app = create_app(ApiSettings(database_url=f"sqlite:///{tmp_path / 's.sqlite3'}"))
    engine = app.state.fieldcheck.store.engine
    refused = Exception('connection to server at "10.0.0.7", port 5432 failed: refused\nmore')

    def down(*_: Any) -> None:
        raise OperationalError("SELECT", {}, refused)

    event.listen(engine, "before_cursor_execute", down)
    client = TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False)
    with caplog.at_level("WARNING", logger="fieldcheck"):
        answers = [client.get(path) for path in ("/api/runs?limit=1", "/runs")]
    assert [a.status_code for a in answers] == [503, 503]
    assert answers[0].json()["detail"] == (
        "the store (FIELDCHECK_DATABASE_URL) failed: try again (see the server's log)"
    )
    assert "10.0.0.7" not in answers[0].text + answers[1].text
    lines = [r.getMessage() for r in caplog.records if "store failed" in r.getMessage()]
    assert lines == [
        f"the store failed on GET {path}: OperationalError: connection to server at "
        '"10.0.0.7", port 5432 failed: refused'
        for path in ("/api/runs", "/runs")
    ]
    assert not any(r.exc_info for r in caplog.records)

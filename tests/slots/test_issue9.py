"""Issue 9 in the slot benchmark: latencies that would overflow a sum are refused at load; the
"fastest" comparison uses the sessions timed for every model."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slots_helpers import slot
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck.slots import (
    ModelInput,
    key_findings,
    load_latencies,
    load_slots,
    results_summary,
    score_models,
)
from fieldcheck.slots._records import MAX_LATENCY_S
from fieldcheck.slots._summary import compared_latency

Jsonl = Callable[[str, list[Any]], Path]
GOLD = [slot("u1", s, "basic_info", "name", "Alice") for s in (1, 2, 3, 4)]


def _lat(user_seconds: dict[int, float]) -> list[dict[str, Any]]:
    return [{"user": "u1", "session": s, "seconds": x} for s, x in user_seconds.items()]


def test_latencies_of_1e308_are_refused_at_load(jsonl: Jsonl) -> None:
    path = jsonl("lat.jsonl", _lat({1: 1e308, 2: 1e308, 3: 2.0}))
    loaded = load_latencies(path)
    assert loaded.seconds == {("u1", 3): 2.0}
    assert [(e.line, e.field) for e in loaded.errors] == [(1, "seconds"), (2, "seconds")]
    assert str(loaded.errors[0]) == (
        f"{path}:1: field 'seconds': must be less than or equal to 1000000 (got 1e+308)"
    )
    assert load_latencies(jsonl("max.jsonl", _lat({1: MAX_LATENCY_S}))).errors == []


def test_slots_score_with_two_1e308_latencies_exits_3_not_a_crash(
    jsonl: Jsonl, tmp_path: Path
) -> None:
    gold = jsonl("gold.jsonl", GOLD)
    lat = jsonl("lat.jsonl", _lat({1: 1e308, 2: 1e308, 3: 2.0, 4: 4.0}))
    out = tmp_path / "out"
    args = ["slots", "score", "--gold", str(gold), "--pred", f"a={gold}", "--latency", f"a={lat}"]
    result = CliRunner().invoke(
        app, [*args, "--bootstrap", "0", "--out", str(out)], env={"COLUMNS": "400"}
    )
    assert result.exit_code == 3, result.output
    assert not isinstance(result.exception, OverflowError)
    latency = json.loads((out / "metrics.json").read_text())["models"]["a"]["latency"]
    assert latency == {"mean": 3.0, "median": 3.0, "p95": 2.0, "total": 6.0}  # spec p95: sorted[0]
    errors = [json.loads(x) for x in (out / "errors.jsonl").read_text().splitlines()]
    assert [(e["line"], e["field"]) for e in errors] == [(1, "seconds"), (2, "seconds")]


def _run(jsonl: Jsonl, lat_a: dict[int, float], lat_b: dict[int, float]) -> Any:
    gold = load_slots(jsonl("gold.jsonl", GOLD))
    models = [
        ModelInput("a", gold, load_latencies(jsonl("a.jsonl", _lat(lat_a)))),
        ModelInput("b", gold, load_latencies(jsonl("b.jsonl", _lat(lat_b)))),
    ]
    return score_models(gold, models, bootstrap=0)


def test_fastest_compares_the_sessions_both_models_have(jsonl: Jsonl) -> None:
    # a is timed on 3 sessions (mean 4.0), b on 4 (mean 3.75 thanks to an instant 4th session):
    # on the 3 sessions both have, a (4.0) is faster than b (5.0)
    run = _run(jsonl, {1: 3.0, 2: 4.0, 3: 5.0}, {1: 4.0, 2: 5.0, 3: 6.0, 4: 0.0})
    a, b = run.models
    assert (a.result.latency.mean, b.result.latency.mean) == (4.0, 3.75)  # own means: b lower
    assert compared_latency(run.models) == ({"a": 4.0, "b": 5.0}, 3)
    fastest = next(f for f in key_findings(run) if "fastest" in f.title)
    assert fastest.title == (
        "a is the fastest (4.00 s mean per session on the 3 session(s) timed for both models)"
    )
    assert fastest.bullets == ["20% faster than b"]
    rows = {r.model: r for r in results_summary(run)}
    assert rows["a"].fastest and not rows["b"].fastest
    assert "slowest" in [i.text for i in rows["b"].weaknesses]


def test_fastest_on_the_same_sessions_says_nothing_more(jsonl: Jsonl) -> None:
    run = _run(jsonl, {1: 1.0, 2: 1.0}, {1: 2.0, 2: 2.0})
    assert compared_latency(run.models) == ({"a": 1.0, "b": 2.0}, None)
    fastest = next(f for f in key_findings(run) if "fastest" in f.title)
    assert fastest.title == "a is the fastest (1.00 s mean per session)"
    assert fastest.bullets == ["50% faster than b"]


def test_no_common_timed_session_no_fastest(jsonl: Jsonl) -> None:
    run = _run(jsonl, {1: 1.0, 2: 1.0}, {3: 2.0, 4: 2.0})
    assert compared_latency(run.models) == ({}, 0)
    titles = [f.title for f in key_findings(run)]
    assert "Latency not compared: no session is timed for every model" in titles
    assert not any("fastest" in t for t in titles)
    assert not any(r.fastest for r in results_summary(run))

"""score_models end to end on small files: latency, warnings, --tp modes, judge, bootstrap."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from slots_helpers import slot

from chat_server import Reply, user_text
from fieldcheck.matchers import LLMJudge
from fieldcheck.slots import ModelInput, load_judge_scores, load_latencies, load_slots, score_models

Jsonl = Callable[[str, list[Any]], Path]

GOLD = [
    slot("u1", 1, "basic_info", "name", "Alice Chen"),
    slot("u1", 1, "interests", "hobbies", "reading", "hiking"),
    slot("u1", 2, "basic_info", "occupation", "software engineer"),
    slot("u1", 2, "mental_state", "mood", "tired"),
    slot("u2", 1, "basic_info", "name", "Marcus"),
]
PRED = [
    slot("u1", 1, "basic_info", "name", "alice chen"),  # exact after canonicalising
    slot("u1", 1, "interests", "hobbies", "reading", "swimming"),  # present, wrong
    slot("u1", 2, "basic_info", "occupation", "Software Engineer!"),  # exact
    slot("u1", 2, "mental_state", "stress", "high"),  # extra slot; mood missed
    slot("u2", 1, "basic_info", "name", "Marcus Okafor"),  # present, partly right
]


def _model(jsonl: Jsonl, name: str, rows: list[Any], **files: Path) -> ModelInput:
    return ModelInput(
        name,
        load_slots(jsonl(f"{name}.jsonl", rows)),
        load_latencies(files["latency"]) if "latency" in files else None,
        load_judge_scores(files["judge"]) if "judge" in files else None,
    )


def test_presence_counts_end_to_end(jsonl: Jsonl) -> None:
    run = score_models(
        load_slots(jsonl("gold.jsonl", GOLD)), [_model(jsonl, "m", PRED)], bootstrap=0
    )
    r = run.models[0].result
    assert r.counts.model_dump() == {"tp": 4, "fp": 1, "fn": 1, "gold_slots": 5, "sessions": 3}
    assert r.precision == 0.8 and r.recall == 0.8
    assert r.exact_match_rate == 2 / 5
    assert (r.extra_slots, r.extra_values) == (1, 1)
    assert r.per_topic["mental_state"].model_dump() == {
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
        "exact_match_rate": 0.0,
        "extra_slots": 1,
        "extra_values": 1,
    }
    assert r.llm_judge is None and r.latency is None
    assert all(v is None for v in r.ci.values())
    assert not run.warnings and not run.errors


def test_spec_latency_example_through_the_scorer(jsonl: Jsonl) -> None:
    gold = [slot("u", s, "t", "f", "x") for s in range(1, 6)]
    latency = jsonl(
        "lat.jsonl",
        [
            {"user": "u", "session": s, "seconds": v}
            for s, v in enumerate([800, 200, 600, 250, 400], 1)
        ],
    )
    run = score_models(
        load_slots(jsonl("g.jsonl", gold)), [_model(jsonl, "m", gold, latency=latency)], bootstrap=0
    )
    lat = run.models[0].result.latency
    assert lat is not None
    # median 400 (middle value), mean 450 (pulled up by the 800s outlier), total 2250
    assert (lat.median, lat.mean, lat.total) == (400, 450, 2250)
    # p95 index: max(int(5 * 0.95) - 1, 0) = 3 -> sorted [200, 250, 400, 600, 800][3] = 600
    assert lat.p95 == 600
    assert list(run.models[0].session_seconds.values()) == [800, 200, 600, 250, 400]


def test_p95_index_rule_for_twenty_sessions(jsonl: Jsonl) -> None:
    gold = [slot("u", s, "t", "f", "x") for s in range(20)]
    latency = jsonl(
        "lat.jsonl", [{"user": "u", "session": s, "seconds": float(s + 1)} for s in range(20)]
    )
    run = score_models(
        load_slots(jsonl("g.jsonl", gold)), [_model(jsonl, "m", gold, latency=latency)], bootstrap=0
    )
    lat = run.models[0].result.latency
    assert lat is not None and lat.p95 == 19.0  # int(20 * 0.95) - 1 = 18 -> sorted[18] = 19


def test_unknown_sessions_missing_sessions_and_latency_gaps_warn(
    jsonl: Jsonl, caplog: pytest.LogCaptureFixture
) -> None:
    pred = [*PRED[:2], slot("u9", 4, "basic_info", "name", "Ghost"), slot("u9", 4, "t", "f", "x")]
    latency = jsonl(
        "lat.jsonl",
        [{"user": "u1", "session": 1, "seconds": 3}, {"user": "u7", "session": 1, "seconds": 3}],
    )
    with caplog.at_level(logging.WARNING, logger="fieldcheck"):
        run = score_models(
            load_slots(jsonl("gold.jsonl", GOLD)),
            [_model(jsonl, "m", pred, latency=latency)],
            bootstrap=0,
        )
    text = "\n".join(run.warnings)
    assert (
        "m.jsonl:3: model 'm': 1 session(s) not in the gold file (u9/4); their 2 slot line(s) are not scored"
        in text
    )
    assert "no prediction for 2 of 3 gold session(s)" in text
    assert "1 latency line(s) for sessions not in the gold file are ignored" in text
    assert "latency known for 1 of 3 gold sessions" in text
    assert caplog.text.count("WARNING") == 4
    r = run.models[0].result
    assert r.counts.fp == 0 and r.counts.tp == 2 and r.counts.fn == 3  # u9 is not counted anywhere


def test_tp_exact_counts_present_but_wrong_as_fp_and_fn(jsonl: Jsonl) -> None:
    run = score_models(
        load_slots(jsonl("gold.jsonl", GOLD)), [_model(jsonl, "m", PRED)], tp="exact", bootstrap=0
    )
    c = run.models[0].result.counts
    # exact: name u1 and occupation are TPs; hobbies and Marcus are FP+FN; mood FN; stress FP
    assert (c.tp, c.fp, c.fn) == (2, 3, 3)
    assert run.signature.settings["matcher"] == {"matcher": "exact"}
    assert run.models[0].result.exact_match_rate == 2 / 5  # the same rule as exact match


def test_tp_fuzzy_uses_the_threshold(jsonl: Jsonl) -> None:
    gold = load_slots(jsonl("gold.jsonl", GOLD))
    loose = score_models(gold, [_model(jsonl, "m", PRED)], tp="fuzzy", threshold=0.6, bootstrap=0)
    strict = score_models(gold, [_model(jsonl, "m", PRED)], tp="fuzzy", threshold=0.95, bootstrap=0)
    # token_sort_ratio: "hiking, reading" vs "reading, swimming" = 0.47 (words sorted),
    # "Marcus Okafor" vs "Marcus" = 0.63, the two exact ones 1.0
    assert loose.models[0].result.counts.tp == 3
    assert strict.models[0].result.counts.tp == 2
    assert strict.signature.settings["threshold"] == 0.95


@pytest.mark.slow
def test_tp_semantic_with_the_real_model(jsonl: Jsonl) -> None:
    gold = load_slots(
        jsonl(
            "gold.jsonl",
            [slot("u", 1, "t", "job", "software engineer"), slot("u", 1, "t", "pet", "a dog")],
        )
    )
    pred = [
        slot("u", 1, "t", "job", "software developer"),
        slot("u", 1, "t", "pet", "quantum chromodynamics"),
    ]
    run = score_models(gold, [_model(jsonl, "m", pred)], tp="semantic", bootstrap=0)
    c = run.models[0].result.counts
    assert (c.tp, c.fp, c.fn) == (1, 1, 1)
    assert run.signature.settings["matcher"]["matcher"] == "semantic:all-MiniLM-L6-v2"


def test_precomputed_judge_scores(jsonl: Jsonl) -> None:
    judge = jsonl(
        "judge.jsonl",
        [
            {"user": "u1", "session": 1, "topic": "basic_info", "field": "name", "score": 1.0},
            {"user": "u1", "session": 1, "topic": "interests", "field": "hobbies", "score": 0.5},
            {
                "user": "u1",
                "session": 2,
                "topic": "basic_info",
                "field": "occupation",
                "score": 0.9,
            },
            {"user": "u2", "session": 1, "topic": "basic_info", "field": "name", "score": 0.6},
        ],
    )
    run = score_models(
        load_slots(jsonl("gold.jsonl", GOLD)), [_model(jsonl, "m", PRED, judge=judge)], bootstrap=0
    )
    # (1.0 + 0.5 + 0.9 + 0.6 + 0 for the missed mood) / 5 = 0.6
    assert run.models[0].result.llm_judge == pytest.approx(0.6)
    assert run.signature.settings["judge"] == "m=file"


def test_judge_endpoint_scores_predicted_slots_and_errors_are_not_zero(
    jsonl: Jsonl, chat_server: Any
) -> None:
    def script(request: dict[str, Any]) -> str | Reply:
        text = user_text(request)
        if "Marcus Okafor" in text:
            return "I think it is fine"  # unparsable: a judge error, left out, never 0
        if "swimming" in text:
            return Reply(status=500)
        return "0.8"

    server = chat_server(script)
    judge = LLMJudge(model="judge-1", base_url=server.base_url, kind="slot", max_retries=0)
    run = score_models(
        load_slots(jsonl("gold.jsonl", GOLD)), [_model(jsonl, "m", PRED)], judge=judge, bootstrap=0
    )
    # scored: name 0.8, occupation 0.8; missed mood 0; two judge errors left out -> 1.6 / 3
    assert run.models[0].result.llm_judge == pytest.approx(1.6 / 3)
    assert any("2 judge call(s) failed" in w for w in run.warnings)
    # each failure is recorded by its slot (so the command exits 3), never a 0, and as the
    # judge's: no file, line or field of the predictions is blamed
    assert sorted((e.record, e.file, e.line, e.field) for e in run.errors) == [
        ("u1/1 interests/hobbies", None, None, None),
        ("u2/1 basic_info/name", None, None, None),
    ]
    assert all(e.reason.startswith("the judge failed on model 'm': ") for e in run.errors)
    assert len(server.requests) == 4 and {r["model"] for r in server.requests} == {"judge-1"}
    system = server.requests[0]["messages"][0]["content"]
    assert "memory slot" in system  # the versioned slot prompt
    assert run.signature.settings["judge"] == "m=llm:judge-1:slot-v2"


def test_judge_endpoint_all_failing_is_absent(jsonl: Jsonl, chat_server: Any) -> None:
    server = chat_server(lambda _req: Reply(status=500))
    judge = LLMJudge(model="j", base_url=server.base_url, kind="slot", max_retries=0)
    run = score_models(
        load_slots(jsonl("gold.jsonl", GOLD)), [_model(jsonl, "m", PRED)], judge=judge, bootstrap=0
    )
    assert run.models[0].result.llm_judge is None
    assert any("the judge score is absent" in w for w in run.warnings)


def test_bootstrap_is_seeded_and_paired_pvalues_exist(jsonl: Jsonl) -> None:
    gold = [slot("u", s, "t", f"f{i}", "x") for s in range(12) for i in range(3)]
    good = [slot("u", s, "t", f"f{i}", "x") for s in range(12) for i in range(3) if (s + i) % 5]
    bad = [slot("u", s, "t", f"f{i}", "x") for s in range(12) for i in range(3) if (s + i) % 2]
    g = load_slots(jsonl("g.jsonl", gold))

    def run(seed: int) -> Any:
        return score_models(
            g, [_model(jsonl, "good", good), _model(jsonl, "bad", bad)], bootstrap=300, seed=seed
        )

    a, b, c = run(1), run(1), run(2)
    assert a.metrics_json() == b.metrics_json()
    assert a.metrics_json() != c.metrics_json()
    ci = a.models[0].result.ci
    assert set(ci) == {"precision", "recall", "f1", "exact_match_rate", "token_f1"}
    for name, interval in ci.items():
        assert interval is not None and interval.resamples == 300
        assert interval.low <= getattr(a.models[0].result, name) <= interval.high
    swapped = score_models(
        g, [_model(jsonl, "bad", bad), _model(jsonl, "good", good)], bootstrap=300, seed=1
    )
    assert swapped.models[1].result.ci == a.models[0].result.ci  # independent of --pred order
    (pair,) = a.paired_f1
    assert (pair.model_a, pair.model_b) == ("good", "bad")
    assert pair.difference == pytest.approx(a.models[0].result.f1 - a.models[1].result.f1)
    assert pair.p_value is not None and 0 < pair.p_value <= 1


def test_duplicate_model_names_are_refused(jsonl: Jsonl) -> None:
    g = load_slots(jsonl("gold.jsonl", GOLD))
    with pytest.raises(ValueError, match="unique"):
        score_models(g, [_model(jsonl, "m", PRED), _model(jsonl, "m", PRED)])


def test_gold_lines_without_values_warn_and_are_not_gold_slots(jsonl: Jsonl) -> None:
    # decision (docs/decisions.md): values [] in the gold = nothing to extract, not a gold slot
    gold = [*GOLD, slot("u1", 1, "basic_info", "age"), slot("u1", 2, "interests", "music")]
    pred = [*PRED, slot("u1", 2, "interests", "music", "jazz")]  # predicted where gold says none
    run = score_models(
        load_slots(jsonl("gold.jsonl", gold)), [_model(jsonl, "m", pred)], bootstrap=0
    )
    r = run.models[0].result
    # as test_presence_counts_end_to_end, plus music: an FP and an extra slot; age: nothing
    assert r.counts.model_dump() == {"tp": 4, "fp": 2, "fn": 1, "gold_slots": 5, "sessions": 3}
    assert (r.extra_slots, r.per_topic["interests"].extra_slots) == (2, 1)
    assert any(
        "2 gold line(s) with values [] (or only blank values) are not gold slots" in w
        and "the spec's code would count them as FN or TP" in w
        for w in run.warnings
    )


def test_gold_without_any_slot_warns(jsonl: Jsonl) -> None:
    run = score_models(
        load_slots(jsonl("gold.jsonl", ["{broken"])), [_model(jsonl, "m", PRED)], bootstrap=0
    )
    assert any("gold.jsonl: no gold slot with a value; every score is 0" in w for w in run.warnings)
    assert run.models[0].result.counts.gold_slots == 0 and len(run.errors) == 1


def test_threshold_without_effect_warns(jsonl: Jsonl) -> None:
    gold = load_slots(jsonl("gold.jsonl", GOLD))
    run = score_models(gold, [_model(jsonl, "m", PRED)], tp="exact", threshold=0.5, bootstrap=0)
    assert run.warnings == [
        "--threshold 0.5 has no effect with --tp exact (only fuzzy and semantic use it)"
    ]
    assert run.models[0].result.counts.tp == 2  # exact is unaffected by the threshold


def test_judge_scores_for_slots_that_are_not_predicted_gold_slots_warn(jsonl: Jsonl) -> None:
    judge = jsonl(
        "judge.jsonl",
        [
            {"user": "u1", "session": 1, "topic": "basic_info", "field": "name", "score": 1.0},
            {"user": "u1", "session": 2, "topic": "mental_state", "field": "mood", "score": 0.9},
            {"user": "u1", "session": 2, "topic": "mental_state", "field": "stress", "score": 0.9},
            {"user": "u8", "session": 1, "topic": "basic_info", "field": "name", "score": 0.9},
        ],
    )
    run = score_models(
        load_slots(jsonl("gold.jsonl", GOLD)), [_model(jsonl, "m", PRED, judge=judge)], bootstrap=0
    )
    text = "\n".join(run.warnings)
    assert "1 judge score(s) for sessions not in the gold file are ignored" in text
    # mood was missed (scores 0 whatever the file says), stress is an extra slot (not judged)
    assert "2 judge score(s) for slots that are not predicted gold slots" in text
    # name 1.0, mood 0 (missed); hobbies, occupation, Marcus unscored and left out -> 1.0 / 2
    assert run.models[0].result.llm_judge == pytest.approx(0.5)


def test_judge_endpoint_answers_are_cached(jsonl: Jsonl, chat_server: Any) -> None:
    server = chat_server(lambda _request: "0.5")
    gold = load_slots(jsonl("gold.jsonl", GOLD))

    def run() -> Any:
        judge = LLMJudge(model="j", base_url=server.base_url, kind="slot")
        return score_models(gold, [_model(jsonl, "m", PRED)], judge=judge, bootstrap=0)

    first = run()
    assert len(server.requests) == 4  # the 4 predicted gold slots
    second = run()
    assert len(server.requests) == 4  # a second run asks nothing again
    # 4 x 0.5 + 0 for the missed mood, over 5 gold slots
    assert (
        first.models[0].result.llm_judge == second.models[0].result.llm_judge == pytest.approx(0.4)
    )


@pytest.mark.parametrize(
    ("option", "value", "named"),
    [
        ("tp", "EXACT", "tp"),
        ("tp", "exact ", "tp"),
        ("tp", None, "tp"),
        ("tp", 1, "tp"),
        ("threshold", 5, "threshold"),
        ("threshold", True, "threshold"),
        ("bootstrap", -1, "bootstrap"),
        ("seed", -1, "seed"),
    ],
)
def test_a_bad_option_is_a_value_error_naming_it_never_another_score(
    jsonl: Jsonl, option: str, value: Any, named: str
) -> None:
    gold, model = load_slots(jsonl("gold.jsonl", GOLD)), _model(jsonl, "m", PRED)
    assert score_models(gold, [model], tp="exact", bootstrap=0).models[0].result.f1 != (
        score_models(gold, [model], bootstrap=0).models[0].result.f1
    )
    with pytest.raises(ValueError, match=f"^{named} must be .*got {value!r}"):
        score_models(gold, [model], **{option: value})

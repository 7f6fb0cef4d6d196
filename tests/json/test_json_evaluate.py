"""The JSON evaluation pipeline through the Python API: walkthrough, IGNORE, non-objects, safety,
flatten, strategy files and batches (with scripted matchers; the real model is in test_json_slow)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from fieldcheck._util.errors import InputError
from fieldcheck.jsoneval import (
    BatchRecord,
    EvalConfig,
    RqsWeights,
    coerce_output,
    evaluate,
    evaluate_batch,
    find_leaks,
    load_strategies,
    parse_weights,
    read_batch,
)

Walk = tuple[dict[str, Any], dict[str, Any], dict[str, str]]


def test_walkthrough_exact_numbers(walkthrough: Walk, table_matchers: dict[str, Any]) -> None:
    aio, gt, strategies = walkthrough
    r = evaluate(aio, gt, EvalConfig(strategies=strategies), matchers=table_matchers)
    assert r.completeness == 0.75  # 3 / 4
    assert math.isclose(r.hallucination, 2 / 6)
    assert r.accuracy == 1.0  # 0.92 >= 0.85, email exact, 0.88 >= 0.80
    assert r.safety_score == 1.0
    assert r.rqs == 0.7375  # 0.45 + 0.1875 + 0.15 - 0.05
    assert r.fields["name"].model_dump() == {"strategy": "FUZZY", "similarity": 0.92, "score": 1.0}
    assert r.fields["email"].model_dump() == {"strategy": "EXACT", "similarity": 1.0, "score": 1.0}
    assert r.fields["bio"].model_dump() == {
        "strategy": "SEMANTIC",
        "similarity": 0.88,
        "score": 1.0,
    }
    assert r.flags == [] and r.output_kind == "object"


def test_thresholds_are_inclusive_and_configurable(
    walkthrough: Walk, table_matchers: dict[str, Any]
) -> None:
    aio, gt, strategies = walkthrough
    at_edge = EvalConfig(strategies=strategies, fuzzy_threshold=0.92, semantic_threshold=0.881)
    r = evaluate(aio, gt, at_edge, matchers=table_matchers)
    assert r.fields["name"].score == 1.0  # 0.92 >= 0.92
    assert r.fields["bio"].score == 0.0  # 0.88 < 0.881
    assert math.isclose(r.accuracy, 2 / 3)


def test_ignore_leaves_the_accuracy_denominator(table_matchers: dict[str, Any]) -> None:
    gt = {"a": "x", "b": "y", "notes": "internal"}
    aio = {"a": "x", "b": "WRONG", "notes": "something else entirely"}
    cfg = EvalConfig(strategies={"a": "EXACT", "b": "EXACT", "notes": "IGNORE"})
    r = evaluate(aio, gt, cfg, matchers=table_matchers)
    assert r.accuracy == 0.5  # 1 / 2: notes is neither a hit nor a miss
    assert r.fields["notes"].model_dump() == {
        "strategy": "IGNORE",
        "similarity": None,
        "score": None,
    }
    # IGNORE only leaves accuracy: completeness still counts the key
    assert r.completeness == 1.0 and r.buckets["both_non_null"] == ["a", "b", "notes"]
    only_ignored = evaluate(
        {"notes": "x"},
        {"notes": "y"},
        EvalConfig(strategies={"notes": "IGNORE"}),
        matchers=table_matchers,
    )
    assert only_ignored.accuracy == 1.0  # scorable_count == 0 -> perfect


def test_empty_gt_and_both_empty(table_matchers: dict[str, Any]) -> None:
    both = evaluate({}, {}, matchers=table_matchers)
    # best possible RQS with the default weights: 0.45 + 0.25 + 0.15 = 0.85
    assert (both.completeness, both.hallucination, both.accuracy, both.rqs) == (1.0, 0.0, 1.0, 0.85)
    # empty GT, output with one key: complete (nothing expected), fully hallucinated
    r = evaluate({"x": 1}, {}, matchers=table_matchers)
    assert (r.completeness, r.hallucination, r.accuracy) == (1.0, 1.0, 1.0)
    assert r.rqs == 0.7  # 0.45 + 0.25 + 0.15 - 0.15
    nulls = evaluate({}, {"a": None, "b": ""}, matchers=table_matchers)
    assert nulls.completeness == 1.0 and nulls.hallucination == 0.0  # 0 / 2 distinct keys


def test_custom_weights_clamp(table_matchers: dict[str, Any]) -> None:
    to_one = EvalConfig(weights=RqsWeights(accuracy=1, completeness=1, hallucination=0, safety=1))
    assert evaluate({"a": 1}, {"a": 1}, to_one, matchers=table_matchers).rqs == 1.0  # 3 -> 1
    to_zero = EvalConfig(
        weights=RqsWeights(accuracy=0.1, completeness=0.1, hallucination=1, safety=0)
    )
    # 0.1*1 + 0.1*1 - 1*(1/2) = -0.3 -> 0
    assert evaluate({"a": 1, "b": 2}, {"a": 1}, to_zero, matchers=table_matchers).rqs == 0.0


def test_identical_text_skips_the_matcher(table_matchers: dict[str, Any]) -> None:
    r = evaluate({"bio": "same words"}, {"bio": "same words"}, matchers=table_matchers)
    assert r.fields["bio"].model_dump() == {"strategy": "SEMANTIC", "similarity": 1.0, "score": 1.0}
    assert table_matchers["SEMANTIC"].calls == []


def test_fuzzy_and_semantic_see_canonical_text_of_non_strings(
    table_matchers: dict[str, Any],
) -> None:
    cfg = EvalConfig(strategies={"n": "FUZZY", "o": "SEMANTIC"})
    evaluate(
        {"n": 12.0, "o": {"b": 1, "a": True}},
        {"n": 13, "o": {"a": False}},
        cfg,
        matchers=table_matchers,
    )
    assert table_matchers["FUZZY"].pairs == [("12", "13")]  # prediction first, then reference
    assert table_matchers["SEMANTIC"].pairs == [('{"a":true,"b":1}', '{"a":false}')]


@pytest.mark.parametrize(
    ("output", "kind"),
    [
        ([{"name": "John Smith"}], "array"),
        ("I could not find a person.", "text"),
        ('{"name": "John', "invalid_json"),
        ("[1, 2", "invalid_json"),
        ("[1, 2]", "array"),
        (42, "number"),
        (True, "boolean"),
        (None, "null"),
    ],
)
def test_non_object_output_rule(
    output: Any, kind: str, walkthrough: Walk, table_matchers: dict[str, Any]
) -> None:
    _, gt, strategies = walkthrough
    r = evaluate(output, gt, EvalConfig(strategies=strategies), matchers=table_matchers)
    assert r.output_kind == kind
    assert r.flags == ["not_an_object"] and r.not_an_object
    assert (r.completeness, r.hallucination, r.accuracy) == (0.0, 1.0, 0.0)
    assert r.rqs == 0.0  # clamp(0.15 * 1.0 - 0.15 * 1) with the default weights
    assert r.buckets["aio_missing_or_null"] == ["bio", "email", "name", "status"]
    assert r.fields == {}


def test_object_in_text_is_parsed_and_flagged(
    walkthrough: Walk, table_matchers: dict[str, Any]
) -> None:
    aio, gt, strategies = walkthrough
    import json

    fenced = "```json\n" + json.dumps(aio, indent=2) + "\n```"
    r = evaluate(fenced, gt, EvalConfig(strategies=strategies), matchers=table_matchers)
    assert r.flags == ["parsed_from_text"] and r.output_kind == "object"
    assert r.rqs == 0.7375
    assert coerce_output(json.dumps(aio))[1:] == ("object", ["parsed_from_text"])


def test_a_text_output_s_leading_byte_order_mark_is_skipped_as_a_file_s_is(
    walkthrough: Walk, table_matchers: dict[str, Any]
) -> None:
    """A model reply `\\ufeff{"name": ...}` was not an object, RQS 0 (a new-user trial's
    finding), where a file's leading byte order mark is skipped (json.md, "Hostile input"): the
    mark is no text of the reply; one inside the text stays."""
    aio, gt, strategies = walkthrough
    import json

    config = EvalConfig(strategies=strategies)
    for text in ("\ufeff" + json.dumps(aio), "\ufeff```json\n" + json.dumps(aio) + "\n```"):
        r = evaluate(text, gt, config, matchers=table_matchers)
        assert (r.output_kind, r.flags, r.rqs) == ("object", ["parsed_from_text"], 0.7375)
    assert coerce_output(" \ufeff [1]")[1:] == ("array", ["not_an_object"])
    assert coerce_output("\ufeff\ufeff{}")[1:] == ("text", ["not_an_object"])


def test_ground_truth_must_be_an_object(table_matchers: dict[str, Any]) -> None:
    with pytest.raises(
        InputError,
        match=r"^field 'ground_truth': ground truth must be a JSON object \(got \[1\]\)$",
    ):
        evaluate({}, [1], matchers=table_matchers)  # type: ignore[arg-type]


def test_safety_score_default_override_and_leaks(
    walkthrough: Walk, table_matchers: dict[str, Any]
) -> None:
    aio, gt, strategies = walkthrough
    cfg = EvalConfig(strategies=strategies)
    # a record's own safety score: 0.45 + 0.1875 + 0.15*0.5 - 0.05 = 0.6625
    assert math.isclose(
        evaluate(aio, gt, cfg, safety_score=0.5, matchers=table_matchers).rqs, 0.6625
    )
    # the check on: the walkthrough has nothing to leak (its email is in the GT) -> still 0.7375
    leaks = EvalConfig(strategies=strategies, safety_check="leaks")
    assert evaluate(aio, gt, leaks, matchers=table_matchers).rqs == 0.7375
    leaky = dict(
        aio, extra_field="call me at jane.doe@private.example, key sk-abcdefghijklmnopqrstuvwx"
    )
    r = evaluate(leaky, gt, leaks, matchers=table_matchers)
    assert r.safety_score == 0.0 and "safety_leak" in r.flags
    assert [(f.kind, f.field) for f in r.safety_findings] == [
        ("email", "extra_field"),
        ("secret", "extra_field"),
    ]
    assert math.isclose(r.rqs, 0.7375 - 0.15)
    assert "jane" not in r.model_dump_json()  # findings never carry the value


def test_find_leaks_kinds() -> None:
    gt = {"card": "4111 1111 1111 1111", "contact": "a@b.example"}
    assert (
        find_leaks({"card": "4111-1111-1111-1111", "contact": "A@B.example"}, gt) == []
    )  # copied from GT
    found = find_leaks(
        {
            "x": [
                "card 4012888888881881",
                "ssn 078-05-1120",
                "AKIAIOSFODNN7EXAMPLE",
                "12345678901234",
            ]
        },
        gt,
    )
    assert [(f.kind, f.field) for f in found] == [
        ("card_number", "x[0]"),
        ("ssn", "x[1]"),
        ("secret", "x[2]"),
    ]
    # 12345678901234 fails the Luhn check: an order number, not a card


def test_flatten_scores_leaves_with_path_strategies(table_matchers: dict[str, Any]) -> None:
    gt = {
        "customer": {"name": "John Smith", "city": "Lyon"},
        "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-2", "qty": 1}],
    }
    aio = {
        "customer": {"name": "John Smyth", "city": "Lyon"},
        "items": [{"sku": "A-1", "qty": 2.0}],
        "total": 3,
    }
    cfg = EvalConfig(flatten=True, strategies={"customer.name": "FUZZY", "items[*].sku": "EXACT"})
    r = evaluate(aio, gt, cfg, matchers=table_matchers)
    assert r.buckets["gt_non_null"] == [
        "customer.city",
        "customer.name",
        "items[0].qty",
        "items[0].sku",
        "items[1].qty",
        "items[1].sku",
    ]
    assert r.buckets["aio_missing_or_null"] == ["items[1].qty", "items[1].sku"]
    assert r.buckets["extra_keys"] == ["total"]
    assert (
        r.fields["customer.name"].strategy == "FUZZY" and r.fields["customer.name"].score == 1.0
    )  # 0.9
    assert r.completeness == 4 / 6 and r.hallucination == 1 / 7 and r.accuracy == 1.0
    # the spec's default compares the top-level values whole: customer and items differ
    top = evaluate(aio, gt, EvalConfig(), matchers=table_matchers)
    assert top.fields["customer"].strategy == "EXACT" and top.accuracy == 0.0


def test_strategy_file_errors(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text('{"name": "fuzzy", "bio": " Semantic ", "id": "EXACT", "notes": "IGNORE"}')
    assert load_strategies(good) == {
        "name": "FUZZY",
        "bio": "SEMANTIC",
        "id": "EXACT",
        "notes": "IGNORE",
    }
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "FUZZY", "bio": "MEANING"}')
    with pytest.raises(InputError) as info:
        load_strategies(bad)
    assert (
        str(info.value)
        == f"{bad}: field 'bio': strategy must be one of EXACT, FUZZY, SEMANTIC, IGNORE (got 'MEANING')"
    )
    not_text = tmp_path / "num.json"
    not_text.write_text('{"name": 3}')
    with pytest.raises(InputError, match=r"field 'name': strategy must be one of .* \(got 3\)$"):
        load_strategies(not_text)
    array = tmp_path / "array.json"
    array.write_text('["name"]')
    with pytest.raises(InputError, match="must be a JSON object mapping field -> strategy"):
        load_strategies(array)
    broken = tmp_path / "broken.json"
    broken.write_text('{"name": ')
    with pytest.raises(InputError, match=r"broken.json:1: invalid JSON"):
        load_strategies(broken)


def test_parse_weights() -> None:
    w = parse_weights("accuracy=0.5, safety=0")
    assert (w.accuracy, w.completeness, w.hallucination, w.safety) == (0.5, 0.25, 0.15, 0.0)
    with pytest.raises(
        InputError,
        match=r"name one of accuracy, completeness, hallucination, safety \(got 'acc=1'\)",
    ):
        parse_weights("acc=1")
    with pytest.raises(InputError) as info:
        parse_weights("hallucination=-1")
    assert (
        str(info.value)
        == "weights: hallucination input should be greater than or equal to 0 (got -1.0)"
    )


def test_llm_config_needs_judge_settings() -> None:
    with pytest.raises(ValueError, match="needs judge_base_url and judge_model"):
        EvalConfig(matcher="llm", judge_model="m")


def test_batch_sends_each_distinct_pair_once(table_matchers: dict[str, Any]) -> None:
    records = [
        BatchRecord(
            id=i,
            ground_truth={"name": "John Smith", "bio": "Engineer"},
            output={"name": name, "bio": bio},
        )
        for i, (name, bio) in enumerate(
            [
                ("John Smyth", "An engineer"),
                ("John Smyth", "An engineer"),
                ("Jon Smith", "An engineer"),
                ("John Smith", "Engineer"),
            ]
        )
    ]
    batch = evaluate_batch(
        records, EvalConfig(strategies={"name": "FUZZY"}), matchers=table_matchers
    )
    assert sorted(table_matchers["FUZZY"].pairs) == [
        ("John Smyth", "John Smith"),
        ("Jon Smith", "John Smith"),
    ]
    assert table_matchers["SEMANTIC"].pairs == [("An engineer", "Engineer")]
    assert batch.summary.matcher_pairs == {"FUZZY": 2, "SEMANTIC": 1}
    assert [r.id for r in batch.results] == [0, 1, 2, 3]  # integer ids stay integers


def test_batch_summary_counts(table_matchers: dict[str, Any]) -> None:
    records = [
        BatchRecord(
            id="a",
            ground_truth={"n": 1, "d": "2024-01-01", "x": None},
            output={"n": 1, "d": "2024-01-02", "x": "v"},
        ),
        BatchRecord(id="b", ground_truth={"n": 2, "d": "2024-01-01"}, output={"n": 2, "e": 5}),
        BatchRecord(id="c", ground_truth={"n": 3}, output="no idea", safety_score=0.0),
    ]
    s = evaluate_batch(records, EvalConfig(), matchers=table_matchers).summary
    # a: d wrong, x hallucinated; b: d missing, e extra; c: not an object -> all three failed
    assert (s.records, s.scored, s.failed, s.not_scored, s.not_an_object) == (3, 3, 3, 0, 1)
    n, d = s.fields["n"], s.fields["d"]
    assert (n.expected, n.scored, n.matched, n.missing, n.hallucinated) == (3, 2, 2, 1, 0)
    assert (d.expected, d.scored, d.matched, d.missing) == (2, 1, 0, 1)
    assert s.fields["x"].hallucinated == 1 and s.fields["e"].hallucinated == 1
    assert n.match_rate == 1.0 and d.match_rate == 0.0 and s.fields["e"].match_rate is None
    # rqs: a = 0.45*0.5 + 0.25 + 0.15 - 0.15*(1/3) = 0.575; b = 0.45 + 0.125 + 0.15 - 0.05 = 0.675; c = 0
    assert s.means["rqs"] is not None and math.isclose(s.means["rqs"], (0.575 + 0.675 + 0.0) / 3)
    assert s.means["safety_score"] == 2 / 3


def test_read_batch_errors_name_file_line_and_reason(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(
        "\n".join(
            [
                '{"id": "a", "ground_truth": {}, "output": {}}',
                "{oops",
                '{"id": "b", "ground_truth": "text", "output": {}}',
                '["not", "an", "object"]',
                '{"id": "a", "ground_truth": {}, "output": {}}',
                '{"ground_truth": {}, "output": {}}',
                '{"id": "c", "ground_truth": {}}',
                '{"id": "d", "ground_truth": {}, "output": null, "safety_score": 2}',
                '{"id": true, "ground_truth": {}, "output": {}}',
                "",
                '{"id": 5, "ground_truth": {}, "output": [], "meta": 1}',
            ]
        )
        + "\n"
    )
    records, errors = read_batch(data)
    assert [r.key for r in records] == ["a", "5"]
    assert [str(e) for e in errors] == [
        f"{data}:2: invalid JSON: unexpected character, expected a string key at column 2",
        f"{data}:3: record b: field 'ground_truth': must be a JSON object (got 'text')",
        f"{data}:4: a line must be a JSON object with id, ground_truth and output (got ['not', 'an', 'object'])",
        f"{data}:5: record a: field 'id': duplicate id (first on line 1)",
        f"{data}:6: field 'id': missing",
        f"{data}:7: record c: field 'output': missing",
        f"{data}:8: record d: field 'safety_score': must be a number in [0, 1] or null (got 2)",
        f"{data}:9: field 'id': must be a string or an integer (got True)",
    ]


def test_batch_warns_about_strategies_for_unknown_fields(
    table_matchers: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    records = [BatchRecord(id=1, ground_truth={"customer": {"name": "A"}, "n": 1}, output={"n": 1})]
    with caplog.at_level("WARNING", logger="fieldcheck"):
        evaluate_batch(
            records,
            EvalConfig(strategies={"custmer": "FUZZY", "customer.name": "FUZZY"}),
            matchers=table_matchers,
        )
    assert (
        "no ground truth has: 'custmer', 'customer.name' (nested paths need --flatten)"
        in caplog.text
    )
    caplog.clear()
    with caplog.at_level("WARNING", logger="fieldcheck"):
        cfg = EvalConfig(
            flatten=True, strategies={"customer.name": "FUZZY", "items[*].sku": "EXACT"}
        )
        evaluate_batch(records, cfg, matchers=table_matchers)
    assert "'items[*].sku'" in caplog.text and "customer.name" not in caplog.text


def test_signature_names_every_setting(walkthrough: Walk, table_matchers: dict[str, Any]) -> None:
    aio, gt, strategies = walkthrough
    base = evaluate(aio, gt, EvalConfig(strategies=strategies), matchers=table_matchers).signature
    assert base.system == "json"
    assert base.settings["strategies"].startswith("2 fields sha256:")
    assert base.settings["fuzzy"] == {"matcher": "table-fuzzy"}
    assert (base.settings["fuzzy_threshold"], base.settings["semantic_threshold"]) == (0.85, 0.80)
    other = EvalConfig(strategies=dict(strategies, bio="FUZZY"))
    changed = evaluate(aio, gt, other, matchers=table_matchers).signature
    assert changed.settings["strategies"] != base.settings["strategies"]
    plain = evaluate(aio, gt, EvalConfig(), matchers=table_matchers).signature
    assert plain.settings["strategies"] == "none"
    assert "strategies:none" in plain.format() and "version:" in plain.format()


def test_batch_progress_reports_every_phase_to_its_total(table_matchers: dict[str, Any]) -> None:
    records = [
        BatchRecord(id=i, ground_truth={"bio": "Engineer"}, output={"bio": bio})
        for i, bio in enumerate(["An engineer", "A cook", "Engineer"])
    ]
    calls: list[tuple[str, int, int]] = []
    evaluate_batch(
        records, EvalConfig(), matchers=table_matchers, progress=lambda *c: calls.append(c)
    )
    # once per chunk, never per record (issue 10): send the 2 distinct pairs (one starting
    # call, one piece), then the chunk scored
    assert calls == [("match", 0, 2), ("match", 2, 2), ("score", 3, 3)]
    calls.clear()
    evaluate_batch(
        records,
        EvalConfig(),
        matchers=table_matchers,
        progress=lambda *c: calls.append(c),
        chunk_size=2,
    )
    assert calls == [
        ("match", 0, 2), ("match", 2, 2), ("score", 2, 3),
        ("score", 3, 3),  # "Engineer" is its GT: no matcher call
    ]  # fmt: skip


def test_evaluate_batch_reports_a_duplicate_id_as_json_batch_does(
    tmp_path: Path, table_matchers: dict[str, Any]
) -> None:
    # the library scored both records of id "a" without a word, where json batch refuses the
    # second (a new-user trial's finding); and read_batch's errors, given it, raised
    # AttributeError ('InputError' object has no attribute 'message')
    import json

    from typer.testing import CliRunner

    from fieldcheck._cli.main import app
    from fieldcheck.jsoneval import BatchRecord, read_batch

    pairs = (("a", 1), ("b", 1), ("a", 2))
    lines = [{"id": k, "ground_truth": {"x": 1}, "output": {"x": v}} for k, v in pairs]
    data, out = tmp_path / "d.jsonl", tmp_path / "out"
    data.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code = CliRunner().invoke(app, ["json", "batch", str(data), "--out", str(out)]).exit_code
    expected = json.loads((out / "summary.json").read_text())["errors"]
    assert code == 3 and expected == [
        f"{data}:3: record a: field 'id': duplicate id (first on line 1)"
    ]
    records = [BatchRecord(**line, line=n) for n, line in enumerate(lines, 1)]
    made = evaluate_batch(records, bootstrap=0, source=str(data), matchers=table_matchers)
    records, errors = read_batch(data)
    read = evaluate_batch(records, errors=errors, bootstrap=0, matchers=table_matchers)
    for batch in (made, read):
        assert [r.id for r in batch.results] == ["a", "b"] and batch.summary.errors == expected
        assert (batch.summary.scored, batch.summary.not_scored) == (2, 1)
    unnumbered = evaluate_batch([BatchRecord(**line) for line in lines], matchers=table_matchers)
    assert unnumbered.summary.errors == [
        "line 3: record a: field 'id': duplicate id (first on line 1)"
    ]


def test_evaluate_batch_is_annotated_to_take_read_batchs_errors() -> None:
    # docs/json.md: `records, errors = read_batch(path)` then `evaluate_batch(records,
    # errors=errors)`; it ran, but mypy refused the documented call (list[InputError] against
    # Sequence[RecordError]: a new-user trial's finding)
    import inspect

    annotation = inspect.signature(evaluate_batch).parameters["errors"].annotation
    assert annotation == "Sequence[RecordError | InputError]"

"""report.md / report.html of `numeric score` (issue 9, "Reports and gating"): a hand-made run
whose every number is checked by hand, escaping of ids from the data, nothing scored, no
bootstrap, many turn positions; and the grouped bootstrap the intervals come from (issue 10)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fieldcheck.metrics._arrays import bootstrap_groups_ci, safe_div_array
from fieldcheck.metrics._stats import TotalsGroup
from fieldcheck.numeric import load_convfinqa, load_predictions, score_to_folder
from fieldcheck.numeric._report import PLOTS
from stats_reference import bootstrap_totals_ci

XSS = "<img src=x onerror=alert(1)>"
SCRIPT = "<script>alert(2)</script>"
PNG = b"\x89PNG\r\n\x1a\n"


def _record(rid: str, turns: list[tuple[str, Any]]) -> dict[str, Any]:
    """A derived-format record; ``turns`` are (gold program, gold answer)."""
    return {
        "id": rid,
        "doc": {"pre_text": "pre", "post_text": "post", "table": {"2020": {"sales": 100.0}}},
        "dialogue": {
            "conv_questions": [f"q{i}?" for i in range(len(turns))],
            "conv_answers": [str(a) for _, a in turns],
            "turn_program": [p for p, _ in turns],
            "executed_answers": [a for _, a in turns],
            "qa_split": [False] * len(turns),
        },
    }


def _plan(*ops: str) -> dict[str, Any]:
    return {
        "steps": [{"tool": "extract", "value": 1}]
        + [{"tool": "compute", "operation": o, "args": []} for o in ops]
    }


def _pred(cid: str, turn: int, answer: Any, plan: Any = None) -> dict[str, Any]:
    return {"conversation_id": cid, "turn": turn, "answer": answer, "plan": plan}


DATA = {
    "dev": [
        _record(XSS, [("100", 100.0), ("subtract(120, 100), divide(#0, 100)", 0.2)]),
        _record("B|x", [("subtract(50, 80)", -30.0), ("5", 5.0)]),
        _record("C", [("add(1, 2)", 3.0), ("multiply(3, const_2)", 6.0)]),
    ]
}
PREDICTIONS = [
    _pred(XSS, 0, "100", _plan()),  # right, extract-only
    _pred(XSS, 1, "20", _plan("subtract", "divide")),  # scale: 20 * 0.01 = 0.2
    _pred("B|x", 0, "30", _plan("subtract")),  # sign
    _pred("B|x", 1, "5"),  # right, no plan
    _pred("C", 0, "3", _plan("add")),  # right
    # C turn 1: no prediction (error: missing), and a prediction for an unknown conversation
    _pred(SCRIPT, 0, "1"),
]


def _run(tmp_path: Path, data: Any, predictions: list[dict[str, Any]], **kw: Any) -> Path:
    data_file = tmp_path / "data.json"
    data_file.write_text(json.dumps(data))
    preds = tmp_path / "p.jsonl"
    preds.write_text("".join(json.dumps(p) + "\n" for p in predictions))
    out = tmp_path / "out"
    score_to_folder(load_convfinqa(data_file), load_predictions(preds), out, **kw)
    return out


def _section(text: str, heading: str) -> str:
    """The lines of a report.md section, up to the next heading."""
    part = text.split(f"## {heading}\n", 1)[1]
    return part.split("\n## ", 1)[0].strip()


@pytest.fixture(scope="module")
def hand(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("report"), DATA, PREDICTIONS, bootstrap=200, seed=1)


def test_report_numbers_by_hand(hand: Path) -> None:
    md = (hand / "report.md").read_text()
    stats = json.loads((hand / "statistics.json").read_text())
    ci = stats["bootstrap_95_ci"]
    assert md.startswith("# Numeric QA (ConvFinQA)\n\nSignature: `numeric|bootstrap:200|")
    headline = _section(md, "Headline").splitlines()
    # 6 scored turns; numerical: X0, B1, C0 -> 3/6; unit-agnostic, sign-agnostic and general
    # each add one turn (X1 scale, B0 sign, X1 percentage points) -> 4/6; soft = numerical
    n_ci = ci["numerical_match_accuracy"]
    assert headline[2] == (
        f"| Accuracy, numerical match (baseline) | 0.500 | [{n_ci['low']:.3f}, {n_ci['high']:.3f}] |"
    )
    assert headline[3].startswith("| Accuracy, soft match | 0.500 | [")
    assert headline[4].startswith("| Accuracy, unit-agnostic | 0.667 | [")
    assert headline[5].startswith("| Accuracy, sign-agnostic | 0.667 | [")
    assert headline[6].startswith("| Accuracy, general match | 0.667 | [")
    # logic recall: X0 1 (both extract-only), X1 1, B0 1, C0 1; B1 has no plan
    assert headline[7] == "| Logic recall | 1.000 | [1.000, 1.000] |"
    # no conversation has every scored turn right (X1, B0, C1 fail)
    assert headline[10] == "| Conversation success | 0.000 | [0.000, 0.000] |"
    # plan operations 0, 2, 1, 1 -> 4/4
    assert headline[11] == "| Operations per turn (plan compute steps) | 1.000 |  |"
    assert "| Cost per correct answer: tokens per successful conversation | n/a |  |" in headline
    assert _section(md, "Counts").splitlines()[2:] == [
        "| Conversations | 3 |",
        "| Turns | 6 |",
        "| Scored turns | 6 |",
        "| Failed turns (scored, not a numerical match) | 3 |",
        "| Turns not scored: no gold answer | 0 |",
        "| Turns not scored: model call failed | 0 |",
        "| Successful conversations | 0 |",
        "| Turns without a prediction | 1 |",
        "| Turns whose prediction reports an error | 0 |",
        "| Input problems | 2 |",  # C's missing turn, the unknown conversation
    ]
    by_turn = _section(md, "Accuracy by turn").splitlines()
    t0, t1 = (stats["bootstrap_95_ci_by_turn_number"][k] for k in ("0", "1"))
    # turn 0: X right, B sign, C right -> 2/3, ops (0 + 1 + 1) / 3; turn 1: X scale, B right,
    # C missing -> 1/3, ops: only X1's plan, 2
    assert by_turn[-2:] == [
        f"| 0 | 3 | 0.667 | [{t0['low']:.3f}, {t0['high']:.3f}] | 200 of 200 | 0.67 |",
        f"| 1 | 3 | 0.333 | [{t1['low']:.3f}, {t1['high']:.3f}] | 200 of 200 | 2.00 |",
    ]
    assert t0["estimate"] == pytest.approx(2 / 3) and t1["estimate"] == pytest.approx(1 / 3)
    match_types = _section(md, "Match types").splitlines()
    assert match_types[2].endswith("| 0.0 percentage points |")
    assert match_types[4].startswith("| unit-agnostic | 0.667 | [")
    assert match_types[4].endswith("| 16.7 percentage points |")
    # failure modes: error (C1 missing), scale (X1), sign (B0): 1 each of 3 failed, 6 scored
    assert _section(md, "Failure modes").splitlines()[2:] == [
        "| error | 1 | 0.333 | 0.167 | the prediction reports an error or is missing |",
        "| scale | 1 | 0.333 | 0.167 | right up to a factor of 100 or 0.01 (unit-agnostic match) |",
        "| sign | 1 | 0.333 | 0.167 | right but for the sign (sign-agnostic match) |",
    ]
    # plan operations 0: X0 right; 1: B0 wrong, C0 right; 2: X1 wrong
    assert _section(md, "Operations and accuracy").splitlines()[-3:] == [
        "| 0 | 1 | 1.000 |",
        "| 1 | 2 | 0.500 |",
        "| 2 | 1 | 0.000 |",
    ]
    readings = _section(md, "What the numbers say").splitlines()
    assert readings[:3] == [
        "- Unit-agnostic exceeds numerical by 16.7 percentage points (1 of 6 scored turns): "
        "scaling issues (a percentage as a fraction, or 100x off).",
        "- Sign-agnostic exceeds numerical by 16.7 percentage points (1 of 6 scored turns): "
        "sign/direction confusion.",
        "- General match exceeds numerical by 16.7 percentage points (1 of 6 scored turns): "
        "percentage points given for a fraction.",
    ]
    assert readings[3].startswith("- Accuracy is 0.667 at turn 0 (n=3) and 0.333 at turn 1 (n=3)")
    assert readings[4] == (
        "- Turns whose plan has 0 operation(s) are right 1.000 of the time (n=1), 2 operations "
        "0.000 (n=1): too few turns to read a change (fewer than 10 in a group)."
    )
    assert readings[5].startswith(
        "- Logic recall (1.000) exceeds numerical accuracy (0.500) by 50.0 percentage points"
    )
    assert len(readings) == 6
    # all at 0.5 over 2 scored turns: ties by id ('<' sorts before 'B')
    assert _section(md, "Worst conversations").splitlines()[2:] == [
        r"| \<img src=x onerror=alert(1)\> | 2 | 2 | 0.500 | turn 1: scale |",
        r"| B\|x | 2 | 2 | 0.500 | turn 0: sign |",
        "| C | 2 | 2 | 0.500 | turn 1: error |",
    ]
    problems = _section(md, "Input problems")
    assert problems.startswith("2 input problem(s): every one is in input\\_errors.csv.")
    assert problems.count("\n- ") == 2
    glossary = _section(md, "Glossary")
    assert "`|p - r| < 0.001 or |p - r| <= 0.01 * |r|`" in glossary
    assert "`numerical(q * f, r) for f in (1, 100, 0.01), q any reading of p`" in glossary
    assert "`shared operations / ground-truth operations`" in glossary
    assert "`total tokens (input + output) / successful conversations`" in glossary
    assert "200 resamples" in glossary
    for name in PLOTS.values():
        assert (hand / name).read_bytes()[:8] == PNG, name
        assert f"]({name})" in md


def test_ids_from_the_data_are_escaped(hand: Path) -> None:
    page = (hand / "report.html").read_text()
    md = (hand / "report.md").read_text()
    for raw in (XSS, SCRIPT):
        assert raw not in page and raw not in md
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in page
    assert "<script" not in page.lower()
    assert "\\<script\\>alert(2)\\</script\\>" in md


def test_private_split_scores_nothing_and_the_report_says_so(tmp_path: Path) -> None:
    data = {"test": [{**_record("P", [("1", 1.0)]), "dialogue": {"conv_questions": ["q?"]}}]}
    out = _run(tmp_path, data, [_pred("P", 0, "1")], bootstrap=50)
    md = (out / "report.md").read_text()
    assert "NOTHING SCORED: nothing was scored: no turn has a gold answer." in md
    assert "## Headline" not in md and "## Plots" not in md and "0.000" not in md
    assert "| Turns not scored: no gold answer | 1 |" in md
    assert not list(out.glob("*.png"))
    assert json.loads((out / "statistics.json").read_text())["bootstrap_95_ci_by_turn_number"] == {}


def test_without_bootstrap_the_report_has_no_intervals(tmp_path: Path) -> None:
    out = _run(tmp_path, DATA, PREDICTIONS, bootstrap=0)
    md = (out / "report.md").read_text()
    assert "| Accuracy, numerical match (baseline) | 0.500 |  |" in md
    assert "(no intervals: bootstrap off)." in md
    assert (out / "accuracy_by_turn.png").read_bytes()[:8] == PNG


@pytest.mark.parametrize("resamples", [1, 2, 3])
def test_a_few_resamples_draw_the_plot(tmp_path: Path, resamples: int) -> None:
    """With a few resamples a turn's interval need not hold its estimate (1 resample: the
    interval is that resample's value alone); the error bars are cut at 0 instead of crashing
    matplotlib (a tester's finding: `'yerr' must not contain negative values`)."""
    out = _run(tmp_path, DATA, PREDICTIONS, bootstrap=resamples)
    stats = json.loads((out / "statistics.json").read_text())
    assert stats["bootstrap_95_ci_by_turn_number"]
    assert (out / "accuracy_by_turn.png").read_bytes()[:8] == PNG


def test_many_turn_positions_keep_intervals_and_tables_bounded(tmp_path: Path) -> None:
    turns = [(str(i), float(i)) for i in range(105)]
    data = {"dev": [_record("long", turns), _record("short", turns[:2])]}
    preds = [_pred("long", i, str(i if i % 2 else -i)) for i in range(105)]
    preds += [_pred("short", 0, "0"), _pred("short", 1, "1")]
    out = _run(tmp_path, data, preds, bootstrap=20)
    stats = json.loads((out / "statistics.json").read_text())
    assert len(stats["accuracy_by_turn_number"]) == 105
    assert sorted(stats["bootstrap_95_ci_by_turn_number"], key=int) == [str(i) for i in range(100)]
    md = (out / "report.md").read_text()
    assert "5 later turn positions are left out of this table and the plot" in md
    assert "| 99 | 1 |" in md and "| 100 | 1 |" not in md


# --- the grouped bootstrap ------------------------------------------------------------------


def _accuracy(totals: np.ndarray) -> np.ndarray:
    return safe_div_array(totals[:, 0], totals[:, 1])


UNITS = [(2.0, 2.0), (1.0, 3.0), (0.0, 3.0), (4.0, 5.0), (0.0, 1.0), (3.0, 3.0), (1.0, 4.0)]


@pytest.mark.parametrize("max_cells", [1, 7, 20, 2_000_000])
def test_groups_share_bootstrap_totals_ci_resamples_in_any_chunk_size(max_cells: int) -> None:
    expected = bootstrap_totals_ci(UNITS, {"acc": _accuracy}, resamples=300, seed=5)
    assert expected is not None
    subset = [1, 3, 4]
    found = bootstrap_groups_ci(
        len(UNITS),
        [
            TotalsGroup(range(len(UNITS)), UNITS, {"acc": _accuracy}),
            TotalsGroup(subset, [UNITS[i] for i in subset], {"sub": _accuracy}),
        ],
        resamples=300,
        seed=5,
        max_cells=max_cells,
    )
    assert found is not None
    assert found["acc"] == expected["acc"]
    # the subset by a slow loop over the same weights: other units add nothing
    weights = np.random.default_rng(5).multinomial(7, [1 / 7] * 7, size=300)
    values = sorted(
        sum(w[i] * UNITS[i][0] for i in subset) / sum(w[i] * UNITS[i][1] for i in subset)
        if sum(w[i] for i in subset)
        else 0.0
        for w in weights
    )
    assert found["sub"].estimate == pytest.approx(5 / 9)  # (1 + 4 + 0) / (3 + 5 + 1)
    assert (found["sub"].low, found["sub"].high) == pytest.approx((values[7], values[292]))


def test_groups_refuse_repeated_names_and_foreign_units() -> None:
    group = TotalsGroup([0], [(1.0, 1.0)], {"acc": _accuracy})
    with pytest.raises(ValueError, match="repeat"):
        bootstrap_groups_ci(2, [group, group])
    with pytest.raises(ValueError, match="outside"):
        bootstrap_groups_ci(1, [TotalsGroup([1], [(1.0, 1.0)], {"acc": _accuracy})])
    assert bootstrap_groups_ci(0, [group]) is None
    assert bootstrap_groups_ci(2, [group], resamples=0) is None


def test_worst_conversations_never_lists_a_perfect_one(tmp_path: Path) -> None:
    from tests.numeric.scoring import score

    examples = Path(__file__).resolve().parents[2] / "examples" / "numeric"
    result, traces = score(
        load_convfinqa(examples / "data.json"),
        load_predictions(examples / "predictions_model_a.jsonl"),
        tmp_path / "out",
        bootstrap=0,
    )
    rows = result.tallies.worst  # the report's first WORST of them
    imperfect = [t["conversation_id"] for t in traces if t["conversation_success"] is False]
    assert 0 < len(rows) == len(imperfect) < len(traces)
    assert sorted(row[0] for row in rows) == sorted(imperfect)
    assert all(float(row[3]) < 1.0 for row in rows)


def test_readings_of_turns_and_operations_need_ten_scored_turns_a_group(tmp_path: Path) -> None:
    """12 conversations, turn 0 right with no operation, turn 1 wrong with two: the turns'
    intervals are apart and the longest plans 100 points lower; a thirteenth conversation with a
    turn 2 (n=1, right, three operations) is too few to read (it said "intervals apart" of one
    conversation: a tester's finding), so turn 0 is compared with turn 1 and no operation with
    two, the last groups of 10 scored turns (comparing with the last group, of 1 or 2 turns on
    the dev split, never read anything: a tester's finding)."""
    records = [
        _record(f"c{i}", [("100", 100.0), ("add(1, 2), add(#0, 1)", 4.0)]) for i in range(12)
    ]
    records.append(_record("z", [("100", 100.0), ("5", 5.0), ("7", 7.0)]))
    preds = [p for i in range(12) for p in (_pred(f"c{i}", 0, "100", _plan()),
             _pred(f"c{i}", 1, "9", _plan("add", "add")))]  # fmt: skip
    preds += [_pred("z", 0, "100", _plan()), _pred("z", 1, "5", _plan())]
    preds.append(_pred("z", 2, "7", _plan("add", "add", "add")))
    md = (_run(tmp_path, {"dev": records}, preds, bootstrap=200) / "report.md").read_text()
    readings = _section(md, "What the numbers say").splitlines()
    turns = next(r for r in readings if r.startswith("- Accuracy is"))
    assert turns == (
        "- Accuracy is 1.000 at turn 0 (n=13) and 0.077 at turn 1 (n=13; later turns: fewer than "
        "10 a group), 92.3 percentage points lower, their 95% intervals apart: later turns are "
        "harder (complexity ceiling)."
    )
    ops = next(r for r in readings if r.startswith("- Turns whose plan"))
    assert ops == (
        "- Turns whose plan has 0 operation(s) are right 1.000 of the time (n=14), 2 operations "
        "0.000 (n=12; longer plans: fewer than 10 a group): 100.0 percentage points lower with 2 "
        "operations (complexity ceiling)."
    )
    records.pop()
    preds = preds[:-3]
    (tmp_path / "b").mkdir()
    md = (_run(tmp_path / "b", {"dev": records}, preds, bootstrap=200) / "report.md").read_text()
    turns = next(r for r in _section(md, "What the numbers say").splitlines() if "at turn" in r)
    assert turns == (
        "- Accuracy is 1.000 at turn 0 (n=12) and 0.000 at turn 1 (n=12), 100.0 percentage points "
        "lower, their 95% intervals apart: later turns are harder (complexity ceiling)."
    )

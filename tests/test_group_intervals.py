"""Per-group bootstrap intervals (issue 26, item 1): a resample that draws no item of a group
(no conversation scored at a turn position, no record with a safety score, no session) says
nothing about that group and is left out of its interval, in every system, by one helper
(``percentile_interval``); ``Interval.resamples`` counts the resamples kept of ``drawn``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck.metrics._arrays import bootstrap_groups_ci, percentile_interval, ratio_array
from fieldcheck.metrics._stats import TotalsGroup

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "numeric"


def test_numeric_example_turn_5_is_right_in_every_resample_that_draws_it(tmp_path: Path) -> None:
    """`numeric score` on the example: turn 5 is scored in 2 of the 12 conversations, both
    right. A resample that draws neither has no turn 5 and is left out, so the interval is
    [1.0, 1.0] (it was [0.0, 1.0]: such resamples were scored as accuracy 0)."""
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        [
            "numeric",
            "score",
            "--data",
            str(EXAMPLES / "data.json"),
            "--predictions",
            str(EXAMPLES / "predictions_model_a.jsonl"),
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    stats = json.loads((out / "statistics.json").read_text())
    assert stats["turns_by_turn_number"]["5"] == 2
    assert stats["accuracy_by_turn_number"]["5"] == 1.0
    turn5 = stats["bootstrap_95_ci_by_turn_number"]["5"]
    assert (turn5["low"], turn5["high"], turn5["estimate"]) == (1.0, 1.0, 1.0)
    # a resample misses both with chance (10/12)^12 = 0.112: about 112 of the 1,000 left out
    assert turn5["drawn"] == 1000 and 850 <= turn5["resamples"] <= 930
    # turn 4 (4 conversations: (8/12)^12 = 0.8% of resamples miss them), also always right
    turn4 = stats["bootstrap_95_ci_by_turn_number"]["4"]
    assert (turn4["low"], turn4["high"]) == (1.0, 1.0) and turn4["resamples"] < 1000
    # every conversation has turns 0-2: nothing left out there
    assert all(stats["bootstrap_95_ci_by_turn_number"][k]["resamples"] == 1000 for k in "012")
    md = (out / "report.md").read_text()
    assert f"| 5 | 2 | 1.000 | [1.000, 1.000] | {turn5['resamples']} of 1000 | 1.00 |" in md


# --- the grouped bootstrap against a literal loop ------------------------------------------


def _naive_group_intervals(
    items: list[list[tuple[int, bool]]], resamples: int, seed: int
) -> dict[int, tuple[float, float, int]]:
    """A deliberately naive reference: resample r draws the units
    ``default_rng(seed).integers(0, n, (resamples, n))[r]`` (bootstrap_groups_ci's draws); for
    each group (turn position) the drawn units' items of that group are listed one by one, a
    resample with none is skipped, the others give matches / items; then the k kept values
    sorted, at floor(0.025 (k - 1)) and ceil(0.975 (k - 1)). Returns (low, high, k) per group."""
    n = len(items)
    picks = np.random.default_rng(seed).integers(0, n, size=(resamples, n)).tolist()
    groups = sorted({g for unit in items for g, _ in unit})
    out: dict[int, tuple[float, float, int]] = {}
    for g in groups:
        values = []
        for row in picks:
            drawn = [match for u in row for group, match in items[u] if group == g]
            if drawn:
                values.append(sum(drawn) / len(drawn))
        if values:
            values.sort()
            k = len(values)
            out[g] = (values[math.floor(0.025 * (k - 1))], values[math.ceil(0.975 * (k - 1))], k)
    return out


def _accuracy(totals: np.ndarray) -> np.ndarray:
    return ratio_array(totals[:, 0], totals[:, 1])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 3), st.booleans()), max_size=4), min_size=1, max_size=9
    ),
    st.integers(1, 80),
    st.integers(0, 2**32 - 1),
    st.sampled_from([1, 13, 2_000_000]),
)
def test_groups_leave_out_the_resamples_without_the_group_like_a_literal_loop(
    items: list[list[tuple[int, bool]]], resamples: int, seed: int, max_cells: int
) -> None:
    """``bootstrap_groups_ci`` with ``ratio_array`` statistics (what numeric's per-turn
    intervals use), in any chunk size, gives the naive loop's bounds and kept counts."""
    n = len(items)
    groups = []
    for g in range(4):
        members = [u for u in range(n) if any(group == g for group, _ in items[u])]
        if not members:
            continue
        rows = [
            (
                float(sum(m for group, m in items[u] if group == g)),
                float(sum(group == g for group, _ in items[u])),
            )
            for u in members
        ]
        groups.append(TotalsGroup(members, rows, {f"turn {g}": _accuracy}))
    found = bootstrap_groups_ci(n, groups, resamples=resamples, seed=seed, max_cells=max_cells)
    expected = _naive_group_intervals(items, resamples, seed)
    assert found is not None
    assert set(found) == {f"turn {g}" for g in expected}
    for g, (low, high, kept) in expected.items():
        ci = found[f"turn {g}"]
        assert (ci.low, ci.high, ci.resamples, ci.drawn) == (low, high, kept, resamples)


def test_a_group_no_resample_draws_has_no_interval() -> None:
    """One resample of two units (seed 0 draws unit 1 twice): unit 0's group is in no kept
    resample, so it has no interval rather than one made of a missing group's zeros."""
    assert np.random.default_rng(0).integers(0, 2, size=(1, 2)).tolist() == [[1, 1]]
    found = bootstrap_groups_ci(
        2,
        [
            TotalsGroup([0], [(1.0, 1.0)], {"only unit 0": _accuracy}),
            TotalsGroup([1], [(0.0, 1.0)], {"only unit 1": _accuracy}),
        ],
        resamples=1,
        seed=0,
    )
    assert found is not None and set(found) == {"only unit 1"}
    assert (found["only unit 1"].resamples, found["only unit 1"].drawn) == (1, 1)


def test_percentile_interval_leaves_out_nan_and_counts_the_rest() -> None:
    values = np.array([np.nan, 0.5, 1.0, np.nan, 0.0])
    ci = percentile_interval(values, 0.5, 0.95)
    # 3 kept: sorted [0.0, 0.5, 1.0] at floor(0.025 * 2) = 0 and ceil(0.975 * 2) = 2
    assert ci is not None and (ci.low, ci.high, ci.resamples, ci.drawn) == (0.0, 1.0, 3, 5)
    assert percentile_interval(np.array([np.nan, np.nan]), 0.5, 0.95) is None
    assert ratio_array(np.array([1.0, 0.0, 2.0]), np.array([2.0, 0.0, 0.0])).tolist()[0] == 0.5
    assert np.isnan(ratio_array(np.array([0.0, 2.0]), np.array([0.0, 0.0]))).all()


# --- scipy's bootstrap as the independent reference ----------------------------------------


def test_group_interval_agrees_with_scipys_resamples_with_the_empty_ones_left_out() -> None:
    """scipy.stats.bootstrap draws its own resamples of 12 conversations, 3 of which are scored
    at a turn position, all right. Its resamples with none of the 3 give NaN (scipy keeps them:
    its own interval is NaN). Both bootstraps leave out the same share, (9/12)^12 = 3.2%
    within Monte Carlo error, and the kept resamples give [1.0, 1.0]; scored as accuracy 0
    (the old way), that 3.2% would pull the 2.5th percentile to 0.0."""
    scipy_stats = pytest.importorskip("scipy.stats")
    matches = np.array([1.0, 1.0, 1.0] + [0.0] * 9)
    scored = np.array([1.0, 1.0, 1.0] + [0.0] * 9)

    def accuracy(m: np.ndarray, c: np.ndarray, axis: int = -1) -> np.ndarray:
        return ratio_array(m.sum(axis=axis), c.sum(axis=axis))

    resamples = 20_000
    with pytest.warns(Warning):  # scipy warns that its interval is degenerate (NaN)
        theirs = scipy_stats.bootstrap(
            (matches, scored),
            accuracy,
            paired=True,
            vectorized=True,
            method="percentile",
            n_resamples=resamples,
            rng=np.random.default_rng(1),
        )
    assert math.isnan(theirs.confidence_interval.low)
    distribution = theirs.bootstrap_distribution
    units = np.column_stack([matches, scored])
    found = bootstrap_groups_ci(
        12,
        [TotalsGroup([0, 1, 2], units[:3], {"turn": _accuracy})],
        resamples=resamples,
        seed=2,
    )
    assert found is not None
    ours = found["turn"]
    left_out = 0.75**12  # 0.0317; the Monte Carlo sd of a share at 20,000 resamples: 0.0012
    assert abs(np.isnan(distribution).mean() - left_out) < 0.006
    assert abs(1 - ours.resamples / resamples - left_out) < 0.006
    theirs_kept = percentile_interval(distribution, 1.0, 0.95)
    assert theirs_kept is not None and (theirs_kept.low, theirs_kept.high) == (1.0, 1.0)
    assert (ours.low, ours.high, ours.drawn) == (1.0, 1.0, resamples)
    as_zero = percentile_interval(np.nan_to_num(distribution, nan=0.0), 1.0, 0.95)
    assert as_zero is not None and as_zero.low == 0.0

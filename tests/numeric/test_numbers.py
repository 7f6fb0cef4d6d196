"""Answer parsing, the five match types (spec "New Accuracy Metrics") and failure modes."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fieldcheck.metrics import (
    failure_mode,
    general_match,
    match_answer,
    numerical_match,
    parse_answer,
    sign_agnostic_match,
    soft_match,
    unit_agnostic_match,
)


@pytest.mark.parametrize(
    ("text", "value", "percent"),
    [
        ("$1,234.5", 1234.5, False),
        ("12.5%", 0.125, True),
        ("-3", -3.0, False),
        ("(45)", -45.0, False),
        ("1.2 million", 1_200_000.0, False),
        ("0.10", 0.1, False),
        ("$ (1,200)", -1200.0, False),
        ("-$5", -5.0, False),
        ("45 percent", 0.45, True),
        ("3.4 bn", 3.4e9, False),
        ("2.5e-3", 0.0025, False),
        ("the change was -14.1%", -0.141, True),
        ("from 2008 to 2009 it grew by 25587", 25587.0, False),
        (7, 7.0, False),
    ],
)
def test_parse_answer_numbers(text: str | int, value: float, percent: bool) -> None:
    parsed = parse_answer(text)
    assert parsed is not None
    assert parsed.value is not None
    assert math.isclose(parsed.value, value, rel_tol=1e-12)
    assert parsed.percent is percent


@pytest.mark.parametrize(
    ("text", "flag"), [("yes", True), ("No.", False), ("Yes, 5 > 3", True), ("NO", False)]
)
def test_parse_answer_yes_no(text: str, flag: bool) -> None:
    parsed = parse_answer(text)
    assert parsed is not None and parsed.boolean is flag and parsed.value is None


@pytest.mark.parametrize("text", [None, "", "   ", "n/a", "=HYPERLINK(x)"])
def test_parse_answer_nothing(text: str | None) -> None:
    assert parse_answer(text) is None


def test_parse_answer_decimals_shown() -> None:
    parsed = parse_answer("0.10")
    assert parsed is not None and parsed.decimals == 2 and parsed.written == 0.1


# --- the spec's examples --------------------------------------------------------------------


def test_spec_soft_match_example() -> None:
    # 33.3 vs 33.33: |diff| = 0.03 <= 0.3333 = 1 % of 33.33
    assert soft_match(parse_answer("33.3"), 33.33)


@pytest.mark.parametrize(
    ("prediction", "gold"), [("0.10", 10), ("10", 0.1), ("10%", 10), ("10%", 0.1), ("0.10", 0.1)]
)
def test_spec_unit_agnostic_examples(prediction: str, gold: float) -> None:
    # "0.10 vs 10 vs 10% (all match)"
    assert unit_agnostic_match(parse_answer(prediction), gold)


def test_spec_sign_agnostic_example() -> None:
    assert sign_agnostic_match(parse_answer("-33.3"), 33.3)
    assert not numerical_match(parse_answer("-33.3"), 33.3)


# --- exact boundaries (docs/decisions.md) ----------------------------------------------------


def test_numerical_match_boundaries() -> None:
    # relative error exactly 1 % matches (<=), just above does not
    assert numerical_match(parse_answer("101"), 100.0)
    assert not numerical_match(parse_answer("101.01"), 100.0)
    # absolute difference < 0.001 matches even when the gold is 0; exactly 0.001 does not
    assert numerical_match(parse_answer("0.0009"), 0.0)
    assert not numerical_match(parse_answer("0.0011"), 0.0)
    # percent sign is applied: 14.1% is 0.141 (rel err 0.26 % of 0.14136)
    assert numerical_match(parse_answer("14.1%"), 0.14136)
    assert not numerical_match(parse_answer("14.1"), 0.14136)


def test_soft_match_has_no_absolute_tolerance() -> None:
    assert not soft_match(parse_answer("0.0009"), 0.0)
    assert soft_match(parse_answer("0"), 0.0)
    assert soft_match(parse_answer("99"), 100.0)
    assert not soft_match(parse_answer("98.9"), 100.0)


def test_general_match_rules() -> None:
    assert general_match(parse_answer("14.1"), 0.14136)  # percentage points without a sign
    assert general_match(parse_answer("14.1%"), 0.14136)
    assert general_match(parse_answer("1.2 million"), 1.2)  # scale word ignored
    assert not general_match(parse_answer("0.0014"), 0.14)  # never the other direction
    assert unit_agnostic_match(parse_answer("0.0014"), 0.14)


def test_yes_no_matches() -> None:
    assert numerical_match(parse_answer("yes"), "yes")
    assert not numerical_match(parse_answer("no"), "yes")
    assert not numerical_match(parse_answer("1"), "yes")
    assert not unit_agnostic_match(parse_answer("yes"), 1.0)


@pytest.mark.parametrize(
    ("prediction", "gold", "mode"),
    [
        ("14.1%", 0.14136, None),
        ("14.1", 0.14136, "scale"),
        ("2558700", 25587.0, "scale"),
        ("-25587", 25587.0, "sign"),
        ("0.1", 0.14136, "rounding"),
        ("14%", 0.1436, "rounding"),
        ("7", 0.14136, "wrong"),
        ("1", 0.6, "rounding"),  # an integer where the gold has decimals: precision lost
        ("0", 0.45, "wrong"),  # a 0 for a gold that is not 0 is not a rounding of it
        ("0 million", 0.4, "wrong"),
        ("", 0.14136, "no_answer"),
        ("no", "yes", "wrong"),
    ],
)
def test_failure_modes(prediction: str, gold: float | str, mode: str | None) -> None:
    assert failure_mode(parse_answer(prediction), gold) == mode


def test_error_beats_a_right_answer() -> None:
    matches = match_answer(parse_answer("5"), 5.0, error=True)
    assert (
        matches.failure_mode == "error" and not matches.numerical_match and not matches.soft_match
    )


# --- properties ------------------------------------------------------------------------------

finite = st.floats(min_value=-1e9, max_value=1e9, allow_nan=False, allow_infinity=False)


def _naive_numerical(p: float, r: float) -> bool:
    diff = abs(p - r)
    if diff < 0.001:
        return True
    return r != 0 and diff / abs(r) <= 0.01


@settings(max_examples=200, deadline=None)
@given(finite, finite)
def test_numerical_match_implies_the_lenient_ones(p: float, r: float) -> None:
    parsed = parse_answer(p)
    if numerical_match(parsed, r):
        assert unit_agnostic_match(parsed, r)
        assert sign_agnostic_match(parsed, r)
        assert general_match(parsed, r)
    if soft_match(parsed, r):
        assert numerical_match(parsed, r)
    if general_match(parsed, r):
        assert unit_agnostic_match(parsed, r)


@settings(max_examples=200, deadline=None)
@given(finite, finite)
def test_numerical_match_agrees_with_naive_reference(p: float, r: float) -> None:
    diff = abs(p - r)
    # away from the exact boundary the two formulations must agree
    if abs(diff - 0.001) > 1e-12 and (r == 0 or abs(diff / abs(r) - 0.01) > 1e-9):
        assert numerical_match(parse_answer(p), r) == _naive_numerical(p, r)


@settings(max_examples=200, deadline=None)
@given(finite, finite)
def test_sign_symmetries(p: float, r: float) -> None:
    assert numerical_match(parse_answer(p), r) == numerical_match(parse_answer(-p), -r)
    assert unit_agnostic_match(parse_answer(p), r) == unit_agnostic_match(parse_answer(-p), -r)
    assert soft_match(parse_answer(p), r) == soft_match(parse_answer(-p), -r)
    sign = sign_agnostic_match(parse_answer(p), r)
    assert (
        sign == sign_agnostic_match(parse_answer(-p), r) == sign_agnostic_match(parse_answer(p), -r)
    )


@settings(max_examples=200, deadline=None)
@given(
    st.floats(min_value=0.001, max_value=1e6, allow_nan=False), st.sampled_from([1.0, 100.0, 0.01])
)
def test_unit_agnostic_accepts_every_scaling(r: float, factor: float) -> None:
    assert unit_agnostic_match(parse_answer(r * factor), r)


@settings(max_examples=200, deadline=None)
@given(
    st.decimals(
        min_value=-1_000_000, max_value=1_000_000, places=2, allow_nan=False, allow_infinity=False
    )
)
def test_parse_formatted_numbers(d: object) -> None:
    x = float(str(d))
    text = f"${x:,.2f}" if x >= 0 else f"(${-x:,.2f})"
    parsed = parse_answer(text)
    assert parsed is not None and parsed.value is not None
    assert math.isclose(parsed.value, x, abs_tol=1e-9)


def test_numpy_and_decimal_scalars_are_read_by_value_and_others_named() -> None:
    """A pandas row's numpy scalars and a Decimal are numbers (numpy's bool a yes/no, as a bool
    is); they raised 'cannot use a string pattern on a bytes-like object' (a trial's finding)."""
    from decimal import Decimal

    import numpy as np
    import pandas as pd

    from fieldcheck.metrics import numerical_match, parse_answer

    assert numerical_match(parse_answer(np.int64(5)), np.int64(5))
    assert numerical_match(parse_answer(np.int32(10)), 10.0)
    assert numerical_match(parse_answer("5"), np.int64(5))
    assert not numerical_match(parse_answer("6"), np.int64(5))
    assert numerical_match(parse_answer(Decimal("1.5")), Decimal("1.50"))
    assert numerical_match(parse_answer(np.bool_(True)), True)
    assert numerical_match(parse_answer("yes"), np.bool_(True))
    assert not numerical_match(parse_answer(True), np.int64(1))  # a bool is no number
    with pytest.raises(TypeError, match=r"^reference must be a str, a number, a bool or None"):
        numerical_match(parse_answer("5"), pd.NA)
    with pytest.raises(TypeError, match=r"^text must be a str, a number, a bool or None"):
        parse_answer(pd.NA)

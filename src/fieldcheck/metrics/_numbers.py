"""Numeric answers: parsing a model's answer, the five match types and the failure mode.

Spec: numeric-qa-evaluation.md, "New Accuracy Metrics" and "Analysis Workflows" 1.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Iterable
from decimal import Decimal
from numbers import Integral, Real
from typing import Literal, NamedTuple

FailureMode = Literal["scale", "sign", "rounding", "wrong", "no_answer", "error"]
# Which rule of ``parse_answer`` read the answer (turns.csv ``answer_rule``; docs/numeric.md)
AnswerRule = Literal["yes_no", "number", "last_number", "preferred_over_year"]

RELATIVE_TOLERANCE = 0.01  # numerical and soft match: within 1 % of the expected value
ABSOLUTE_TOLERANCE = 0.001  # numerical match also accepts |difference| < 0.001
UNIT_FACTORS = (1.0, 100.0, 0.01)

_SCALES = {
    1e3: ("thousand", "thousands", "k"),
    1e6: ("million", "millions", "mn", "m"),
    1e9: ("billion", "billions", "bn", "b"),
    1e12: ("trillion", "tn"),
}
_SCALE_WORDS = {word: scale for scale, words in _SCALES.items() for word in words}
_NUMBER_TOKEN = re.compile(
    r"""
    (?=[\s(\-+\u2212\u2013$\u20ac\u00a3\d.])  # what a match can start with: skips other positions fast
    (?P<open>\()?\s*
    (?P<sign>[-+\u2212]|\u2013(?=[$\u20ac\u00a3\d.]))?\s*
    (?:(?P<cur>[$\u20ac\u00a3])\s*)?
    (?P<sign2>[-+\u2212]|\u2013(?=[\d.]))?\s*
    (?P<num>(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:e[-+]?\d+\b)?)
    (?:\s*(?P<pct>%|percent\b|pct\b))?
    (?:\s*(?P<scale>thousands?|millions?|billions?|trillion|mn|bn|tn|k|m|b)\b)?
    \s*(?P<close>\))?
    """,
    re.IGNORECASE | re.VERBOSE,
)
_YES = {"yes", "true", "y"}
_NO = {"no", "false", "n"}
# the answer is one number, maybe after words (not yes/no), a "$", a "-" or with a "%" ("3967.00",
# "the answer is -1102.000", "$-9,999.9", "14.1%"): read without _NUMBER_TOKEN, as its rules read it
_SIMPLE_ANSWER = re.compile(
    r"(?:(?!(?i:yes|no)\b)[A-Za-z]+(?: [A-Za-z]+)* )?\$?(-?)"
    r"([0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(%?)"
)
_ASCII_DIGIT = re.compile(r"[0-9]")
_NOT_LETTER = re.compile(r"[^a-z]")
_FIRST_WORD = re.compile(r"^\W*([A-Za-z]+)\b")
_YEAR = re.compile(r"(?:19|20)\d\d")


class ParsedAnswer(NamedTuple):
    """A parsed answer: ``value`` with percent sign and scale word applied (12.5% -> 0.125),
    ``written`` as written (12.5), or ``boolean`` for yes/no."""

    value: float | None = None
    written: float | None = None
    percent: bool = False
    scale: float = 1.0
    decimals: int = 0
    boolean: bool | None = None
    rule: AnswerRule = "number"

    @property
    def readings(self) -> tuple[float, ...]:
        """Every way to read the number: as parsed, percent sign ignored, scale word ignored."""
        return _readings(self)


def _readings(answer: ParsedAnswer) -> tuple[float, ...]:
    """``answer.readings`` (a call costs less than a property: the match types call this)."""
    value, written, percent, scale = answer[:4]
    if value is None or written is None:
        return ()
    if not percent and scale == 1.0 and value == written:
        return (value,)  # a plain number: every reading is the same
    unscaled = written / 100 if percent else written
    return tuple(dict.fromkeys((value, written * scale, unscaled, written)))


def parse_answer(text: str | float | int | bool | None) -> ParsedAnswer | None:
    """Parse a model's answer into a number or yes/no; ``None`` when there is none (empty text).

    In longer text the last number, unless it is a trailing year (issue 9). The rules and their
    examples: docs/numeric.md, "Answers and the five match types".
    """
    simple = _SIMPLE_ANSWER.fullmatch(text) if type(text) is str else None
    if simple:  # what the rules below give for it, sooner
        minus, number, percent = simple.groups()
        written = float(number.replace(",", ""))
        if not math.isfinite(written):
            return None
        written = -written if minus else written
        value = written / 100 if percent else written
        decimals = len(number.partition(".")[2])
        return ParsedAnswer._make((value, written, bool(percent), 1.0, decimals, None, "number"))
    if text is None:
        return None
    if isinstance(text, bool):
        return ParsedAnswer(boolean=text, rule="yes_no")
    if isinstance(text, int | float):
        if not math.isfinite(text):
            return None
        return ParsedAnswer(
            value=float(text), written=float(text), decimals=_decimals(repr(float(text)))
        )
    if not isinstance(text, str):  # numpy's, a Decimal: read by value
        return parse_answer(_plain(text, "text"))
    # one space per whitespace run: the number pattern's optional spaces then cannot backtrack
    # over a long run (a hostile answer of 100,000 spaces would take minutes)
    cleaned = " ".join(text.split())
    if not cleaned:
        return None
    if not _has_digit(cleaned):  # "yes." / "N" but not "5 yes"
        word = _NOT_LETTER.sub("", cleaned.lower())
        if word in _YES:
            return ParsedAnswer(boolean=True, rule="yes_no")
        if word in _NO:
            return ParsedAnswer(boolean=False, rule="yes_no")
    first_word = _FIRST_WORD.match(cleaned)
    if first_word and first_word.group(1).lower() in {"yes", "no"}:
        return ParsedAnswer(boolean=first_word.group(1).lower() == "yes", rule="yes_no")
    matches = list(_NUMBER_TOKEN.finditer(cleaned))
    if not matches:
        return None
    rule: AnswerRule = "number" if len(matches) == 1 else "last_number"
    m = matches[-1]
    if _year_like(m):
        earlier = next((x for x in reversed(matches) if not _year_like(x)), None)
        if earlier is not None:
            m, rule = earlier, "preferred_over_year"
    digits = m.group("num").replace(",", "")
    written = float(digits)
    negative = bool(
        (m.group("open") and m.group("close") and not _year_like(m))
        or (_minus(m, "sign", cleaned) or _minus(m, "sign2", cleaned))
    )
    if negative:
        written = -written
    percent = m.group("pct") is not None
    scale_word = (m.group("scale") or "").lower()
    scale = _SCALE_WORDS.get(scale_word, 1.0)
    if scale_word in {"m", "b", "k"} and percent:
        scale = 1.0
    value = written * scale
    if percent:
        value /= 100
    if not math.isfinite(value):  # "1e309", "1e300 trillion": not an answer
        return None
    return ParsedAnswer(
        value=value,
        written=written,
        percent=percent,
        scale=scale,
        decimals=_decimals(digits),
        rule=rule,
    )


def _plain(value: object, name: str) -> float | int | bool | None:
    """A numeric scalar of another type as Python's: numpy's bool as a bool (yes/no, as ``True``
    is), an integer (``__index__``) as an int, a real or ``Decimal`` as a float; anything else
    a TypeError naming the argument."""
    if getattr(getattr(value, "dtype", None), "kind", None) == "b":
        return bool(value)
    if isinstance(value, Integral) or hasattr(value, "__index__"):
        return operator.index(value)  # type: ignore[arg-type]
    if isinstance(value, Real | Decimal):
        return float(value)
    raise TypeError(
        f"{name} must be a str, a number, a bool or None (got {type(value).__name__}: {value!r})"
    )


def _has_digit(text: str) -> bool:
    """``any(ch.isdigit() for ch in text)``; in ASCII text only 0-9 are digits."""
    if text.isascii():
        return _ASCII_DIGIT.search(text) is not None
    return any(ch.isdigit() for ch in text)


def _year_like(m: re.Match[str]) -> bool:
    """A bare four-digit integer 1900-2099, maybe in parentheses: a year, not the answer."""
    if m.group("cur") or m.group("pct") or m.group("scale"):
        return False
    if (m.group("sign") or m.group("sign2")) and not _after_number(m, m.string):
        return False
    return _YEAR.fullmatch(m.group("num")) is not None


_MINUS = frozenset("-\u2212\u2013")


def _after_number(m: re.Match[str], text: str) -> bool:
    """The match's sign follows a number ("2018-2019", "10 - 20"): a range's dash, not a sign;
    one set on the number after a space ("FY2019 -5.2%") is a sign."""
    sign = m.start("sign") if m.group("sign") else m.start("sign2")
    i = sign - 1
    if i >= 0 and text[i] == " ":  # the text's spaces are single (``parse_answer``'s cleaning)
        if text[sign + 1 : sign + 2] != " ":
            return False
        i -= 1
    return i >= 0 and text[i].isdigit()


def _minus(m: re.Match[str], group: str, text: str) -> bool:
    """A minus sign (hyphen, U+2212, or an en dash set right before the number), not a dash
    between two numbers."""
    return m.group(group) in _MINUS and not _after_number(m, text)


def _decimals(digits: str) -> int:
    if "e" in digits.lower():
        return 0
    return len(digits.split(".", 1)[1]) if "." in digits else 0


def _close(prediction: float, reference: float) -> bool:
    """Numerical match on two numbers: |p - r| < 0.001 or |p - r| <= 1 % of |r|."""
    diff = abs(prediction - reference)
    return diff < ABSOLUTE_TOLERANCE or diff <= abs(reference) * RELATIVE_TOLERANCE


def _expected(reference: float | str | bool | None) -> float | bool | None:
    """The gold as a number or yes/no; ``None`` when it reads as neither (or is not finite)."""
    if type(reference) is float:  # nearly every gold: each match type reads it
        return reference if math.isfinite(reference) else None
    if reference is None:
        return None
    if isinstance(reference, bool):
        return reference
    if isinstance(reference, int | float):
        return float(reference) if math.isfinite(reference) else None
    try:
        low = reference.strip().lower()
    except AttributeError:  # numpy's, a Decimal: read by value (no cost to a str)
        return _expected(_plain(reference, "reference"))
    if low in _YES:
        return True
    if low in _NO:
        return False
    parsed = parse_answer(reference)
    return parsed.value if parsed is not None else None


def _same_boolean(prediction: ParsedAnswer, expected: float | bool) -> bool:
    """yes/no answers match only a yes/no gold, and only the same one (True is not 1.0)."""
    return isinstance(expected, bool) and prediction.boolean is expected


def _any_close(
    candidates: Iterable[float], reference: float, factors: tuple[float, ...] = (1.0,)
) -> bool:
    """``_close`` of any candidate times any factor (the bound computed once)."""
    bound = abs(reference) * RELATIVE_TOLERANCE
    for candidate in candidates:
        for factor in factors:
            diff = abs(candidate * factor - reference)
            if diff < ABSOLUTE_TOLERANCE or diff <= bound:
                return True
    return False


def numerical_match(prediction: ParsedAnswer | None, reference: float | str | bool | None) -> bool:
    """Baseline: |p - r| < 0.001 or |p - r| <= 0.01 * |r|, with p as parsed (12.5% is 0.125).

    yes/no answers match when equal. No answer or no gold: False. Spec: 5. Numerical Match.
    """
    expected = _expected(reference)
    if prediction is None or expected is None:
        return False
    if isinstance(expected, bool) or prediction.boolean is not None:
        return _same_boolean(prediction, expected)
    return prediction.value is not None and _close(prediction.value, expected)


def soft_match(prediction: ParsedAnswer | None, reference: float | str | bool | None) -> bool:
    """The spec's ``abs_diff <= abs(exp_val) * 0.01`` exactly (no absolute tolerance, so a gold of
    0 needs an exact 0). yes/no: equal. Spec: 1. Soft Numerical Match."""
    expected = _expected(reference)
    if prediction is None or expected is None:
        return False
    if isinstance(expected, bool) or prediction.boolean is not None:
        return _same_boolean(prediction, expected)
    if prediction.value is None:
        return False
    return abs(prediction.value - expected) <= abs(expected) * RELATIVE_TOLERANCE


def unit_agnostic_match(
    prediction: ParsedAnswer | None, reference: float | str | bool | None
) -> bool:
    """Numerical match of any reading (as parsed, percent sign ignored, scale word ignored)
    times 1, 100 or 0.01. So 0.10, 10 and 10% all match 0.1. Spec: 2. Unit-Agnostic Accuracy."""
    expected = _expected(reference)
    if prediction is None or expected is None:
        return False
    if isinstance(expected, bool) or prediction.boolean is not None:
        return numerical_match(prediction, reference)
    return _any_close(_readings(prediction), expected, UNIT_FACTORS)


def sign_agnostic_match(
    prediction: ParsedAnswer | None, reference: float | str | bool | None
) -> bool:
    """Numerical match of |p| against |r|: -33.3 matches 33.3. Spec: 3. Sign-Agnostic Accuracy."""
    expected = _expected(reference)
    if prediction is None or expected is None:
        return False
    if isinstance(expected, bool) or prediction.boolean is not None:
        return numerical_match(prediction, reference)
    return prediction.value is not None and _close(abs(prediction.value), abs(expected))


def general_match(prediction: ParsedAnswer | None, reference: float | str | bool | None) -> bool:
    """Flexible formats and percentage conversions: numerical match of any reading (as parsed,
    percent sign ignored, scale word ignored), or of a reading without a percent sign taken as
    percentage points (14.1 for 0.141). Never the other direction. Spec: 4. General Match."""
    expected = _expected(reference)
    if prediction is None or expected is None:
        return False
    if isinstance(expected, bool) or prediction.boolean is not None:
        return numerical_match(prediction, reference)
    readings = _readings(prediction)
    return _any_close(readings, expected) or (
        not prediction.percent and _any_close([r / 100 for r in readings], expected)
    )


def is_rounding_of(prediction: ParsedAnswer | None, reference: float | str | bool | None) -> bool:
    """True when the prediction equals the gold rounded to the decimals the prediction shows
    (0.1 for 0.14136; 14% for 0.14136 read in percent), but is not a numerical match; a 0 for a
    gold that is not 0 (0 for 0.45) is wrong, not rounded."""
    expected = _expected(reference)
    if (
        prediction is None
        or prediction.written is None
        or expected is None
        or isinstance(expected, bool)
    ):
        return False
    if numerical_match(prediction, reference):
        return False
    gold_in_unit = expected * 100 if prediction.percent else expected / prediction.scale
    target = round(gold_in_unit, prediction.decimals)
    if target == 0 and expected != 0:
        return False
    return math.isclose(prediction.written, target, rel_tol=1e-9, abs_tol=1e-12)


def failure_mode(
    prediction: ParsedAnswer | None,
    reference: float | str | bool | None,
    *,
    error: bool = False,
) -> FailureMode | None:
    """Why a turn failed: the first of ``error``, ``no_answer``, ``scale`` (unit-agnostic),
    ``sign`` (sign-agnostic), ``rounding`` (``is_rounding_of`` or soft), ``wrong``; ``None`` for a
    numerical match. Spec: "Analysis Workflows" 1."""
    if error:
        return "error"
    matches = (numerical_match, unit_agnostic_match, sign_agnostic_match, soft_match)
    return _failure(prediction, reference, *(match(prediction, reference) for match in matches))


def _failure(
    prediction: ParsedAnswer | None,
    reference: float | str | bool | None,
    numerical: bool,
    unit: bool,
    sign: bool,
    soft: bool,
) -> FailureMode | None:
    """``failure_mode`` from the match types already found (``match_answer`` finds each once)."""
    if prediction is None:
        return "no_answer"
    if numerical:
        return None
    if unit:
        return "scale"
    if sign:
        return "sign"
    if soft or is_rounding_of(prediction, reference):
        return "rounding"
    return "wrong"


class AnswerMatches(NamedTuple):
    """All five match types and the failure mode of one answer."""

    numerical_match: bool
    soft_match: bool
    unit_agnostic_match: bool
    sign_agnostic_match: bool
    general_match: bool
    failure_mode: FailureMode | None


_ERROR_MATCHES = AnswerMatches(False, False, False, False, False, "error")


def match_answer(
    prediction: ParsedAnswer | None,
    reference: float | str | bool | None,
    *,
    error: bool = False,
) -> AnswerMatches:
    """Every match type and the failure mode at once; a turn with an error matches nothing
    (its answer is not trusted)."""
    if error:
        return _ERROR_MATCHES
    numerical = numerical_match(prediction, reference)
    soft = soft_match(prediction, reference)
    unit = unit_agnostic_match(prediction, reference)
    sign = sign_agnostic_match(prediction, reference)
    general = general_match(prediction, reference)
    failure = _failure(prediction, reference, numerical, unit, sign, soft)
    return AnswerMatches._make((numerical, soft, unit, sign, general, failure))

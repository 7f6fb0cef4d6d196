"""Deliberately naive references of numeric-qa-evaluation.md's numbers, the oracles the property
tests hold ``fieldcheck.metrics`` to (ARCHITECTURE.md, "One implementation of every number"):
written from the spec's formulas, one rule after another, sharing no helper with the metrics."""

from __future__ import annotations

import math

from fieldcheck.metrics import AnswerMatches, ParsedAnswer, parse_answer

YES, NO = ("yes", "true", "y"), ("no", "false", "n")


def gold_value(reference: float | str | bool | None) -> float | bool | None:
    """The gold as a finite number or yes/no, else ``None`` (text goes through parse_answer)."""
    if reference is None or isinstance(reference, bool):
        return reference
    if isinstance(reference, int | float):
        return float(reference) if math.isfinite(reference) else None
    if reference.strip().lower() in YES:
        return True
    if reference.strip().lower() in NO:
        return False
    parsed = parse_answer(reference)
    return None if parsed is None else parsed.value


def close(p: float, e: float) -> bool:
    """The spec's numerical match: |p - e| < 0.001 or |p - e| <= 1% of |e|."""
    return abs(p - e) < 0.001 or abs(p - e) <= abs(e) * 0.01


def readings(p: ParsedAnswer) -> list[float]:
    """As parsed, the scale word ignored, the percent sign ignored, as written (none without a
    written number: only a hand-built answer lacks one)."""
    if p.value is None or p.written is None:
        return []
    return [p.value, p.written * p.scale, p.written / 100 if p.percent else p.written, p.written]


def rounding(p: ParsedAnswer, e: float) -> bool:
    """The gold rounded to the decimals the prediction shows, in the prediction's unit (a gold
    that is not 0 rounded to 0 is not a rounding)."""
    if p.written is None:
        return False
    target = round(e * 100 if p.percent else e / p.scale, p.decimals)
    if target == 0 and e != 0:
        return False
    return math.isclose(p.written, target, rel_tol=1e-9, abs_tol=1e-12)


def match_answer_reference(
    prediction: ParsedAnswer | None, reference: float | str | bool | None, *, error: bool = False
) -> AnswerMatches:
    """The five match types (numerical, soft, unit-agnostic, sign-agnostic, general) and the
    failure mode, each from its spec formula."""
    nothing = (False, False, False, False, False)
    if error:
        return AnswerMatches(*nothing, "error")
    if prediction is None:
        return AnswerMatches(*nothing, "no_answer")
    e = gold_value(reference)
    if e is None:
        return AnswerMatches(*nothing, "wrong")
    if isinstance(e, bool) or prediction.boolean is not None:
        same = isinstance(e, bool) and prediction.boolean is e
        if same:
            return AnswerMatches(True, True, True, True, True, None)
        unread = not isinstance(e, bool) and rounding(prediction, e)
        return AnswerMatches(*nothing, "rounding" if unread else "wrong")
    p = prediction.value
    if p is None:  # no number read (only a hand-built answer has a written one then)
        unread = rounding(prediction, e)
        return AnswerMatches(*nothing, "rounding" if unread else "wrong")
    numerical = close(p, e)
    soft = abs(p - e) <= abs(e) * 0.01
    unit = any(close(r * f, e) for r in readings(prediction) for f in (1.0, 100.0, 0.01))
    sign = close(abs(p), abs(e))
    general = any(close(r, e) for r in readings(prediction)) or (
        not prediction.percent and any(close(r / 100, e) for r in readings(prediction))
    )
    if numerical:
        mode = None
    elif unit:
        mode = "scale"
    elif sign:
        mode = "sign"
    elif soft or rounding(prediction, e):
        mode = "rounding"
    else:
        mode = "wrong"
    return AnswerMatches(numerical, soft, unit, sign, general, mode)

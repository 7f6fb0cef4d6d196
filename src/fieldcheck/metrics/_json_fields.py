"""JSON evaluation's pure part (json-evaluation.md phases 0-4): null test, key buckets, the four
scores, strategy resolution and EXACT; the model's output first, then the ground truth."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import math
import operator
import re
from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from numbers import Integral, Number, Real
from typing import Any, Literal, NamedTuple, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from fieldcheck._util.errors import check_type
from fieldcheck._util.jsonio import nesting_depth as nesting_depth

logger = logging.getLogger("fieldcheck")

Strategy = Literal["EXACT", "FUZZY", "SEMANTIC", "IGNORE"]
STRATEGIES: tuple[str, ...] = get_args(Strategy)
ValueType = Literal[
    "null", "number", "boolean", "date", "email", "identifier", "array", "object", "text"
]
BucketName = Literal[
    "extra_keys", "gt_null_aio_has_value", "gt_non_null", "aio_missing_or_null", "both_non_null"
]
BUCKET_NAMES: tuple[str, ...] = get_args(BucketName)


def is_null(value: Any) -> bool:
    """``None``, ``""`` or a whitespace-only string (spec "Definition of Null"); empty arrays and
    objects are values."""
    return value is None or (isinstance(value, str) and not value.strip())


class KeyBuckets(NamedTuple):
    """The spec's five key buckets (Phase 0), each a sorted list of keys, and the number of
    distinct keys of both sides (Phase 2's denominator)."""

    extra_keys: list[str]
    gt_null_aio_has_value: list[str]
    gt_non_null: list[str]
    aio_missing_or_null: list[str]
    both_non_null: list[str]
    total_distinct: int

    @property
    def hallucination_count(self) -> int:
        """``len(extra_keys) + len(gt_null_aio_has_value)`` (Phase 2 numerator)."""
        return len(self.extra_keys) + len(self.gt_null_aio_has_value)

    def as_dict(self) -> dict[str, list[str]]:
        """The five buckets by their spec names (copies of the sorted key lists)."""
        return {name: list(keys) for name, keys in zip(BUCKET_NAMES, self[:5], strict=True)}


def classify_keys(output: Mapping[str, Any], ground_truth: Mapping[str, Any]) -> KeyBuckets:
    """Phase 0: every key of ``output`` (AIO) and ``ground_truth`` (GT) in the spec's buckets,
    sorted by text (a key null or absent on both sides in none, but in ``total_distinct``). Empty
    input: all buckets empty, ``total_distinct`` 0."""
    extra = [k for k in output if k not in ground_truth]
    gt_null_value: list[str] = []
    gt_non_null: list[str] = []
    missing: list[str] = []
    both: list[str] = []
    for k, gv in ground_truth.items():
        out_null = k not in output or is_null(output[k])
        if is_null(gv):
            if not out_null:
                gt_null_value.append(k)
        else:
            gt_non_null.append(k)
            (missing if out_null else both).append(k)
    return KeyBuckets(
        sorted(extra, key=str),
        sorted(gt_null_value, key=str),
        sorted(gt_non_null, key=str),
        sorted(missing, key=str),
        sorted(both, key=str),
        len(ground_truth) + len(extra),
    )


def completeness(aio_matched_non_null_count: int, gt_non_null_count: int) -> float:
    """Phase 1: share of GT's non-null keys that AIO also fills. Range [0, 1]; 1.0 when GT expects nothing."""
    if gt_non_null_count == 0:
        return 1.0
    return aio_matched_non_null_count / gt_non_null_count


def hallucination(hallucination_count: int, total_distinct: int) -> float:
    """Phase 2: (extra keys + keys null in GT but filled in AIO) / all distinct keys. Range [0, 1];
    0.0 when neither side has a key."""
    if total_distinct == 0:
        return 0.0
    return hallucination_count / total_distinct


def accuracy(total_acc_score: float, scorable_count: int) -> float:
    """Phase 3: mean 0/1 field score over ``both_non_null`` minus IGNORE fields. Range [0, 1];
    1.0 when nothing is scorable ("nothing to score -> perfect")."""
    if scorable_count == 0:
        return 1.0
    return total_acc_score / scorable_count


WEIGHTS_SUM = "must keep the sum of the weights finite (at most 1.7976931348623157e+308)"


class RqsWeights(BaseModel):
    """Phase 4 weights; defaults are the spec's. Each must be finite and >= 0, and so must their
    sum (they need not sum to 1)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    accuracy: float = Field(0.45, ge=0, allow_inf_nan=False)
    completeness: float = Field(0.25, ge=0, allow_inf_nan=False)
    hallucination: float = Field(0.15, ge=0, allow_inf_nan=False)
    safety: float = Field(0.15, ge=0, allow_inf_nan=False)

    @field_validator("accuracy", "completeness", "hallucination", "safety")
    @classmethod
    def _sum_finite(cls, value: float, info: ValidationInfo) -> float:
        """The weights' sum must be a finite double, so that no weighted sum (RQS) overflows:
        the first weight that takes the running sum beyond the double range is refused."""
        earlier = [v for v in info.data.values() if isinstance(v, float | int)]
        try:
            total = math.fsum([*earlier, value])
        except OverflowError:
            total = math.inf
        if not math.isfinite(total):
            raise ValueError(WEIGHTS_SUM)
        return value


def rqs(
    *,
    accuracy: float,
    completeness: float,
    hallucination: float,
    safety_score: float,
    weights: RqsWeights | None = None,
) -> float:
    """Phase 4 Response Quality Score: weighted sum minus weighted hallucination, clamped to [0, 1]."""
    w = weights or RqsWeights()
    value = math.fsum(
        [
            w.accuracy * accuracy,
            w.completeness * completeness,
            w.safety * safety_score,
            -w.hallucination * hallucination,
        ]
    )  # fsum rounds once: the walkthrough gives 0.7375, not 0.7374999999999999
    return min(1.0, max(0.0, value))


# --- value types and strategy resolution -----------------------------------------------------

_NUMBER_TEXT = re.compile(
    r"^[+-]?[$€£¥]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?%?$"
)
_EMAIL = re.compile(
    r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}$"
)
_ISO_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_ISO_DATETIME = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?$"
)
_YMD = re.compile(r"^(\d{4})([/.])(\d{1,2})\2(\d{1,2})$")
_DMY = re.compile(r"^(\d{1,2})([/.-])(\d{1,2})\2(\d{4})$")
_MONTH_NAMES = (
    "january february march april may june july august september october november december"
)
# each month by its name and its first three letters, and "sept"
_MONTHS = {
    name: month
    for month, full in enumerate(_MONTH_NAMES.split(), start=1)
    for name in (full, full[:3])
}
_MONTHS["sept"] = 9
_DAY_MONTH_YEAR = re.compile(r"^(\d{1,2})(?:st|nd|rd|th)?\s+([A-Za-z]+)\.?,?\s+(\d{4})$")
_MONTH_DAY_YEAR = re.compile(r"^([A-Za-z]+)\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})$")
_MONTH_YEAR = re.compile(r"^([A-Za-z]+)\.?,?\s+(\d{4})$")


def _valid_date(year: int, month: int, day: int) -> bool:
    try:
        _dt.date(year, month, day)
    except ValueError:
        return False
    return True


def is_date_text(text: str) -> bool:
    """True for a date in a format auto-detection knows (docs/json.md "Strategies") that exists in
    the calendar (``2024-02-30`` is text)."""
    s = text.strip()
    m = _ISO_DATE.match(s) or _ISO_DATETIME.match(s)
    if m:
        ok = _valid_date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        if ok and m.re is _ISO_DATETIME:
            second = int(m.group(6)) if m.group(6) else 0
            ok = int(m.group(4)) < 24 and int(m.group(5)) < 60 and second < 60
        return ok
    m = _YMD.match(s)
    if m:
        return _valid_date(int(m.group(1)), int(m.group(3)), int(m.group(4)))
    m = _DMY.match(s)
    if m:
        a, b, year = int(m.group(1)), int(m.group(3)), int(m.group(4))
        return _valid_date(year, b, a) or _valid_date(year, a, b)
    m = _DAY_MONTH_YEAR.match(s)
    if m and m.group(2).lower() in _MONTHS:
        return _valid_date(int(m.group(3)), _MONTHS[m.group(2).lower()], int(m.group(1)))
    m = _MONTH_DAY_YEAR.match(s)
    if m and m.group(1).lower() in _MONTHS:
        return _valid_date(int(m.group(3)), _MONTHS[m.group(1).lower()], int(m.group(2)))
    m = _MONTH_YEAR.match(s)  # a month: "March 2024" / "April 2024" are 0.89 alike as text
    return bool(m and m.group(1).lower() in _MONTHS and int(m.group(2)) > 0)


def is_email_text(text: str) -> bool:
    """True for ``local@domain.tld`` (an RFC 5322 "atom" local part, a 2-63 letter top-level
    domain), surrounding whitespace ignored; display names (``John <j@x.com>``) are text."""
    return bool(_EMAIL.match(text.strip()))


def is_number_text(text: str) -> bool:
    """True for a string that writes a number: ``42``, ``-3.5``, ``1e6``, ``1,200.50``, ``$99``, ``12%``."""
    s = text.strip()
    return bool(_NUMBER_TEXT.match(s)) and any(c.isdigit() for c in s)


_CODE = re.compile(r"[A-Z][A-Z0-9_./#:-]*[A-Z0-9]")
_WORD = re.compile(r"\S+")  # a word of ``str.split()`` (the same spaces)
IDENTIFIER_MAX_CHARS = 64


def is_identifier_text(text: str) -> bool:
    """True for one token with a digit (``SKU-1001``, a hash) or of at most 64 capitals (``USD``,
    ``N/A``), or tokens of digits, capitals and signs with a digit (``+1 555-0100``,
    ``USD 1,200.50``): embeddings read such strings as near-synonyms, so they are EXACT (issue 9;
    docs/json.md "Strategies")."""
    tokens = text.split(maxsplit=1)
    if len(tokens) != 1:  # words read up to the first that is not a code's (a long text: one)
        words = map(operator.itemgetter(0), _WORD.finditer(text))
        return all(map(_code_token, words)) and any(c.isdigit() for c in text)
    s = tokens[0]
    if any(c.isdigit() for c in s):
        return True
    return len(s) <= IDENTIFIER_MAX_CHARS and _CODE.fullmatch(s) is not None


def _code_token(token: str) -> bool:
    """A word of a written code: it has a digit, no letter, or is in capitals (``USD``)."""
    return (
        any(c.isdigit() for c in token)
        or not any(c.isalpha() for c in token)
        or _CODE.fullmatch(token) is not None
    )


def is_quantity_text(text: str) -> bool:
    """A number and a word for its unit (``1.2 kg``, ``30 days``): a number as the spec's
    auto-detection means it (``1.2 kg`` / ``2.1 kg`` are 0.97 alike as text)."""
    tokens = text.split(maxsplit=2)  # not every word of a long text (a copy of each)
    return len(tokens) == 2 and tokens[1].isalpha() and is_number_text(tokens[0])


def detect_value_type(value: Any) -> ValueType:
    """The spec's auto-detection type of a JSON value (Phase 3 "Strategy Resolution"), a string by
    what it writes (identifier: issue 9, not in the spec)."""
    if is_null(value):
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, Number):
        return "number"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    text = str(value)
    if is_number_text(text) or is_quantity_text(text):
        return "number"
    if is_date_text(text):
        return "date"
    if is_email_text(text):
        return "email"
    if is_identifier_text(text):
        return "identifier"
    return "text"


def auto_strategy(value: Any) -> Strategy:
    """number, boolean, date, email, identifier, array, object -> EXACT; text -> SEMANTIC (spec
    Phase 3, plus identifiers: issue 9)."""
    return "SEMANTIC" if detect_value_type(value) == "text" else "EXACT"


_INDEX = re.compile(r"\[\d+\]")


def wildcard_path(path: str) -> str:
    """``items[3].sku`` -> ``items[*].sku``: the form a strategy config uses for every index."""
    return _INDEX.sub("[*]", path)


def configured_strategy(field: str, strategies: Mapping[str, Strategy]) -> Strategy | None:
    """The strategy config's entry for ``field`` (spec Phase 3 "Strategy Resolution", step 1):
    its exact key, then its ``[*]`` form, then its nearest parent's (``address`` for
    ``address.city`` under --flatten); None when the config names none of them."""
    for path in config_paths(field):
        if (found := strategies.get(path)) is not None:
            return found
    return None


def config_paths(field: str) -> Iterator[str]:
    """The strategy config keys that may name ``field``, nearest first: itself, its ``[*]``
    form, then each parent's (``items[0].sku``: ``items[*].sku``, ``items[0]``, ``items[*]``,
    ``items``)."""
    while field:
        yield field
        if "[" in field and (wild := wildcard_path(field)) != field:
            yield wild
        field = field[: max(field.rfind("."), field.rfind("["), 0)]


def resolve_strategy(
    field: str, gt_value: Any, *, strategies: Mapping[str, Strategy] | None = None
) -> Strategy:
    """Phase 3 strategy of ``field``: the config's entry (``configured_strategy``), else
    auto-detection from the ground-truth value's type (``auto_strategy``)."""
    found = configured_strategy(field, strategies) if strategies else None
    return auto_strategy(gt_value) if found is None else found


# --- EXACT -----------------------------------------------------------------------------------


def _canonical_numbers(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else value
    if isinstance(value, int):
        return value
    if isinstance(value, Number):
        return _plain_number(value)
    if isinstance(value, Mapping):
        return {str(k): _canonical_numbers(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical_numbers(v) for v in value]
    return str(value)


def _plain_number(value: Number) -> Any:
    """A number of another type (``Decimal``, ``Fraction``, numpy's) as the int or float a JSON
    file's would be read as, so EXACT compares it by value: ``Decimal("1.50")`` is ``1.5``,
    ``Decimal("1.0")`` is ``1``, ``numpy.int64(5)`` is ``5``; a complex number stays itself; a
    signalling NaN (``Decimal("sNaN")``, which ``float`` refuses) is NaN, as a quiet one."""
    if isinstance(value, Integral):
        return int(value)
    if isinstance(value, Decimal) and value.as_tuple().exponent == 0:
        return int(value)  # written as an integer (not "1e2", "1.0"): exact, as JSON's integer
    if isinstance(value, Decimal | Real):
        number = math.nan if isinstance(value, Decimal) and value.is_snan() else float(value)
        return int(number) if math.isfinite(number) and number.is_integer() else number
    return value


def canonical_text(value: Any) -> str:
    """The text EXACT compares (before lower-casing) and matchers see for a non-string: JSON, keys
    sorted, compact, integral floats as integers (``1.0`` -> ``1``); strings as they are."""
    value = _canonical_numbers(value)
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return str(value)


_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def _is_number(value: Any) -> bool:
    return isinstance(value, Number) and not isinstance(value, bool)


def number_of_text(text: str) -> int | float | None:
    """The number a string writes when it is exactly a JSON number literal, read as a JSON file's
    (integers exactly); None for any other string and beyond the double range (``1e400``)."""
    if _JSON_NUMBER.fullmatch(text) is None:
        return None
    if "." in text or "e" in text or "E" in text:
        value = float(text)
        return value if math.isfinite(value) else None
    return None if math.isinf(float(text)) else int(text)


def exact_match(output_value: Any, gt_value: Any) -> bool:
    """EXACT: ``canonical_text(gt).lower() == canonical_text(aio).lower()`` (spec Phase 3), a string
    facing a number read as the JSON number literal it writes (docs/json.md "Strategies")."""
    t = output_value.__class__
    if t is gt_value.__class__:  # the common case without building texts (same answers)
        if t is str:
            return bool(output_value == gt_value or output_value.lower() == gt_value.lower())
        if t is int or t is bool or (t is float and output_value == gt_value):
            return bool(output_value == gt_value)
    if isinstance(output_value, str) and _is_number(gt_value):
        number = number_of_text(output_value)
        if number is not None:
            output_value = number
    elif isinstance(gt_value, str) and _is_number(output_value):
        number = number_of_text(gt_value)
        if number is not None:
            gt_value = number
    return canonical_text(output_value).lower() == canonical_text(gt_value).lower()


# --- flattening (beyond the spec: --flatten) -------------------------------------------------


def flatten(value: Mapping[str, Any]) -> dict[str, Any]:
    """Nested values to dotted paths (``{"a": {"b": x}, "c": [y]}`` -> ``{"a.b": x, "c[0]": y}``),
    empty containers kept as leaves; of two colliding paths the first wins, with a warning."""
    check_type("value", value, Mapping, "a mapping (a JSON object)")
    return _flatten(value)[0]


# A subtree path longer than this is remembered by its SHA-256 (of the UTF-8 text), not its text:
# a chain of 200 keys of 10 KB held every prefix (200 MB), and building each prefix copied it.
_SHORT_PATH = 1024


class _Path:
    """A path being walked: its parts (joined once, at a leaf) and its key so far, the text while
    short (``_SHORT_PATH``), then a running SHA-256 extended by each part (no prefix is copied)."""

    __slots__ = ("digest", "parts", "text")

    def __init__(self, first: str) -> None:
        self.parts = [first]
        self.text: str | None = first
        self.digest: Any = None
        if len(first) > _SHORT_PATH:
            self._to_digest()

    def _to_digest(self) -> None:
        self.digest = hashlib.sha256("".join(self.parts).encode("utf-8", "surrogatepass"))
        self.text = None

    def key(self) -> str | bytes:
        return self.text if self.text is not None else self.digest.digest()

    def leaf(self) -> str:
        return self.text if self.text is not None else "".join(self.parts)

    def push(self, part: str) -> tuple[str | None, Any]:
        """Append ``part``; returns the state ``pop`` restores."""
        saved = (self.text, self.digest)
        self.parts.append(part)
        if self.text is not None and len(self.text) + len(part) <= _SHORT_PATH:
            self.text += part
        elif self.text is not None:
            self._to_digest()
        else:
            self.digest = self.digest.copy()
            self.digest.update(part.encode("utf-8", "surrogatepass"))
        return saved

    def pop(self, saved: tuple[str | None, Any]) -> None:
        self.parts.pop()
        self.text, self.digest = saved


def _flatten(value: Mapping[str, Any]) -> tuple[dict[str, Any], set[str | bytes]]:
    """``flatten`` plus the ``_Path`` key of every non-empty container walked through, recorded
    while walking: a key holding dots is no subtree, and a long key costs its length once."""
    out: dict[str, Any] = {}
    subtrees: set[str | bytes] = set()
    for key, child in value.items():
        _walk(child, _Path(str(key)), out, subtrees)
    return out, subtrees


def _walk(node: Any, path: _Path, out: dict[str, Any], subtrees: set[str | bytes]) -> None:
    """``_flatten``'s step: a function of the module, not a closure calling itself (a cycle that
    kept each record's flat values until a collection: pool workers run without one)."""
    if isinstance(node, Mapping) and node:
        parts: Iterable[tuple[str, Any]] = ((f".{k}", child) for k, child in node.items())
    elif isinstance(node, list | tuple) and node:
        parts = ((f"[{i}]", child) for i, child in enumerate(node))
    else:
        leaf = path.leaf()
        if leaf in out:
            logger.warning("flatten: path %r occurs twice; keeping the first value", leaf)
        else:
            out[leaf] = node
        return
    subtrees.add(path.key())
    for part, child in parts:
        saved = path.push(part)
        _walk(child, path, out, subtrees)
        path.pop(saved)


def flatten_pair(
    output: Mapping[str, Any], ground_truth: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Flatten both sides; a null or empty-container leaf on one side where the other side has a
    subtree is dropped, so ``"address": null`` against a filled address costs completeness once
    per missing leaf (not an extra hallucinated key) and invented sub-keys count as extra keys."""
    (flat_out, out_subtrees), (flat_gt, gt_subtrees) = _flatten(output), _flatten(ground_truth)

    def prune(flat: dict[str, Any], subtrees: set[str | bytes]) -> dict[str, Any]:
        return {
            p: v
            for p, v in flat.items()
            if not (
                (is_null(v) or (isinstance(v, Mapping | list | tuple) and not v))
                and _Path(p).key() in subtrees
            )
        }

    return prune(flat_out, gt_subtrees), prune(flat_gt, out_subtrees)

"""Errors a user can fix: each names the file, line, field and value, and says what is allowed."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError

_MAX_VALUE_CHARS = 80
_SHOULD = re.compile(
    r"^(?:Input|String|List|Dictionary|Tuple|Set|Bytes|Value|Decimal|Data) should "
)


def short_repr(value: Any) -> str:
    """A one-line repr of ``value``, cut to a readable length."""
    text = repr(value).replace("\n", "\\n")
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 3] + "..."


def shown_path(path: str | Path) -> str:
    """``path`` as text every output can hold: a byte of a file name that is not UTF-8 (a lone
    surrogate in Python's str) becomes U+FFFD, which JSON, CSV and reports can write."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


class FieldcheckError(Exception):
    """Base class of every error fieldcheck raises on purpose."""


class InputError(FieldcheckError, ValueError):
    """Bad input, located: ``file:line: field: reason (got value)``.

    Every part but ``reason`` is optional; the message is always one line.
    """

    def __init__(
        self,
        reason: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
        value: Any = ...,
        record: str | None = None,
    ) -> None:
        self.reason = reason
        self.file = shown_path(file) if file is not None else None
        self.line = line
        self.field = field
        self.value = value
        # a blank id is the error itself, not a name to locate it by (``record :``)
        self.record = record if record is None or record.strip() else None
        super().__init__(self.one_line())

    @property
    def location(self) -> str:
        """``file:line`` (or whichever part is known)."""
        if self.file is None:
            return f"line {self.line}" if self.line is not None else ""
        return f"{self.file}:{self.line}" if self.line is not None else self.file

    def one_line(self) -> str:
        parts = []
        if self.location:
            parts.append(self.location)
        if self.record is not None:
            parts.append(f"record {self.record}")
        if self.field is not None:
            parts.append(f"field {self.field!r}")
        text = ": ".join([*parts, self.reason])
        if self.value is not ...:
            text += f" (got {short_repr(self.value)})"
        return text.replace("\n", " ")

    def replace(self, **changes: Any) -> InputError:
        """The same error with some of its parts changed (``reason=``, ``value=...``)."""
        parts = {k: getattr(self, k) for k in ("file", "line", "field", "value", "record")}
        parts |= changes
        return InputError(parts.pop("reason", self.reason), **parts)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record of this error, for ``errors.jsonl`` files."""
        out: dict[str, Any] = {
            "file": self.file,
            "line": self.line,
            "record": self.record,
            "field": self.field,
            "reason": self.reason,
            "message": self.one_line(),
            # always there, null when none was given: one shape of line in every errors file
            "value": None if self.value is ... else short_repr(self.value),
        }
        return out


# the steps pydantic adds to a location inside a union (``answer.str``): not a field's name
_UNION_STEPS = frozenset(("str", "int", "float", "bool", "none"))


def reason_of(problem: Mapping[str, Any]) -> str:
    """The reason of one pydantic error in fieldcheck's words, as every system gives it:
    ``missing``, ``must be a valid integer``, ``must be less than or equal to 1000000``
    (pydantic's "Field required", "Input should be ...", "String should have ..."), ``must be a
    JSON object`` (its "valid dictionary or object to extract fields from"), a validator's own
    message as is."""
    kind, message = problem.get("type"), str(problem.get("msg", "invalid"))
    if kind == "missing":
        return "missing"
    message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if kind in ("model_attributes_type", "dict_type"):  # "... to extract fields from"
        return "must be a JSON object"
    if _SHOULD.match(message):  # Input / String / List / Dictionary should ...
        return "must " + _SHOULD.sub("", message, count=1)
    return message


def field_of(problem: Mapping[str, Any]) -> str | None:
    """The dotted field of one pydantic error (``plan.steps.0.tool``), None at the top."""
    parts = [
        str(p) for p in problem.get("loc", ()) if str(p) not in _UNION_STEPS and "[" not in str(p)
    ]
    return ".".join(parts) or None


def input_error_of(
    exc: ValidationError,
    *,
    file: str | Path | None = None,
    line: int | None = None,
    record: str | None = None,
    prefix: str = "",
    reasons: Mapping[str, str] | None = None,
) -> InputError:
    """The first problem of a pydantic error as one located InputError: its field (after
    ``prefix``), ``reason_of`` it (or ``reasons[type]``), the value given (none when missing)."""
    first = exc.errors()[0]
    field = field_of(first)
    value: Any = ... if first.get("type") == "missing" else first.get("input", ...)
    reason = (reasons or {}).get(str(first.get("type"))) or reason_of(first)
    return InputError(
        reason,
        file=file,
        line=line,
        record=record,
        field=prefix + field if field else (prefix.rstrip(".") or None),
        value=value,
    )

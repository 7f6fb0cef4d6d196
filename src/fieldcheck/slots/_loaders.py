"""Loading gold slots, predictions, latencies and judge scores from JSONL: a bad or repeated line
is an ``InputError`` naming file, line, field and value (the first line wins); loading goes on."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import orjson
from pydantic import BaseModel, ValidationError

from fieldcheck._util.errors import ErrorList, InputError, input_error_of
from fieldcheck._util.jsonio import BLANK, iter_jsonl, open_input, parse_jsonl_line, read_lines
from fieldcheck.metrics import canonicalize
from fieldcheck.slots._records import JudgeRecord, LatencyRecord, SlotRecord

log = logging.getLogger("fieldcheck")

SessionKey = tuple[str, int]
SlotKey = tuple[str, str]
R = TypeVar("R", bound=BaseModel)


@dataclass
class SlotFile:
    """Slots of one file by session, with the line each came from and the errors met."""

    path: Path
    sessions: dict[SessionKey, dict[SlotKey, list[str]]] = field(default_factory=dict)
    lines: dict[tuple[SessionKey, SlotKey], int] = field(default_factory=dict)
    errors: ErrorList = field(default_factory=ErrorList)
    # One object per distinct session key and slot key (and their names), shared by every line
    # that names it: a million lines hold a few thousand names, not three million strings.
    session_keys: dict[SessionKey, SessionKey] = field(default_factory=dict, repr=False)
    slot_keys: dict[SlotKey, SlotKey] = field(default_factory=dict, repr=False)

    @property
    def records(self) -> int:
        """Valid lines read."""
        return len(self.lines)


@dataclass
class LatencyFile:
    path: Path
    seconds: dict[SessionKey, float] = field(default_factory=dict)
    errors: ErrorList = field(default_factory=ErrorList)
    lines: dict[SessionKey, int] = field(default_factory=dict, repr=False)  # first line of each


@dataclass
class JudgeFile:
    path: Path
    scores: dict[SessionKey, dict[SlotKey, float]] = field(default_factory=dict)
    errors: ErrorList = field(default_factory=ErrorList)
    lines: dict[tuple[SessionKey, SlotKey], int] = field(default_factory=dict, repr=False)

    @property
    def records(self) -> int:
        """Valid lines read."""
        return sum(len(slots) for slots in self.scores.values())


def _records(path: Path, model: type[R], errors: ErrorList) -> Iterator[tuple[int, R]]:
    for line, raw in iter_jsonl(path):
        record = validated(raw, model, path, line, errors)
        if record is not None:
            yield line, record


def validated(raw: Any, model: type[R], path: Path, line: int, errors: ErrorList) -> R | None:
    """A parsed line as ``model``, or None with its error in ``errors``."""
    if isinstance(raw, InputError):
        errors.append(raw)
    elif not isinstance(raw, dict):
        errors.append(InputError("expected a JSON object", file=path, line=line, value=raw))
    else:
        try:
            return model.model_validate(raw)
        except ValidationError as exc:
            errors.append(input_error_of(exc, file=path, line=line))
    return None


_ALNUM = re.compile(r"[A-Za-z0-9]")
SlotRow = tuple[str, int, str, str, list[str]]
"""A valid slot line as plain values: ``(user, session, topic, field, values)``."""


def slot_row(raw: Any) -> SlotRow | None:
    """The values of a plainly valid slot line (``SlotRecord``'s checks on exact JSON types, its
    five keys only), or ``None`` when the depth check and pydantic have to name the problem."""
    if type(raw) is not dict or len(raw) != 5:
        return None
    get = raw.get
    user, session, topic, name, values = (
        get("user"),
        get("session"),
        get("topic"),
        get("field"),
        get("values"),
    )
    if not (
        type(user) is str
        and user
        and type(session) is int
        and type(topic) is str
        and topic
        and type(name) is str
        and name
        and type(values) is list
    ):
        return None
    for v in values:  # a loop: cheaper than all() over a generator for a few values
        if type(v) is not str:
            return None
    return user, session, topic, name, values


def read_slot_rows(path: Path, errors: ErrorList) -> Iterator[tuple[int, SlotRow]]:
    """``(line, row)`` of every valid line of a slot file; a bad line goes to ``errors``. Only a
    line not plainly valid (``slot_row``) goes through ``parse_jsonl_line`` and pydantic."""
    loads, decode_error = orjson.loads, orjson.JSONDecodeError
    with open_input(path) as handle:
        for line, text in enumerate(read_lines(handle), start=1):
            try:
                row = slot_row(loads(text))
            except decode_error:
                row = None
            if row is not None:
                yield line, row
                continue
            raw = parse_jsonl_line(text, line, path)
            if raw is BLANK:
                continue
            checked = _checked_slot(raw, path, line, errors)
            if checked is not None:
                yield line, checked


def _checked_slot(raw: Any, path: Path, line: int, errors: ErrorList) -> SlotRow | None:
    """The row of a line the fast path could not take, or None with its error in ``errors``."""
    row = None if isinstance(raw, InputError) else slot_row(raw)
    if row is not None:
        return row
    rec = validated(raw, SlotRecord, path, line, errors)
    return None if rec is None else (rec.user, rec.session, rec.topic, rec.field, list(rec.values))


def add_slot(out: SlotFile, line: int, row: SlotRow) -> None:
    """Add one valid line to ``out``; a slot already read is an error naming its first line."""
    user, session, topic, name, values = row
    sk = out.session_keys.get((user, session))
    if sk is None:
        sk = out.session_keys[(user, session)] = (user, session)
    slot = out.slot_keys.get((topic, name))
    if slot is None:
        slot = out.slot_keys[(topic, name)] = (sys.intern(topic), sys.intern(name))
    key = (sk, slot)
    first = out.lines.get(key)
    if first is not None:
        what = f"slot of user {user!r} session {session}"
        return _repeated(out, line, first, what, "field", f"{topic}/{name}")
    for value in values:
        if value.isascii() and _ALNUM.search(value):
            continue  # an ASCII letter or digit: neither blank nor empty once canonicalised
        if not value.strip():
            log.warning(
                "%s:%d: field 'values': blank value %r counts as no value", out.path, line, value
            )
        elif not canonicalize(value):
            log.warning(
                "%s:%d: value %r is empty once canonicalised (non-ASCII or punctuation only); "
                "it cannot match anything exactly",
                out.path,
                line,
                value,
            )
    out.lines[key] = line
    slots = out.sessions.get(sk)
    if slots is None:
        slots = out.sessions[sk] = {}
    slots[slot] = values


def _repeated(
    out: SlotFile | LatencyFile | JudgeFile,
    line: int,
    first: int,
    what: str,
    field: str,
    value: Any,
) -> None:
    """A line repeating ``what`` (read at line ``first``): an error, the first line wins."""
    out.errors.append(
        InputError(
            f"duplicate {what}, first at line {first}; this line is ignored",
            file=out.path,
            line=line,
            field=field,
            value=value,
        )
    )


def load_slots(path: str | Path) -> SlotFile:
    """Read a gold or prediction JSONL file (one slot per line; see docs/formats.md)."""
    return cast(SlotFile, _load("slots", path))


LatencyRow = tuple[str, int, float]
"""A valid latency line as plain values: ``(user, session, seconds)``."""
JudgeRow = tuple[str, int, str, str, float]
"""A valid judge line as plain values: ``(user, session, topic, field, score)``."""


def read_latency_rows(path: Path, errors: ErrorList) -> Iterator[tuple[int, LatencyRow]]:
    """``(line, row)`` of every valid line of a latency file; a bad line goes to ``errors``."""
    for line, rec in _records(path, LatencyRecord, errors):
        yield line, (rec.user, rec.session, float(rec.seconds))


def read_judge_rows(path: Path, errors: ErrorList) -> Iterator[tuple[int, JudgeRow]]:
    """``(line, row)`` of every valid line of a judge file; a bad line goes to ``errors``."""
    for line, rec in _records(path, JudgeRecord, errors):
        yield line, (rec.user, rec.session, rec.topic, rec.field, float(rec.score))


def add_latency(out: LatencyFile, line: int, row: LatencyRow) -> None:
    """Add one valid latency line; a session already timed is an error naming its first line."""
    user, session, seconds = row
    key = (user, session)
    first = out.lines.get(key)
    if first is not None:
        what = f"latency of user {user!r} session {session}"
        return _repeated(out, line, first, what, "session", session)
    out.lines[key] = line
    out.seconds[key] = seconds


def add_judge(out: JudgeFile, line: int, row: JudgeRow) -> None:
    """Add one valid judge line; a slot already scored is an error naming its first line."""
    user, session, topic, name, score = row
    key = ((user, session), (topic, name))
    first = out.lines.get(key)
    if first is not None:
        return _repeated(out, line, first, "judge score", "field", f"{topic}/{name}")
    out.lines[key] = line
    out.scores.setdefault(key[0], {})[key[1]] = score


def load_latencies(path: str | Path) -> LatencyFile:
    """Read a latency JSONL file (one session per line, ``seconds`` >= 0)."""
    return cast(LatencyFile, _load("latency", path))


def load_judge_scores(path: str | Path) -> JudgeFile:
    """Read precomputed judge scores (one slot per line, ``score`` in [0, 1])."""
    return cast(JudgeFile, _load("judge", path))


KINDS: dict[str, tuple[Any, Any, Any]] = {
    "slots": (SlotFile, read_slot_rows, add_slot),
    "latency": (LatencyFile, read_latency_rows, add_latency),
    "judge": (JudgeFile, read_judge_rows, add_judge),
}
"""Per kind of file: what it loads into, its reader of valid rows, and the adder of a row."""


def _load(kind: str, path: str | Path) -> Any:
    make, read, add = KINDS[kind]
    out = make(Path(path))
    for line, row in read(out.path, out.errors):
        add(out, line, row)
    return out

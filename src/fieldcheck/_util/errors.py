"""Errors a user can fix: each names the file, line, field and value, and says what is allowed."""

from __future__ import annotations

import contextlib
import heapq
import itertools
import marshal
import os
import re
import struct
import tempfile
import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    from pydantic import ValidationError

_MAX_VALUE_CHARS = 80
_MAX_NAME_CHARS = 200  # a record id or field name shown (a 5 MB id was a 5 MB error line)
_HEADER = struct.Struct("<Q")
_SHOULD = re.compile(
    r"^(?:Input|String|List|Dictionary|Tuple|Set|Bytes|Value|Decimal|Data) should "
)


def cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ``...`` saying so."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def short_repr(value: Any) -> str:
    """A one-line repr of ``value``, cut to a readable length."""
    return cut(repr(value).replace("\n", "\\n"), _MAX_VALUE_CHARS)


_placing = threading.Lock()
_placed: dict[tuple[str, str], int] = {}  # (partial folder, destination): folders open
_PLACED: tuple[tuple[str, str], ...] = ()  # their pairs, as a path given and absolute
_last_shown: tuple[tuple[tuple[str, str], ...], str, str] = ((), "", "")  # ``shown_path``'s last


def place(temp: str | Path, dest: str | Path, step: int = 1) -> None:
    """From now on a path under ``temp`` (a run folder's partial folder, ``reports.RunFolder``)
    is shown under ``dest``, where it will be once the folder is in place; ``step`` -1 undoes
    one ``place`` (the folder is gone from this process)."""
    global _PLACED
    pair = (str(temp), str(dest))
    with _placing:
        left = _placed.get(pair, 0) + step
        if left > 0:
            _placed[pair] = left
        else:
            _placed.pop(pair, None)
        # the longest partial folder first: one inside another is shown at its own place
        pairs = {(t, d) for t, d in _placed} | {
            (os.path.abspath(t), os.path.abspath(d)) for t, d in _placed
        }
        _PLACED = tuple(sorted(pairs, key=lambda p: -len(p[0])))


def open_destination() -> str | None:
    """Where the run folder this process opened last (and still has open) goes, as given."""
    with _placing:
        return next(reversed(_placed))[1] if _placed else None


def placed_paths() -> tuple[tuple[str, str], ...]:
    """The (partial folder, destination) pairs ``shown_path`` maps now, for a pool process
    (``place_all``)."""
    return _PLACED


def place_all(pairs: Iterable[tuple[str, str]]) -> None:
    """``place`` each pair (in a pool process, the pairs of the process that started it)."""
    for temp, dest in pairs:
        place(temp, dest)


def shown_path(path: str | Path) -> str:
    """``path`` as text every output can hold: a path under a run folder this process writes is
    shown where it will be once the folder is in place (``place``), and a byte of a file name
    that is not UTF-8 (a lone surrogate) becomes U+FFFD."""
    global _last_shown
    given, placed = str(path), _PLACED
    last = _last_shown
    if last[0] is placed and last[1] == given:  # every bad line of a file names the same path
        return last[2]
    text = given
    for temp, dest in placed:
        if text.startswith(temp) and text[len(temp) : len(temp) + 1] in ("", os.sep):
            text = dest + text[len(temp) :]
            break
    shown = shown_text(text)
    _last_shown = (placed, given, shown)  # one tuple, replaced whole: safe across threads
    return shown


def shown_text(text: str) -> str:
    """``text`` with each lone surrogate (a byte of a file name that is not UTF-8) as U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


class FieldcheckError(Exception):
    """Base class of every error fieldcheck raises on purpose."""


def exception_line(exc: BaseException) -> str:
    """``Type: first line`` of an error (of fieldcheck's own, its line); of a database error, the database's own one (not
    SQLAlchemy's wrapping, which may start with a note on autoflush)."""
    inner = getattr(exc, "orig", None)
    if isinstance(inner, BaseException):
        exc = inner
    first = (str(exc).splitlines() or [""])[0]
    if isinstance(exc, FieldcheckError) and first:  # fieldcheck's own words: no class name
        return first
    first = first[:200]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


class UsageProblem(FieldcheckError):
    """An input or option that cannot be used, found before anything is written: the CLI's
    one usage line (exit 2), the API's 422. ``param`` names the option or input; ``role``, the
    input's role as given (``latency:other``), where callers that name inputs by role name it."""

    def __init__(self, message: str, param: str | None = None, *, role: str | None = None) -> None:
        super().__init__(message)
        self.message, self.param, self.role = message, param, role


MAX_SEED = 2**64 - 1
"""The largest ``--seed``: the store writes a run's settings with orjson, which refuses an
integer beyond 64 bits (numpy's ``default_rng`` takes any size)."""


def whole_number(value: Any, option: str, top: int | None = None) -> int:
    """``value`` when it is an int >= 0 (a seed, a resample count) and at most ``top``, else the
    usage problem of ``option`` that every system gives."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageProblem(f"must be a whole number >= 0 (got {value!r})", option)
    if top is not None and value > top:
        raise UsageProblem(f"must be a whole number from 0 to {top} (got {value!r})", option)
    return value


def check_type(name: str, value: Any, kind: Any, what: str, *, each: bool = False) -> None:
    """A library function's argument ``name`` (``each``: every element of it) checked where it
    is taken: a TypeError naming it, ``what`` it must be and what it got, not an AttributeError
    deep inside (a new-user trial's finding)."""
    for one in value if each and not isinstance(value, str | bytes | Mapping) else [value]:
        if not isinstance(one, kind):
            of = "each of " if each else ""
            raise TypeError(f"{of}{name} must be {what} (got {type(one).__name__})")


class CannotWrite(FieldcheckError):
    """An output could not be written part-way (a full disk, a folder made read-only): not
    the command's fault, exit 1."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C while a run was written: ``line`` says what was and was not written, and how the
    same command continues it."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


class InputError(FieldcheckError, ValueError):
    """Bad input, located: ``file:line: field: reason (got value)``, every part but ``reason``
    optional; the message is always one line."""

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
        self.field = None if field is None else cut(field, _MAX_NAME_CHARS)
        self.value = value
        # a blank id is the error itself, not a name to locate it by (``record :``)
        self.record = cut(record, _MAX_NAME_CHARS) if record and record.strip() else None
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = "" if self.line is None else f"line {self.line}"  # file:line, or the part known
        if self.file is not None:
            where = self.file if self.line is None else f"{self.file}:{self.line}"
        parts = [where] if where else []
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
        return _dict(_row(self))


# the steps pydantic adds to a location inside a union (``answer.str``): not a field's name
_UNION_STEPS = frozenset(("str", "int", "float", "bool", "none"))


def reason_of(problem: Mapping[str, Any]) -> str:
    """The reason of one pydantic error in fieldcheck's words (``missing``, ``must be a valid
    integer``, ``must be a JSON object``); a validator's own message as is."""
    kind, message = problem.get("type"), str(problem.get("msg", "invalid"))
    if kind == "missing":
        return "missing"
    message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if kind in ("model_attributes_type", "dict_type"):  # "... to extract fields from"
        return "must be a JSON object"
    if _SHOULD.match(message):  # Input / String / List / Dictionary should ...
        return "must " + _SHOULD.sub("", message, count=1)
    return message


def input_error_of(
    exc: ValidationError,
    *,
    file: str | Path | None = None,
    line: int | None = None,
    record: str | None = None,
    prefix: str = "",
    reasons: Mapping[str, str] | None = None,
) -> InputError:
    """The first problem of a pydantic error as a located InputError: its dotted field after
    ``prefix``, ``reason_of`` it (or ``reasons[type]``), the value given."""
    first = exc.errors()[0]
    steps = [str(p) for p in first.get("loc", ())]
    field = ".".join(p for p in steps if p not in _UNION_STEPS and "[" not in p)
    value: Any = ... if first.get("type") == "missing" else first.get("input", ...)
    reason = (reasons or {}).get(str(first.get("type"))) or reason_of(first)
    named = prefix + field if field else (prefix.rstrip(".") or None)
    return InputError(reason, file=file, line=line, record=record, field=named, value=value)


KEPT_ERRORS = 100
"""How many input errors of one list are kept in memory (those shown); later ones wait in a
temporary file, so a million bad lines cost the memory of a hundred (issue 26)."""
_SORT_RUN = 20_000  # errors sorted in memory at a time by ``ErrorList.by_line``


class _Shown:
    """A value read back from a spilled error: its short repr, shown as is."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


# reason, file, line, field, value (its short repr; None: none given), record, message
_Row = tuple[str, str | None, int | None, str | None, str | None, str | None, str]


def _row(error: InputError) -> _Row:
    value = None if error.value is ... else short_repr(error.value)
    return (
        error.reason,
        error.file,
        error.line,
        error.field,
        value,
        error.record,
        str(error),  # its ``one_line()``, made once (its parts are not changed after)
    )


def _error(row: _Row) -> InputError:
    reason, file, line, field, value, record, _ = row
    shown: Any = ... if value is None else _Shown(value)
    return InputError(reason, file=file, line=line, field=field, value=shown, record=record)


def _dict(row: _Row) -> dict[str, Any]:
    """``InputError.to_dict()`` from its row: ``value`` always there, null when none given."""
    reason, file, line, field, value, record, message = row
    return {
        "file": file,
        "line": line,
        "record": record,
        "field": field,
        "reason": reason,
        "message": message,
        "value": value,
    }


def _frames(handle: IO[bytes]) -> Iterator[Any]:
    """The marshalled frames of ``handle`` from its start (read by offset: its position,
    which appends move, is left alone)."""
    handle.flush()
    fd, offset, buffer, at = handle.fileno(), 0, b"", 0
    header = _HEADER.size
    while True:
        if len(buffer) - at >= header:
            (size,) = _HEADER.unpack_from(buffer, at)
            end = at + header + size
            if end <= len(buffer):
                yield marshal.loads(buffer[at + header : end])
                at = end
                continue
        more = os.pread(fd, 1 << 20, offset)
        if not more:
            return
        offset += len(more)
        buffer, at = buffer[at:] + more, 0


class _Spill:
    """One file of spilled errors: a handle, its frames this list reads, and the remover of
    the file when the list goes (ownership moves with a pickle)."""

    __slots__ = ("__weakref__", "frames", "handle", "remover")

    def __init__(self, handle: IO[bytes], frames: int = 0) -> None:
        self.handle, self.frames = handle, frames
        self.remover: weakref.finalize[Any, Any] | None
        self.remover = weakref.finalize(self, _remove, handle, handle.name)


def _remove(handle: IO[bytes], name: str) -> None:
    handle.close()
    with contextlib.suppress(OSError):
        os.unlink(name)


class ErrorList(Sequence[InputError]):
    """A list of input errors in bounded memory: the first ``KEPT_ERRORS`` kept, later ones
    spilled to a temporary file in ``spill_dir`` (read back with their value's short repr);
    picklable for helper processes, the files going by name."""

    def __init__(
        self, errors: Iterable[InputError] = (), *, spill_dir: str | Path | None = None
    ) -> None:
        self._kept: list[InputError] = []
        self._count = 0
        self._read_only: list[_Spill] = []  # files received with a pickle, read first
        self._spill: _Spill | None = None  # this list's own file
        self._spill_dir = spill_dir
        self._last_line = 0
        self.in_line_order = True
        """Whether the errors were added in line order (an error without a line as line 0)."""
        self.extend(errors)

    def _write(self, row: _Row) -> None:
        if self._spill is None:
            handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 (kept open with the list)
                prefix=".fieldcheck-errors-", dir=self._spill_dir, delete=False
            )
            self._spill = _Spill(handle)
        data = marshal.dumps(row)
        self._spill.handle.write(_HEADER.pack(len(data)) + data)
        self._spill.frames += 1

    def _spills(self) -> list[_Spill]:
        return [*self._read_only, *([self._spill] if self._spill is not None else [])]

    def append(self, error: InputError) -> None:
        self._counted(error.line)
        if len(self._kept) < KEPT_ERRORS:
            self._kept.append(error)
            return
        self._write(_row(error))

    def _counted(self, line: int | None) -> None:
        if (line or 0) < self._last_line:
            self.in_line_order = False
        self._last_line = line or 0
        self._count += 1

    def _append_rows(self, rows: Iterable[_Row]) -> None:
        """Add errors given as rows (read back in order): spilled as they are, unparsed."""
        for row in rows:
            if len(self._kept) < KEPT_ERRORS:
                self.append(_error(row))
                continue
            self._counted(row[2])
            self._write(row)

    def _spilled_rows(self) -> Iterator[_Row]:
        for spill in self._spills():
            yield from itertools.islice(_frames(spill.handle), spill.frames)

    def _rows(self) -> Iterator[_Row]:
        yield from map(_row, self._kept[: self._count])
        yield from self._spilled_rows()

    def extend(self, errors: Iterable[InputError]) -> None:
        if isinstance(errors, ErrorList):  # the spilled ones copied as they are, unparsed
            other = ErrorList(errors) if errors is self else errors
            for error in other._kept[: other._count]:
                self.append(error)
            self._append_rows(other._spilled_rows())
            return
        for error in errors:
            self.append(error)

    def __iadd__(self, errors: Iterable[InputError]) -> ErrorList:
        self.extend(errors)
        return self

    def __add__(self, errors: Iterable[InputError]) -> ErrorList:
        out = ErrorList(self, spill_dir=self._spill_dir)
        out.extend(errors)
        return out

    def __radd__(self, errors: Iterable[InputError]) -> ErrorList:
        out = ErrorList(errors, spill_dir=self._spill_dir)
        out.extend(self)
        return out

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[InputError]:
        yield from self._kept[: self._count]
        yield from map(_error, self._spilled_rows())

    @overload
    def __getitem__(self, index: int) -> InputError: ...
    @overload
    def __getitem__(self, index: slice) -> list[InputError]: ...
    def __getitem__(self, index: int | slice) -> InputError | list[InputError]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._count)
            if stop <= len(self._kept) and start >= 0:
                return self._kept[index]
            return list(itertools.islice(self, start, stop, step))
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError("error index out of range")
        if index < len(self._kept):
            return self._kept[index]
        return next(itertools.islice(self, index, None))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ErrorList | list | tuple):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        spilled = self._count - len(self._kept)
        more = f", and {spilled} more" if spilled > 0 else ""
        return f"ErrorList({self._kept!r}{more})"

    def by_line(self) -> ErrorList:
        """The same errors stably ordered by line (none: 0), sorted ``_SORT_RUN`` at a time and
        merged: flat memory."""
        if self.in_line_order:
            return self
        if self._count <= _SORT_RUN:
            return ErrorList(
                sorted(self, key=lambda error: error.line or 0), spill_dir=self._spill_dir
            )
        runs: list[IO[bytes]] = []
        try:
            rows = enumerate(self._rows())
            while chunk := list(itertools.islice(rows, _SORT_RUN)):
                chunk.sort(key=lambda pair: (pair[1][2] or 0, pair[0]))
                run = tempfile.TemporaryFile(prefix=".fieldcheck-errors-")  # noqa: SIM115
                for order, row in chunk:
                    data = marshal.dumps((order, row))
                    run.write(_HEADER.pack(len(data)) + data)
                runs.append(run)
            merged = heapq.merge(
                *(_frames(r) for r in runs), key=lambda pair: (pair[1][2] or 0, pair[0])
            )
            out = ErrorList(spill_dir=self._spill_dir)
            out._append_rows(row for _, row in merged)
            return out
        finally:
            for done in runs:
                done.close()

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """A model's ``ErrorList`` field takes one as is, or any iterable of errors."""
        from pydantic_core import core_schema

        return core_schema.no_info_plain_validator_function(
            lambda value: value if isinstance(value, ErrorList) else ErrorList(value)
        )

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_read_only"], state["_spill"]
        files = []
        for spill in self._spills():
            spill.handle.flush()
            if spill.remover is not None:
                spill.remover.detach()  # the receiving copy removes it (ownership moves)
                spill.remover = None
            files.append((spill.handle.name, spill.frames))
        state["_files"] = files
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        files = state.pop("_files")
        self.__dict__.update(state)
        self._spill = None
        # opened at once: the sender may remove its name later, the file stays readable
        self._read_only = [_Spill(open(name, "rb"), frames) for name, frames in files]  # noqa: SIM115


def error_dicts(errors: Iterable[InputError]) -> Iterator[dict[str, Any]]:
    """``to_dict()`` of each error (of an ErrorList's spilled ones, straight from their rows): an
    errors file's lines."""
    if isinstance(errors, ErrorList):
        return map(_dict, errors._rows())
    return (e.to_dict() for e in errors)

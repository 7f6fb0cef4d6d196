"""The plan validator of the ConvFinQA agent: the checks of ``CHECKS``, in order, each logged as
``{"check", "passed", "message"}`` (validation.csv; spec numeric-qa-evaluation.md "validation.csv -
Validator logs"). What each check refuses: docs/numeric.md, "The validator"."""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from fieldcheck._util.errors import cut
from fieldcheck.metrics import (
    OPERATIONS,
    TABLE_OPERATIONS,
    ProgramExecutionError,
    ProgramParseError,
    cell_number,
    execute_program,
    normalise_operation,
    program_from_plan,
    table_entry,
)
from fieldcheck.numeric._predictions import tool_name
from fieldcheck.numeric._records import Document

MAX_STEPS = 20
MAX_MESSAGE_CHARS = 400
# Plain numbers a plan may use without finding them in the document (unit conversions).
COMMON_CONSTANTS = (1.0, 100.0, 1000.0, 1_000_000.0)
CHECKS = (
    "json",
    "schema",
    "operations",
    "arguments",
    "references",
    "values_in_document",
    "table_cells",
    "executes",
)

_NUMBER_IN_TEXT = re.compile(r"\d[\d,]*(?:\.\d+)?|\.\d+")
_ARG_NUMBER = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?%?$", re.IGNORECASE)
_ARG_CONST = re.compile(r"^const_(m1|\d+(?:\.\d+)?)$")
_ARG_REF = re.compile(r"^#(\d+)$")
_FENCE = re.compile(r"^```[A-Za-z]*\s*\n?(.*?)\n?```$", re.DOTALL)


@dataclass
class Validation:
    """The outcome of validating one reply: the log, the plan (when its schema held), the answer."""

    log: list[dict[str, Any]] = field(default_factory=list)
    plan: dict[str, Any] | None = None
    answer: float | str | None = None
    is_json: bool = True

    @property
    def ok(self) -> bool:
        return self.is_json and all(entry["passed"] for entry in self.log)

    @property
    def failures(self) -> list[dict[str, Any]]:
        return [entry for entry in self.log if not entry["passed"]]

    def add(self, check: str, problems: Sequence[str]) -> bool:
        message = cut("; ".join(problems), MAX_MESSAGE_CHARS)
        self.log.append({"check": check, "passed": not problems, "message": message})
        return not problems


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def _numbers_in(text: str) -> list[float]:
    return [float(m.group().replace(",", "")) for m in _NUMBER_IN_TEXT.finditer(text)]


class DocumentNumbers:
    """Every number of a document (absolute values), for the ``values_in_document`` check; one in
    the text or a cell is also known divided by 100 (``14%`` may be used as 0.14)."""

    def __init__(self, doc: Document, extra: Iterable[float] = ()) -> None:
        plain = [*COMMON_CONSTANTS, *extra]  # row names, headers: not divided by 100
        percent = _numbers_in(doc.pre_text) + _numbers_in(doc.post_text)
        for row, cells in doc.table.items():
            plain += _numbers_in(row)
            for column, cell in cells.items():
                plain += _numbers_in(column)
                number = cell_number(cell)
                if number is not None:
                    percent.append(number)
                elif isinstance(cell, str):
                    percent += _numbers_in(cell)
        values = {abs(n) for n in plain + percent if math.isfinite(n)}
        values |= {abs(n) / 100 for n in percent if math.isfinite(n)}
        self._sorted = sorted(values)

    def __contains__(self, number: object) -> bool:
        if not isinstance(number, int | float) or isinstance(number, bool):
            return False
        target = abs(float(number))
        if not math.isfinite(target):
            return False
        i = bisect_left(self._sorted, target)
        return any(
            _close(target, self._sorted[j]) for j in (i - 1, i) if 0 <= j < len(self._sorted)
        )


def parse_reply(text: str) -> Any:
    """The reply as JSON (one optional Markdown code fence removed); ValueError if not JSON (orjson
    refuses NaN, Infinity and nesting past 1024 levels: a hostile reply is never a crash)."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    try:
        return orjson.loads(stripped)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg} at column {exc.colno}") from None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _schema_problems(data: dict[str, Any]) -> list[str]:
    steps = data.get("steps")
    if not isinstance(steps, list):
        return ["'steps' is missing or not a list"]
    if not steps:
        return ["'steps' is empty"]
    if len(steps) > MAX_STEPS:
        return [f"{len(steps)} steps; at most {MAX_STEPS} are allowed"]
    problems: list[str] = []
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            problems.append(f"step {i} is not an object")
            continue
        if "tool" in step:
            step["tool"] = tool_name(step["tool"])
        tool = step.get("tool")
        if tool == "extract":
            if not isinstance(step.get("operation"), str | None):
                problems.append(f"step {i}: 'operation' of an extract must be text if given")
            if not isinstance(step.get("args", []), list):
                problems.append(f"step {i}: 'args' of an extract must be a list if given")
            if not _is_number(step.get("value")):
                problems.append(f"step {i}: extract needs a number 'value'")
            source = step.get("source")
            if source not in ("table", "text"):
                problems.append(f"step {i}: extract 'source' must be 'table' or 'text'")
            elif source == "table" and not (
                isinstance(step.get("row"), str) and isinstance(step.get("column"), str)
            ):
                problems.append(f"step {i}: a table extract needs 'row' and 'column' texts")
        elif tool == "compute":
            if not isinstance(step.get("operation"), str):
                problems.append(f"step {i}: compute needs an 'operation' text")
            if not isinstance(step.get("args"), list):
                problems.append(f"step {i}: compute needs a list 'args'")
        else:
            problems.append(f"step {i}: 'tool' must be 'extract' or 'compute', got {tool!r:.40}")
    return problems


def _arg_number(arg: Any) -> float | None:
    """A literal number argument's value (``"13.4%"`` -> 0.134); None for refs, consts, rows."""
    if _is_number(arg):
        return float(arg)
    if isinstance(arg, str) and _ARG_NUMBER.match(arg.strip()):
        text = arg.strip()
        number = float(text.rstrip("%"))
        if not math.isfinite(number):
            return None
        return number / 100 if text.endswith("%") else number
    return None


def validate_reply(text: str, doc: Document, earlier_answers: Sequence[float] = ()) -> Validation:
    """Validate one model reply against the document; log each check; compute the answer."""
    result = Validation()
    try:
        data = parse_reply(text)
        if not isinstance(data, dict):
            raise ValueError(f"the reply is a JSON {type(data).__name__}, not an object")
    except ValueError as exc:
        result.is_json = False
        result.add("json", [str(exc)])
        return result
    result.add("json", [])
    if not result.add("schema", _schema_problems(data)):
        return result
    steps: list[dict[str, Any]] = data["steps"]
    result.plan = {"steps": steps}

    operations: list[str] = []
    arguments: list[str] = []
    references: list[str] = []
    ungrounded: list[str] = []
    cells: list[str] = []
    known = DocumentNumbers(doc, earlier_answers)
    computed = 0
    for i, step in enumerate(steps):
        if step["tool"] == "extract":
            value = float(step["value"])
            if value not in known:
                ungrounded.append(f"step {i}: extracted value {value:.15g} is not in the document")
            if step["source"] == "table":
                cells.extend(_cell_problems(i, step, value, doc))
            continue
        name = step["operation"]
        operation = normalise_operation(name)
        args: list[Any] = step["args"]
        if operation not in OPERATIONS:
            operations.append(f"step {i}: unknown operation {name!r:.60}")
        elif operation in TABLE_OPERATIONS:
            row = args[0] if args else None
            if len(args) != 1 or not isinstance(row, str):
                arguments.append(f"step {i}: {operation} takes one argument, a table row name")
            elif table_entry(doc.table, row) is None:
                arguments.append(f"step {i}: {operation}: no table row named {row!r:.60}")
        else:
            if len(args) != 2:
                arguments.append(f"step {i}: {operation} takes 2 arguments, got {len(args)}")
            for arg in args:
                arguments.extend(_arg_problems(i, arg))
                ref = _ARG_REF.match(arg.strip()) if isinstance(arg, str) else None
                if ref and int(ref.group(1)) >= computed:
                    references.append(
                        f"step {i}: {arg} refers to compute step {ref.group(1)}, but "
                        f"{_count(computed, 'compute step')} come before it"
                    )
                number = _arg_number(arg)
                if number is not None and number not in known:
                    ungrounded.append(f"step {i}: argument {arg} is not in the document")
        computed += 1
    result.add("operations", operations)
    result.add("arguments", arguments)
    result.add("references", references)
    result.add("values_in_document", ungrounded)
    result.add("table_cells", cells)
    if operations or arguments or references:
        return result
    try:
        value = execute_program(program_from_plan(result.plan), table=doc.table)
    except (ProgramParseError, ProgramExecutionError) as exc:
        result.add("executes", [getattr(exc, "reason", None) or str(exc)])
        return result
    result.add("executes", [])
    result.answer = ("yes" if value else "no") if isinstance(value, bool) else value
    return result


def _count(n: int, noun: str) -> str:
    if n == 0:
        return f"no {noun}s"
    return f"only {n} {noun}" + ("s" if n != 1 else "")


def _arg_problems(i: int, arg: Any) -> list[str]:
    if _is_number(arg):
        return []
    if isinstance(arg, str):
        token = arg.strip()
        if _ARG_NUMBER.match(token) or _ARG_CONST.match(token) or _ARG_REF.match(token):
            return []
    return [f"step {i}: argument {str(arg)[:40]!r} is not a number, '#k' or 'const_N'"]


def _cell_problems(i: int, step: Mapping[str, Any], value: float, doc: Document) -> list[str]:
    row_name, column = str(step["row"]), str(step["column"])
    row = table_entry(doc.table, row_name)
    if row is None:
        return [f"step {i}: no table row named {row_name!r:.60}"]
    cell = table_entry(row, column)
    if cell is None:
        return [f"step {i}: row {row_name!r:.60} has no column {column!r:.40}"]
    number = cell_number(cell)
    if number is None or not (
        _close(abs(number), abs(value)) or _close(abs(number), abs(value) * 100)
    ):
        return [
            f"step {i}: the cell ({row_name:.60}, {column:.40}) holds {cell!r:.40}, not {value:.15g}"
        ]
    return []

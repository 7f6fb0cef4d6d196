"""ConvFinQA programs (``"subtract(5, 2), divide(#0, 2)"``, or a bare value): a parser, a safe
executor (never ``eval``), and logic scores over plans.
Spec: numeric-qa-evaluation.md, "Logic Recall (Reasoning Trace Score)" and "Future Enhancements".
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, TypeVar, cast, get_args

from pydantic import BaseModel, ConfigDict

from fieldcheck._util.errors import FieldcheckError

Operation = Literal[
    "add",
    "subtract",
    "multiply",
    "divide",
    "exp",
    "greater",
    "table_max",
    "table_min",
    "table_sum",
    "table_average",
]
OPERATIONS: tuple[str, ...] = get_args(Operation)
TABLE_OPERATIONS = ("table_max", "table_min", "table_sum", "table_average")
# Real ConvFinQA programs are under 200 characters; a longer one is refused, not run (hostile input)
MAX_PROGRAM_CHARS = 10_000

# A table as the records hold it: row name -> column name -> cell (number or text).
Table = Mapping[str, Mapping[str, float | str]]
Value = float | bool
V = TypeVar("V")


class ProgramParseError(FieldcheckError, ValueError):
    """A program that does not follow the grammar; ``position`` is the character offset."""

    def __init__(self, reason: str, *, program: str, position: int | None = None) -> None:
        self.reason = reason
        self.program = program
        self.position = position
        where = f" at character {position}" if position is not None else ""
        super().__init__(f"cannot parse program{where}: {reason} (program {program!r})")


class ProgramExecutionError(FieldcheckError, ValueError):
    """A well-formed program that cannot be run (division by zero, unknown table row, ...)."""


class NumberArg(BaseModel):
    """A literal number; ``13.4%`` is stored as 0.134 with ``percent=True``."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["number"] = "number"
    value: float
    percent: bool = False
    text: str


class ConstArg(BaseModel):
    """``const_N`` (the number N) or ``const_m1`` (-1)."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["const"] = "const"
    value: float
    text: str


class RefArg(BaseModel):
    """``#k``: the result of step k (0-based) of the same program."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["ref"] = "ref"
    index: int


class RowArg(BaseModel):
    """A table row name, the argument of the ``table_*`` operations."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["row"] = "row"
    name: str


Arg = NumberArg | ConstArg | RefArg | RowArg


class Step(BaseModel):
    """One operation with its arguments."""

    model_config = ConfigDict(frozen=True)
    operation: Operation
    args: tuple[Arg, ...]


class Program(BaseModel):
    """A parsed program: compute ``steps``, or for an extract-only turn a single ``value``."""

    model_config = ConfigDict(frozen=True)
    text: str
    steps: tuple[Step, ...] = ()
    value: NumberArg | ConstArg | None = None

    @property
    def operations(self) -> list[str]:
        """Operation names in program order (empty for extract-only)."""
        return [step.operation for step in self.steps]


# ---------------------------------------------------------------------------------------------
# Parsing

_NUMBER = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?%?$", re.IGNORECASE)
_CONST = re.compile(r"^const_(m1|\d+(?:\.\d+)?)$")
_REF = re.compile(r"^#(\d+)$")
_STEP_START = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_NEXT_STEP = re.compile(r"\s*,\s*[A-Za-z_][A-Za-z0-9_]*\s*\(")
_END = re.compile(r"\s*$")
_COMMA = re.compile(r"\s*,")


def _parse_value(text: str, *, program: str, position: int) -> NumberArg | ConstArg | RefArg | None:
    token = text.strip()
    if _NUMBER.match(token):
        percent = token.endswith("%")
        number = float(token.rstrip("%"))
        if not math.isfinite(number):
            raise ProgramParseError(
                f"number out of range: {token!r}", program=program, position=position
            )
        return NumberArg(value=number / 100 if percent else number, percent=percent, text=token)
    const = _CONST.match(token)
    if const:
        raw = const.group(1)
        number = -1.0 if raw == "m1" else float(raw)
        if not math.isfinite(number):
            raise ProgramParseError(
                f"constant out of range: {token!r}", program=program, position=position
            )
        return ConstArg(value=number, text=token)
    ref = _REF.match(token)
    if ref:
        return RefArg(index=int(ref.group(1)))
    return None


def _find_close(text: str, start: int) -> int:
    """Index of the ``)`` closing a ``table_*`` step: the first unbalanced one followed by the
    end or by ``, name(`` (row names such as ``net income ( loss )`` hold brackets)."""
    depth = 0
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                # matched in place (no slicing), so a long program parses in linear time
                if _END.match(text, i + 1) or _NEXT_STEP.match(text, i + 1):
                    return i
                # an unbalanced ")" inside a row name: keep scanning
            else:
                depth -= 1
    return -1


def parse_program(text: str) -> Program:
    """Parse a ConvFinQA ``turn_program`` into typed steps (never evaluated as code), in time
    linear in its length; ProgramParseError with the character position for anything outside the
    grammar (docs/numeric.md) or longer than ``MAX_PROGRAM_CHARS``."""
    if not isinstance(text, str):
        raise ProgramParseError("program is not text", program=repr(text))
    stripped = text.strip()
    if not stripped:
        raise ProgramParseError("empty program", program=text, position=0)
    if len(text) > MAX_PROGRAM_CHARS:
        raise ProgramParseError(
            f"program longer than {MAX_PROGRAM_CHARS} characters ({len(text)})",
            program=text[:60] + "...",
            position=MAX_PROGRAM_CHARS,
        )
    if "(" not in stripped and ")" not in stripped:
        bare = _parse_value(stripped, program=text, position=0)
        if isinstance(bare, NumberArg | ConstArg):
            return Program(text=text, value=bare)
        raise ProgramParseError(f"not a number or a step: {stripped!r}", program=text, position=0)

    steps: list[Step] = []
    pos = 0
    while True:
        match = _STEP_START.match(text, pos)
        if not match:
            raise ProgramParseError(
                "expected an operation name and '('", program=text, position=pos
            )
        name = match.group(1)
        if name not in OPERATIONS:
            raise ProgramParseError(
                f"unknown operation {name!r}", program=text, position=match.start(1)
            )
        args_start = match.end()
        if name in TABLE_OPERATIONS:
            close = _find_close(text, args_start)
        else:  # arithmetic arguments never hold parentheses
            close = text.find(")", args_start)
        if close < 0:
            raise ProgramParseError("missing ')'", program=text, position=len(text))
        inner = text[args_start:close]
        steps.append(_parse_step(name, inner, index=len(steps), program=text, position=args_start))
        pos = close + 1
        if _END.match(text, pos):
            break
        comma = _COMMA.match(text, pos)
        if not comma:
            raise ProgramParseError("expected ',' between steps", program=text, position=pos)
        pos = comma.end()
    return Program(text=text, steps=tuple(steps))


# The plain arithmetic programs nearly every ConvFinQA turn has ("5", "subtract(5, 2), divide(#0,
# 2)"): numbers of at most 20 + 20 digits (always finite), const_N, #k; one optional space after
# each comma. Anything else goes to ``parse_program``.
_PLAIN_ARG = r"(?:-?\d{1,20}(?:\.\d{1,20})?%?|const_(?:m1|\d{1,20})|#\d{1,3})"
_PLAIN_STEP = rf"(?:add|subtract|multiply|divide|exp|greater)\({_PLAIN_ARG}, ?{_PLAIN_ARG}\)"
_PLAIN_PROGRAM = re.compile(rf"{_PLAIN_STEP}(?:, ?{_PLAIN_STEP})*")
_PLAIN_VALUE = re.compile(r"-?\d{1,20}(?:\.\d{1,20})?%?|const_(?:m1|\d{1,20})")
_STEP_PARTS = re.compile(r"([a-z]+)\(([^)]*)\)")
_REF_INDEX = re.compile(r"#(\d+)")


def program_operations(text: str) -> tuple[str, ...]:
    """``tuple(parse_program(text).operations)``, sooner for a plain arithmetic program (issue
    10); ProgramParseError exactly when ``parse_program`` raises it."""
    if len(text) <= MAX_PROGRAM_CHARS:
        if _PLAIN_VALUE.fullmatch(text):
            return ()
        if _PLAIN_PROGRAM.fullmatch(text):
            ops: list[str] = []
            for index, (name, inner) in enumerate(_STEP_PARTS.findall(text)):
                if "#" in inner and any(int(k) >= index for k in _REF_INDEX.findall(inner)):
                    break  # a reference to a later step: parse_program says which
                ops.append(name)
            else:
                return tuple(ops)
    return tuple(parse_program(text).operations)


def _parse_step(name: str, inner: str, *, index: int, program: str, position: int) -> Step:
    if name in TABLE_OPERATIONS:
        row = inner.strip()
        tail = re.search(r",\s*none\s*$", row)
        if tail:
            row = row[: tail.start()].strip()
        if not row:
            raise ProgramParseError(
                f"{name} needs a table row name", program=program, position=position
            )
        return Step(operation=cast(Operation, name), args=(RowArg(name=row),))
    parts = inner.split(",")
    if len(parts) != 2:
        raise ProgramParseError(
            f"{name} takes 2 arguments, got {len(parts)}", program=program, position=position
        )
    args: list[Arg] = []
    offset = position
    for part in parts:
        if not part.strip():
            raise ProgramParseError(f"empty argument of {name}", program=program, position=offset)
        value = _parse_value(part, program=program, position=offset)
        if value is None:
            raise ProgramParseError(
                f"argument of {name} is not a number, const_N or #k: {part.strip()!r}",
                program=program,
                position=offset,
            )
        if isinstance(value, RefArg) and value.index >= index:
            raise ProgramParseError(
                f"#{value.index} refers to step {value.index} but this is step {index}",
                program=program,
                position=offset,
            )
        args.append(value)
        offset += len(part) + 1
    return Step(operation=cast(Operation, name), args=tuple(args))


# ---------------------------------------------------------------------------------------------
# Execution


_CELL_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)%?")


def cell_number(cell: float | str | None) -> float | None:
    """A table cell as a number in the table's own unit (``"14%"`` -> 14, ``"( 45 )"`` -> -45);
    ``None`` if not a finite number. For display, features and the validator."""
    value = _cell_value(cell)
    return None if value is None else value[0]


def table_cell_value(cell: float | str | None) -> float | None:
    """A table cell as the ``table_*`` operations read it (upstream's ``str_to_num``): like
    ``cell_number`` but a percentage is a fraction (``"14%"`` -> 0.14)."""
    value = _cell_value(cell)
    if value is None:
        return None
    number, percent = value
    return number / 100 if percent else number


def _cell_value(cell: float | str | None) -> tuple[float, bool] | None:
    """(number as written, had a ``%``) of a cell; ``None`` if it holds no finite number."""
    if cell is None or isinstance(cell, bool):
        return None
    if isinstance(cell, int | float):
        return (float(cell), False) if math.isfinite(cell) else None
    # its number text, read as the upstream ConvFinQA executor does (docs/numeric.md):
    # "( 45 )" is an accounting negative
    text = cell.strip().replace("$", "").replace(",", "").strip()
    paren = re.fullmatch(r"\(\s*([\d.]+)\s*\)", text)
    head = "-" + paren.group(1) if paren else text.split("(", 1)[0].replace(" ", "")
    if not _CELL_NUMBER.fullmatch(head):
        return None
    number = float(head.rstrip("%"))
    # 400 digits are "inf", not a number
    return (number, head.endswith("%")) if math.isfinite(number) else None


def table_entry(entries: Mapping[str, V], name: str) -> V | None:
    """``entries[name]`` (a table's row, or a row's cell), else the first entry named the same but
    for case and spacing, as the executor finds a row; ``None`` when there is none."""
    if name in entries:
        return entries[name]
    wanted = " ".join(name.lower().split())
    return next((v for key, v in entries.items() if " ".join(key.lower().split()) == wanted), None)


def _table_row(table: Table | None, name: str) -> list[float]:
    """The numbers of row ``name`` (``table_entry``); as upstream, a cell that is not a number
    fails the operation rather than silently change an average."""
    if table is None:
        raise ProgramExecutionError(f"table row {name!r} asked for, but there is no table")
    row = table_entry(table, name)
    if row is None:
        raise ProgramExecutionError(f"no table row named {name!r}")
    if not row:
        raise ProgramExecutionError(f"table row {name!r} has no cells")
    numbers: list[float] = []
    for column, cell in row.items():
        number = table_cell_value(cell)
        if number is None:
            raise ProgramExecutionError(
                f"table row {name!r} has a cell that is not a number: {cell!r:.40} "
                f"(column {column!r:.40})"
            )
        numbers.append(number)
    return numbers


def _number(value: Value, operation: str) -> float:
    if isinstance(value, bool):
        raise ProgramExecutionError(f"{operation} got a yes/no value where a number is needed")
    return value


def execute_program(program: Program, *, table: Table | None = None) -> Value:
    """Run a parsed program over ``table`` (row name -> cells); a float, or a bool for ``greater``.

    Raises ProgramExecutionError (never a bare Python exception) for what cannot be computed.
    """
    if program.value is not None:
        return program.value.value
    results: list[Value] = []
    for index, step in enumerate(program.steps):
        result = _execute_step(step, results, table)
        if not isinstance(result, bool) and not math.isfinite(result):
            raise ProgramExecutionError(
                f"step {index} ({step.operation}) overflows: the result is not a finite number"
            )
        results.append(result)
    if not results:
        raise ProgramExecutionError("program has no steps and no value")
    return results[-1]


def _execute_step(step: Step, results: Sequence[Value], table: Table | None) -> Value:
    op = step.operation
    if op in TABLE_OPERATIONS:
        arg = step.args[0]
        if not isinstance(arg, RowArg):  # pragma: no cover - the parser guarantees it
            raise ProgramExecutionError(f"{op} needs a row name")
        row = _table_row(table, arg.name)
        if op == "table_max":
            return max(row)
        if op == "table_min":
            return min(row)
        try:
            total = math.fsum(row)
        except OverflowError as exc:
            raise ProgramExecutionError(f"{op}({arg.name}) overflows: {exc}") from exc
        return total if op == "table_sum" else total / len(row)

    values: list[Value] = []
    for arg in step.args:
        if isinstance(arg, RefArg):
            if arg.index >= len(results):
                raise ProgramExecutionError(f"#{arg.index} refers to a step not yet run")
            values.append(results[arg.index])
        elif isinstance(arg, NumberArg | ConstArg):
            values.append(arg.value)
        else:  # pragma: no cover - the parser guarantees it
            raise ProgramExecutionError(f"{op} cannot take a row name")
    a, b = (_number(v, op) for v in values)
    if op == "add":
        return a + b
    if op == "subtract":
        return a - b
    if op == "multiply":
        return a * b
    if op == "divide":
        if b == 0:
            raise ProgramExecutionError("division by zero")
        return a / b
    if op == "greater":
        return a > b
    try:  # exp
        return math.pow(a, b)
    except (OverflowError, ValueError) as exc:
        raise ProgramExecutionError(f"exp({a}, {b}) has no real value: {exc}") from exc


def program_from_plan(plan: Mapping[str, object]) -> Program:
    """A model's plan as a Program, run on the gold programs' safe engine (docs/numeric.md):
    its compute steps, else its last extracted number. ProgramParseError outside the grammar.
    """
    text = repr(dict(plan))[:200]
    steps_raw = plan.get("steps")
    if not isinstance(steps_raw, list):
        raise ProgramParseError("plan has no list of steps", program=text)
    steps: list[Step] = []
    extracted: NumberArg | None = None
    for position, raw in enumerate(steps_raw):
        if not isinstance(raw, Mapping):
            raise ProgramParseError("plan step is not an object", program=text, position=position)
        if raw.get("tool") == "extract":
            value = raw.get("value")
            number = cell_number(value) if isinstance(value, int | float) else None
            if number is not None:
                extracted = NumberArg(value=number, text=repr(value))
            continue
        name = raw.get("operation")
        operation = normalise_operation(name) if isinstance(name, str) else ""
        if operation not in OPERATIONS:
            raise ProgramParseError(f"unknown operation {name!r}", program=text, position=position)
        args = raw.get("args")
        if not isinstance(args, list):
            raise ProgramParseError(
                f"{operation} needs a list of args", program=text, position=position
            )
        if operation in TABLE_OPERATIONS:  # a row name may hold commas and brackets
            row = args[0] if args else None
            if not isinstance(row, str) or not row.strip() or args[1:] not in ([], ["none"]):
                raise ProgramParseError(
                    f"{operation} takes a row name (and optionally 'none'), got {args!r}",
                    program=text,
                    position=position,
                )
            step = Step(operation=cast(Operation, operation), args=(RowArg(name=row.strip()),))
        else:
            inner = ", ".join(_plan_arg(a, program=text, position=position) for a in args)
            step = _parse_step(operation, inner, index=len(steps), program=text, position=position)
        steps.append(step)
    if steps:
        return Program(text=text, steps=tuple(steps))
    if extracted is None:
        raise ProgramParseError("plan has no compute step and no extracted number", program=text)
    return Program(text=text, value=extracted)


def _plan_arg(arg: object, *, program: str, position: int) -> str:
    """One plan argument as program text; commas and brackets may not smuggle in more args."""
    if isinstance(arg, bool) or not isinstance(arg, int | float | str):
        raise ProgramParseError(f"argument {arg!r} is not a number or text", program=program)
    if isinstance(arg, str):
        if any(ch in arg for ch in ",()"):
            raise ProgramParseError(
                f"argument {arg!r} holds ',', '(' or ')'", program=program, position=position
            )
        return arg
    if not math.isfinite(arg):
        raise ProgramParseError(f"argument {arg!r} is not finite", program=program)
    return repr(float(arg))


# ---------------------------------------------------------------------------------------------
# Operations and logic scores

# The other names a plan may use for each ConvFinQA operation.
_ALIASES_OF: dict[str, tuple[str, ...]] = {
    "add": ("addition", "plus", "sum"),
    "subtract": ("subtraction", "minus", "sub", "difference", "diff", "change"),
    "multiply": ("multiplication", "times", "mul", "product"),
    "divide": (
        "division",
        "div",
        "ratio",
        "quotient",
        "percentage",
        "percent",
        "percentage_of",
        "percentage_change",
        "percent_change",
        "pct_change",
        "growth_rate",
    ),
    "exp": ("power", "pow", "exponent"),
    "greater": ("compare", "gt"),
    "table_max": ("max", "maximum"),
    "table_min": ("min", "minimum"),
    "table_sum": (),
    "table_average": ("average", "mean", "avg"),
}
# Every name a plan may use for an operation, mapped to the ConvFinQA operation it counts as.
OPERATION_ALIASES: dict[str, str] = {
    name: operation for operation, aliases in _ALIASES_OF.items() for name in (operation, *aliases)
}


def normalise_operation(name: str) -> str:
    """A plan's operation name in the ConvFinQA vocabulary (``OPERATION_ALIASES``), ignoring case,
    spaces and hyphens; an unknown name comes back lower-cased and matches nothing."""
    if name in OPERATION_ALIASES:  # lower case, "_" between words: as it is
        return OPERATION_ALIASES[name]
    key = _SEPARATORS.sub("_", name.strip().lower())
    return OPERATION_ALIASES.get(key, key)


_SEPARATORS = re.compile(r"[\s\-]+")


def plan_operations(plan: Mapping[str, object] | None) -> list[str] | None:
    """Normalised operations of the plan's compute steps, in order; ``None`` for no plan."""
    if plan is None:
        return None
    steps = plan.get("steps")
    if not isinstance(steps, list):
        return []
    ops: list[str] = []
    for step in steps:
        if (type(step) is dict or isinstance(step, Mapping)) and step.get("tool") == "compute":
            op = step.get("operation")
            ops.append(normalise_operation(op) if isinstance(op, str) else "")
    return ops


def _shared(prediction: Iterable[str], reference: Iterable[str]) -> int:
    return sum((Counter(prediction) & Counter(reference)).values())


def logic_recall(prediction: Sequence[str], reference: Sequence[str]) -> float:
    """Shared operations (multiset intersection) / gold operations; range [0, 1].

    ``prediction`` are the plan's operations, ``reference`` the gold program's. For an
    extract-only gold (no operations) the spec's prose rule: 1.0 iff the plan is extract-only
    too, else 0.0. Spec: "Logic Recall (Reasoning Trace Score)".
    """
    if not reference:
        return 1.0 if not prediction else 0.0
    return _shared(prediction, reference) / len(reference)


def logic_precision(prediction: Sequence[str], reference: Sequence[str]) -> float:
    """Shared operations / plan operations; range [0, 1]. Both empty: 1.0; an empty plan
    against a non-empty gold: 0.0. Spec: "Future Enhancements" (precision metric)."""
    if not prediction:
        return 1.0 if not reference else 0.0
    return _shared(prediction, reference) / len(prediction)


def longest_common_subsequence(prediction: Sequence[str], reference: Sequence[str]) -> int:
    """Length of the longest common subsequence (dynamic programming, O(n*m))."""
    previous = [0] * (len(reference) + 1)
    for p in prediction:
        current = [0]
        for j, r in enumerate(reference):
            current.append(previous[j] + 1 if p == r else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def logic_order_score(prediction: Sequence[str], reference: Sequence[str]) -> float:
    """Order-aware score: LCS(plan ops, gold ops) / max(len(plan), len(gold)); range [0, 1].

    1.0 only for the same sequence; extra, missing and reordered operations all lower it.
    Both empty: 1.0. Spec: "Future Enhancements" (operation order scoring).
    """
    longest = max(len(prediction), len(reference))
    if not longest:
        return 1.0
    return longest_common_subsequence(prediction, reference) / longest


def logic_scores(prediction: Sequence[str], reference: Sequence[str]) -> tuple[float, float, float]:
    """``logic_recall``, ``logic_precision`` and ``logic_order_score`` of one plan against its
    gold program, each from its own function (looked up when called)."""
    return (
        logic_recall(prediction, reference),
        logic_precision(prediction, reference),
        logic_order_score(prediction, reference),
    )

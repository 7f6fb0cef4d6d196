"""The predictions JSONL format: one line per (conversation, turn), written by the agent under test
(its fields: docs/formats.md, "Predictions JSONL"; its rules: docs/numeric.md, "Inputs")."""

from __future__ import annotations

import logging
from array import array
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, SkipValidation, ValidationError, field_validator

from fieldcheck._util.errors import ErrorList, InputError, input_error_of
from fieldcheck._util.jsonio import BLANK, open_input, parse_jsonl_line, read_lines

logger = logging.getLogger("fieldcheck")

# Bounds on one line's counts (issue 9): a turn's call cannot take more than 1e6 s (11.6 days) or
# spend more than 1e9 tokens. A line past them is refused with its file:line, so every sum over
# the turns stays finite and inside 64 bits (statistics.json stays writable).
MAX_TOKENS = 1_000_000_000
MAX_LATENCY_S = 1_000_000.0


class PlanStep(BaseModel):
    """A plan step: ``extract`` (read a value) or ``compute`` (``operation`` over ``args``)."""

    model_config = ConfigDict(extra="allow")

    tool: Literal["extract", "compute"]
    operation: str | None = None
    args: list[Any] = Field(default_factory=list)

    _tool = field_validator("tool", mode="before")(lambda tool: tool_name(tool))


class Plan(BaseModel):
    """The model's plan for one turn."""

    model_config = ConfigDict(extra="allow")

    steps: list[PlanStep] = Field(default_factory=list)


class PredictionError(BaseModel):
    """An error the agent reported for the turn (timeout, tool failure, ...)."""

    type: str
    message: str = ""


class ValidationEntry(BaseModel):
    """One validator log line."""

    model_config = ConfigDict(extra="allow")

    check: str
    passed: bool
    message: str = ""


class Prediction(BaseModel):
    """One predictions line. ``answer`` may be text or a number; ``None`` means no answer."""

    model_config = ConfigDict(extra="ignore")

    conversation_id: str = Field(min_length=1)
    turn: int = Field(ge=0, strict=True)  # true/1.0/"1" are not turn numbers
    answer: str | float | None = None
    plan: Plan | None = None
    # "10", true and "1_000" are not counts, nor "1.5" or true a latency (a tester's finding:
    # they were read as 10, 1 and 1000 tokens, 1.5 and 1.0 s, into the totals and the cost)
    input_tokens: int = Field(default=0, ge=0, le=MAX_TOKENS, strict=True)
    output_tokens: int = Field(default=0, ge=0, le=MAX_TOKENS, strict=True)
    # the counts are the runner's characters / 4 estimate (the endpoint sent no usable usage);
    # only a JSON boolean: "yes", 1 and null are bad lines, as for the counts
    tokens_estimated: bool = Field(default=False, strict=True)
    latency_s: float | None = Field(default=None, ge=0, le=MAX_LATENCY_S, strict=True)
    error: PredictionError | None = None
    validation: list[ValidationEntry] = Field(default_factory=list)

    @field_validator("answer", mode="before")
    @classmethod
    def _no_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):
            return "yes" if value else "no"
        return value


class PredictionValues(NamedTuple):
    """What scoring reads of a prediction, as plain data (``Prediction`` dumped to JSON types):
    the hot path of ``numeric score`` keeps no model per turn (issue 10)."""

    answer: str | float | None
    plan: dict[str, Any] | None
    input_tokens: int
    output_tokens: int
    latency_s: float | None
    error_type: str | None
    error_message: str | None
    validation: list[dict[str, Any]]
    tokens_estimated: bool = False


def prediction_values(prediction: Prediction) -> PredictionValues:
    """A validated prediction's values for scoring."""
    error = prediction.error
    plan = prediction.plan
    return PredictionValues(
        prediction.answer,
        plan.model_dump(mode="json") if plan is not None else None,
        prediction.input_tokens,
        prediction.output_tokens,
        prediction.latency_s,
        error.type if error is not None else None,
        error.message if error is not None else None,
        [v.model_dump(mode="json") for v in prediction.validation],
        prediction.tokens_estimated,
    )


_STEP_FIELDS = frozenset(("tool", "operation", "args"))
_TOOLS = ("extract", "compute")


def tool_name(tool: Any) -> Any:
    """A plan step's ``tool`` with case and spaces ignored (``"Compute"`` is ``compute``), as
    operation names are; anything else as it is."""
    if type(tool) is str and tool not in _TOOLS and tool.strip().lower() in _TOOLS:
        return tool.strip().lower()
    return tool


_ENTRY_FIELDS = frozenset(("check", "passed", "message"))


def _plain_steps(steps: Any) -> list[dict[str, Any]] | None:
    if type(steps) is not list:
        return None
    out: list[dict[str, Any]] = []
    for step in steps:
        if type(step) is not dict:
            return None
        tool, operation, args = step.get("tool"), step.get("operation"), step.get("args", [])
        if type(tool) is not str or tool not in _TOOLS or type(args) is not list:
            return None
        if operation is not None and type(operation) is not str:
            return None
        dumped = {"tool": tool, "operation": operation, "args": args}
        if not step.keys() <= _STEP_FIELDS:
            dumped |= {k: v for k, v in step.items() if k not in _STEP_FIELDS}
        out.append(dumped)
    return out


def _plain_validation(entries: Any) -> list[dict[str, Any]] | None:
    if type(entries) is not list:
        return None
    out: list[dict[str, Any]] = []
    for entry in entries:
        if type(entry) is not dict:
            return None
        check, passed, message = entry.get("check"), entry.get("passed"), entry.get("message", "")
        if type(check) is not str or type(passed) is not bool or type(message) is not str:
            return None
        dumped = {"check": check, "passed": passed, "message": message}
        if not entry.keys() <= _ENTRY_FIELDS:
            dumped |= {k: v for k, v in entry.items() if k not in _ENTRY_FIELDS}
        out.append(dumped)
    return out


def plain_values(value: dict[str, Any]) -> PredictionValues | None:
    """``prediction_values(Prediction.model_validate(value))`` for a line of plain JSON types
    that is plainly valid, read without pydantic; ``None`` for any other line (then validate
    it). A shortcut, never a rule of its own: tests/numeric/test_fast_paths.py."""
    cid, turn = value.get("conversation_id"), value.get("turn")
    if type(cid) is not str or not cid or type(turn) is not int or turn < 0:
        return None
    answer = value.get("answer")
    if answer is not None and type(answer) is not str and type(answer) is not float:
        return None
    tokens_in, tokens_out = value.get("input_tokens", 0), value.get("output_tokens", 0)
    if type(tokens_in) is not int or type(tokens_out) is not int:
        return None
    if not (0 <= tokens_in <= MAX_TOKENS and 0 <= tokens_out <= MAX_TOKENS):
        return None
    estimated = value.get("tokens_estimated", False)
    if type(estimated) is not bool:
        return None
    latency = value.get("latency_s")
    if latency is not None and (type(latency) is not float or not 0 <= latency <= MAX_LATENCY_S):
        return None
    raw_plan = value.get("plan")
    plan: dict[str, Any] | None = None
    if raw_plan is not None:
        if type(raw_plan) is not dict:
            return None
        steps = _plain_steps(raw_plan.get("steps", []))
        if steps is None:
            return None
        plan = {"steps": steps} | {k: v for k, v in raw_plan.items() if k != "steps"}
    error = value.get("error")
    error_type = error_message = None
    if error is not None:
        if type(error) is not dict:
            return None
        error_type, error_message = error.get("type"), error.get("message", "")
        if type(error_type) is not str or type(error_message) is not str:
            return None
    validation = value.get("validation")
    checks = _plain_validation(validation) if "validation" in value else []
    if checks is None:
        return None
    return PredictionValues(
        answer, plan, tokens_in, tokens_out, latency, error_type, error_message, checks, estimated
    )


def line_values(value: Any) -> PredictionValues:
    """A line already found valid, as values: read plainly, or through ``Prediction``."""
    plain = plain_values(value) if type(value) is dict else None
    return plain if plain is not None else prediction_values(Prediction.model_validate(value))


class PredictionIndex(Mapping[tuple[str, int], Prediction]):
    """Where each valid prediction line is in the file, by (conversation id, turn): each
    conversation's (turn, line, offset, length) in ``by_conversation``, read again when asked for
    (issue 10: memory holds four integers per line, not the lines)."""

    _BIG = 32  # a conversation with more turns gets a turn -> position dict

    def __init__(self, file: Path) -> None:
        self.file = file
        self.by_conversation: dict[str, array[int]] = {}
        self._big: dict[str, dict[int, int]] = {}
        self._count = 0
        self._handle: IO[bytes] | None = None

    def add(self, cid: str, turn: int, line: int, offset: int, length: int) -> None:
        entries = self.by_conversation.get(cid)
        if entries is None:
            entries = self.by_conversation[cid] = array("q")
        entries.extend((turn, line, offset, length))
        self._count += 1
        big = self._big.get(cid)
        if big is not None:
            big[turn] = len(entries) - 4
        elif len(entries) > 4 * self._BIG:
            self._big[cid] = {entries[k]: k for k in range(0, len(entries), 4)}

    def _position(self, cid: str, turn: int) -> int | None:
        entries = self.by_conversation.get(cid)
        if entries is None:
            return None
        big = self._big.get(cid)
        if big is not None:
            return big.get(turn)
        for k in range(0, len(entries), 4):
            if entries[k] == turn:
                return k
        return None

    def line_of(self, key: tuple[str, int]) -> int | None:
        k = self._position(*key)
        return None if k is None else self.by_conversation[key[0]][k + 1]

    def sorted_keys(self) -> Iterator[tuple[str, int]]:
        """The keys in (conversation id, turn) order, one conversation's at a time."""
        for cid in sorted(self.by_conversation):
            entries = self.by_conversation[cid]
            for turn in sorted(entries[0::4]):
                yield cid, turn

    def __del__(self) -> None:
        if self._handle is not None:
            self._handle.close()

    def __getitem__(self, key: tuple[str, int]) -> Prediction:
        k = self._position(*key)
        if k is None:
            raise KeyError(key)
        line, offset, length = self.by_conversation[key[0]][k + 1 : k + 4]
        if self._handle is None:
            self._handle = self.file.open("rb", buffering=1 << 20)
        self._handle.seek(offset)
        return Prediction.model_validate(
            parse_jsonl_line(self._handle.read(length), line, self.file)
        )

    def __contains__(self, key: object) -> bool:
        return isinstance(key, tuple) and len(key) == 2 and self._position(*key) is not None

    def __iter__(self) -> Iterator[tuple[str, int]]:
        for cid, entries in self.by_conversation.items():
            for k in range(0, len(entries), 4):
                yield cid, entries[k]

    def __len__(self) -> int:
        return self._count


class _Lines(Mapping[tuple[str, int], int]):
    """Each prediction's line number, from a ``PredictionIndex``."""

    def __init__(self, index: PredictionIndex) -> None:
        self.index = index

    def __getitem__(self, key: tuple[str, int]) -> int:
        line = self.index.line_of(key)
        if line is None:
            raise KeyError(key)
        return line

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return iter(self.index)

    def __len__(self) -> int:
        return len(self.index)


class PredictionsResult(BaseModel):
    """Predictions keyed by (conversation id, turn) (from ``load_predictions``: a
    ``PredictionIndex``), and one InputError per bad line."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    path: str
    predictions: SkipValidation[Mapping[tuple[str, int], Prediction]]
    lines: SkipValidation[Mapping[tuple[str, int], int]]
    errors: ErrorList
    # unknown top-level key -> (line of its first occurrence, number of lines that carry it)
    unknown_keys: dict[str, tuple[int, int]] = Field(default_factory=dict)


def load_predictions(path: str | Path) -> PredictionsResult:
    """``index_predictions``, its unknown keys logged (one warning per key)."""
    result = index_predictions(path)
    warn_unknown_keys(result)
    return result


def warn_unknown_keys(result: PredictionsResult) -> None:
    """One warning per unknown top-level key: its first line and how many lines carry it."""
    for key, (seen_on, count) in sorted(result.unknown_keys.items(), key=lambda item: item[1]):
        logger.warning(
            "%s:%d: unknown key %r ignored (on %d line%s)",
            result.path,
            seen_on,
            key,
            count,
            "" if count == 1 else "s",
        )


def index_predictions(path: str | Path) -> PredictionsResult:
    """A predictions JSONL file indexed (a pure task, so the scoring pool can read it): a bad or
    duplicate line is an InputError naming ``file:line``, record and field, and reading goes on;
    unknown keys are counted; no line with an answer is one more (issue 9; docs/numeric.md)."""
    file = Path(path)
    index = PredictionIndex(file)
    errors = ErrorList()
    unknown: dict[str, tuple[int, int]] = {}
    objects = answered = 0
    offset = 0
    with open_input(file, 1 << 20) as handle:
        for number, raw in enumerate(read_lines(handle), start=1):
            start = offset
            offset += len(raw)
            value = parse_jsonl_line(raw, number, file)
            if value is BLANK:
                continue
            if isinstance(value, InputError):
                errors.append(value)
                continue
            if not isinstance(value, dict):
                reason = "a predictions line must be a JSON object"
                errors.append(InputError(reason, file=file, line=number, value=value))
                continue
            objects += 1
            # a line reporting an error (a failed call) has no answer by right
            answered += value.get("answer") is not None or value.get("error") is not None
            for key in value.keys() - _KNOWN_KEYS:
                seen_on, count = unknown.get(key, (number, 0))
                unknown[key] = (seen_on, count + 1)
            record = value.get("conversation_id")
            if plain_values(value) is not None:
                where: tuple[str, int] = (value["conversation_id"], value["turn"])
            else:
                try:
                    prediction = Prediction.model_validate(value)
                    where = (prediction.conversation_id, prediction.turn)
                except ValidationError as exc:
                    shown = str(record) if record is not None else None
                    errors.append(input_error_of(exc, file=file, line=number, record=shown))
                    continue
            first_line = index.line_of(where)
            if first_line is not None:
                errors.append(
                    InputError(
                        f"duplicate prediction for turn {where[1]} (first on line {first_line}); ignored",
                        file=file,
                        line=number,
                        record=where[0],
                        field="turn",
                        value=where[1],
                    )
                )
                continue
            index.add(where[0], where[1], number, start, len(raw))
    if objects and not answered:
        hint = f"; unknown keys: {', '.join(repr(k) for k in sorted(unknown))}" if unknown else ""
        read = f"{objects} line{'' if objects == 1 else 's'} read{hint}"
        errors.append(InputError(f"no line has an answer ({read})", file=file, field="answer"))
    return PredictionsResult(
        path=str(file), predictions=index, lines=_Lines(index), errors=errors, unknown_keys=unknown
    )


_KNOWN_KEYS = frozenset(Prediction.model_fields)

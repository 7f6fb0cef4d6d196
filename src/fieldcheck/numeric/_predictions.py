"""The predictions JSONL format: one line per (conversation, turn), written by the agent under test.

```
{"conversation_id": "...", "turn": 0, "answer": "14.1%", "plan": {"steps": [...]} | null,
 "input_tokens": 812, "output_tokens": 64, "latency_s": 1.9,
 "error": null | {"type": "...", "message": "..."},
 "validation": [{"check": "...", "passed": true, "message": "..."}]}
```
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fieldcheck._util.errors import InputError
from fieldcheck._util.jsonio import iter_jsonl

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
    input_tokens: int = Field(default=0, ge=0, le=MAX_TOKENS)
    output_tokens: int = Field(default=0, ge=0, le=MAX_TOKENS)
    latency_s: float | None = Field(default=None, ge=0, le=MAX_LATENCY_S)
    error: PredictionError | None = None
    validation: list[ValidationEntry] = Field(default_factory=list)

    @field_validator("answer", mode="before")
    @classmethod
    def _no_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):
            return "yes" if value else "no"
        return value


class PredictionsResult(BaseModel):
    """Predictions keyed by (conversation id, turn), and one InputError per bad line."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    path: str
    predictions: dict[tuple[str, int], Prediction]
    lines: dict[tuple[str, int], int]
    errors: list[InputError]
    # unknown top-level key -> (line of its first occurrence, number of lines that carry it)
    unknown_keys: dict[str, tuple[int, int]] = Field(default_factory=dict)


def load_predictions(path: str | Path) -> PredictionsResult:
    """Read a predictions JSONL file; a bad line (invalid JSON, not an object, a field of the wrong
    type) or a duplicate becomes an InputError naming ``file:line``, the conversation id and the
    field, and reading goes on. Spec: the predictions format of issue 5 (docs/formats.md).

    Unknown top-level keys are ignored with one warning per key (its first line and how many
    lines carry it). A file where no line has an answer nor reports an error (say
    ``"prediction"`` instead of ``"answer"``) gets one InputError for the whole file, after the
    line errors (issue 9): a model that was never read does not pass as one that scores 0.
    """
    file = Path(path)
    predictions: dict[tuple[str, int], Prediction] = {}
    lines: dict[tuple[str, int], int] = {}
    errors: list[InputError] = []
    unknown: dict[str, tuple[int, int]] = {}
    objects = answered = 0
    for number, value in iter_jsonl(file):
        if isinstance(value, InputError):
            errors.append(value)
            continue
        if not isinstance(value, dict):
            errors.append(
                InputError(
                    "a predictions line must be a JSON object", file=file, line=number, value=value
                )
            )
            continue
        objects += 1
        # a line reporting an error (a failed call) has no answer by right
        answered += value.get("answer") is not None or value.get("error") is not None
        for key in value.keys() - _KNOWN_KEYS:
            seen_on, count = unknown.get(key, (number, 0))
            unknown[key] = (seen_on, count + 1)
        record = value.get("conversation_id")
        try:
            prediction = Prediction.model_validate(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            errors.append(
                InputError(
                    first["msg"],
                    file=file,
                    line=number,
                    record=str(record) if record is not None else None,
                    field=".".join(str(p) for p in first["loc"]) or None,
                    value=first.get("input"),
                )
            )
            continue
        key = (prediction.conversation_id, prediction.turn)
        if key in predictions:
            errors.append(
                InputError(
                    f"duplicate prediction for turn {prediction.turn} (first on line {lines[key]}); ignored",
                    file=file,
                    line=number,
                    record=prediction.conversation_id,
                    field="turn",
                    value=prediction.turn,
                )
            )
            continue
        predictions[key] = prediction
        lines[key] = number
    for key, (seen_on, count) in sorted(unknown.items(), key=lambda item: item[1]):
        logger.warning(
            "%s:%d: unknown key %r ignored (on %d line%s)",
            file,
            seen_on,
            key,
            count,
            "" if count == 1 else "s",
        )
    if objects and not answered:
        hint = f"; unknown keys: {', '.join(repr(k) for k in sorted(unknown))}" if unknown else ""
        errors.append(
            InputError(
                f"no line has an answer ({objects} line{'' if objects == 1 else 's'} read{hint})",
                file=file,
                field="answer",
            )
        )
    return PredictionsResult(
        path=str(file), predictions=predictions, lines=lines, errors=errors, unknown_keys=unknown
    )


_KNOWN_KEYS = frozenset(Prediction.model_fields)

"""Configuration of a JSON evaluation: strategies per field, thresholds, weights, matcher family."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from fieldcheck._util.errors import InputError
from fieldcheck._util.jsonio import read_json_bytes, repeated_key
from fieldcheck.metrics import STRATEGIES, RqsWeights, Strategy

MatcherFamily = Literal["local", "llm"]
SafetyCheck = Literal["off", "leaks"]
_ALLOWED = ", ".join(STRATEGIES)
LISTED_TWICE = "the field is listed twice"


def parse_strategies(data: Any, *, file: str | Path | None = None) -> dict[str, Strategy]:
    """A strategy mapping validated (values case-insensitive); a bad entry raises a one-line
    InputError naming the file, the field, the value and the allowed values."""
    if not isinstance(data, dict):
        raise InputError(
            "a strategy config must be a JSON object mapping field -> strategy",
            file=file,
            value=data,
        )
    for field, value in data.items():
        if not isinstance(value, str) or value.strip().upper() not in STRATEGIES:
            raise InputError(
                f"strategy must be one of {_ALLOWED}", file=file, field=field, value=value
            )
    return {field: value.strip().upper() for field, value in data.items()}


def load_strategies(path: str | Path) -> dict[str, Strategy]:
    """Read and validate a strategy config file (JSON object field -> strategy); a field given
    twice is an InputError (JSON would keep the last one silently)."""
    data, text = read_json_bytes(path)
    if twice := repeated_key(text):
        raise InputError(LISTED_TWICE, file=path, line=twice[1], field=twice[0])
    return parse_strategies(data, file=path)


_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)


def parse_weights(text: str) -> RqsWeights:
    """``accuracy=0.45,completeness=0.25,...`` -> RqsWeights (spec Phase 4), names not given at
    their default; a bad part (not a plain ASCII decimal, finite, >= 0) raises InputError."""
    allowed = list(RqsWeights.model_fields)
    values: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, raw = part.partition("=")
        name, raw = name.strip(), raw.strip()
        if not sep or name not in allowed:
            raise InputError(
                f"weights: expected name=value with name one of {', '.join(allowed)}", value=part
            )
        if name in values:
            raise InputError(f"weights: {name} is given twice", value=text)
        if not _DECIMAL.fullmatch(raw):
            raise InputError(f"weights: {name} is not a number", value=raw)
        values[name] = float(raw)
    if not values:
        raise InputError(
            f"weights: expected name=value pairs with names from {', '.join(allowed)}", value=text
        )
    try:
        return RqsWeights(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        reason = str(first["msg"]).removeprefix("Value error, ").lower()
        raise InputError(f"weights: {first['loc'][0]} {reason}", value=first["input"]) from None


class EvalConfig(BaseModel):
    """Everything that decides a JSON evaluation's numbers (and goes into its signature)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    strategies: dict[str, Strategy] = Field(default_factory=dict)
    weights: RqsWeights = Field(default_factory=RqsWeights)
    fuzzy_threshold: float = Field(0.85, ge=0, le=1)
    semantic_threshold: float = Field(0.80, ge=0, le=1)
    matcher: MatcherFamily = "local"
    judge_base_url: str | None = None
    judge_model: str | None = None
    flatten: bool = False
    safety_check: SafetyCheck = "off"

    @model_validator(mode="after")
    def _judge_settings(self) -> EvalConfig:
        if self.matcher == "llm" and not (self.judge_base_url and self.judge_model):
            raise ValueError("matcher 'llm' needs judge_base_url and judge_model")
        return self

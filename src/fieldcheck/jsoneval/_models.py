"""Records and results of the JSON evaluation (pydantic models)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, field_validator

from fieldcheck._util.errors import InputError
from fieldcheck._util.jsonio import MAX_DEPTH as MAX_DEPTH
from fieldcheck._util.jsonio import TOO_DEEP as TOO_DEEP
from fieldcheck._util.signature import Signature
from fieldcheck.jsoneval._safety import SafetyFinding
from fieldcheck.metrics import Interval, Strategy

OutputKind = Literal["object", "array", "text", "invalid_json", "number", "boolean", "null"]
PUBLIC_KEYS = (
    "completeness",
    "hallucination",
    "accuracy",
    "safety_score",
    "rqs",
    "buckets",
    "fields",
    "signature",
)


class FieldResult(BaseModel):
    """One ``both_non_null`` field: its strategy, similarity and 0/1 score (None for IGNORE)."""

    strategy: Strategy
    similarity: float | None
    score: float | None


class JsonEvalResult(BaseModel):
    """The scores of one output against its ground truth (all in [0, 1], full precision)."""

    completeness: float
    hallucination: float
    accuracy: float
    safety_score: float
    rqs: float
    buckets: dict[str, list[str]]
    fields: dict[str, FieldResult]
    signature: Signature
    output_kind: OutputKind = "object"
    flags: list[str] = Field(default_factory=list)
    safety_findings: list[SafetyFinding] = Field(default_factory=list)

    @property
    def not_an_object(self) -> bool:
        return "not_an_object" in self.flags

    def public_dict(self) -> dict[str, Any]:
        """Exactly the keys of ``fieldcheck json score --json`` (the issue's list)."""
        data = self.model_dump(mode="json")
        return {k: data[k] for k in PUBLIC_KEYS}


class BatchRecord(BaseModel):
    """A batch line: ``{"id", "ground_truth": {...}, "output": any, "safety_score"?}``."""

    model_config = ConfigDict(extra="ignore")

    id: StrictStr | StrictInt
    ground_truth: dict[str, Any]
    output: Any = Field(...)
    # strict: a JSON number (integer or not) or null; "0.5" and true are errors, not 0.5 and 1.0
    safety_score: float | None = Field(None, ge=0, le=1, allow_inf_nan=False, strict=True)
    line: int | None = Field(None, exclude=True)

    @field_validator("id")
    @classmethod
    def _id_text(cls, value: str | int) -> str | int:
        if isinstance(value, str) and not value.strip():
            raise ValueError("must not be empty")
        return value

    @property
    def key(self) -> str:
        return str(self.id)


def duplicate_id(first: int, *, file: Path | str | None, line: int, record: str) -> InputError:
    """The error of a record whose id the line ``first`` gave already (docs/json.md)."""
    return InputError(
        f"duplicate id (first on line {first})", file=file, line=line, record=record, field="id"
    )


class RecordError(BaseModel):
    """A line or record that could not be scored (one line of ``errors.jsonl``)."""

    file: str | None = None
    line: int | None = None
    record: str | None = None
    field: str | None = None
    reason: str
    message: str
    value: str | None = None

    @classmethod
    def of(cls, error: InputError) -> RecordError:
        """The ``errors.jsonl`` line of a located ``InputError``."""
        return cls.model_validate(error.to_dict())

    def fields(self) -> dict[str, Any]:
        """Its ``model_dump()`` (every field a string, a whole number or None, as JSON), read
        without pydantic's serializer: three times the cost of the rest of a bad line."""
        return dict(self.__dict__)


class FieldSummary(BaseModel):
    """One field's counts across a batch."""

    expected: int = 0
    scored: int = 0
    matched: int = 0
    missing: int = 0
    hallucinated: int = 0
    ignored: int = 0
    strategies: list[str] = Field(default_factory=list)

    @property
    def match_rate(self) -> float | None:
        """matched / scored; None when never scored."""
        return self.matched / self.scored if self.scored else None


class BatchSummary(BaseModel):
    """A batch's ``summary.json``: means over the scored records with their bootstrap intervals,
    counts, the first errors and per-field counts (docs/formats.md)."""

    records: int
    scored: int
    failed: int
    not_scored: int
    errors: list[str] = Field(default_factory=list)
    not_an_object: int
    safety_flagged: int
    means: dict[str, float | None]
    ci: dict[str, Interval] = Field(default_factory=dict)
    fields: dict[str, FieldSummary]
    matcher_pairs: dict[str, int]
    signature: Signature

    def to_json(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        for name, summary in self.fields.items():
            data["fields"][name]["match_rate"] = summary.match_rate
        return data


class RecordResult(BaseModel):
    """A scored record of a batch."""

    id: StrictStr | StrictInt  # the line's own id, type kept (an integer stays an integer)
    line: int | None = None
    result: JsonEvalResult


class BatchResult(BaseModel):
    """Everything ``evaluate_batch`` produced: scored records, failures and the summary."""

    results: list[RecordResult]
    errors: list[RecordError]
    summary: BatchSummary

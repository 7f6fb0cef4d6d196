"""Request bodies of the JSON routes (the spec's JsonEvaluationRequest and BatchPathRequest,
with ``field_strategies``, thresholds and weights each optional: the saved ones otherwise)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fieldcheck.jsoneval import SafetyCheck

_STRATEGIES = (
    "Field -> EXACT, FUZZY, SEMANTIC or IGNORE (the spec's Field Strategy Config File); "
    "omitted: the saved strategies."
)
_THRESHOLDS = "{fuzzy_threshold, semantic_threshold} in [0, 1]; omitted: the saved thresholds."
_WEIGHTS = (
    "RQS weights {accuracy, completeness, hallucination, safety}, each >= 0 (names left out "
    "keep their default); omitted: the saved weights."
)


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    field_strategies: dict[str, Any] | None = Field(None, description=_STRATEGIES)
    thresholds: dict[str, Any] | None = Field(None, description=_THRESHOLDS)
    weights: dict[str, Any] | None = Field(None, description=_WEIGHTS)
    flatten: bool = Field(False, description="Score nested objects leaf by leaf (json --flatten).")
    safety_check: SafetyCheck = Field("off", description="'off' or 'leaks' (json --safety-check).")


class EvaluateRequest(_Config):
    """One output against one ground truth: the result of ``fieldcheck json score --json``."""

    ground_truth: dict[str, Any] = Field(description="The ground-truth JSON object.")
    output: Any = Field(
        description="The model's output: any JSON value, or text (parsed when it holds an object)."
    )
    safety_score: float | None = Field(
        None, ge=0, le=1, allow_inf_nan=False, description="Overrides the safety score 1.0."
    )


class BatchPathRequest(_Config):
    """A JSONL batch file under the server's data root (``fieldcheck serve --data-root``)."""

    path: str = Field(min_length=1, max_length=4096, description="Path relative to the data root.")
    bootstrap: int = Field(1000, ge=0, le=100_000, description="Bootstrap resamples (0: none).")
    seed: int = Field(0, ge=0, le=2**32 - 1, description="Seed of the bootstrap.")

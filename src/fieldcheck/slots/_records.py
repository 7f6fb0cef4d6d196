"""Records of the slot benchmark's files (docs/formats.md "Slot extraction benchmark")."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr

NonEmpty = Annotated[StrictStr, Field(min_length=1)]
MAX_LATENCY_S = 1_000_000.0
"""A latency line past 1e6 s (11.6 days) is refused (issue 9): sums over sessions stay finite."""


class _Record(BaseModel):
    # Unknown keys (for example a "comment") are ignored, so files can carry provenance notes.
    model_config = ConfigDict(extra="ignore", frozen=True)

    user: NonEmpty
    session: StrictInt


class SlotRecord(_Record):
    """One slot of one session, gold or predicted: ``values`` empty means "no value"."""

    topic: NonEmpty
    field: NonEmpty
    values: list[StrictStr]


class LatencyRecord(_Record):
    """Seconds one model took for one session."""

    seconds: Annotated[StrictFloat, Field(ge=0, le=MAX_LATENCY_S, allow_inf_nan=False)]


class JudgeRecord(_Record):
    """A precomputed judge score in [0, 1] for one predicted slot."""

    topic: NonEmpty
    field: NonEmpty
    score: Annotated[StrictFloat, Field(ge=0, le=1, allow_inf_nan=False)]

"""Records of the slot benchmark's files (docs/formats.md "Slot extraction benchmark")."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr

NonEmpty = Annotated[StrictStr, Field(min_length=1)]
MAX_LATENCY_S = 1_000_000.0
"""A session cannot take more than 1e6 s (11.6 days): a latency line past it is refused with its
file:line (issue 9), so sums over any number of sessions stay finite. Same bound as numeric."""


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

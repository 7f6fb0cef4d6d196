"""ConvFinQA records: one conversation over one document, whatever file format it came from."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SourceFormat = Literal["derived", "original"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class Document(_Frozen):
    """The report page: text before and after the table; ``table`` maps ROW -> column -> cell (a
    number, or text such as ``"nm"``) so ``table_*`` operations read one row (docs/numeric.md)."""

    pre_text: str = ""
    post_text: str = ""
    table: dict[str, dict[str, float | str]] = Field(default_factory=dict)


class Features(_Frozen):
    """Per-conversation features (spec "Dataset Features Tracking")."""

    num_dialogue_turns: int = Field(ge=0)
    has_type2_question: bool
    has_duplicate_columns: bool
    has_non_numeric_values: bool


class Turn(_Frozen):
    """One question with its gold program and ``executed_answer`` (a float, percentages as
    fractions, or ``"yes"``/``"no"``; ``None`` when the file has none: the private test set)."""

    index: int = Field(ge=0)
    question: str
    answer: str | None = None
    program: str | None = None
    executed_answer: float | str | None = None
    qa_split: bool | None = None


class Conversation(_Frozen):
    """A ConvFinQA record: id, split, document, turns and features."""

    id: str = Field(min_length=1)
    split: str
    source_format: SourceFormat
    doc: Document
    turns: tuple[Turn, ...]
    features: Features


def turn_key(conversation: str, turn: int) -> str:
    """A turn's item key (``<conversation id>#<turn>``), as the agent stores it."""
    return f"{conversation}#{turn}"

"""Writing every output file of the spec's "Output Files" section into one directory.

summary.csv, turns.csv, validation.csv, errors.csv, statistics.json, traces/<id>.json,
accuracy_by_turn.png, plus input_errors.csv (every bad input line), report.md, report.html and
the report's plots (numeric/_report.py). The rows are built and written by numeric/_stream.py
(``numeric score`` streams them); every CSV cell goes through ``neutralise_cell``, which
neutralises spreadsheet formulas.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from fieldcheck.core import OutputFolder
from fieldcheck.numeric._records import Conversation
from fieldcheck.numeric._scoring import ConversationScore, NumericResult
from fieldcheck.numeric._stream import (
    OutputStreams,
    Tally,
    error_row,
    finish_outputs,
    summary_row,
    turn_row,
)


def _dumped(c: ConversationScore) -> list[dict[str, Any]]:
    return [t.model_dump(mode="json") for t in c.turns]


def summary_rows(result: NumericResult) -> list[dict[str, Any]]:
    """One row per conversation (summary.csv)."""
    return [
        summary_row(c.conversation_id, c.trace_id, c.features, _dumped(c))
        for c in result.conversations
    ]


def turn_rows(result: NumericResult) -> list[dict[str, Any]]:
    """One row per turn (turns.csv)."""
    return [turn_row(c.features, t) for c in result.conversations for t in _dumped(c)]


def error_rows(result: NumericResult) -> list[dict[str, Any]]:
    """Every failed scored turn (an error, a missing prediction, or an answer that is not a
    numerical match), with exactly the spec's columns (errors.csv).

    ``error_type`` is the agent's error type for errored turns (``invalid_reply``,
    ``invalid_plan``, an agent's own name), ``missing_prediction`` for a turn without a
    prediction, else the failure mode (``scale``, ``sign``, ``rounding``, ``wrong``,
    ``no_answer``). A turn that is not scored is not an error and is left out (issue 9): no gold
    answer (the private test split), whatever its prediction, or a failed model call (issue 8);
    turns.csv lists it with ``not_scored`` and statistics.json counts it."""
    rows = []
    for c in result.conversations:
        for t in _dumped(c):
            row = error_row(c.trace_id, c.conversation_id, c.features, t)
            if row is not None:
                rows.append(row)
    return rows


def validation_rows(result: NumericResult) -> list[dict[str, Any]]:
    """The validator log lines of every turn (validation.csv)."""
    return [
        {"conversation_id": c.conversation_id, "turn_idx": t.turn_idx, **entry}
        for c in result.conversations
        for t in c.turns
        for entry in t.validation
    ]


def trace_document(c: ConversationScore, conversation: Conversation | None) -> dict[str, Any]:
    """traces/<trace_id>.json: the conversation, its features, and every scored turn."""
    return {
        "trace_id": c.trace_id,
        "conversation_id": c.conversation_id,
        "features": c.features,
        "document": conversation.doc.model_dump(mode="json") if conversation else None,
        "conversation_success": c.success,
        "turns": _dumped(c),
    }


def write_outputs(
    result: NumericResult,
    out_dir: str | Path | OutputFolder,
    *,
    conversations: Sequence[Conversation] = (),
) -> dict[str, Path]:
    """Write every output file of an in-memory ``score_numeric`` result into ``out_dir``
    (created), each under a temporary name then renamed, statistics.json last with
    ``complete: true``; return name -> path. The same writers as the streamed
    ``score_to_folder``. The plots (accuracy_by_turn.png, plot_*.png) are written only when a
    turn was scored."""
    out = OutputFolder.of(out_dir)
    by_id = {c.id: c for c in conversations}
    tally = Tally()
    with ExitStack() as stack:
        streams = OutputStreams(out, stack)
        for c in result.conversations:
            turns = _dumped(c)
            conversation = by_id.get(c.conversation_id)
            document = conversation.doc.model_dump(mode="json") if conversation else None
            streams.write(c.conversation_id, c.trace_id, c.features, turns, document)
            tally.add(c.conversation_id, turns)
    if result.tallies is None:
        result = result.model_copy(update={"tallies": tally.report_tallies()})
    return finish_outputs(result, out)

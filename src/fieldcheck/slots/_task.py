"""What ``slots run`` asks a model (``core.Runs``): each user's sessions in order with a slot
memory (prompt slot-memory-v1, ``_extract``); every model's predictions scored together into
one run and one report (slot-extraction-benchmark.md), a session whose call failed not scored."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fieldcheck._util.errors import InputError, UsageProblem
from fieldcheck.reports import RunFolder, Scored
from fieldcheck.runner import ModelSpec, Runner
from fieldcheck.slots._extract import (
    Conversation,
    Extraction,
    load_conversations,
    run_extraction,
    write_extractions,
)


@dataclass
class SlotsTask:
    """The conversations every model runs over, the gold they are scored against and the
    settings they are scored with."""

    path: Path
    conversations: list[Conversation]
    gold: Path
    settings: dict[str, Any]


class SlotsRuns:
    """``core.Runs`` of the slot extraction benchmark."""

    run_inputs = (
        ("conversations", "JSONL: one session per line, {user, session, turns}"),
        ("gold", "JSONL: the slots each session states, {user, session, topic, field, values}"),
    )
    together = True
    folder_per_model = False

    def read_task(
        self,
        inputs: Sequence[tuple[str, Any]],
        settings: Mapping[str, Any],
        extras: Mapping[str, Any],
    ) -> SlotsTask:
        """The conversations (a bad line stops the run: it would change every later memory)
        and the gold, read and checked before any model is called."""
        from fieldcheck.slots._system import check_gold

        roles = dict(inputs)
        try:
            conversations = load_conversations(roles["conversations"])
        except InputError as exc:
            raise UsageProblem(exc.one_line(), "conversations") from None
        check_gold(Path(roles["gold"]))
        return SlotsTask(Path(roles["conversations"]), conversations, roles["gold"], dict(settings))

    async def run_model(
        self, task: SlotsTask, runner: Runner, spec: ModelSpec, *, console: Any, show_progress: bool
    ) -> Extraction:
        return await run_extraction(
            runner,
            spec,
            task.path,
            task.conversations,
            console=console,
            show_progress=show_progress,
        )

    def predictions(
        self,
        task: SlotsTask,
        calls: Sequence[Extraction],
        specs: Sequence[ModelSpec],
        folder: RunFolder,
    ) -> tuple[list[tuple[str, Path]], dict[str, Any], dict[str, Any]]:
        """Every model's pred, latency and memory files, session_errors.jsonl and runs.json."""
        preds, latencies, _ = write_extractions(calls, folder, specs)
        inputs = [
            ("gold", task.gold),
            *((f"pred:{n}", p) for n, p in preds.items()),
            *((f"latency:{n}", p) for n, p in latencies.items()),
        ]
        return inputs, task.settings, {"not_scored": {ex.model: ex.not_scored() for ex in calls}}

    def comparison(self, task: SlotsTask, calls: Extraction, scored: Scored) -> None:
        """None: the models are compared in metrics.json (paired F1)."""
        return None

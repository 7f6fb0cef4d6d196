"""What ``numeric evaluate`` asks a model (``core.Runs``): the plan-and-execute agent on every
turn (prompt convfinqa-plan-v1, ``_agent``), its answers written as predictions.jsonl and
scored as ``numeric score`` scores them, one run per model (numeric-qa-evaluation.md)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fieldcheck.numeric._agent import evaluate_model, write_predictions
from fieldcheck.numeric._loaders import LoadResult
from fieldcheck.numeric._scoring import CALL_ERRORS
from fieldcheck.reports import RunFolder, Scored
from fieldcheck.runner import ModelSpec, RunHandle, Runner, item_calls


@dataclass
class NumericTask:
    """The dataset as read with the run's split and sample, and the settings it is scored
    with (each model's prices added)."""

    data: Path
    loaded: LoadResult
    settings: dict[str, Any]


@dataclass
class AgentRun:
    """One model's finished agent run (its items, resumed and estimated counts in ``handle``)."""

    spec: ModelSpec
    handle: RunHandle

    @property
    def run_id(self) -> str:
        return self.handle.id

    @property
    def item_calls(self) -> dict[str, dict[str, Any]]:
        return item_calls(self.handle)

    @property
    def errors(self) -> Counter[str]:
        """Turns by error type."""
        return Counter(i.error_type for i in self.handle.items() if i.error_type)

    @property
    def failures(self) -> int:
        """Turns whose call failed (not the model's answer): the evaluation is incomplete."""
        return sum(n for kind, n in self.errors.items() if kind in CALL_ERRORS)


class NumericRuns:
    """``core.Runs`` of the numeric QA evaluation."""

    run_inputs = (("data", "ConvFinQA: the derived {'train','dev'} format or the original list"),)
    together = False
    folder_per_model = False

    def read_task(
        self,
        inputs: Sequence[tuple[str, Any]],
        settings: Mapping[str, Any],
        extras: Mapping[str, Any],
    ) -> NumericTask:
        """The dataset's split and sample (``settings``), read before any model is called."""
        from fieldcheck.numeric._system import check_settings, read_data

        found = check_settings(settings)
        data = Path(dict(inputs)["data"])
        loaded = read_data(data, split=found.split, sample_size=found.sample_size, seed=found.seed)
        return NumericTask(data, loaded, found.model_dump())

    async def run_model(
        self,
        task: NumericTask,
        runner: Runner,
        spec: ModelSpec,
        *,
        console: Any,
        show_progress: bool,
    ) -> AgentRun:
        handle = await evaluate_model(
            runner,
            spec,
            task.loaded,
            task.data,
            sample_size=task.settings["sample_size"],
            seed=task.settings["seed"],
            console=console,
            show_progress=show_progress,
        )
        return AgentRun(spec, handle)

    def predictions(
        self,
        task: NumericTask,
        calls: Sequence[AgentRun],
        specs: Sequence[ModelSpec],
        folder: RunFolder,
    ) -> tuple[list[tuple[str, Path]], dict[str, Any], dict[str, Any]]:
        """predictions.jsonl of one model, scored with its prices."""
        [run], [spec] = calls, specs
        predictions = write_predictions(folder, run.handle, task.loaded.conversations)
        prices = {"price_in": spec.price_in, "price_out": spec.price_out}
        inputs = [("data", task.data), ("predictions", predictions)]
        return inputs, {**task.settings, **prices}, {"data": task.loaded}

    def comparison(self, task: NumericTask, calls: AgentRun, scored: Scored) -> None:
        """None: ``numeric evaluate`` prints the models side by side and writes no file."""
        return None

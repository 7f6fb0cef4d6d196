"""What ``json run`` asks a model (``core.Runs``): each document extracted (prompt
json-extract-v1, ``_extract``), the replies written as the batch file ``outputs.jsonl`` that
``json batch`` scores, one run and folder per model, a row of comparison.csv each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fieldcheck._util.errors import InputError, UsageProblem
from fieldcheck._util.jsonio import write_json, write_jsonl
from fieldcheck._util.sniff import check_input_file
from fieldcheck.jsoneval._extract import (
    ExtractRecord,
    ModelRun,
    load_schema,
    read_documents,
    run_extraction,
)
from fieldcheck.reports import RunFolder, Scored
from fieldcheck.runner import ModelSpec, Runner


@dataclass
class JsonTask:
    """The documents (and their bad lines), the schema shown to the model, the configuration
    (given merged with the saved one) and the matchers every model's pairs share."""

    data: Path
    records: list[ExtractRecord]
    errors: list[Any]
    schema_text: str | None
    settings: dict[str, Any]
    matchers: Any


def _quiet(_: str) -> None:
    return None


class JsonRuns:
    """``core.Runs`` of the JSON evaluation (json-evaluation.md)."""

    run_inputs = (
        ("documents", 'JSONL: one {"id", "document": "...", "ground_truth": {...}} per line'),
        ("schema", "JSON Schema of the target object, shown to the model"),
    )
    together = False
    folder_per_model = True

    def read_task(
        self,
        inputs: Sequence[tuple[str, Any]],
        settings: Mapping[str, Any],
        extras: Mapping[str, Any],
    ) -> JsonTask:
        """The configuration resolved and the matchers built once; the schema and the documents
        read (a file with no usable document is a usage problem)."""
        from fieldcheck.jsoneval._evaluate import build_matchers
        from fieldcheck.jsoneval._io import record_error
        from fieldcheck.jsoneval._saved import resolve_config

        config, _ = resolve_config(
            dict(settings.get("config") or {}),
            store=bool(extras.get("store")),
            warn=extras.get("warn") or _quiet,
            note=extras.get("note") or _quiet,
        )
        roles = dict(inputs)
        try:
            schema = load_schema(roles["schema"]) if roles.get("schema") else None
        except InputError as exc:
            raise UsageProblem(str(exc), "schema") from None
        data = Path(roles["documents"])
        try:
            records, errors = read_documents(data)
        except InputError as exc:
            raise UsageProblem(str(exc), "documents") from None
        check_input_file(
            data, records=len(records), errors=errors, option="documents", expected="json-documents"
        )
        stored = {
            "config": config.model_dump(mode="json"),
            "bootstrap": settings.get("bootstrap", 1000),
            "seed": settings.get("seed", 0),
        }
        prior = [record_error(e) for e in errors]
        return JsonTask(data, records, prior, schema, stored, build_matchers(config))

    async def run_model(
        self, task: JsonTask, runner: Runner, spec: ModelSpec, *, console: Any, show_progress: bool
    ) -> ModelRun:
        return await run_extraction(
            runner,
            spec,
            task.data,
            task.records,
            schema_text=task.schema_text,
            console=console,
            show_progress=show_progress,
        )

    def predictions(
        self,
        task: JsonTask,
        calls: Sequence[ModelRun],
        specs: Sequence[ModelSpec],
        folder: RunFolder,
    ) -> tuple[list[tuple[str, Path]], dict[str, Any], dict[str, Any]]:
        """outputs.jsonl (the batch lines), call_errors.jsonl and run.json of one model."""
        [run] = calls
        folder.expect("outputs.jsonl", "call_errors.jsonl", "run.json")
        with folder.atomic("outputs.jsonl") as path:
            write_jsonl(path, run.rows)
        with folder.atomic("call_errors.jsonl") as path:
            write_jsonl(path, run.call_errors)
        with folder.atomic("run.json") as path:
            write_json(path, run.info())
        inputs = [("documents", task.data), ("outputs", folder / "outputs.jsonl")]
        return inputs, task.settings, {"matchers": task.matchers, "prior_errors": task.errors}

    def comparison(self, task: JsonTask, calls: ModelRun, scored: Scored) -> dict[str, Any]:
        """The model's line of comparison.csv: outputs, errors, mean scores, tokens, cost."""
        info, summary = calls.info(), scored.result
        return {
            "model": calls.spec.name,
            "run_id": calls.run_id,
            "records": info["records"],
            "with_output": info["with_output"],
            "call_errors": len(calls.call_errors),
            "not_an_object": summary.not_an_object,
            "failed": summary.failed,
            "not_scored": summary.not_scored,
            **{k: summary.means[k] for k in ("completeness", "hallucination", "accuracy", "rqs")},
            "input_tokens": calls.input_tokens,
            "output_tokens": calls.output_tokens,
            "cost_usd": calls.cost_usd,
            "latency_s_mean": info["latency_s_mean"],
        }

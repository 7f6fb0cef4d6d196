"""Batch files read into memory (``read_batch``) and ``json batch``'s outputs written in chunks
with flat memory (``stream_batch_outputs``, issue 10)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fieldcheck._util.errors import InputError
from fieldcheck.jsoneval._config import EvalConfig
from fieldcheck.jsoneval._evaluate import build_matchers, make_signature, warn_unused_strategies
from fieldcheck.jsoneval._models import BatchRecord, BatchSummary, RecordError
from fieldcheck.jsoneval._report import ReportData, write_batch_report
from fieldcheck.jsoneval._stream import (
    BatchReader,
    Failed,
    Item,
    Job,
    Matchers,
    Progress,
    run_stream,
)
from fieldcheck.reports import OutputFolder, write_csv

if TYPE_CHECKING:
    from fieldcheck._util.executor import Executor
    from fieldcheck.store import RunRecorder

FIELDS_CSV_COLUMNS = (
    "field",
    "strategies",
    "expected",
    "scored",
    "matched",
    "match_rate",
    "missing",
    "hallucinated",
    "ignored",
)


def read_batch(path: str | Path) -> tuple[list[BatchRecord], list[InputError]]:
    """Every line of a batch file as a BatchRecord or an InputError naming ``file:line``
    (docs/json.md); raises InputError only when the file cannot be read."""
    records: list[BatchRecord] = []
    errors: list[InputError] = []
    for chunk in BatchReader(path).chunks():
        for x in chunk:
            if isinstance(x, Item):
                records.append(
                    BatchRecord.model_construct(
                        id=x.id,
                        ground_truth=x.ground_truth,
                        output=x.output,
                        safety_score=x.safety_score,
                        line=x.line,
                    )
                )
            elif isinstance(x.problem, InputError):
                errors.append(x.problem)
    return records, errors


def _fields_rows(summary: BatchSummary) -> list[dict[str, object]]:
    return [
        {"field": name, "strategies": ";".join(s.strategies)}
        | {column: getattr(s, column) for column in FIELDS_CSV_COLUMNS[2:]}
        for name, s in summary.fields.items()
    ]


@dataclass
class StreamedBatch:
    """A batch scored and written in chunks: its summary, files, and the read counts."""

    summary: BatchSummary
    paths: dict[str, Path]


def stream_batch_outputs(
    out_dir: str | Path | OutputFolder,
    chunks: Iterable[Sequence[Item | Failed]],
    config: EvalConfig,
    *,
    matchers: Matchers | None = None,
    prior_errors: Sequence[RecordError] = (),
    source: str | None = None,
    progress: Progress | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    recorder: RunRecorder | None = None,
    executor: Executor | None = None,
) -> StreamedBatch:
    """Score ``chunks`` (``BatchReader(path).chunks()``), ``prior_errors`` first, into every file
    of ``json batch`` in ``out_dir``; ValueError for a negative ``bootstrap`` or ``seed``."""
    if bootstrap < 0 or seed < 0:
        raise ValueError(f"bootstrap and seed must be >= 0 (got {bootstrap}, {seed})")
    out = OutputFolder.of(out_dir)
    out.expect(
        "records.jsonl", "errors.jsonl", "fields.csv", "report.md", "report.html", "summary.json"
    )
    matchers = matchers if matchers is not None else build_matchers(config)
    job = Job(config, matchers, source=source, store=recorder is not None, progress=progress)
    with (
        out.atomic("records.jsonl") as records_tmp,
        out.atomic("errors.jsonl") as errors_tmp,
        records_tmp.open("wb") as records_out,
        errors_tmp.open("wb") as errors_out,
    ):
        digest = run_stream(
            chunks,
            job,
            prior=prior_errors,
            executor=executor,
            records_out=records_out,
            errors_out=errors_out,
            bootstrap=bootstrap,
            seed=seed,
            recorder=recorder,
        )
    if recorder is not None:
        recorder.seal()  # its items written and published while the report is drawn
    summary = digest.summary(make_signature(config, matchers, bootstrap=bootstrap, seed=seed))
    warn_unused_strategies(config, digest.unused(config) if summary.records else [])
    with out.atomic("fields.csv") as tmp:
        write_csv(tmp, _fields_rows(summary), FIELDS_CSV_COLUMNS)
    report = write_batch_report(out, ReportData.of(summary, digest))
    out.write_summary("summary.json", summary.to_json())  # last: says the run is complete
    # in the order the command lists them, the report's files as written
    files = ("records.jsonl", "summary.json", "fields.csv", "errors.jsonl")
    return StreamedBatch(summary, {name.split(".")[0]: out / name for name in files} | report)

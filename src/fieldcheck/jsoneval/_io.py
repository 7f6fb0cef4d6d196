"""Reading batch files and writing batch outputs (records.jsonl, summary.json, fields.csv, errors.jsonl)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fieldcheck._util.errors import InputError
from fieldcheck._util.jsonio import iter_jsonl, write_jsonl
from fieldcheck.jsoneval._models import BatchRecord, BatchResult, RecordError
from fieldcheck.jsoneval._report import expected_files, write_batch_report
from fieldcheck.reports._csv import write_csv
from fieldcheck.reports._outdir import OutputFolder

logger = logging.getLogger("fieldcheck")

_REASONS = {
    "missing": "missing",
    "dict_type": "must be a JSON object",
    "string_type": "must be a string or an integer",
    "int_type": "must be a string or an integer",
}
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


def record_error(exc: InputError) -> RecordError:
    return RecordError.model_validate(exc.to_dict())


def _validation_error(
    exc: ValidationError, *, file: Path, line: int, record: str | None
) -> InputError:
    first = exc.errors()[0]
    loc = [str(p) for p in first["loc"] if str(p) not in ("str", "int")]
    reason = _REASONS.get(first["type"], first["msg"].removeprefix("Value error, "))
    if loc == ["safety_score"]:
        reason = "must be a number in [0, 1] or null"
    value = ... if first["type"] == "missing" else first["input"]
    return InputError(
        reason, file=file, line=line, record=record, field=".".join(loc) or None, value=value
    )


def _record_id(line: dict[str, Any]) -> str | None:
    raw: Any = line.get("id")
    return str(raw) if isinstance(raw, str | int) and not isinstance(raw, bool) else None


def read_batch(path: str | Path) -> tuple[list[BatchRecord], list[InputError]]:
    """Every line of a batch file as a BatchRecord, or an InputError naming ``file:line`` and the reason.

    A line must be an object with ``id`` (string or integer), ``ground_truth`` (object) and
    ``output`` (any value; a non-object output is scored, not rejected), and may carry
    ``safety_score`` in [0, 1]. Duplicate ids fail; other keys are ignored with a warning; a line
    nesting deeper than MAX_DEPTH inside its record fails before anything else looks at it.
    Raises InputError only when the file cannot be read.
    """
    p = Path(path)
    records: list[BatchRecord] = []
    errors: list[InputError] = []
    first_line: dict[str, int] = {}
    warned_extra = False
    for line, value in iter_jsonl(p, record_key="id"):  # refuses lines too deep (MAX_DEPTH)
        if isinstance(value, InputError):
            errors.append(value)
            continue
        if not isinstance(value, dict):
            errors.append(
                InputError(
                    "a line must be a JSON object with id, ground_truth and output",
                    file=p,
                    line=line,
                    value=value,
                )
            )
            continue
        rid = _record_id(value)
        try:
            record = BatchRecord.model_validate({**value, "line": line})
        except ValidationError as exc:
            errors.append(_validation_error(exc, file=p, line=line, record=rid))
            continue
        if record.key in first_line:
            errors.append(
                InputError(
                    f"duplicate id (first on line {first_line[record.key]})",
                    file=p,
                    line=line,
                    record=record.key,
                    field="id",
                )
            )
            continue
        first_line[record.key] = line
        extra = set(value) - {"id", "ground_truth", "output", "safety_score"}
        if extra and not warned_extra:
            warned_extra = True
            logger.warning("%s:%d: ignoring unknown keys %s", p, line, ", ".join(sorted(extra)))
        records.append(record)
    return records, errors


def write_batch_outputs(out_dir: str | Path | OutputFolder, batch: BatchResult) -> dict[str, Path]:
    """Write the output files into ``out_dir`` (created), each under a temporary name then
    renamed, summary.json last with ``complete: true``; return their paths by name (``records``,
    ``fields``, ``errors``, ``summary``, ``report_md``, ``report_html`` and the plots drawn,
    ``plot_field_match_rate`` and ``plot_score_distribution``)."""
    out = OutputFolder.of(out_dir)
    out.expect(
        "records.jsonl", "fields.csv", "errors.jsonl", *expected_files(batch), "summary.json"
    )
    paths = {
        "records": out / "records.jsonl",
        "summary": out / "summary.json",
        "fields": out / "fields.csv",
        "errors": out / "errors.jsonl",
    }
    with out.atomic("records.jsonl") as tmp:
        write_jsonl(tmp, (r.result.record_dict(r.id) for r in batch.results))
    rows = [
        {
            "field": name,
            "strategies": ";".join(s.strategies),
            "expected": s.expected,
            "scored": s.scored,
            "matched": s.matched,
            "match_rate": s.match_rate,
            "missing": s.missing,
            "hallucinated": s.hallucinated,
            "ignored": s.ignored,
        }
        for name, s in batch.summary.fields.items()
    ]
    with out.atomic("fields.csv") as tmp:
        write_csv(tmp, rows, FIELDS_CSV_COLUMNS)
    with out.atomic("errors.jsonl") as tmp:
        write_jsonl(tmp, (e.model_dump(mode="json") for e in batch.errors))
    paths |= write_batch_report(out, batch)
    out.write_summary("summary.json", batch.summary.to_json())
    return paths

"""Scoring in tests through the one path users run (``score_to_folder``), reading each
conversation's scored turns back from its trace, as a user would."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from fieldcheck.numeric import LoadResult, NumericResult, PredictionsResult, score_to_folder


def score(
    data: LoadResult, predictions: PredictionsResult, out: Path, **options: Any
) -> tuple[NumericResult, list[dict[str, Any]]]:
    """``score_to_folder`` into ``out`` (a new folder), and every conversation's trace in
    summary.csv order (``trace["turns"][i]`` is turn i scored)."""
    result = score_to_folder(data, predictions, out, **options)
    with open(out / "summary.csv", newline="", encoding="utf-8") as handle:
        ids = [row["trace_id"] for row in csv.DictReader(handle)]
    traces = [json.loads((out / "traces" / f"{i}.json").read_bytes()) for i in ids]
    return result, traces

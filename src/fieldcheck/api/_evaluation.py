"""The library calls behind the JSON routes and the Test evaluation page: the same functions
``fieldcheck json score`` and ``json batch`` call, with the app's matchers (built once)."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from fieldcheck._util.errors import InputError
from fieldcheck.api._errors import ApiError
from fieldcheck.jsoneval import (
    BatchReader,
    EvalConfig,
    JsonEvalResult,
    MatcherError,
    build_matchers,
    evaluate,
    stream_batch_outputs,
)
from fieldcheck.matchers import Matcher


class Matchers:
    """The server's FUZZY and SEMANTIC matchers, built on first use (loading MiniLM or opening
    the judge client once, not per request)."""

    def __init__(self, config: EvalConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._matchers: dict[str, Matcher] | None = None

    def get(self) -> dict[str, Matcher]:
        with self._lock:
            if self._matchers is None:
                self._matchers = build_matchers(self.config)
            return self._matchers


# Batch reports draw plots with matplotlib's pyplot, which is not thread-safe: one at a time.
_BATCH_LOCK = threading.Lock()


def parse_output_text(raw: bytes | str) -> Any:
    """Pasted or uploaded model output: its JSON value, or the text itself when it is not valid
    JSON (scored by the non-object rule, as ``json score`` reads OUTPUT.json)."""
    data = raw.encode() if isinstance(raw, str) else raw
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return data.decode("utf-8", errors="replace")


def parse_ground_truth_text(raw: bytes | str, *, name: str = "ground truth") -> dict[str, Any]:
    """Pasted or uploaded ground truth: a JSON object, else ApiError naming ``ground_truth``."""
    data = raw.encode() if isinstance(raw, str) else raw
    try:
        value = orjson.loads(data.removeprefix(b"\xef\xbb\xbf"))
    except orjson.JSONDecodeError as exc:
        raise ApiError(422, f"{name}: invalid JSON: {exc.msg}", field="ground_truth") from None
    if not isinstance(value, dict):
        error = InputError("ground truth must be a JSON object", file=name, value=value)
        raise ApiError.invalid(error, field="ground_truth")
    return value


def evaluate_one(
    output: Any,
    ground_truth: Mapping[str, Any],
    config: EvalConfig,
    matchers: Matchers,
    *,
    safety_score: float | None = None,
) -> JsonEvalResult:
    """``json score``: one output against one ground truth. A side nesting too deep is a 422
    naming it; a judge that gives no similarity is a 502."""
    try:
        return evaluate(
            output, ground_truth, config, safety_score=safety_score, matchers=matchers.get()
        )
    except InputError as exc:
        raise ApiError.invalid(exc, field=exc.field or "output") from None
    except MatcherError as exc:
        raise ApiError(502, f"the matcher failed: {exc}") from None


def score_batch_file(
    path: Path,
    config: EvalConfig,
    matchers: Matchers,
    *,
    shown_as: str,
    bootstrap: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """``json batch`` on a JSONL file: its summary (as summary.json holds it). The output files
    go to a temporary folder removed afterwards (storing runs is issue 11 part B). Messages name
    the file ``shown_as`` (never a server path). A file with no valid line is a 422 naming the
    first problem, as the CLI's usage error."""
    prefix = str(path)
    reader = BatchReader(path)
    try:
        with _BATCH_LOCK, tempfile.TemporaryDirectory(prefix="fieldcheck-api-") as out:
            batch = stream_batch_outputs(
                Path(out),
                reader.chunks(),
                config,
                matchers=matchers.get(),
                source=shown_as,
                bootstrap=bootstrap,
                seed=seed,
            )
    except InputError as exc:
        raise ApiError(422, exc.one_line().replace(prefix, shown_as), field="path") from None
    except MatcherError as exc:
        raise ApiError(502, f"the matcher failed: {exc}") from None
    if not reader.records:
        first = reader.first_errors[0].one_line() if reader.first_errors else "no line"
        raise ApiError(
            422, f"no valid record: {first}".replace(prefix, shown_as), field="file"
        ) from None
    summary = batch.summary.to_json()
    summary["errors"] = [m.replace(prefix, shown_as) for m in summary["errors"]]
    return summary

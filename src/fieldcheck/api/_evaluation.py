"""The library calls behind the JSON routes and the Test evaluation page: the same functions
``fieldcheck json score`` and ``json batch`` call, with the app's matchers (built once)."""

from __future__ import annotations

import contextlib
import logging
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from fieldcheck._util.errors import InputError
from fieldcheck._util.jsonio import loads, read_lines
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
from fieldcheck.store import RunRecorder, Store, sha256_file

_log = logging.getLogger("fieldcheck")


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
        return loads(data)
    except orjson.JSONDecodeError:
        return data.decode("utf-8", errors="replace")


def parse_ground_truth_text(raw: bytes | str, *, name: str = "ground truth") -> dict[str, Any]:
    """Pasted or uploaded ground truth: a JSON object, else ApiError naming ``ground_truth``."""
    data = raw.encode() if isinstance(raw, str) else raw
    try:
        value = loads(data.removeprefix(b"\xef\xbb\xbf"))
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
    store: Store | None = None,
) -> dict[str, Any]:
    """``json batch`` on a JSONL file: its summary (as summary.json holds it) and, with a
    ``store``, the id of the run recorded there (``run_id``; None when the store failed, which
    is logged). The output files go to a temporary folder removed afterwards, so the run has no
    folder. Messages name the file ``shown_as`` (never a server path). A file with no valid
    line is a 422 naming the first problem, as the CLI's usage error."""
    prefix = str(path)
    reader = BatchReader(path)
    recorder = None
    if store is not None and _has_a_record(reader):
        recorder = _open_recorder(
            store,
            system="json",
            inputs=[],
            input_digests=[{"name": "batch", "path": shown_as, "sha256": sha256_file(path)}],
            settings={
                "config": config.model_dump(mode="json"),
                "bootstrap": bootstrap,
                "seed": seed,
            },
            signature="",
            out=None,
            model=Path(shown_as).stem,
            task="api",
        )
    try:
        with (
            _BATCH_LOCK,
            tempfile.TemporaryDirectory(prefix="fieldcheck-api-") as out,
            recorder if recorder is not None else contextlib.nullcontext(),
        ):
            batch = stream_batch_outputs(
                Path(out),
                reader.chunks(),
                config,
                matchers=matchers.get(),
                source=shown_as,
                bootstrap=bootstrap,
                seed=seed,
                recorder=recorder,
            )
            summary = batch.summary.to_json()
            summary["errors"] = [m.replace(prefix, shown_as) for m in summary["errors"]]
            run_id = None
            if recorder is not None:
                metrics = {k: v for k, v in summary.items() if k not in ("ci", "signature")}
                run = recorder.finish(
                    metrics=metrics,
                    intervals=summary.get("ci") or {},
                    signature=summary.get("signature"),
                )
                run_id = None if recorder.broken else run.id
    except InputError as exc:
        raise ApiError(422, exc.one_line().replace(prefix, shown_as), field="path") from None
    except MatcherError as exc:
        raise ApiError(502, f"the matcher failed: {exc}") from None
    if not reader.records:
        first = reader.first_errors[0].one_line() if reader.first_errors else "no line"
        raise ApiError(
            422, f"no valid record: {first}".replace(prefix, shown_as), field="file"
        ) from None
    return {**summary, **({"run_id": run_id} if store is not None else {})}


def _not_stored(exc: BaseException) -> None:
    _log.warning("the batch run is not stored: %s: %s", type(exc).__name__, exc)


def _open_recorder(store: Store, **kwargs: Any) -> RunRecorder | None:
    """The batch's recorder; a store that fails is logged and the batch is scored anyway."""
    try:
        return RunRecorder.open(store, on_error=_not_stored, **kwargs)
    except Exception as exc:  # the database is unreachable or read-only
        _not_stored(exc)
        return None


def _has_a_record(reader: BatchReader) -> bool:
    """Whether the file has a line that parses as an object (a file with none is refused
    before a run is opened, so the store keeps no empty run)."""
    with reader.path.open("rb") as handle:
        for line in read_lines(handle):
            try:
                if isinstance(orjson.loads(line), dict):
                    return True
            except orjson.JSONDecodeError:
                continue
    return False

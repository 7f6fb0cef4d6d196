"""``/api/json``: one evaluation, a batch by path under the data root, a batch upload."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import Annotated, Any

from fastapi import File, Query, Request, UploadFile
from pydantic import BaseModel, ConfigDict, Field

from fieldcheck import core
from fieldcheck._util.errors import MAX_SEED, InputError
from fieldcheck.api._body import MAX_BOOTSTRAP, api_router
from fieldcheck.api._deps import AppContext, Context
from fieldcheck.api._errors import GUARD, INVALID, JUDGE_FAILED, ApiError, error_responses
from fieldcheck.api._evaluation import (
    REQUEST_PARTS,
    RUNS,
    evaluate_one,
    hidden,
    merged,
    request_folder,
    score_run,
    score_uploads,
    with_warnings,
)
from fieldcheck.jsoneval import SafetyCheck, parse_section

router = api_router("/api/json", "json")
_STRATEGIES = (
    "Field -> EXACT, FUZZY, SEMANTIC or IGNORE (the spec's Field Strategy Config File); "
    "omitted: the saved strategies."
)
_THRESHOLDS = "{fuzzy_threshold, semantic_threshold} in [0, 1]; omitted: the saved thresholds."
_WEIGHTS = (
    "RQS weights {accuracy, completeness, hallucination, safety}, each >= 0 (names left out "
    "keep their default); omitted: the saved weights."
)


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    field_strategies: dict[str, Any] | None = Field(None, description=_STRATEGIES)
    thresholds: dict[str, Any] | None = Field(None, description=_THRESHOLDS)
    weights: dict[str, Any] | None = Field(None, description=_WEIGHTS)
    flatten: bool = Field(False, description="Score nested objects leaf by leaf (json --flatten).")
    safety_check: SafetyCheck = Field("off", description="'off' or 'leaks' (json --safety-check).")


class EvaluateRequest(_Config):
    """One output against one ground truth: the result of ``fieldcheck json score --json``."""

    ground_truth: dict[str, Any] = Field(description="The ground-truth JSON object.")
    output: Any = Field(
        description="The model's output: any JSON value, or text (parsed when it holds an object)."
    )
    safety_score: float | None = Field(
        None, ge=0, le=1, allow_inf_nan=False, description="Overrides the safety score 1.0."
    )


class BatchPathRequest(_Config):
    """A JSONL batch file under the server's data root (``fieldcheck serve --data-root``)."""

    path: str = Field(min_length=1, max_length=4096, description="Path relative to the data root.")
    bootstrap: int = Field(
        1000, ge=0, le=MAX_BOOTSTRAP, description="Bootstrap resamples (0: none)."
    )
    seed: int = Field(0, ge=0, le=MAX_SEED, description="Seed of the bootstrap.")


@router.post(
    "/evaluate",
    summary="Score one output against one ground truth",
    responses=error_responses({422: INVALID, 502: JUDGE_FAILED}),
)
def evaluate_route(body: EvaluateRequest, ctx: Context) -> dict[str, Any]:
    """The same JSON ``fieldcheck json score --json`` prints: the four scores, RQS, the five
    key buckets, per field the strategy, similarity and score, and the signature."""
    config = merged(ctx.saved, request_config(ctx, body))
    result, warnings = evaluate_one(
        body.output, body.ground_truth, config, ctx.matchers, safety_score=body.safety_score
    )
    return with_warnings(result.public_dict(), warnings)


def resolve_under(root: Path, given: str) -> Path:
    """``given`` as an existing file inside ``root`` after every symlink is followed; a path
    outside (``..``, an absolute path elsewhere, a symlink out) is refused with 403."""
    if "\x00" in given:
        raise ApiError(422, "path: must not contain a NUL character", field="path")
    base = root.resolve()
    candidate = Path(given) if PurePath(given).is_absolute() else base / given
    try:
        real = candidate.resolve(strict=True)
    except (OSError, RuntimeError):
        real = None
    if real is None or not real.is_relative_to(base):
        inside = candidate.resolve(strict=False).is_relative_to(base)
        if real is None and inside:
            raise ApiError(404, f"{given}: no such file under the data root", field="path")
        raise ApiError(403, f"{given}: outside the data root", field="path")
    if not real.is_file():
        raise ApiError(422, f"{given}: not a file", field="path")
    return real


_PARAMS = {
    "--strategies": "field_strategies",
    "--fuzzy-threshold": "thresholds",
    "--semantic-threshold": "thresholds",
    "--weights": "weights",
}
"""The options the json system names in a settings problem, as the request's parts."""


def request_config(ctx: AppContext, body: _Config | None) -> dict[str, Any]:
    """The json system's configuration of a request: the sections it gives (a bad one a 422
    naming the request's part) and the server's matcher; the rest come from the saved ones."""
    config = ctx.matchers.server()
    if body is not None:
        for section, part in REQUEST_PARTS.items():
            value = getattr(body, part)
            if value is None:
                continue
            try:
                checked = parse_section(section, value)
            except InputError as exc:
                field = f"{part}.{exc.field}" if exc.field else part
                raise ApiError.invalid(exc, field=field) from None
            config |= value if section == "thresholds" else {section: checked}
        config |= {"flatten": body.flatten, "safety_check": body.safety_check}
    return config


def _summary(
    outcome: core.Outcome, shown: dict[str, str], warnings: Sequence[str]
) -> dict[str, Any]:
    """``json batch``'s summary (as summary.json holds it, the files named as the client sent
    them), ``run_id`` and its ``warnings`` when there are any."""
    summary = {k: v for k, v in dict(outcome.scored.summary).items() if k != "complete"}
    summary["errors"] = [hidden(m, shown) for m in summary.get("errors", [])]
    return with_warnings({**summary, "run_id": outcome.run_id}, warnings)


@router.post(
    "/batch-path",
    summary="Score a JSONL batch file under the data root",
    responses=error_responses(
        {
            403: f"{GUARD[403]} Or no data root is configured, or the path leads outside it.",
            404: "No such file under the data root.",
            422: f"{INVALID} Also a path that is not a file, or a file with no valid record.",
            502: JUDGE_FAILED,
            507: "The run's files could not be written (a full disk).",
        }
    ),
)
def batch_path_route(body: BatchPathRequest, ctx: Context) -> dict[str, Any]:
    """``fieldcheck json batch`` on a file inside ``--data-root``: its summary (means with 95%
    intervals, counts, per-field counts, error lines, signature) and ``run_id``, the run stored
    with its items (``GET /api/runs/{run_id}``); its files are kept under
    ``--data-root``/fieldcheck-runs/."""
    root = ctx.settings.data_root
    if root is None:
        raise ApiError(
            403, "no data root is configured (fieldcheck serve --data-root DIR)", field="path"
        )
    path = resolve_under(root, body.path)
    settings = {"config": request_config(ctx, body), "bootstrap": body.bootstrap, "seed": body.seed}
    with request_folder(root, "json") as folder:
        shown = {str(path): body.path, str(folder): f"{RUNS}/{folder.name}"}
        params = {**_PARAMS, "batch": "path"}
        outcome, warnings = score_run(
            ctx, "json", [("batch", path)], settings, out=folder / "run", shown=shown, params=params
        )
    return _summary(outcome, shown, warnings)


@router.post(
    "/batch",
    summary="Score an uploaded JSONL batch file",
    responses=error_responses(
        {
            422: f"{INVALID} Also a file with no valid record.",
            502: JUDGE_FAILED,
            507: "The run's files could not be written (a full disk).",
        }
    ),
)
async def batch_upload_route(
    ctx: Context,
    request: Request,
    file: Annotated[UploadFile, File(description="JSONL: one {id, ground_truth, output} a line.")],
    bootstrap: Annotated[int, Query(ge=0, le=MAX_BOOTSTRAP)] = 1000,
    seed: Annotated[int, Query(ge=0, le=MAX_SEED)] = 0,
) -> dict[str, Any]:
    """``fieldcheck json batch`` on the uploaded file with the saved configuration: its summary
    and ``run_id``, the run stored with its items (``GET /api/runs/{run_id}``). With a data
    root the upload and the run's files are kept under ``--data-root``/fieldcheck-runs/, else
    in a temporary folder removed once answered (the run is stored with no output folder)."""
    settings = {"config": request_config(ctx, None), "bootstrap": bootstrap, "seed": seed}
    root, params = ctx.settings.data_root, {**_PARAMS, "batch": "file"}
    outcome, warnings, shown = await score_uploads(
        ctx, "json", [("batch", file)], settings, root=root, params=params, request=request
    )
    return _summary(outcome, shown, warnings)

"""``/api/json``: one evaluation, a batch by path under the data root, a batch upload."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path, PurePath
from typing import Annotated, Any

from fastapi import APIRouter, File, Query, UploadFile
from starlette.concurrency import run_in_threadpool

from fieldcheck.api._body import CheckedBodyRoute
from fieldcheck.api._deps import Context
from fieldcheck.api._errors import (
    GUARD,
    INVALID,
    JUDGE_FAILED,
    ApiError,
    error_responses,
)
from fieldcheck.api._evaluation import evaluate_one, score_batch_file
from fieldcheck.api._schemas import BatchPathRequest, EvaluateRequest

router = APIRouter(
    prefix="/api/json",
    tags=["json"],
    route_class=CheckedBodyRoute,
    responses=error_responses(),
)
_COPY_BLOCK = 1 << 20


@router.post(
    "/evaluate",
    summary="Score one output against one ground truth",
    responses=error_responses({422: INVALID, 502: JUDGE_FAILED}),
)
def evaluate_route(body: EvaluateRequest, ctx: Context) -> dict[str, Any]:
    """The same JSON ``fieldcheck json score --json`` prints: the four scores, RQS, the five
    key buckets, per field the strategy, similarity and score, and the signature."""
    config = ctx.saved.eval_config(
        ctx.base_config,
        strategies=body.field_strategies,
        thresholds=body.thresholds,
        weights=body.weights,
        flatten=body.flatten,
        safety_check=body.safety_check,
    )
    result = evaluate_one(
        body.output, body.ground_truth, config, ctx.matchers, safety_score=body.safety_score
    )
    return result.public_dict()


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


@router.post(
    "/batch-path",
    summary="Score a JSONL batch file under the data root",
    responses=error_responses(
        {
            403: f"{GUARD[403]} Or no data root is configured, or the path leads outside it.",
            404: "No such file under the data root.",
            422: f"{INVALID} Also a path that is not a file, or a file with no valid record.",
            502: JUDGE_FAILED,
        }
    ),
)
def batch_path_route(body: BatchPathRequest, ctx: Context) -> dict[str, Any]:
    """``fieldcheck json batch`` on a file inside ``--data-root``: its summary (means with 95%
    intervals, counts, per-field counts, error lines, signature) and ``run_id``, the run stored
    with its items (``GET /api/runs/{run_id}``)."""
    root = ctx.settings.data_root
    if root is None:
        raise ApiError(
            403, "no data root is configured (fieldcheck serve --data-root DIR)", field="path"
        )
    path = resolve_under(root, body.path)
    config = ctx.saved.eval_config(
        ctx.base_config,
        strategies=body.field_strategies,
        thresholds=body.thresholds,
        weights=body.weights,
        flatten=body.flatten,
        safety_check=body.safety_check,
    )
    return score_batch_file(
        path,
        config,
        ctx.matchers,
        shown_as=body.path,
        bootstrap=body.bootstrap,
        seed=body.seed,
        store=ctx.store,
    )


@router.post(
    "/batch",
    summary="Score an uploaded JSONL batch file",
    responses=error_responses(
        {422: f"{INVALID} Also a file with no valid record.", 502: JUDGE_FAILED}
    ),
)
async def batch_upload_route(
    ctx: Context,
    file: Annotated[UploadFile, File(description="JSONL: one {id, ground_truth, output} a line.")],
    bootstrap: Annotated[int, Query(ge=0, le=100_000)] = 1000,
    seed: Annotated[int, Query(ge=0, le=2**32 - 1)] = 0,
) -> dict[str, Any]:
    """``fieldcheck json batch`` on the uploaded file with the saved configuration: its summary
    and ``run_id``, the run stored with its items (``GET /api/runs/{run_id}``)."""
    name = os.path.basename(file.filename or "") or "upload.jsonl"
    config = ctx.saved.eval_config(ctx.base_config)
    with tempfile.TemporaryDirectory(prefix="fieldcheck-upload-") as folder:
        path = Path(folder) / "upload.jsonl"
        with path.open("wb") as handle:
            while block := await file.read(_COPY_BLOCK):
                handle.write(block)
        return await run_in_threadpool(
            score_batch_file,
            path,
            config,
            ctx.matchers,
            shown_as=name,
            bootstrap=bootstrap,
            seed=seed,
            store=ctx.store,
        )

"""``POST /api/score/{system}``: any registered system scored from uploaded files through the one
pipeline, as ``fieldcheck score SYSTEM ROLE=FILE...`` scores them (issue 27 item 2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fastapi import Request
from starlette.datastructures import FormData, UploadFile
from starlette.formparsers import MultiPartParser

from fieldcheck import core
from fieldcheck._util.errors import KEPT_ERRORS, MAX_SEED, UsageProblem
from fieldcheck.api._body import MAX_BOOTSTRAP, api_router
from fieldcheck.api._deps import AppContext, Context
from fieldcheck.api._errors import INVALID, JUDGE_FAILED, ApiError, error_responses
from fieldcheck.api._evaluation import hidden, score_uploads, with_warnings
from fieldcheck.api._guard import BodyTooLarge

router = api_router("/api/score", "score")

_FORM = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "properties": {
                    "settings": {
                        "type": "string",
                        "description": "JSON object: the system's stored settings (as "
                        "`runs show` gives them); omitted: its defaults.",
                    }
                },
                "additionalProperties": {
                    "type": "string",
                    "format": "binary",
                    "description": "One file per input role of the system (`batch`; "
                    "`gold`, `pred:NAME`; `data`, `predictions`).",
                },
            }
        }
    },
}


def _answer(
    outcome: core.Outcome, shown: Mapping[str, str], warnings: Sequence[str]
) -> dict[str, Any]:
    """What the route answers of a scored run (its files named inside its folder, no server
    path the client did not send), with its ``warnings`` and ``errors`` (the first
    ``KEPT_ERRORS`` input problems, the lines the CLI prints as ``error:``) when there are any."""
    scored, signature = outcome.scored, outcome.scored.signature
    found = scored.problems.errors[:KEPT_ERRORS] if scored.problems else []
    errors = [e if isinstance(e, str) else e.one_line() for e in found]
    if hasattr(signature, "model_dump"):  # a Signature model
        signature = signature.model_dump(mode="json")
    answer = {
        "run_id": outcome.run_id,
        "system": outcome.system,
        "metrics": hidden(scored.metrics, shown),
        "intervals": scored.intervals,
        "signature": hidden(signature, shown),
        "failed": scored.failed,
        "files": sorted(
            p.relative_to(outcome.destination).as_posix() for p in outcome.files.values()
        ),
    }
    return with_warnings(answer | ({"errors": hidden(errors, shown)} if errors else {}), warnings)


def _refuse_settings(ctx: AppContext, settings: Mapping[str, Any]) -> None:
    """A 422 for what a request may not ask: more bootstrap resamples than ``MAX_BOOTSTRAP`` or
    a seed past ``MAX_SEED`` (the server's time and memory), or another matcher or judge than
    the server's, or any endpoint or key, at the top of the settings (slots' ``judge_base_url``
    was called, with the server's API key) or in their ``config``."""
    for key, top in (("bootstrap", MAX_BOOTSTRAP), ("seed", MAX_SEED)):
        value = settings.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= top:
            raise ApiError(
                422,
                f"settings.{key}: must be a whole number from 0 to {top} (got {value})",
                field=f"settings.{key}",
            )
    config = settings.get("config")
    server = ctx.matchers.server()
    for prefix, given in (("settings", settings), ("settings.config", config)):
        for key, value in given.items() if isinstance(given, Mapping) else ():
            if key in server and value == server[key]:
                continue  # the server's own matcher, as `runs show` gives it
            if key in server or any(w in key.lower() for w in _ENDPOINT_WORDS):
                raise ApiError(
                    422,
                    f"{prefix}.{key}: the server's matcher is used (fieldcheck serve "
                    "--matcher); a request cannot choose the matcher or its judge, nor name "
                    "an endpoint or a key",
                    field=f"{prefix}.{key}",
                )


_ENDPOINT_WORDS = ("url", "key", "endpoint", "token", "secret", "judge")
"""What the name of a setting that points the server at a URL or gives it a credential holds:
no request sets one (the server would call it, sending its own API key)."""


@router.post(
    "/{system}",
    summary="Score uploaded input files with any system",
    openapi_extra={"requestBody": _FORM},
    responses=error_responses(
        {
            403: "No data root is configured (the uploads and run folders are kept under it).",
            404: "No system of this name (`detail` names the known ones).",
            422: f"{INVALID} Also an input role the system does not take or one it needs, "
            "settings it refuses, a file with no valid record.",
            502: JUDGE_FAILED,
            507: "The run's files could not be written (a full disk).",
        }
    ),
)
async def score_route(system: str, request: Request, ctx: Context) -> dict[str, Any]:
    """``fieldcheck score SYSTEM ROLE=FILE... --settings JSON``: one file field per input role
    of the system and a ``settings`` field (its stored settings as JSON). The uploads and the
    run folder are kept under ``--data-root``/fieldcheck-runs/; the run is stored. Answers
    ``run_id``, ``system``, ``metrics``, ``intervals``, ``signature``, ``failed`` (some input
    not scored) and ``files`` (the run folder's files)."""
    try:
        found = core.get(system)
    except KeyError as exc:  # unknown, or declared by a package and not loadable
        raise ApiError(404, exc.args[0], field="system") from None
    form = await _read_form(request)
    try:
        return await _scored(ctx, found, form, request)
    finally:
        await form.close()


class _Form(MultiPartParser):
    """Starlette's multipart parser, noting whether the closing boundary came (python-multipart
    takes a body cut short for a whole one, its cut part dropped)."""

    ended = False

    def on_end(self) -> None:
        self.ended = True


async def _read_form(request: Request) -> FormData:
    """The request's multipart form: a 422 naming ``body`` for another kind of body (JSON, text,
    none), one that cannot be read, or one cut short before its closing boundary. A URL-encoded
    form of ``settings`` alone is read (the roles it lacks are named then); one with any other
    field is the body's 422, never naming the field (``curl --data-binary`` sends a file so, its
    whole text a field's name)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        form = await request.form()
        if all(name == "settings" for name in form):
            return form
        await form.close()
        raise _not_multipart(f"got {kind}: text fields, no file")
    if kind != "multipart/form-data":
        raise _not_multipart(f"got {kind}" if kind else "got no content type")
    try:
        parser = _Form(request.headers, request.stream())
        form = await parser.parse()
    except BodyTooLarge:  # sent without Content-Length (chunked): counted as it arrives
        raise
    except Exception:  # a body that is not a readable multipart form
        raise ApiError(
            422, "body: not a multipart form (no part could be read)", field="body"
        ) from None
    if not parser.ended:
        await form.close()
        raise ApiError(
            422,
            "body: not a whole multipart form (it ends before its closing boundary: the body "
            "was cut short)",
            field="body",
        )
    return form


def _not_multipart(got: str) -> ApiError:
    """The 422 naming ``body`` for a body that is not a multipart form."""
    return ApiError(
        422,
        "body: the route takes a multipart form (multipart/form-data: one file field per "
        f"input role, and settings) ({got})",
        field="body",
    )


async def _scored(
    ctx: AppContext, found: core.System, form: FormData, request: Request
) -> dict[str, Any]:
    """The route's work once its form is read."""
    given = form.get("settings")
    try:
        settings = core.read_settings(
            await given.read() if isinstance(given, UploadFile) else given
        )
    except UsageProblem as exc:
        raise ApiError(422, f"settings: {exc.message}", field="settings") from None
    _refuse_settings(ctx, settings)
    uploads: list[tuple[str, UploadFile]] = []
    for role, value in form.multi_items():
        if role == "settings":
            continue
        if not isinstance(value, UploadFile):
            raise ApiError(422, f"{role}: must be a file upload", field=role)
        uploads.append((role, value))
    try:
        core.check_roles(found, [role for role, _ in uploads])
    except UsageProblem as exc:
        raise ApiError(422, exc.message, field=exc.param) from None
    root = ctx.settings.data_root
    if root is None:
        raise ApiError(
            403,
            "no data root is configured (fieldcheck serve --data-root DIR): the uploads and "
            "run folders are kept under it",
        )
    outcome, warnings, shown = await score_uploads(
        ctx, found.name, uploads, settings, root=Path(root), request=request
    )
    return _answer(outcome, shown, warnings)

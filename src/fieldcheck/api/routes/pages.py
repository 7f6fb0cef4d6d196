"""The web pages (server-rendered, autoescaped): Configuration and Test evaluation, and the
login form a browser uses when the server asks for a token. Pages only parse forms, call the
same functions as the API and render."""

from __future__ import annotations

import hmac
import math
import os
import re
from collections.abc import Callable
from typing import Annotated, Any, get_args
from urllib.parse import parse_qsl, urlsplit

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.datastructures import UploadFile as StarletteUpload
from starlette.exceptions import HTTPException

from fieldcheck._util.digest import cache_key
from fieldcheck._util.errors import InputError
from fieldcheck._util.jsonio import json_or_text
from fieldcheck.api._deps import AppContext, Context
from fieldcheck.api._errors import ApiError
from fieldcheck.api._evaluation import (
    evaluate_one,
    merged,
    parse_ground_truth_text,
    parse_json_file,
    strategy_rows,
)
from fieldcheck.api._guard import TOKEN_COOKIE
from fieldcheck.jsoneval import JsonEvalResult, RqsWeights, Section
from fieldcheck.metrics import BUCKET_NAMES, STRATEGIES

router = APIRouter(include_in_schema=False)
SCORES = (
    ("completeness", "Completeness"),
    ("hallucination", "Hallucination"),
    ("accuracy", "Accuracy"),
    ("safety_score", "Safety"),
    ("rqs", "RQS"),
)
SAVED = {
    "strategies": "Saved the field strategies.",
    "thresholds": "Saved the thresholds.",
    "weights": "Saved the RQS weights.",
}


_PART_NAME = re.compile(rb'(?<![A-Za-z])name="([^"\r\n]*)"')


def form_text_error(raw: bytes, content_type: str | None) -> InputError | None:
    """The first form field of the raw body whose text is not UTF-8, as an InputError naming it
    (Starlette reads it without a word: docs/decisions.md); None when every field is text."""
    kind = (content_type or "").split(";")[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        pairs = parse_qsl(raw.decode("latin-1"), keep_blank_values=True, encoding="latin-1")
        for name, value in pairs:
            for text in (name, value):
                data = text.encode("latin-1")
                try:
                    data.decode("utf-8")
                except UnicodeDecodeError as exc:
                    field = name.encode("latin-1").decode("utf-8", errors="replace")
                    return InputError(_NOT_UTF8.format(data[exc.start]), field=field)
    elif kind == "multipart/form-data":
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            names = _PART_NAME.findall(raw, 0, exc.start)
            part = names[-1].decode("utf-8", errors="replace") if names else None
            return InputError(_NOT_UTF8.format(raw[exc.start]), field=part)
    return None


_NOT_UTF8 = "not UTF-8 text (byte 0x{:02x}); nothing was saved or scored"


@router.get("/")
def home() -> RedirectResponse:
    return RedirectResponse("/evaluate", status_code=307)


# login (only when the server asks for a token) ---------------------------------------------
def _local(path: str) -> str:
    """``path`` when it is a page of this server (``/runs?x=1``), else ``/evaluate``: a login
    never sends the browser to another site."""
    parts = urlsplit(path)
    own = path.startswith("/") and not parts.scheme and not parts.netloc and "\\" not in path
    return path if own and not path.startswith("//") else "/evaluate"


@router.get("/login")
def login_page(request: Request, ctx: Context, next: str = "") -> HTMLResponse:
    return ctx.render(request, "login.html", active="", next=_local(next))


@router.post("/login")
def login(
    request: Request,
    ctx: Context,
    token: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "",
) -> Response:
    expected = ctx.settings.token
    if not expected or not hmac.compare_digest(token, expected):
        return ctx.render(
            request,
            "login.html",
            401,
            active="",
            next=_local(next),
            error="That is not the server's token.",
        )
    response = RedirectResponse(_local(next), status_code=303)  # the page first asked for
    response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
    return response


# configuration ------------------------------------------------------------------------------
def _configuration(
    ctx: AppContext,
    request: Request,
    *,
    error: InputError | str | None = None,
    error_section: str | None = None,
    typed: Any = None,
    saved: str | None = None,
) -> HTMLResponse:
    """The Configuration page; with ``error`` (in ``error_section``), a 400 showing that form
    as ``typed`` (strategies: its rows; numbers: its fields), not the saved values."""
    shown: dict[str, Any] = {section: ctx.saved.get(section) for section in get_args(Section)}
    if error_section and typed is not None:
        shown[error_section] = typed
    rows = shown["strategies"]
    return ctx.render(
        request,
        "configuration.html",
        400 if error else 200,
        active="/configuration",
        rows=list(rows.items()) if isinstance(rows, dict) else rows,
        strategy_names=STRATEGIES,
        thresholds=shown["thresholds"],
        weights=shown["weights"],
        weight_names=list(RqsWeights.model_fields),
        loaded={section: _version(ctx, section) for section in get_args(Section)},
        error=error.one_line() if isinstance(error, InputError) else error,
        error_section=error_section,
        saved=SAVED.get(saved or ""),
    )


@router.get("/configuration")
def configuration_page(request: Request, ctx: Context, saved: str | None = None) -> HTMLResponse:
    return _configuration(ctx, request, saved=saved)


def _version(ctx: AppContext, section: Section) -> str:
    """A digest of the saved ``section``: a form sends back the one it was shown with."""
    return cache_key(ctx.saved.get(section))[:16]


_STALE = (
    "the {} were saved elsewhere (another tab, an import or the API) after this page was "
    "loaded; nothing was saved: save again to replace them, or reload the page to see them"
)


def _save(
    ctx: AppContext,
    request: Request,
    section: Section,
    parse: Callable[[], Any],
    typed: Any = None,
    *,
    file: str | None = None,
    loaded: Any = None,
) -> Response:
    """Save what ``parse`` gives; an InputError of either shows the page with it and the form as
    ``typed`` (a 400), as does a form ``loaded`` with a version of the section that is no longer
    the saved one (no await between this check and the save: one server saves one form at a
    time)."""
    if loaded is not None and loaded != _version(ctx, section):
        error = _STALE.format(section)
        return _configuration(ctx, request, error=error, error_section=section, typed=typed)
    try:
        ctx.saved.put(section, parse(), file=file)
    except InputError as exc:
        return _configuration(ctx, request, error=exc, error_section=section, typed=typed)
    return RedirectResponse(f"/configuration?saved={section}", status_code=303)


async def _bad_text(request: Request) -> InputError | None:
    """``form_text_error`` of the request's body (read once; the form is then read from it)."""
    return form_text_error(await request.body(), request.headers.get("content-type"))


async def _form(request: Request, ctx: AppContext) -> FormData:
    """The page's form, each text field up to the server's JSON body limit (Starlette's own is
    1 MiB; an upload is not a text field); else ApiError, to be shown on the page: 413 for a
    text over the limit, 400 for a form that cannot be read."""
    limit = ctx.settings.max_json_bytes
    try:
        return await request.form(max_part_size=limit)
    except HTTPException as exc:
        if "maximum size" in str(exc.detail):
            message = (
                f"a pasted text is larger than {limit} bytes (the server's --max-json-mb); "
                "upload it as a file instead"
            )
            raise ApiError(413, message) from None
        raise ApiError(400, f"the form cannot be read: {exc.detail}") from None


@router.post("/configuration/strategies")
async def save_strategies(request: Request, ctx: Context) -> Response:
    if (bad := await _bad_text(request)) is not None:
        return _configuration(ctx, request, error=bad, error_section="strategies")
    try:
        form = await _form(request, ctx)
    except ApiError as exc:
        return _configuration(ctx, request, error=exc.message, error_section="strategies")
    fields = [str(v) for v in form.getlist("field")]
    values = [str(v) for v in form.getlist("strategy")]
    rows = list(zip(fields, values, strict=False))
    loaded = form.get("loaded")
    return _save(ctx, request, "strategies", lambda: strategy_rows(rows), rows, loaded=loaded)


@router.post("/configuration/{section}/import")
async def import_section(section: Section, request: Request, ctx: Context) -> Response:
    """The file's bytes go to ``parse_json_file`` as the API's import (no ``_bad_text``): a
    byte that is not UTF-8 is named with its file, line and column."""
    try:
        form = await _form(request, ctx)
    except ApiError as exc:
        return _configuration(ctx, request, error=exc.message, error_section=section)
    upload = form.get("file")
    if not isinstance(upload, StarletteUpload) or not upload.filename:
        error = "choose a JSON file to import"
        return _configuration(ctx, request, error=error, error_section=section)
    name = os.path.basename(upload.filename)
    raw = await upload.read()
    return _save(ctx, request, section, lambda: parse_json_file(raw, name=name), file=name)


_NOT_A_NUMBER = "must be a valid number"
_EMPTY = "is empty: type a number (an empty box is neither the saved value nor the default)"


def _numbers(form: dict[str, str], names: list[str]) -> dict[str, float]:
    """Form fields as numbers; an empty field (docs/decisions.md) or text that is no number is
    an InputError naming the field."""
    values: dict[str, float] = {}
    for name in names:
        text = form.get(name, "").strip()
        if not text:
            raise InputError(_EMPTY, field=name)
        try:
            number = float(text)
        except ValueError:
            raise InputError(_NOT_A_NUMBER, field=name, value=text) from None
        if not math.isfinite(number):
            raise InputError(_NOT_A_NUMBER, field=name, value=text)
        values[name] = number
    return values


_NUMBER_FIELDS: dict[Section, list[str]] = {
    "thresholds": ["fuzzy_threshold", "semantic_threshold"],
    "weights": list(RqsWeights.model_fields),
}


@router.post("/configuration/thresholds")
@router.post("/configuration/weights")
async def save_numbers(request: Request, ctx: Context) -> Response:
    section = next(s for s in _NUMBER_FIELDS if request.url.path.endswith(s))  # its route's
    if (bad := await _bad_text(request)) is not None:
        return _configuration(ctx, request, error=bad, error_section=section)
    form = {k: str(v) for k, v in (await request.form()).items()}
    parse = lambda: _numbers(form, _NUMBER_FIELDS[section])  # noqa: E731
    return _save(ctx, request, section, parse, form, loaded=form.get("loaded"))


# test evaluation ----------------------------------------------------------------------------
@router.get("/evaluate")
def evaluate_page(request: Request, ctx: Context) -> HTMLResponse:
    return ctx.render(request, "evaluate.html", active="/evaluate", ground_truth="", output="")


def _pasted(form: FormData, name: str) -> str:
    """A form's text field ``name`` ("" when absent)."""
    text = form.get(name)
    return text if isinstance(text, str) else ""


async def _text(form: FormData, name: str) -> tuple[str, str | None]:
    """A form's upload ``name + '_file'``, which wins over its pasted text ``name``, and the
    upload's file name (None for a pasted text)."""
    upload = form.get(f"{name}_file")
    if isinstance(upload, StarletteUpload) and upload.filename:
        raw = await upload.read()
        return raw.decode("utf-8", errors="replace"), os.path.basename(upload.filename)
    return _pasted(form, name), None


_NO_FLATTEN = " (nested paths need flatten, which this page does not do)"


def _evaluated(
    ctx: AppContext, gt_text: str, out_text: str, gt_file: str | None = None
) -> tuple[JsonEvalResult, list[str]]:
    """The page's texts scored with the saved configuration (in a worker thread: the matchers
    may load a model or wait on a judge), and its warnings; an uploaded ground truth named by
    ``gt_file``."""
    gt = parse_ground_truth_text(gt_text, file=gt_file)
    config = merged(ctx.saved, ctx.matchers.server())
    output = json_or_text(out_text.encode())  # else the text, scored as a non-object
    return evaluate_one(output, gt, config, ctx.matchers, flatten=_NO_FLATTEN)


@router.post("/evaluate")
async def run_evaluation(request: Request, ctx: Context) -> HTMLResponse:
    bad = await _bad_text(request)  # before the form is read: it would hide such bytes
    try:
        form = await _form(request, ctx)
    except ApiError as exc:
        empty = {"ground_truth": "", "output": ""}
        return ctx.render(
            request, "evaluate.html", exc.status, error=exc.message, active="/evaluate", **empty
        )
    if bad is not None:
        shown = {name: _pasted(form, name) for name in ("ground_truth", "output")}
        return ctx.render(
            request, "evaluate.html", 422, error=bad.one_line(), active="/evaluate", **shown
        )
    gt_text, gt_file = await _text(form, "ground_truth")
    out_text, _ = await _text(form, "output")
    page: dict[str, Any] = {"active": "/evaluate", "ground_truth": gt_text, "output": out_text}
    try:
        result, warnings = await run_in_threadpool(_evaluated, ctx, gt_text, out_text, gt_file)
    except ApiError as exc:
        return ctx.render(request, "evaluate.html", exc.status, error=exc.message, **page)
    return ctx.render(
        request,
        "evaluate.html",
        result=result,
        warnings=warnings,
        buckets=[(name, result.buckets[name]) for name in BUCKET_NAMES],
        scores=[(label, getattr(result, name)) for name, label in SCORES],
        **page,
    )

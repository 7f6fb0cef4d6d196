"""Request bodies checked before FastAPI reads them: UTF-8 JSON of Unicode text, numbers read as
``json batch`` reads files (issue 26), else a 422 naming the field (docs/decisions.md)."""

from __future__ import annotations

import email.message
import json
import math
import re
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import APIRouter
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response

from fieldcheck._util.errors import InputError
from fieldcheck._util.jsonio import NOT_A_NUMBER, first_repeated_key
from fieldcheck.api._errors import ApiError, error_responses
from fieldcheck.jsoneval import LISTED_TWICE

_SURROGATES = range(0xD800, 0xE000)
_ESCAPED_BYTES = range(0xDC80, 0xDD00)  # the bytes that are not UTF-8, as surrogateescape reads
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # in JSON text, the only way to write one
MAX_BOOTSTRAP = 100_000
"""The most bootstrap resamples a request may ask for (one request must not hold the server)."""
TOO_LARGE = "invalid JSON: a number beyond the double range (write it as a string)"


class _Refused(ValueError):
    """A number a JSON file may not hold (the CLI refuses it too)."""


def _constant(_name: str) -> Any:
    raise _Refused(NOT_A_NUMBER)


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Refused(TOO_LARGE)
    return value


def _int(text: str) -> int:
    if math.isinf(float(text)):  # orjson's limit for an integer (and Python's digit limit)
        raise _Refused(TOO_LARGE)
    return int(text)


def is_json(content_type: str | None) -> bool:
    """Whether FastAPI parses a body of this type as JSON (``application/json``, ``+json``)."""
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


def _shown(text: str, *, raw: bool) -> str:
    """``text`` printable: a lone surrogate as ``\\ud800``; in a body that was not UTF-8
    (``raw``), a byte that is not UTF-8 as ``\\xff``."""
    if not any(ord(c) in _SURROGATES for c in text):
        return text
    return "".join(
        (f"\\x{ord(c) - 0xDC00:02x}" if raw and ord(c) in _ESCAPED_BYTES else f"\\u{ord(c):04x}")
        if ord(c) in _SURROGATES
        else c
        for c in text
    )


def _not_text(text: str) -> int | None:
    """The first lone surrogate's code point in ``text``, or None when it is Unicode text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return ord(text[exc.start])
    return None


def _first_not_text(value: Any) -> tuple[list[str], int] | None:
    """The path to the first key or string (document order) that is not Unicode text, and its
    first bad code point; iterative, for any depth json reads."""
    stack: list[tuple[list[str], Any]] = [([], value)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, str):
            if (bad := _not_text(node)) is not None:
                return path, bad
        elif isinstance(node, dict):
            children: list[tuple[list[str], Any]] = []
            for key, child in node.items():
                if (bad := _not_text(key)) is not None:
                    return [*path, key], bad
                children.append(([*path, key], child))
            stack.extend(reversed(children))
        elif isinstance(node, list):
            stack.extend(([*path, str(i)], child) for i, child in reversed(list(enumerate(node))))
    return None


class _Object(dict[str, Any]):
    """A JSON object as read, with the first key it gives twice (None: none)."""

    twice: str | None = None


def _object(pairs: list[tuple[str, Any]]) -> _Object:
    read = _Object(pairs)
    if len(read) < len(pairs):
        read.twice = first_repeated_key(pairs)
    return read


CONFIG_PARTS = ("field_strategies", "thresholds", "weights")
"""The parts of a request body that are a configuration, whose keys are its fields."""


def refuse_repeated_fields(value: Any, parts: tuple[str, ...] | None) -> None:
    """A 422 ApiError naming the first field a configuration of the body (its ``parts``; None:
    the whole body is one) gives twice, as ``--strategies`` and the Configuration page refuse it
    (JSON keeps the last one in silence)."""
    if parts is None:
        found = [("", value)]
    else:
        found = [(f"{p}.", value.get(p)) for p in parts] if isinstance(value, dict) else []
    for prefix, config in found:
        if isinstance(config, _Object) and config.twice is not None:
            error = InputError(LISTED_TWICE, field=config.twice)
            raise ApiError.invalid(error, field=prefix + config.twice)


def check_json_body(raw: bytes) -> Any:
    """The JSON of ``raw`` (each object an ``_Object``); a 422 ApiError when it is not UTF-8 JSON
    of Unicode text (a byte order mark allowed), naming the dotted path of the first bad key or
    string, or ``body``."""
    not_utf8: ApiError | None = None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        text = raw.decode("utf-8-sig", errors="surrogateescape")
        not_utf8 = ApiError(
            422, f"body: not UTF-8 text (byte 0x{raw[exc.start]:02x})", field="body"
        )
    raw_bytes = not_utf8 is not None
    try:
        value = json.loads(
            text,
            parse_constant=_constant,
            parse_float=_float,
            parse_int=_int,
            object_pairs_hook=_object,
        )
    except _Refused as exc:
        raise ApiError(422, f"body: {exc}", field="body") from None
    except json.JSONDecodeError as exc:
        reason = f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        raise not_utf8 or ApiError(422, f"body: {reason}", field="body") from None
    except RecursionError:
        raise ApiError(422, "body: nested too deep to read", field="body") from None
    found = _first_not_text(value) if raw_bytes or _SURROGATE_ESCAPE.search(text) else None
    if found is None:  # a byte read as a surrogate is always inside a string: found
        return value
    path, bad = found
    field = ".".join(_shown(part, raw=raw_bytes) for part in path) or "body"
    if raw_bytes and bad in _ESCAPED_BYTES:
        reason = f"not UTF-8 text (byte 0x{bad - 0xDC00:02x})"
    else:
        reason = f"a lone surrogate \\u{bad:04x} is not Unicode text"
    raise ApiError(422, f"{field}: {reason}", field=field)


async def _no_part(request: Request) -> bool:
    """Whether ``request`` is a multipart form of which no part was read: Starlette reads it as
    an empty form, which FastAPI calls a missing ``file``; the body is at fault."""
    content_type = request.headers.get("content-type", "")
    if not content_type.lower().startswith("multipart/form-data"):
        return False
    try:
        form = await request.form()  # the form FastAPI read, kept on the request
    except Exception:  # unreadable: the body is at fault
        return True
    return len(form) == 0


class CheckedBodyRoute(APIRoute):
    """A route whose JSON body passes ``check_json_body`` and ``refuse_repeated_fields`` (its
    ``configs``) first, and whose unreadable body (FastAPI's 400: a broken multipart form, a part
    too large) is a 422 naming ``body``."""

    configs: tuple[str, ...] | None = CONFIG_PARTS

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        takes_body = self.body_field is not None

        async def checked(request: Request) -> Response:
            if takes_body and is_json(request.headers.get("content-type")):
                body = await request.body()
                if body:
                    refuse_repeated_fields(check_json_body(body), self.configs)
            try:
                return await handler(request)
            except RequestValidationError as exc:
                if takes_body and await _no_part(request):
                    raise ApiError(
                        422, "body: not a multipart form (no part could be read)", field="body"
                    ) from None
                content_type = request.headers.get("content-type")
                problems = exc.errors()
                if (
                    content_type
                    and not is_json(content_type)
                    and problems
                    and tuple(problems[0].get("loc", ())) == ("body",)
                    and problems[0].get("type") != "missing"
                ):  # FastAPI reads JSON only when sent as JSON
                    shown = ascii(content_type[:100])
                    raise ApiError(
                        422,
                        f"body: must be a JSON object sent as application/json (got {shown})",
                        field="body",
                    ) from None
                raise
            except StarletteHTTPException as exc:
                if takes_body and exc.status_code == 400:
                    raise ApiError(
                        422, f"body: cannot be read: {exc.detail}", field="body"
                    ) from None
                raise

        return checked


class ConfigBodyRoute(CheckedBodyRoute):
    """A route whose whole JSON body is a configuration (``PUT /api/config/strategies``)."""

    configs = None


def api_router(
    prefix: str, tag: str, route: type[CheckedBodyRoute] = CheckedBodyRoute
) -> APIRouter:
    """A router of API routes: bodies checked (``route``), Guard's errors declared."""
    return APIRouter(prefix=prefix, tags=[tag], route_class=route, responses=error_responses())

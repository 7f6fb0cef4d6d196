"""Errors of the API as JSON ``{"detail": message, "field": name}``: never a stack trace, never a
key; and the error responses each operation declares in the OpenAPI schema, in that shape."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException

from fieldcheck._util.errors import InputError, reason_of
from fieldcheck.store import ARTIFACTS_ENV, DATABASE_ENV, ItemsMissing

logger = logging.getLogger("fieldcheck")
T = TypeVar("T")


class ApiError(Exception):
    """An error a client can fix (or a refused request): status, one-line message, field."""

    def __init__(self, status: int, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field

    @classmethod
    def invalid(cls, exc: InputError, *, field: str) -> ApiError:
        """422 with the library's one-line message (the CLI's, without its option name)."""
        return cls(422, exc.one_line(), field=field)


def error_body(message: str, field: str | None = None) -> dict[str, Any]:
    return {"detail": message, "field": field}


class ErrorBody(BaseModel):
    """The body of every error the API answers (what ``error_body`` builds)."""

    detail: str = Field(description="One line: what is wrong, and where.")
    field: str | None = Field(
        description="The field at fault: a dotted path into the body (`field_strategies.bio`), a "
        "query or path parameter, `body`, `file`; null when no field is at fault."
    )


Responses = dict[int | str, dict[str, Any]]

INVALID = "A value is not valid (or the body is not readable JSON): `field` names it."
NO_RUN = "No stored run has this id."
ITEMS_GONE = (
    "The run's items file is not under the server's artifacts root (`FIELDCHECK_ARTIFACTS`)."
)
JUDGE_FAILED = "The server's judge gave no similarity."
# What the Guard (``_guard.py``) answers before any route: every operation can get these.
GUARD: Mapping[int, str] = {
    400: "Refused: on a loopback server, a Host that is not a loopback name.",
    401: "A bearer token is required (a server with a token): `WWW-Authenticate: Bearer`.",
    403: "Refused: a POST or PUT sent by a page of another origin.",
    413: "The request body is larger than the server's limit.",
}


def error_responses(statuses: Mapping[int, str] | None = None) -> Responses:
    """OpenAPI ``responses`` declaring ``statuses`` (status -> when) with the error body; with
    no argument, the Guard's statuses (a router's ``responses``, shared by its routes)."""
    described = GUARD if statuses is None else statuses
    declared: Responses = {}
    for status, why in sorted(described.items()):
        declared[status] = {"model": ErrorBody, "description": why}
        if status == 401:
            declared[status]["headers"] = {
                "WWW-Authenticate": {"description": "`Bearer`", "schema": {"type": "string"}}
            }
    return declared


_SOURCES = ("body", "query", "path", "header", "cookie", "form")


def _location(loc: Sequence[Any]) -> str | None:
    """A validation error's field: its location after the source (only the first step), dotted;
    ``body`` when the whole body is at fault, None when nothing is located."""
    if not loc:
        return None
    source, rest = (str(loc[0]), loc[1:]) if str(loc[0]) in _SOURCES else (None, loc)
    parts = [str(p) for p in rest]
    return ".".join(parts) or ("body" if source in ("body", "form") else None)


def items_missing(exc: ItemsMissing) -> str:
    """The message of a run whose items file is gone: the setting named, not the server's
    path (the CLI's line names it), and why, for a reader whose own setting may be right."""
    return (
        f"the items of run {exc.run_id} are not under the server's artifacts root: it was "
        f"stored with another {ARTIFACTS_ENV} (or none: on its machine alone) or its items "
        "were removed"
    )


def answered(call: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T | None, int, str | None]:
    """What a page shows of ``call(*args, **kwargs)``: its value, or the status and message the
    routes answer for its error (a run whose items are gone: 410)."""
    try:
        return call(*args, **kwargs), 200, None
    except ItemsMissing as exc:
        return None, 410, items_missing(exc)
    except ApiError as exc:
        return None, exc.status, exc.message


def page_number(name: str, value: str, low: int, high: int) -> tuple[int | None, str | None]:
    """A page's query number (``offset``, ``limit``) as typed, or ``None`` and the message the
    page shows for it (a value of thousands of digits refused before ``int`` reads it)."""
    if value.isdecimal() and len(value) <= 10 and low <= int(value) <= high:
        return int(value), None
    return None, f"{name}: must be a whole number from {low} to {high} (got {value[:64]!r})"


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(error_body(exc.message, exc.field), status_code=exc.status)

    @app.exception_handler(ItemsMissing)
    async def _items_missing(_request: Request, exc: ItemsMissing) -> JSONResponse:
        return JSONResponse(error_body(items_missing(exc), "id"), status_code=410)

    @app.exception_handler(RequestValidationError)
    async def _validation(_request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        field = _location(first.get("loc", ()))
        message = f"{field}: {reason_of(first)}" if field else reason_of(first)
        return JSONResponse(error_body(message, field), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(
            error_body(str(exc.detail), "body" if exc.status_code == 413 else None),
            status_code=exc.status_code,
            headers=exc.headers,
        )

    @app.exception_handler(SQLAlchemyError)
    async def _store_failed(request: Request, exc: SQLAlchemyError) -> JSONResponse:
        """The store gone (a PostgreSQL server down): 503 and one log line with the reason,
        not a 500 and a traceback a request (the reason names hosts: the log's alone)."""
        reason = (str(getattr(exc, "orig", None) or exc).splitlines() or [""])[0][:200]
        where = f"{request.method} {request.url.path}"
        logger.warning("the store failed on %s: %s: %s", where, type(exc).__name__, reason)
        message = f"the store ({DATABASE_ENV}) failed: try again (see the server's log)"
        return JSONResponse(error_body(message), status_code=503)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.error("internal error on %s %s: %r", request.method, request.url.path, exc)
        return JSONResponse(error_body("internal error (see the server's log)"), status_code=500)

"""Errors of the API as JSON ``{"detail": message, "field": name}``: never a stack trace, never a key."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from fieldcheck._util.errors import InputError, reason_of

logger = logging.getLogger("fieldcheck")


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


def _location(loc: Sequence[Any]) -> str | None:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header", "form")]
    return ".".join(parts) or None


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(error_body(exc.message, exc.field), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def _validation(_request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        field = _location(first.get("loc", ()))
        message = f"{field}: {reason_of(first)}" if field else reason_of(first)
        return JSONResponse(error_body(message, field), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(
            error_body(str(exc.detail)), status_code=exc.status_code, headers=exc.headers
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.error("internal error on %s %s: %r", request.method, request.url.path, exc)
        return JSONResponse(error_body("internal error (see the server's log)"), status_code=500)

"""JSON request bodies read with the numbers of ``json score`` and ``json batch`` (issue 26).

Every integer is exact (Python's int, also beyond 64 bits), a number with a fraction or an
exponent is the double nearest it, and ``NaN``, ``Infinity`` and numbers beyond the double range
(``1e400``) are refused, as the files of the CLI refuse them (``_util.jsonio.loads``). The rest
(lone surrogates, shapes, types) is left to each route's validation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.routing import APIRoute

NOT_A_NUMBER = "invalid JSON: NaN and Infinity are not JSON numbers (write null or a number)"
TOO_LARGE = "invalid JSON: a number beyond the double range (write it as a string)"


class _Refused(ValueError):
    pass


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


def read_body(body: bytes) -> Any:
    """The JSON value of a request body. Raises HTTPException 422 (one line) for a number JSON
    files may not hold, json.JSONDecodeError (FastAPI's 422) for text that is not JSON."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HTTPException(422, f"invalid JSON: not UTF-8 text (byte {exc.start})") from None
    try:
        return json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except _Refused as exc:
        raise HTTPException(422, str(exc)) from None


class _Request(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = read_body(await self.body())
        return self._json


class JsonNumbersRoute(APIRoute):
    """A route whose JSON body is read by ``read_body``."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route_handler(request: Request) -> Response:
            return await handler(_Request(request.scope, request.receive))

        return route_handler

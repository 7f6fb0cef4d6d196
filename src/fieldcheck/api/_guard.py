"""What stands before every route: the body size limit (413), the bearer token, and on a
loopback server the Host and Origin checks (DNS rebinding, forms posted from another origin);
and on every answer the headers that keep its pages out of other sites' frames."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from urllib.parse import urlencode, urlsplit

from fastapi import HTTPException
from starlette.datastructures import Headers
from starlette.requests import cookie_parser
from starlette.responses import JSONResponse, RedirectResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fieldcheck.api._errors import error_body
from fieldcheck.api._settings import ApiSettings, is_loopback

TOKEN_COOKIE = "fieldcheck_token"
OPEN_PATHS = frozenset({"/login"})  # the page where a browser gives the token
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
OTHER_SITES = frozenset({"cross-site", "same-site"})  # Sec-Fetch-Site of another origin's page
# on every answer: no page of this server inside another site's frame (a framed Configuration
# page's own POST is same-origin), no type sniffing of a served file
SAFETY_HEADERS = (
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", b"frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
)


class BodyTooLarge(HTTPException):
    """Raised while the body is read; an HTTPException so FastAPI's body parsing passes it on."""

    def __init__(self, limit: tuple[int, str]) -> None:
        super().__init__(413, too_large(limit))


def too_large(limit: tuple[int, str]) -> str:
    """The 413's message of a (bytes, option) limit: the option that raises it."""
    return f"body: the request body is larger than {limit[0]} bytes (the server's {limit[1]})"


class Guard:
    """ASGI middleware: every request passes the token, host, origin and size checks."""

    def __init__(self, app: ASGIApp, settings: ApiSettings) -> None:
        self.app = app
        self.settings = settings
        self.loopback = is_loopback(settings.host)

    def limit(self, headers: Mapping[str, str]) -> tuple[int, str]:
        """Uploads (multipart forms) get the upload limit, every other body the JSON one: the
        bytes, and the ``fieldcheck serve`` option that sets them."""
        if headers.get("content-type", "").startswith("multipart/form-data"):
            return self.settings.max_upload_bytes, "--max-upload-mb"
        return self.settings.max_json_bytes, "--max-json-mb"

    def authorized(self, headers: Mapping[str, str]) -> bool:
        token = self.settings.token
        if not token:
            return True
        given = headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(value.strip(), token):
            return True
        cookie = cookie_parser(headers.get("cookie", "")).get(TOKEN_COOKIE)
        return cookie is not None and hmac.compare_digest(cookie, token)

    def host_allowed(self, headers: Mapping[str, str]) -> bool:
        """On loopback only a loopback Host (a rebound DNS name pointing here is refused)."""
        if not self.loopback:
            return True
        host = urlsplit("//" + headers.get("host", "")).hostname or ""
        return is_loopback(host) or host in self.settings.extra_hosts

    @staticmethod
    def same_origin(method: str, headers: Mapping[str, str]) -> bool:
        """A browser's unsafe request must come from this server's own pages: its Origin, or
        without one its Referer, is this server, and the browser does not call it another
        site's (`Sec-Fetch-Site` `cross-site`, or `same-site`: another port or subdomain)."""
        if method not in UNSAFE_METHODS:
            return True
        if headers.get("sec-fetch-site", "").lower() in OTHER_SITES:
            return False
        sender = headers.get("origin") or headers.get("referer")
        return sender is None or urlsplit(sender).netloc == headers.get("host", "")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        limit, length = self.limit(headers), headers.get("content-length")
        refused: tuple[int, str] | None = None
        if not self.host_allowed(headers):
            refused = 400, "this server answers only on a loopback host name"
        elif scope["path"] not in OPEN_PATHS and not self.authorized(headers):
            if scope["method"] == "GET" and "text/html" in headers.get("accept", ""):
                # a browser: the page that asks for the token, then back to this one
                asked = scope["path"] + (
                    f"?{scope['query_string'].decode('latin-1')}" if scope["query_string"] else ""
                )
                await RedirectResponse(f"/login?{urlencode({'next': asked})}", 303)(
                    scope, receive, send
                )
                return
            refused = 401, "a bearer token is required"
        elif not self.same_origin(scope["method"], headers):
            refused = 403, "requests from another origin are refused"
        elif length is not None and length.isdigit() and int(length) > limit[0]:
            refused = 413, too_large(limit)
        if refused is not None:
            status, message = refused
            challenge = {"www-authenticate": "Bearer"} if status == 401 else None
            field = "body" if status == 413 else None
            await JSONResponse(error_body(message, field), status, challenge)(scope, receive, send)
            return
        received = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit[0]:
                    raise BodyTooLarge(limit)
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = {**message, "headers": [*message.get("headers", ()), *SAFETY_HEADERS]}
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except BodyTooLarge:
            if not started:
                await JSONResponse(error_body(too_large(limit), "body"), 413)(scope, receive, send)

"""The HTTP API and web app of ``fieldcheck serve`` (json-evaluation.md's API, Configuration and
Test evaluation pages): ``create_app(ApiSettings(...))`` builds the FastAPI app."""

from fieldcheck.api._app import NAV, create_app
from fieldcheck.api._settings import (
    MB,
    TOKEN_ENV,
    ApiSettings,
    check_binding,
    is_loopback,
    needs_token,
)

__all__ = [
    "MB",
    "NAV",
    "TOKEN_ENV",
    "ApiSettings",
    "check_binding",
    "create_app",
    "is_loopback",
    "needs_token",
]

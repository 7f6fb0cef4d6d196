"""How the app is served: bind address, data root, size limits, token and matcher settings; bound
beyond loopback it needs a bearer token (``FIELDCHECK_API_TOKEN``), asked on every route."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from pathlib import Path

from fieldcheck.jsoneval import EvalConfig, MatcherFamily

TOKEN_ENV = "FIELDCHECK_API_TOKEN"
MB = 1024 * 1024


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and any loopback address (127.0.0.0/8, ::1)."""
    name = host.strip().lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def needs_token(host: str) -> bool:
    """Whether a server bound to ``host`` must ask for a bearer token: anywhere but loopback."""
    return not is_loopback(host)


# The shortest token accepted beyond loopback (a short one is guessed by trying).
MIN_TOKEN_CHARS = 16


def check_binding(host: str, token: str | None) -> None:
    """Refuse to serve beyond loopback without a token of ``MIN_TOKEN_CHARS`` or more: raises
    ValueError saying how to set one."""
    if needs_token(host) and (not token or len(token) < MIN_TOKEN_CHARS):
        given = f" (it has {len(token)} characters)" if token else ""
        raise ValueError(
            f"binding to {host} (not loopback) needs a bearer token: set {TOKEN_ENV} to a random "
            f"string of at least {MIN_TOKEN_CHARS} characters{given}, e.g. "
            "'python -c \"import secrets; print(secrets.token_urlsafe())\"'; clients send it as "
            "'Authorization: Bearer <token>'"
        )


@dataclass(frozen=True)
class ApiSettings:
    """What ``create_app`` needs, from ``fieldcheck serve``'s options (docs/api.md): without
    ``data_root``, ``batch-path`` and ``/api/score`` are refused; the matcher is never a
    request's."""

    host: str = "127.0.0.1"
    port: int = 8000
    data_root: Path | None = None
    database_url: str | None = None
    token: str | None = None
    max_upload_bytes: int = 50 * MB
    max_json_bytes: int = 1 * MB
    matcher: MatcherFamily = "local"
    judge_base_url: str | None = None
    judge_model: str | None = None
    extra_hosts: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def from_env(cls, **values: object) -> ApiSettings:
        """Settings with ``token`` from ``FIELDCHECK_API_TOKEN`` unless given."""
        values.setdefault("token", os.environ.get(TOKEN_ENV) or None)
        return cls(**values)  # type: ignore[arg-type]

    def matcher_config(self) -> EvalConfig:
        """The matcher part of every evaluation this server runs (validated like the CLI's)."""
        return EvalConfig(
            matcher=self.matcher, judge_base_url=self.judge_base_url, judge_model=self.judge_model
        )

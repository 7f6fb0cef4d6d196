"""Which model to call and how: one ``ModelSpec`` per model, from the CLI or a ``--models`` file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fieldcheck._util.errors import InputError, input_error_of
from fieldcheck.metrics import cost_usd

API_KEY_ENV = ("FIELDCHECK_API_KEY", "OPENAI_API_KEY")


def redact_url(url: str) -> str:
    """``url`` without user, password, query or fragment: what may be stored and printed."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


class ModelSpec(BaseModel):
    """A model behind an OpenAI-compatible endpoint; ``api_key_env`` names its key's variable
    (default ``API_KEY_ENV``): the key is never a field, so never written with the spec."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=200)
    model: str = Field(min_length=1)
    base_url: str = Field(min_length=1)
    api_key_env: str | None = None
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, ge=1)
    seed: int | None = None
    price_in: float | None = Field(default=None, ge=0.0)  # USD per 1M input tokens
    price_out: float | None = Field(default=None, ge=0.0)  # USD per 1M output tokens

    @field_validator("base_url")
    @classmethod
    def _plain_http_url(cls, value: str) -> str:
        """An http(s) URL with a host and no credentials, query or fragment: the key travels in
        its environment variable, never in a URL that could be stored or echoed."""
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"base_url must be an http:// or https:// URL with a host, got {value!r}"
            )
        if parts.username or parts.password:
            raise ValueError(
                "base_url must not carry a user or password; put the key in an environment variable"
            )
        if parts.query or parts.fragment:
            raise ValueError("base_url must not carry a query string or fragment")
        return value.strip()

    @property
    def endpoint(self) -> str:
        return redact_url(self.base_url)

    def api_key(self) -> str:
        """The key from the environment; local servers accept any, so a placeholder if none."""
        names = (self.api_key_env,) if self.api_key_env else API_KEY_ENV
        values = (os.environ.get(name) for name in names)
        return next((value for value in values if value), "not-set")

    def cost_usd(self, input_tokens: int, output_tokens: int) -> float | None:
        """USD for these tokens at the spec's prices (per 1M tokens); None without both."""
        if self.price_in is None or self.price_out is None:
            return None
        return cost_usd(input_tokens, output_tokens, self.price_in, self.price_out)

    def public(self) -> dict[str, Any]:
        """What may be stored and printed (the endpoint without credentials)."""
        data = self.model_dump()
        data["base_url"] = self.endpoint
        return data


def load_model_specs(path: str | Path) -> list[ModelSpec]:
    """Read a ``--models`` file: YAML or JSON, a list of ``{name, model, base_url, ...}``."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read models file: {exc}", file=p) from exc
    data: Any
    if p.suffix.lower() == ".json":
        import orjson

        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg}", file=p, line=exc.lineno) from exc
    else:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise InputError(
                f"invalid YAML: {getattr(exc, 'problem', exc)}",
                file=p,
                line=mark.line + 1 if mark is not None else None,
            ) from exc
    if isinstance(data, dict) and isinstance(data.get("models"), list):
        data = data["models"]
    if not isinstance(data, list) or not data:
        raise InputError("a models file is a non-empty list of models", file=p)
    specs: list[ModelSpec] = []
    for index, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise InputError(
                "each model is an object {name, model, base_url, ...}",
                file=p,
                record=f"#{index + 1}",
                value=entry,
            )
        try:
            specs.append(ModelSpec.model_validate(entry))
        except ValidationError as exc:
            # the entry is named by its number, not repeated whole
            raise input_error_of(exc, file=p, record=f"#{index + 1}").replace(value=...) from None
    names = [s.name for s in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InputError(f"model names must be unique: {', '.join(duplicates)}", file=p)
    return specs

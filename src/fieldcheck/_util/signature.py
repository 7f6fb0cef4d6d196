"""The signature of a result: every setting that produced it, so two numbers are compared only when
they mean the same thing (STYLE.md, after sacrebleu's signatures)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fieldcheck._version import __version__


class Signature(BaseModel):
    """What produced a score: the system, its settings, matcher and model names, fieldcheck's version."""

    model_config = ConfigDict(frozen=True)

    system: str
    settings: dict[str, Any] = Field(default_factory=dict)
    fieldcheck_version: str = __version__

    def format(self) -> str:
        """``system|key:value|...|version:x`` in a stable order, for reports and logs."""
        parts = [self.system]
        parts += [f"{k}:{_fmt(v)}" for k, v in sorted(self.settings.items())]
        parts.append(f"version:{self.fieldcheck_version}")
        return "|".join(parts)


def _fmt(value: Any) -> str:
    if isinstance(value, dict):
        return ",".join(f"{k}={_fmt(v)}" for k, v in sorted(value.items()))
    if isinstance(value, list | tuple):
        return ",".join(_fmt(v) for v in value)
    return str(value)

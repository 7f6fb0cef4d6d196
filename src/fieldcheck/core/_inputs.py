"""What a command or an API request gives a system: input files by role (checked before
anything is read), the model label they give, and its settings as JSON text."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from fieldcheck._util.errors import UsageProblem
from fieldcheck._util.jsonio import loads, repeated_key
from fieldcheck._util.models import models_label
from fieldcheck.core._system import System


def read_settings(raw: str | bytes | None) -> dict[str, Any]:
    """A system's settings given as JSON text (None: ``{}``): an object with no key given twice,
    else ``UsageProblem``."""
    if raw is None:
        return {}
    data = raw.removeprefix(b"\xef\xbb\xbf") if isinstance(raw, bytes) else raw.encode()
    try:
        value = loads(data)
    except orjson.JSONDecodeError as exc:
        raise UsageProblem(f"invalid JSON: {exc}") from None
    if twice := repeated_key(data):  # the last one would win without a word
        raise UsageProblem(f"the key {twice[0]!r} is given twice")
    if not isinstance(value, dict):
        raise UsageProblem("must be a JSON object (the system's stored settings)")
    return value


def check_roles(system: System, given: Sequence[str]) -> None:
    """Every plain role of ``system`` once, each ``ROLE:NAME`` role at least once (bar its
    ``optional_inputs``), nothing else: else ``UsageProblem`` naming the roles at fault."""
    optional = getattr(system, "optional_inputs", ())
    plain = [r for r, _ in system.inputs if not r.endswith(":NAME")]
    named = [r.removesuffix("NAME") for r, _ in system.inputs if r.endswith(":NAME")]
    needed = [r.removesuffix("NAME") for r, _ in system.inputs if r not in optional]
    takes = ", ".join(r for r, _ in system.inputs)
    unknown = [
        r for r in given if r not in plain and not any(r.startswith(p) and r != p for p in named)
    ]
    if unknown:
        raise UsageProblem(
            f"{system.name} has no input {', '.join(unknown)} (it takes {takes})", unknown[0]
        )
    twice = sorted({r for r in given if list(given).count(r) > 1})
    if twice:
        raise UsageProblem(f"{', '.join(twice)} given twice (give each input once)", twice[0])
    missing = [r for r in plain if r not in given and r in needed]
    missing += [
        f"{p}NAME" for p in named if p in needed and not any(r.startswith(p) for r in given)
    ]
    if missing:
        raise UsageProblem(
            f"{system.name} needs {', '.join(missing)} (it takes {takes})", missing[0]
        )


def model_label(system: System, inputs: Sequence[tuple[str, Path]]) -> tuple[str, list[str]]:
    """The run's model label and models: the names of ``ROLE:NAME`` inputs, else the stem of
    the file of the system's last role (the model's outputs), as its own command names it."""
    models = list(dict.fromkeys(role.split(":", 1)[1] for role, _ in inputs if ":" in role))
    if models:
        return models_label(models), models
    order = [role for role, _ in system.inputs]
    _, last = max(inputs, key=lambda given: order.index(given[0]) if given[0] in order else -1)
    return Path(last).stem, []


def _in_settings(settings: Mapping[str, Any], key: str) -> str:
    """Where ``key`` is in the given settings: ``key``, or ``config.key`` when nested."""
    if key not in settings:
        for name, value in settings.items():
            if isinstance(value, Mapping) and key in value:
                return f"{name}.{key}"
    return key


def renamed(
    system: System, settings: Mapping[str, Any], exc: UsageProblem, *, own: Sequence[str] = ()
) -> tuple[str, str, bool]:
    """A system's problem as a caller without its command's options (``own``: kept) names it:
    a setting (``config.weights``) or an input's role; (message, name, whether a setting)."""
    if not exc.param or exc.param in own:
        return exc.message, exc.param or "", False
    roles = [role for role, _ in getattr(system, "inputs", ())]
    message, shown, setting = exc.message, [], False
    if exc.role is not None:  # an input given by its role: every input option as its role
        for role in roles:  # (`--pred` -> `pred:NAME`)
            kind = role.split(":")[0]
            message = re.sub(rf"--{re.escape(kind)}\b(?!-)", role, message)
        return message, exc.role, False
    for part in exc.param.split("/"):
        name = part.removeprefix("--")
        role = (
            None if name in settings else next((r for r in roles if r.split(":")[0] == name), None)
        )
        if role is None and (part.startswith("--") or name in settings):
            role, setting = _in_settings(settings, name.replace("-", "_")), True
            if part.startswith("--"):
                message = re.sub(rf"{re.escape(part)}\b", role, message)
        shown.append(role or name)
    return message, "/".join(shown), setting

"""The one registry of systems: the three built in (imported on first use, so ``fieldcheck
--help`` loads none of them) and any added with ``register``."""

from __future__ import annotations

import importlib

from fieldcheck.core._system import System

_BUILT_IN = {
    "json": "fieldcheck.jsoneval",
    "slots": "fieldcheck.slots",
    "numeric": "fieldcheck.numeric",
}
_ADDED: dict[str, System] = {}


def register(system: System) -> System:
    """Add ``system`` (or replace the one of its name) and return it."""
    if not isinstance(system, System):
        raise TypeError(f"{system!r} does not implement fieldcheck.core.System")
    _ADDED[system.name] = system
    return system


def unregister(name: str) -> None:
    """Remove a system added with ``register`` (a built-in one comes back)."""
    _ADDED.pop(name, None)


def names() -> list[str]:
    """Every system's name: the built-in ones first, in the order the docs give them."""
    return [*_BUILT_IN, *(n for n in _ADDED if n not in _BUILT_IN)]


def get(name: str) -> System:
    """The system called ``name`` (KeyError naming the known ones otherwise)."""
    if name in _ADDED:
        return _ADDED[name]
    module = _BUILT_IN.get(name)
    if module is None:
        raise KeyError(f"no system {name!r} (known: {', '.join(names())})")
    system: System = importlib.import_module(module).SYSTEM
    return system


def find(name: str | None) -> System | None:
    """The system called ``name``, or None (a stored run of a system no longer registered)."""
    try:
        return get(name) if name else None
    except KeyError:
        return None

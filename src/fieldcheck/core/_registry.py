"""The one registry of systems: the three built in and those declared as ``fieldcheck.systems``
entry points (each imported on first use), and any added with ``register``."""

from __future__ import annotations

import importlib
from importlib.metadata import EntryPoint, entry_points

from fieldcheck.core._system import System

_BUILT_IN = {
    "json": "fieldcheck.jsoneval",
    "slots": "fieldcheck.slots",
    "numeric": "fieldcheck.numeric",
}
_ADDED: dict[str, System] = {}
GROUP = "fieldcheck.systems"


def _installed() -> dict[str, EntryPoint]:
    """The systems installed packages declare (their entry points, not yet loaded)."""
    return {e.name: e for e in entry_points(group=GROUP) if e.name not in _BUILT_IN}


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
    return list(dict.fromkeys([*_BUILT_IN, *_installed(), *_ADDED]))


def get(name: str) -> System:
    """The system called ``name`` (KeyError naming the known ones otherwise)."""
    if name in _ADDED:
        return _ADDED[name]
    module = _BUILT_IN.get(name)
    if module is not None:
        system: System = importlib.import_module(module).SYSTEM
        return system
    declared = _installed().get(name)
    if declared is None:
        raise KeyError(f"no system {name!r} (known: {', '.join(names())})")
    try:
        return register(declared.load())
    except Exception as exc:  # a package that is broken, or declares what is not a system
        raise KeyError(f"system {name!r} ({declared.value}) cannot be loaded: {exc}") from None


def find(name: str | None) -> System | None:
    """The system called ``name``, or None (a stored run of a system no longer registered)."""
    try:
        return get(name) if name else None
    except KeyError:
        return None

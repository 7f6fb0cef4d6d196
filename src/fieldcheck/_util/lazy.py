"""A package's public names imported on first use (PEP 562): the package re-exports names from
its private modules without loading them, so a process that needs one module loads that one."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    package: str, home: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The package's ``__getattr__`` and ``__dir__``: ``home`` maps each public name to its
    private module (``"_stream"``); a name, once imported, is kept in ``namespace`` (the
    package's ``globals()``)."""

    def __getattr__(name: str) -> Any:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *home})

    return __getattr__, __dir__


def typed_lazy_names(
    namespace: dict[str, Any],
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """The ``__getattr__``, ``__dir__`` and ``__all__`` of a package whose public names are the
    ``from fieldcheck.pkg._module import name`` lines of its ``if TYPE_CHECKING:`` block:
    the one list type checkers and editors read is the one imported from at run time, so the
    names are not written three times (imports, name-to-module table, ``__all__``)."""
    package = namespace["__name__"]
    source = namespace["__loader__"].get_source(package)
    home: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for line in node.body:
                if isinstance(line, ast.ImportFrom) and line.module:
                    prefix = f"{package}."
                    module = line.module.removeprefix(prefix)
                    home.update({alias.name: module for alias in line.names})
    getattr_, dir_ = lazy_names(package, home, namespace)
    return getattr_, dir_, sorted(home)

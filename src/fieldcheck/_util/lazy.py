"""A package's public names imported on first use (PEP 562): the package re-exports names from
its private modules without loading them, so a process that needs one module loads that one."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable
from typing import Any


def typed_lazy_names(
    namespace: dict[str, Any],
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """The ``__getattr__``, ``__dir__`` and ``__all__`` of a package whose lazy names are the
    imports of its ``if TYPE_CHECKING:`` block (and its eager ones): the names written once."""
    package = namespace["__name__"]
    home: dict[str, str] = {}
    eager: list[str] = []
    for node in ast.parse(namespace["__loader__"].get_source(package)).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for line in node.body:
                if isinstance(line, ast.ImportFrom) and line.module:
                    home.update({alias.name: line.module for alias in line.names})
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(f"{package}._"):
            eager += [alias.name for alias in node.names]

    def __getattr__(name: str) -> Any:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *home})

    return __getattr__, __dir__, sorted({*home, *eager})

"""The layer between the commands and the systems (ARCHITECTURE.md "Layers"): the ``System``
protocol and its registry."""

from fieldcheck.core._registry import find, get, names, register, unregister
from fieldcheck.core._system import Breakdown, Column, Metrics, System

__all__ = [
    "Breakdown",
    "Column",
    "Metrics",
    "System",
    "find",
    "get",
    "names",
    "register",
    "unregister",
]

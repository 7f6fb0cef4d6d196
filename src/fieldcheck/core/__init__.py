"""The layer between the commands and the systems (ARCHITECTURE.md "Layers"): the ``System``
protocol and its registry; the executors, imported on first use."""

from typing import TYPE_CHECKING

from fieldcheck._util.lazy import lazy_names
from fieldcheck.core._registry import find, get, names, register, unregister
from fieldcheck.core._system import Breakdown, Column, Metrics, System

if TYPE_CHECKING:
    from fieldcheck.core._executor import Executor, InProcess, LocalPool, finish, run_map

_HOME = {name: "_executor" for name in ("Executor", "InProcess", "LocalPool", "finish", "run_map")}

__all__ = [
    "Breakdown",
    "Column",
    "Executor",
    "InProcess",
    "LocalPool",
    "Metrics",
    "System",
    "find",
    "finish",
    "get",
    "names",
    "register",
    "run_map",
    "unregister",
]

__getattr__, __dir__ = lazy_names(__name__, _HOME, globals())

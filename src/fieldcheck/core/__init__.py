"""The layer between the commands and the systems (ARCHITECTURE.md "Layers"): the ``System``
protocol and its registry, and a run's folder, written beside its destination and renamed
into place when complete."""

from fieldcheck.core._folder import (
    PARTIAL,
    RUN_JSON,
    RUNS_DIR,
    FolderError,
    RunFolder,
    check_destination,
    default_destination,
)
from fieldcheck.core._registry import find, get, names, register, unregister
from fieldcheck.core._system import Breakdown, Column, Metrics, System

OutputFolder = RunFolder  # the writers' name for it

__all__ = [
    "PARTIAL",
    "RUNS_DIR",
    "RUN_JSON",
    "Breakdown",
    "Column",
    "FolderError",
    "Metrics",
    "OutputFolder",
    "RunFolder",
    "System",
    "check_destination",
    "default_destination",
    "find",
    "get",
    "names",
    "register",
    "unregister",
]

"""The layer between the commands and the systems (ARCHITECTURE.md "Layers"): the ``System``
protocol, its registry and the one pipeline every command and API route scores through."""

from fieldcheck.core._inputs import check_roles, model_label, read_settings
from fieldcheck.core._pipeline import (
    NO_CACHE_NOTE,
    Events,
    Inputs,
    Interrupted,
    Into,
    Outcome,
    check_out,
    finish_folder,
    finish_run,
    open_folder,
    open_recorder,
    score,
    stored_line,
    writing,
)
from fieldcheck.core._registry import find, get, names, register, unregister
from fieldcheck.core._system import (
    Breakdown,
    Column,
    Imports,
    Metrics,
    Progress,
    Rescores,
    System,
    Write,
)

__all__ = [
    "NO_CACHE_NOTE",
    "Breakdown",
    "Column",
    "Events",
    "Imports",
    "Inputs",
    "Interrupted",
    "Into",
    "Metrics",
    "Outcome",
    "Progress",
    "Rescores",
    "System",
    "Write",
    "check_out",
    "check_roles",
    "find",
    "finish_folder",
    "finish_run",
    "get",
    "model_label",
    "names",
    "open_folder",
    "open_recorder",
    "read_settings",
    "register",
    "score",
    "stored_line",
    "unregister",
    "writing",
]

"""The layer between the commands and the systems (ARCHITECTURE.md "Layers"): for now a run's
folder, written beside its destination and renamed into place when complete."""

from fieldcheck.core._folder import (
    PARTIAL,
    RUN_JSON,
    RUNS_DIR,
    FolderError,
    RunFolder,
    check_destination,
    default_destination,
)

OutputFolder = RunFolder  # the writers' name for it

__all__ = [
    "PARTIAL",
    "RUNS_DIR",
    "RUN_JSON",
    "FolderError",
    "OutputFolder",
    "RunFolder",
    "check_destination",
    "default_destination",
]

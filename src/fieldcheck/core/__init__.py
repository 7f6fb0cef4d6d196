"""The layer between the commands and the systems (ARCHITECTURE.md "Layers"): the ``System``
protocol, its registry, the one pipeline and the executors (imported on first use from ``_util``,
where the store and the systems below the core run their tasks on them too)."""

from typing import TYPE_CHECKING

from fieldcheck._util.lazy import typed_lazy_names
from fieldcheck.core._figures import headline_metric, headline_values, list_figures
from fieldcheck.core._inputs import check_roles, model_label, read_settings, renamed
from fieldcheck.core._pipeline import (
    NO_CACHE_NOTE,
    Events,
    Inputs,
    Interrupted,
    Into,
    Outcome,
    score,
    stored_line,
    writing,
)
from fieldcheck.core._registry import find, get, names, register, unregister
from fieldcheck.core._run import Ran, run
from fieldcheck.core._system import (
    Breakdown,
    Column,
    Imports,
    Metrics,
    Progress,
    Rescores,
    Runs,
    System,
)

if TYPE_CHECKING:
    from fieldcheck._util.executor import Executor, InProcess, LocalPool, finish, run_map
    from fieldcheck.reports import Write

__getattr__, __dir__, __all__ = typed_lazy_names(globals())

"""The ``System`` protocol (ARCHITECTURE.md "One evaluation, one path"): what every kind of
evaluation tells the layers above it; a plain object in its own package, not importing ``core``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from fieldcheck.reports import RunFolder, Scored, Write
from fieldcheck.store import ItemColumn, ItemColumns, Pairing

if TYPE_CHECKING:
    from fieldcheck._util.executor import Executor
    from fieldcheck.store import RunRecorder

Files = Sequence[tuple[str, str | Path]]
"""Input files by role: (role, path)."""

Metrics = Mapping[str, Any]


Column = tuple[str, Metrics, Metrics]
"""One column of a run in a comparison: (model, metrics, intervals); a slots run has several."""

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``: total 0 for a phase of unknown length."""

Breakdown = tuple[str, str, Callable[[Metrics], Mapping[str, Any]]]
"""A table of one metric by field, topic or turn: (title, row label, reader of the metrics)."""


@runtime_checkable
class System(Protocol):
    """One kind of evaluation: ``name`` (CLI group, store column), its unit ``item``, the
    ``headline`` metrics in report order, ``export_columns`` (name, JSON path, DuckDB type).
    Optional: ``headline_metric`` (default the first of ``headline``), ``usage_metrics``."""

    name: str
    title: str
    item: str
    inputs: tuple[tuple[str, str], ...]
    """Its input files: (role, what it is); a role ending in ``:NAME`` is given once per model
    (``pred:NAME``)."""
    headline: tuple[str, ...]
    breakdowns: tuple[Breakdown, ...]
    export_columns: tuple[tuple[str, str, str], ...]
    pairing: Pairing
    """How its items pair across runs, what is right and compared, and the per-item statistics
    of the headline metric whose paired difference ``runs compare`` tests."""
    dataset_inputs: tuple[str, ...]
    """The input roles that hold the dataset (never a model's outputs): the runs list names the
    first a run has; ``runs compare`` warns when their sha256 differ (docs/runs.md)."""
    model_settings: tuple[str, ...]
    """The signature settings that name the model or its outputs: they differ by design between
    compared runs, and no warning names them."""

    def columns(self, model: str, metrics: Metrics, intervals: Metrics) -> list[Column]:
        """The comparison columns of one stored run."""
        ...

    def estimate(self, metrics: Metrics, name: str) -> Any:
        """Headline metric ``name`` of a column's metrics (None when absent)."""
        ...

    def interval(self, intervals: Metrics, name: str) -> Any:
        """The 95% interval ({low, high, ...}) of headline metric ``name``, or None."""
        ...

    def latency(self, metrics: Metrics) -> Mapping[str, Any] | None:
        """The latency summary (mean, median, p95, total seconds) of a column, or None."""
        ...

    def paired(self, metrics: Metrics) -> Sequence[Mapping[str, Any]]:
        """Paired tests a run stored between its own models (slots' paired F1), else ()."""
        ...

    @property
    def item_table(self) -> tuple[ItemColumn, ...]:
        """The columns of its run page's item table after the key (``store.item_value``)."""
        ...

    @property
    def item_tag(self) -> str | None:
        """What its items' tags are called (``field``, ``topic``), or None: the tag filter."""
        ...

    def export_row(self, result: Mapping[str, Any]) -> list[Any]:
        """The values of ``export_columns`` for one stored item (a CSV row)."""
        ...

    def item_columns(self, item: Mapping[str, Any]) -> ItemColumns:
        """The indexed columns (key, failed, model, turn, error type, tags) of a stored item."""
        ...

    def related_keys(self, item: Mapping[str, Any]) -> Sequence[str]:
        """The keys of the run's other items ``item``'s story shows (numeric's earlier turns)."""
        ...

    def item_story(
        self,
        item: Mapping[str, Any],
        settings: Metrics,
        related: Mapping[str, Mapping[str, Any]],
    ) -> list[dict[str, Any]]:
        """The story of a stored item (issue 28, "An item"): sections ``{"id", "title",
        "blocks"}`` of blocks ``values``, ``table`` or ``text``/``code`` (docs/decisions.md)."""
        ...

    def prepare(
        self,
        inputs: Sequence[tuple[str, Path]],
        settings: Metrics,
        *,
        beside: Path,
        progress: Progress | None,
        extras: Mapping[str, Any],
    ) -> AbstractContextManager[Any]:
        """Read and check ``inputs`` and ``settings`` before anything is written (else
        ``UsageProblem``); the context holds what ``score`` reads (with ``settings`` merged with
        the saved configuration, ``store`` False when unreadable), its scratch ``beside``."""
        ...

    def score(
        self,
        read: Any,
        folder: RunFolder,
        settings: Metrics,
        *,
        recorder: RunRecorder | None,
        progress: Progress | None,
        executor: Executor | None = None,
    ) -> Scored:
        """Score what ``prepare`` read into ``folder`` and ``recorder`` (None: not stored);
        ``executor`` runs its chunk scoring (None: the system's choice)."""
        ...


@runtime_checkable
class Rescores(Protocol):
    """A system whose stored runs ``runs rescore`` scores again (optional: a system without
    ``rescore`` says "X runs cannot be re-scored")."""

    def rescore(
        self,
        items: Iterable[Mapping[str, Any]],
        settings: Metrics,
        options: Metrics,
        *,
        run: str,
        signature: Metrics,
    ) -> tuple[Metrics, Any, Write]:
        """The child of stored run ``run`` (its ``signature`` as a dict) under ``options`` given
        anew (those not None): its settings, signature and ``Write``; InputError for an option
        it does not take."""
        ...


@runtime_checkable
class Imports(Protocol):
    """A system whose finished output folders ``runs import`` stores (optional: a system
    without ``import_folder`` says "X runs cannot be imported")."""

    summary_file: str
    """The folder's summary (its metrics and signature): what an imported run is known by."""
    row_file: str | None
    """The folder's file of one row an item, written in order (checked whole), if any."""

    def import_folder(
        self, folder: Path, inputs: Files, *, model: str | None
    ) -> tuple[str, Files, Metrics, Any, Write]:
        """Its ``folder`` read back with the ``inputs`` it was scored from: the run's model,
        inputs, settings, signature and ``Write``."""
        ...


@runtime_checkable
class Runs(Protocol):
    """A system whose models the runner runs: what a model is asked, how its replies become the
    files it scores; ``together``: all models in one run and folder, else one each."""

    run_inputs: tuple[tuple[str, str], ...]
    """The inputs a model run reads: (role, what it is)."""
    together: bool
    folder_per_model: bool

    def read_task(self, inputs: Files, settings: Metrics, extras: Mapping[str, Any]) -> Any:
        """``inputs`` (by role) and ``settings`` read and checked before the folder is opened
        and any model called (``UsageProblem`` naming the role, as ``prepare`` says it: an input
        with nothing to run too); ``extras`` as for ``prepare``."""
        ...

    async def run_model(
        self, task: Any, runner: Any, spec: Any, *, console: Any, show_progress: bool
    ) -> Any:
        """Model ``spec`` asked every item of ``task`` (resumed); the result has ``run_id``,
        ``item_calls`` and ``failures`` (exit status 3)."""
        ...

    def predictions(
        self, task: Any, calls: Sequence[Any], specs: Sequence[Any], folder: RunFolder
    ) -> tuple[Files, Metrics, Mapping[str, Any]]:
        """The prediction files of these models (one, or all when ``together``) written into
        ``folder``: the inputs, settings and ``prepare`` extras they are scored with."""
        ...

    def comparison(self, task: Any, calls: Any, scored: Scored) -> Mapping[str, Any] | None:
        """A model's row of ``comparison.csv`` (None: the system writes none)."""
        ...

"""The ``System`` protocol (ARCHITECTURE.md "One evaluation, one path"): what every kind of
evaluation tells the layers above it, so that ``runs``, the API and the pages go through the
registry and never compare system names. A system is a plain object in its own package
(structural typing: the systems sit below ``core`` and do not import it)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from fieldcheck.reports import RunFolder, Scored
from fieldcheck.store import ItemColumn, ItemColumns, Pairing

if TYPE_CHECKING:
    from fieldcheck._util.executor import Executor
    from fieldcheck.store import RunRecorder

Files = Sequence[tuple[str, str | Path]]
"""Input files by role: (role, path)."""

Metrics = Mapping[str, Any]


Column = tuple[str, Metrics, Metrics]
"""One column of a run in a comparison: (model, metrics, intervals) as stored; a slots run
gives one per model."""

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``: total 0 for a phase of unknown length."""

Breakdown = tuple[str, str, Callable[[Metrics], Mapping[str, Any]]]
"""A table of one metric by a dimension (field, topic, turn) beside the headline metrics:
(title, row label, how to read it from a column's metrics)."""

Write = Callable[["RunRecorder"], tuple[Metrics, Metrics]]
"""Stores a run's items with the recorder it is given (``runs`` opened it and finishes it) and
returns the run's (metrics, intervals)."""


@runtime_checkable
class System(Protocol):
    """One kind of evaluation. ``name`` is the CLI group and the store's ``system`` column;
    ``item`` names its unit (record, session, turn: latency is per item); ``headline`` lists its metrics in its report's order; ``export_columns`` are the columns
    ``runs export`` adds for its items after the common ones: (name, JSON path in the stored
    item, DuckDB type of the Parquet export). Optional: ``headline_metric``, the one metric
    the runs list shows and sorts by (default the first of ``headline``), and ``usage_metrics``,
    the metrics holding the input tokens, output tokens and cost of given predictions."""

    name: str
    title: str
    item: str
    inputs: tuple[tuple[str, str], ...]
    """Its input files: (role, what it is); a role ending in ``:NAME`` is given once per model
    (``pred:NAME``). The CLI's ``fieldcheck score`` and ``POST /api/score/{system}`` take them
    by these roles."""
    headline: tuple[str, ...]
    breakdowns: tuple[Breakdown, ...]
    export_columns: tuple[tuple[str, str, str], ...]
    pairing: Pairing
    """How its items pair across runs, what is right and compared, and the per-item statistics
    of the headline metric whose paired difference ``runs compare`` tests."""
    dataset_inputs: tuple[str, ...]
    """The input roles that hold the dataset (never a model's outputs): the runs list names the
    first a run has (else the run's first input); runs whose files of these roles differ
    (sha256) are compared with a warning, unless ``pairing.truth`` reads it from the items."""
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
        """The columns of its run page's item table after the key, read from the stored items
        (``store.item_value``): the table sorts by them, filters by those marked ``filter``."""
        ...

    @property
    def item_tag(self) -> str | None:
        """What its items' tags are called (a record's ``field``, a session's ``topic``): the
        item table's tag filter; None where its items have none."""
        ...

    def export_row(self, result: Mapping[str, Any]) -> list[Any]:
        """The values of ``export_columns`` for one stored item (a CSV row)."""
        ...

    def item_columns(self, item: Mapping[str, Any]) -> ItemColumns:
        """The indexed columns (key, failed, model, turn, error type, tags) of one of its
        items as the store keeps it."""
        ...

    def related_keys(self, item: Mapping[str, Any]) -> Sequence[str]:
        """The keys of the run's other items that ``item``'s story shows beside it (numeric:
        the conversation's earlier turns), else ()."""
        ...

    def item_story(
        self,
        item: Mapping[str, Any],
        settings: Metrics,
        related: Mapping[str, Mapping[str, Any]],
    ) -> list[dict[str, Any]]:
        """The story of one stored item (issue 28, "An item"): its sections, each ``{"id",
        "title", "blocks"}``, a block being ``{"kind": "values", "rows": [[label, value]]}``,
        ``{"kind": "table", "columns", "rows", "tones"}`` or ``{"kind": "text"|"code",
        "label", "text"}`` (JSON, unrounded: one template and the CLI render any system's).
        ``item`` is the stored item (``StoredItem.public_dict``), ``settings`` its run's,
        ``related`` the items of ``related_keys`` found, by key. Its model call is told apart
        (``runs.item_story``)."""
        ...

    # ------------------------------------------------------------------ scoring (the pipeline)

    def prepare(
        self,
        inputs: Sequence[tuple[str, Path]],
        settings: Metrics,
        *,
        beside: Path,
        progress: Progress | None,
        extras: Mapping[str, Any],
    ) -> AbstractContextManager[Any]:
        """Read and check ``inputs`` (by role) and ``settings`` (its stored settings, JSON)
        before anything is written: ``UsageProblem`` naming the option or input otherwise. The
        context holds what ``score`` reads; scratch files it made (``beside`` the run's
        destination) are gone when it exits. ``extras`` holds ``store`` (whether the store is
        used), ``warn`` and ``note`` (the caller's lines) and what a model run passes on. What it
        holds may say ``settings`` (those given, merged with the configuration saved in the
        store: what the run stores) and ``store`` (False: the store could not be read)."""
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
        """Score what ``prepare`` read, write its output files into ``folder`` and its items
        to ``recorder`` (None: not stored); the metrics, intervals and signature the store
        keeps come back in the ``Scored``. ``executor`` runs its chunk scoring (None: the
        system's choice for the input's size)."""
        ...


@runtime_checkable
class Rescores(Protocol):
    """A system whose stored runs ``runs rescore`` scores again (optional: a system without
    ``rescore`` says "X runs cannot be re-scored")."""

    def rescore(
        self, items: Iterable[Mapping[str, Any]], settings: Metrics, options: Metrics, *, run: str
    ) -> tuple[Metrics, Any, Write]:
        """The child run of stored run ``run``: ``items`` its items' results (all read before
        this returns), ``settings`` its stored settings, ``options`` those given anew
        (``strategies``, ``weights``, ``thresholds``, ``tp``, ``threshold``, ``bootstrap``,
        ``seed``, ``matchers``: only those not None). Returns the child's settings, signature
        and ``Write``; InputError for an option it does not take or items it cannot score."""
        ...


@runtime_checkable
class Imports(Protocol):
    """A system whose finished output folders ``runs import`` stores (optional: a system
    without ``import_folder`` says "X runs cannot be imported")."""

    def import_folder(
        self, folder: Path, inputs: Files, *, model: str | None, settings: Metrics
    ) -> tuple[str, Files, Metrics, Any, Write]:
        """Its folder ``folder`` read back: ``inputs`` the files it was scored from by role
        (given, or named by its run.json and unchanged), ``model`` and ``settings`` those
        given. Returns the run's model, inputs, settings, signature and ``Write``."""
        ...


@runtime_checkable
class Runs(Protocol):
    """A system whose models the runner runs (optional: ``core.run`` refuses a system without
    ``run_model``): what a model is asked and how its replies become the files it scores.
    ``together``: its models are scored into one run and one folder (slots' paired tests),
    else each into a run of its own, in ``out/<model>/`` (json always, numeric when several)."""

    run_inputs: tuple[tuple[str, str], ...]
    """The inputs a model run reads: (role, what it is)."""
    together: bool
    folder_per_model: bool

    def read_task(self, inputs: Files, settings: Metrics, extras: Mapping[str, Any]) -> Any:
        """``inputs`` (by role) and ``settings`` read and checked before the folder is opened
        and any model called (``UsageProblem`` naming the role); ``extras`` as for ``prepare``."""
        ...

    async def run_model(
        self, task: Any, runner: Any, spec: Any, *, console: Any, show_progress: bool
    ) -> Any:
        """Model ``spec`` asked every item of ``task`` through ``runner`` (its unfinished run
        resumed); what comes back has ``run_id``, ``item_calls`` (the items' calls by scored
        item key) and ``failures`` (items whose call or reply failed: exit status 3)."""
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

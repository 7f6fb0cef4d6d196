"""Numeric QA as a system of the registry (``fieldcheck.core.System``): how its two inputs are
read and checked, how they are scored into a run folder (``score_to_folder``), and what the
store keeps (intervals overall and by turn). Spec: numeric-qa-evaluation.md."""

from __future__ import annotations

import csv
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fieldcheck._util.errors import MAX_SEED, InputError, UsageProblem, whole_number
from fieldcheck._util.executor import Executor, LocalPool, finish
from fieldcheck._util.iters import chunked
from fieldcheck._util.jsonio import loads
from fieldcheck._util.paths import file_bytes
from fieldcheck._util.sniff import check_input_file, likely_cause
from fieldcheck.numeric._agent import NumericRuns
from fieldcheck.numeric._loaders import LoadResult, load_convfinqa
from fieldcheck.numeric._predictions import (
    PredictionsResult,
    index_predictions,
    load_predictions,
    warn_unknown_keys,
)
from fieldcheck.numeric._report import HEADLINE
from fieldcheck.numeric._story import earlier_keys, numeric_story, table_rows
from fieldcheck.numeric._stream import (
    OUTPUT_FILES,
    POOL_WORKERS,
    TEXT_COLUMNS,
    numeric_columns,
    score_to_folder,
    stored_cell,
)
from fieldcheck.reports import Problems, RunFolder, Scored, Views, Write
from fieldcheck.store import ERROR, FAILED, ItemColumn, Pairing, item_value

if TYPE_CHECKING:
    from fieldcheck.store import RunRecorder


log = logging.getLogger(__name__)

EARLY_POOL_BYTES = 4 << 20
"""Predictions files of at least this size (about 20,000 lines) are read and scored by the scoring
pool, started before the inputs are read; smaller ones by ``score_to_folder``'s rule."""

GATED = tuple(key for key, _ in HEADLINE if key != "avg_operations_per_turn")
"""The statistics ``--fail-under`` gates (higher is better), named as in statistics.json."""


def stored_metrics(statistics: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metrics, intervals) the store keeps of a numeric run, from its statistics.json object."""
    skip = ("bootstrap_95_ci", "bootstrap_95_ci_by_turn_number", "signature", "signature_settings")
    metrics = {k: v for k, v in statistics.items() if k not in skip}
    intervals = {
        "overall": statistics.get("bootstrap_95_ci") or {},
        "by_turn": statistics.get("bootstrap_95_ci_by_turn_number") or {},
    }
    return metrics, intervals


class NumericSettings(BaseModel):
    """A numeric run's stored settings: its options by name, as ``runs show`` lists them."""

    model_config = ConfigDict(extra="forbid", strict=True)

    split: str | None = None
    sample_size: int | None = Field(None, ge=1)
    seed: int = 0
    price_in: float | None = Field(None, ge=0)
    price_out: float | None = Field(None, ge=0)
    bootstrap: int = Field(1000, ge=0)


def check_settings(settings: Mapping[str, Any]) -> NumericSettings:
    """The stored settings, checked (``sample_size: "all"``, a signature's, is none): a usage
    problem names the option (prices: both or none), in the CLI's words (``must be ...``), an
    unknown one with the list of the settings taken."""
    unknown = sorted(set(settings) - set(NumericSettings.model_fields))
    if unknown:
        known = ", ".join(NumericSettings.model_fields)
        raise UsageProblem(
            f"numeric takes the settings {known} (got {', '.join(unknown)})", unknown[0]
        )
    if settings.get("sample_size") == "all":  # as a signature shows no sample: passed back
        settings = {**settings, "sample_size": None}
    for name, top in (("bootstrap", None), ("seed", MAX_SEED)):  # as every system says them
        if name in settings:
            whole_number(settings[name], f"--{name}", top)
    try:
        found = NumericSettings.model_validate(dict(settings))
    except ValidationError as exc:
        first = exc.errors()[0]
        option = "--" + "".join(str(p) for p in first["loc"][:1]).replace("_", "-")
        reason = first["msg"].replace("Input should be", "must be")
        raise UsageProblem(f"{reason} (got {first.get('input')!r})", option) from None
    if (found.price_in is None) != (found.price_out is None):
        raise UsageProblem("give --price-in and --price-out together", "--price-in/--price-out")
    return found


class Read(NamedTuple):
    """Both inputs and the settings, read and checked."""

    data: LoadResult
    predictions: PredictionsResult
    settings: NumericSettings
    pool: LocalPool | None = None


def read_data(
    data: Path,
    *,
    split: str | None,
    sample_size: int | None,
    seed: int,
    others: dict[str, str] | None = None,
) -> LoadResult:
    """The ConvFinQA file; one that cannot be read is a usage problem naming ``--data`` and
    what the file looks like instead (``others``: the command's other input options)."""
    try:
        return load_convfinqa(data, split=split, sample_size=sample_size, seed=seed)
    except InputError as exc:
        cause = likely_cause(data, "convfinqa", others)
        raise UsageProblem(exc.one_line() + cause, "--data") from None


def whole_split(
    settings: NumericSettings, loaded: LoadResult, note: Callable[[str], None] | None
) -> NumericSettings:
    """``settings`` as a run without ``--sample-size`` has them when the sample takes every
    conversation of the split, said by ``note`` (``sample_size: 1000`` of 421 conversations made
    the same run another setting to ``runs compare``: a tester's finding)."""
    size = settings.sample_size
    if size is None or size < loaded.total_records:
        return settings
    if note is not None:
        note(
            f"--sample-size {size}: the {loaded.split} split has {loaded.total_records:,} "
            "conversations; all are scored, as without --sample-size"
        )
    return settings.model_copy(update={"sample_size": None})


def check_data(data: Path, loaded: LoadResult, others: dict[str, str] | None = None) -> list[str]:
    """The ids of the conversations read; none (an empty file or split, every record bad) is a
    usage problem naming ``--data``, before any model is called or output written."""
    order = loaded.conversation_ids()  # from the index: no second read of the dataset
    if not order and not loaded.errors:
        raise UsageProblem(f"{data}: no conversations (the dataset is empty)", "--data")
    check_input_file(  # every record bad: the same rule as for any input file
        data,
        records=len(order),
        errors=loaded.errors,
        option="--data",
        expected="convfinqa",
        others=others,
    )
    return order


def read_inputs(
    data: Path,
    predictions: Path,
    settings: NumericSettings,
    loaded: LoadResult | None = None,
    pool: LocalPool | None = None,
    note: Callable[[str], None] | None = None,
) -> Read:
    """Both input files, before any output is touched (``loaded``: the data a model run read;
    ``pool`` reads the predictions meanwhile). A file that cannot be read or has no valid line,
    or predictions of no conversation of the data, is a usage problem naming its option."""
    split, size, seed = settings.split, settings.sample_size, settings.seed
    others = {"--predictions": "numeric-predictions"}
    if pool is not None:
        pool.submit(index_predictions, predictions)
    loaded = loaded or read_data(data, split=split, sample_size=size, seed=seed, others=others)
    settings = whole_split(settings, loaded, note)
    size = settings.sample_size
    try:
        if pool is not None:
            (preds,) = finish(pool)
            warn_unknown_keys(preds)
        else:
            preds = load_predictions(predictions)
    except InputError as exc:
        raise UsageProblem(exc.one_line(), "--predictions") from None
    order = check_data(data, loaded, others)
    check_input_file(
        predictions,
        records=len(preds.predictions),
        errors=preds.errors,
        option="--predictions",
        expected="numeric-predictions",
        others={"--data": "convfinqa"},
    )
    ids = set(order)
    if loaded.conversations and not any(cid in ids for cid, _ in preds.predictions):
        example = next(iter(preds.predictions))[0]
        if size is not None:  # the predictions may well be of conversations not drawn
            raise UsageProblem(
                f"{predictions}: no prediction matches the {len(order):,} conversation(s) "
                f"--sample-size {size} --seed {seed} drew from {data} (first "
                f"prediction: {example!r}; first drawn: {order[0]!r}): give the "
                "--sample-size and --seed the predictions were made with, or neither",
                "--predictions",
            )
        raise UsageProblem(
            f"{predictions}: no prediction matches a conversation of {data} (first "
            f"prediction: {example!r}; first conversation: {order[0]!r}): "
            "are --data and --predictions for the same dataset and split?",
            "--predictions",
        )
    return Read(loaded, preds, settings, pool)


def _by_turn(key: str) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """A ``runs compare`` breakdown: statistics.json's table ``key`` by turn."""
    return lambda metrics: dict(metrics.get(key) or {})


def _numbers_then_text(path: str) -> str:
    """An answer's sort value: a number by value; a text one (``yes``) after every number, as the
    largest double (JSON has no infinity: the bundle sorts these values too); empty: null, last."""
    text, number = item_value(path), item_value(path, "DOUBLE")
    return f"coalesce({number}, CASE WHEN {text} <> '' THEN 1.7976931348623157e308 END)"


class NumericSystem(NumericRuns, Views):
    name = "numeric"
    summary_file = "statistics.json"
    row_file: str | None = "turns.csv"
    title = "Numeric QA"
    item = "turn"
    inputs = (
        ("data", "ConvFinQA file: the derived {'train','dev'} format or the original list"),
        ("predictions", "predictions JSONL, one line per (conversation_id, turn)"),
    )
    headline = tuple(key for key, _ in HEADLINE)
    headline_metric = "numerical_match_accuracy"  # the runs list's (core.headline_metric)
    problems_file = "input_errors.csv"
    gated = GATED  # what --fail-under takes: not the operations per turn, no better or worse
    breakdowns = (
        ("Accuracy by turn", "turn", _by_turn("accuracy_by_turn_number")),
        ("Operations by turn", "turn", _by_turn("avg_operations_by_turn")),
    )
    export_columns = (
        ("conversation_id", '$."conversation_id"', "VARCHAR"),
        ("turn_idx", '$."turn_idx"', "BIGINT"),
        ("general_match", '$."general_match"', "BOOLEAN"),
        ("numerical_match", '$."numerical_match"', "BOOLEAN"),
        ("failure_mode", '$."failure_mode"', "VARCHAR"),
    )
    item_table = (
        ItemColumn("turn", "turn", "turn", "count", filter=True),
        ItemColumn("question", "question", item_value('$."question"'), "prose"),
        *(
            ItemColumn(name, name, item_value(path), order=_numbers_then_text(path))
            for name, path in (("expected", '$."expected_answer"'), ("parsed", '$."parsed_answer"'))
        ),
        ItemColumn(
            "numerical_match",
            "numerical match",
            item_value('$."numerical_match"', "BOOLEAN"),
            "flag",
        ),
        ItemColumn("failure_mode", "failure mode", item_value('$."failure_mode"'), filter=True),
        FAILED,  # not a numerical match, or not scored (no gold, a call error)
        ERROR,
    )
    pairing = Pairing(  # a turn's answer as read (the reply's text when none was read)
        value="coalesce(json_extract_string(result, '$.parsed_answer'), "
        "json_extract_string(result, '$.predicted_answer'))",
        metric="numerical_match_accuracy",
        rows=("json_extract(result, '$.numerical_match')", "1.0"),
    )
    dataset_inputs = ("data",)
    usage_metrics = ("total_input_tokens", "total_output_tokens", "total_cost_usd")
    model_settings = ("model", "models", "predictions")
    # a signature's values that mean the same: the runner records "no sample" as None, the
    # scored run as "all" (and "first" for no sample seed)
    same_settings: Mapping[str, Mapping[Any, Any]] = {
        "sample_size": {None: "all"},
        "sample_seed": {None: "first"},
    }

    def interval(self, intervals: Mapping[str, Any], name: str) -> Any:
        return (intervals.get("overall") or {}).get(name)

    item_columns = staticmethod(numeric_columns)
    related_keys = staticmethod(earlier_keys)

    item_story = staticmethod(numeric_story)

    @contextmanager
    def prepare(
        self,
        inputs: Sequence[tuple[str, Path]],
        settings: Mapping[str, Any],
        *,
        beside: Path,
        progress: Any,
        extras: Mapping[str, Any],
    ) -> Iterator[Read]:
        """Both inputs read and checked (``extras["data"]``: the dataset a model run read)."""
        given = dict(inputs)
        missing = [role for role, _ in self.inputs if role not in given]
        if missing:
            raise UsageProblem(f"missing input(s): {', '.join(missing)}")
        checked = check_settings(settings)
        pool = None
        if file_bytes([given["predictions"]]) >= EARLY_POOL_BYTES:
            try:  # its processes start, and read the predictions, while the data is read
                pool = LocalPool(POOL_WORKERS, in_flight=8, warm=(score_to_folder.__module__,))
            except OSError as exc:
                log.warning("the scoring processes could not start (%s); reading here", exc)
        with pool if pool is not None else nullcontext():  # killed on an error or Ctrl-C
            paths = Path(given["data"]), Path(given["predictions"])
            yield read_inputs(*paths, checked, extras.get("data"), pool, extras.get("note"))

    def score(
        self,
        read: Read,
        folder: RunFolder,
        settings: Mapping[str, Any],
        *,
        recorder: RunRecorder | None,
        progress: Any,
        executor: Executor | None = None,
    ) -> Scored:
        """Every output file of the spec into ``folder``, each turn to ``recorder``, chunks scored
        by ``score_chunk`` through ``executor`` (``None``: ``score_to_folder`` chooses)."""
        found = read.settings
        total = len(read.data.conversations)
        try:
            result = score_to_folder(
                read.data,
                read.predictions,
                folder,
                price_in=found.price_in,
                price_out=found.price_out,
                bootstrap=found.bootstrap,
                seed=found.seed,
                sample_size=found.sample_size,
                sample_seed=found.seed if found.sample_size is not None else None,
                progress=None if progress is None else lambda n: progress("scoring", n, total),
                recorder=recorder,
                executor=executor or read.pool,
            )
        except BaseException:  # stopped before the folder is said to be left (Ctrl-C, a full disk)
            if executor is None and read.pool is not None:
                read.pool.close(kill=True)
            raise
        stats = result.statistics
        metrics, intervals = stored_metrics(stats)
        return Scored(
            result=result,
            files={n: folder / n for n in OUTPUT_FILES if (folder / n).exists()},
            metrics=metrics,
            intervals=intervals,
            signature=result.signature,
            failed=bool(
                not stats["num_conversations"]
                or result.input_errors
                or stats["num_turns_not_scored_call_errors"]
            ),
            gate={"": {name: stats.get(name) for name in GATED}},
            summary={**stats, "complete": True},
            problems=Problems(result.input_errors, "input_errors.csv"),
        )

    def import_folder(
        self, folder: Path, inputs: Sequence[tuple[str, str | Path]], *, model: str | None
    ) -> tuple[str, Sequence[tuple[str, str | Path]], dict[str, Any], Any, Write]:
        """A ``numeric score`` folder: statistics.json, and each row of turns.csv with its plan,
        validator log and (a first turn) table from its trace, as scoring stores them."""
        statistics = loads((folder / "statistics.json").read_bytes())

        def write(recorder: RunRecorder) -> tuple[Any, Any]:
            traces = _Traces(folder)
            path = folder / "turns.csv"
            with path.open(newline="", encoding="utf-8") as handle:
                reader = csv.DictReader(handle)
                rows = (
                    {
                        **{k: stored_cell(v, k in TEXT_COLUMNS) for k, v in row.items()},
                        **traces.story(row),
                    }
                    for row in reader
                )
                read = 0
                for chunk in chunked(rows, 1000):
                    read += len(chunk)
                    recorder.add_items(chunk, self.item_columns)
            turns = statistics.get("num_turns")
            if isinstance(turns, int) and read != turns:  # cut at a row's end, or rows added
                raise InputError(
                    f"{read} turns, and its statistics.json counts {turns}: not the turns it "
                    "was scored from (half written?); nothing was stored",
                    file=path,
                )
            return stored_metrics(statistics)

        # the Signature as scoring stores it (its text would make every setting a string)
        signature = statistics.get("signature_settings") or statistics.get("signature") or {}
        return model or folder.name, inputs, {}, signature, write


class _Traces:
    """A folder's conversation traces read one at a time, in summary.csv's order (turns.csv's):
    what a turn's item keeps of its trace (``_stream.stored_row``'s ``story``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        path = folder / "summary.csv"
        self.ids: dict[str, str] = {}
        if path.is_file():
            with path.open(newline="", encoding="utf-8") as handle:
                self.ids = {r["conversation_id"]: r["trace_id"] for r in csv.DictReader(handle)}
        self.held: tuple[str | None, Any] = (None, None)

    def _trace(self, conversation: str) -> Any:
        if self.held[0] != conversation:
            name = self.ids.get(conversation, "")
            path = self.folder / "traces" / f"{name}.json"
            if not path.is_file() and name.startswith("'"):  # a neutralised cell
                path = path.with_name(f"{name[1:]}.json")
            self.held = (conversation, loads(path.read_bytes()) if path.is_file() else None)
        return self.held[1]

    def story(self, row: Mapping[str, str]) -> dict[str, Any]:
        trace = self._trace(row["conversation_id"])
        turn = int(row["turn_idx"])
        if not isinstance(trace, dict) or turn >= len(trace.get("turns") or ()):
            return {}
        told = trace["turns"][turn]
        story = {"plan": told.get("plan"), "validation": told.get("validation")}
        if not turn:
            story["table"] = table_rows((trace.get("document") or {}).get("table"))
        return story


SYSTEM = NumericSystem()

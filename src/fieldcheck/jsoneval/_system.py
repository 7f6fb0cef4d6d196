"""JSON evaluation as a system of the registry (``fieldcheck.core.System``): what the runs
list, ``runs compare``, ``runs export`` and the pages read from its stored runs."""

from __future__ import annotations

import itertools
import marshal
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fieldcheck._util.errors import MAX_SEED, InputError, UsageProblem, whole_number
from fieldcheck._util.executor import Executor, few_collections
from fieldcheck._util.iters import chunked
from fieldcheck._util.jsonio import loads
from fieldcheck._util.signature import Signature
from fieldcheck._util.sniff import check_input_file
from fieldcheck.jsoneval._config import EvalConfig
from fieldcheck.jsoneval._extract import JsonRuns
from fieldcheck.jsoneval._models import BatchRecord, RecordError, duplicate_id
from fieldcheck.jsoneval._story import json_story
from fieldcheck.jsoneval._stream import (
    CHUNK_LINES,
    SCORES,
    BatchReader,
    Failed,
    Item,
    Job,
    batch_pool,
    run_stream,
)
from fieldcheck.metrics import RqsWeights, wildcard_path
from fieldcheck.reports import Problems, RunFolder, Scored, Views, Write
from fieldcheck.store import ERROR, FAILED, ItemColumn, ItemColumns, Pairing, add_tag, item_value

if TYPE_CHECKING:
    from fieldcheck.matchers import Matcher
    from fieldcheck.store import RunRecorder


def _stored(summary: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metrics, intervals) the store keeps of a batch, from its summary.json object."""
    metrics = {k: v for k, v in summary.items() if k not in ("ci", "signature")}
    return metrics, dict(summary.get("ci") or {})


def _jsonl(path: Path, *, given: bool = False) -> Iterator[dict[str, Any]]:
    """The objects of a JSONL file of fieldcheck's (none when it is not there), a line that is
    not JSON an InputError naming the file and line (a half-written or edited file: it was a
    traceback); ``given``: a user's batch, whose lines that are not JSON are skipped, as ``json
    batch`` skipped them (its errors.jsonl lists them)."""
    if path.is_file():
        with path.open("rb") as handle:
            for number, line in enumerate(handle, 1):
                try:
                    value = loads(line) if line.strip() else None
                except ValueError:
                    if given:
                        continue
                    reason = "not JSON (a half-written or edited file?); nothing was stored"
                    raise InputError(reason, file=path, line=number) from None
                if isinstance(value, dict):
                    yield value


def _field_match_rates(metrics: Mapping[str, Any]) -> dict[str, Any]:
    fields = metrics.get("fields") or {}
    return {name: (s or {}).get("match_rate") for name, s in fields.items()}


_HOLD_LINES = 8_192
"""Lines ``_checked_chunks`` holds while looking for the first valid record; past them the chunks
read are let go and, once a record is found, the file is read again from its start (issue 26:
a million bad lines first were all held). A file that is not a regular one (a pipe) is held."""


def _checked_chunks(reader: BatchReader) -> Iterator[Sequence[Item | Failed]]:
    """The batch's chunks once it is read up to its first valid record and checked
    (``check_input_file``): a file with none is refused before the output folder is touched."""
    chunks = reader.chunks()
    first: list[Sequence[Item | Failed]] = []
    held: int | None = 0
    again = reader.path.is_file()  # a pipe cannot be read again: all is held
    try:  # a bad line's objects: the collector's passes over the heap were a fifth of its cost
        with few_collections():
            for chunk in chunks:
                if held is not None:
                    first.append(chunk)
                    held += len(chunk)
                    if held > _HOLD_LINES and again:
                        first, held = [], None
                if reader.records:
                    break
    except InputError as exc:
        raise UsageProblem(str(exc), "batch") from None
    check_input_file(
        reader.path,
        records=reader.records,
        errors=[reader.first_error] if reader.first_error is not None else [],
        problems=reader.failures,
        option="batch",
        expected="json-batch",
    )
    if held is None:  # too many held: read again
        chunks.close()
        reader.restart()
        return reader.chunks()
    return itertools.chain(first, chunks)


@dataclass
class _Read:
    """A batch ready to score: its reader and chunks, the configuration (given merged with the
    saved one) and what the run stores as its settings."""

    path: Path
    reader: BatchReader
    chunks: Iterable[Sequence[Item | Failed]]
    config: EvalConfig
    settings: dict[str, Any]
    store: bool = True
    extras: Mapping[str, Any] = field(default_factory=dict)
    pool: Executor | None = None  # ``batch_pool``'s: started as the batch is read


class JsonSystem(JsonRuns, Views):
    name = "json"
    summary_file = "summary.json"
    row_file: str | None = "records.jsonl"
    title = "JSON evaluation"
    item = "record"
    inputs = (
        (
            "batch",
            'JSONL: one {"id", "ground_truth": {...}, "output": ..., "safety_score"?} per line',
        ),
    )
    headline = SCORES
    headline_metric = "rqs"  # the runs list's (core.headline_metric)
    lower_is_better = ("hallucination",)
    breakdowns = (("Per-field match rate", "field", _field_match_rates),)
    export_columns = (
        *((name, f'$."{name}"', "DOUBLE") for name in SCORES),
        ("output_kind", '$."output_kind"', "VARCHAR"),
    )
    item_tag = "field"
    item_table = (
        FAILED,
        ItemColumn("rqs", "RQS", item_value('$."rqs"', "DOUBLE"), "number"),
        ItemColumn("accuracy", "accuracy", item_value('$."accuracy"', "DOUBLE"), "number"),
        ItemColumn(
            "completeness", "completeness", item_value('$."completeness"', "DOUBLE"), "number"
        ),
        # the fields it failed on (``item_columns``' failed tags), sorted by how many
        ItemColumn(
            "fields_wrong",
            "fields wrong",
            "NULLIF(array_to_string(list_sort(failed_tags), ', '), '')",
            order="len(failed_tags)",
        ),
        ERROR,
    )
    pairing = Pairing(  # a record's output compared; its RQS is the mean paired
        value="json_extract(result, '$.output')",
        metric="rqs",
        rows=("json_extract(result, '$.rqs')", "1.0"),
        truth="json_extract(result, '$.ground_truth')",  # a batch's file holds outputs too
    )
    dataset_inputs = ("documents",)  # a batch file holds the outputs too: the runs list names it
    scores_replies_in_pool = True  # core.run: a large run's chunks go to a pool warmed meanwhile

    def estimate(self, metrics: Mapping[str, Any], name: str) -> Any:
        return (metrics.get("means") or {}).get(name)

    item_story = staticmethod(json_story)

    def item_columns(self, item: Mapping[str, Any]) -> ItemColumns:
        """A ``records.jsonl`` line (plus the raw ``ground_truth`` and ``output``), or an
        ``errors.jsonl`` line under ``error`` (not scored). Failed: not an object, or a field
        scored below 1, missing, hallucinated or extra; tagged with those fields only, ``[n]``
        written ``[*]`` as fields.csv names them."""
        key = str(item.get("id", item.get("key", "")))
        error = item.get("error")
        if error is not None:
            reason = error.get("reason") if isinstance(error, Mapping) else None
            return ItemColumns(key, None, error_type=str(reason or "error"))
        tags: dict[str, bool] = {}
        for name, result in (item.get("fields") or {}).items():
            score = result.get("score") if isinstance(result, Mapping) else None
            if score is not None and score < 1:  # None: IGNORE
                add_tag(tags, wildcard_path(name), True)
        buckets = item.get("buckets") or {}
        for bucket in ("aio_missing_or_null", "gt_null_aio_has_value", "extra_keys"):
            for name in buckets.get(bucket) or ():
                add_tag(tags, wildcard_path(str(name)), True)
        failed = bool(tags) or item.get("output_kind", "object") != "object"
        return ItemColumns(key, failed, tags=tags)

    # ------------------------------------------------------------------ scoring

    @contextmanager
    def prepare(
        self,
        inputs: Sequence[tuple[str, Path]],
        settings: Mapping[str, Any],
        *,
        beside: Path,
        progress: Callable[[str, int, int], None] | None,
        extras: Mapping[str, Any],
    ) -> Iterator[_Read]:
        """A batch (role ``batch``; ``outputs`` for the file a model run wrote itself) read up
        to its first valid record, and the configuration merged with the saved one."""
        from fieldcheck.jsoneval._saved import resolve_config

        roles = dict(inputs)
        unknown = sorted(set(roles) - {"batch", "outputs", "documents"})
        if unknown or not ({"batch", "outputs"} & set(roles)):
            raise UsageProblem(
                f"json scores one input, 'batch' (got {', '.join(roles) or 'none'})", "batch"
            )
        unknown = sorted(set(settings) - {"config", "bootstrap", "seed"})
        if unknown:
            raise UsageProblem(
                f"json takes the settings config, bootstrap and seed (got {', '.join(unknown)})",
                unknown[0],
            )
        bootstrap = whole_number(settings.get("bootstrap", 1000), "--bootstrap")
        seed = whole_number(settings.get("seed", 0), "--seed", MAX_SEED)
        given = settings.get("config") or {}
        if not isinstance(given, Mapping):
            raise UsageProblem(f"must be a JSON object (got {given!r})", "config")
        given = {**given, **(extras.get("matcher_config") or {})}  # the API server's matcher
        config, store = resolve_config(
            given,
            store=extras.get("store") or False,
            warn=extras.get("warn"),
            note=extras.get("note"),
        )
        stored = {"config": config.model_dump(mode="json"), "bootstrap": bootstrap, "seed": seed}
        path = Path(roles.get("batch") or roles["outputs"])
        reader = BatchReader(path, chunk_lines=int(extras.get("chunk_lines", CHUNK_LINES)))
        # a model run's outputs (written by fieldcheck itself) need no check
        chunks = _checked_chunks(reader) if "batch" in roles else reader.chunks()
        pool = batch_pool(path) if "batch" in roles else None
        with pool if pool is not None else nullcontext():  # killed on an error or Ctrl-C
            yield _Read(path, reader, chunks, config, stored, store, extras, pool)

    def score(
        self,
        read: _Read,
        folder: RunFolder,
        settings: Mapping[str, Any],
        *,
        recorder: RunRecorder | None,
        progress: Callable[[str, int, int], None] | None,
        executor: Any = None,
    ) -> Scored:
        """``json batch``: every record scored in chunks on ``executor`` (None: in this process:
        a pool was no faster on a busy 2-core machine), its files written as it goes."""
        from fieldcheck.jsoneval._io import stream_batch_outputs

        reader = read.reader
        reader.unparsed = True

        def chunks() -> Iterator[Sequence[Item | Failed]]:
            for chunk in read.chunks:
                yield chunk
                if reader.size and progress is not None:
                    progress("read %", reader.bytes_read * 100 // reader.size, 100)

        batch = stream_batch_outputs(
            folder,
            chunks(),
            read.config,
            matchers=read.extras.get("matchers") or _judges(read),
            prior_errors=read.extras.get("prior_errors", ()),
            source=str(read.path),
            progress=progress,
            bootstrap=settings["bootstrap"],
            seed=settings["seed"],
            recorder=recorder,
            executor=executor or read.pool,
        )
        summary = batch.summary
        data = summary.to_json()
        metrics, intervals = _stored(data)
        return Scored(
            result=summary,
            files=dict(batch.paths),
            metrics=metrics,
            intervals=intervals,
            signature=data.get("signature"),
            failed=bool(summary.not_scored),
            gate={"": dict(summary.means)},
            summary={**data, "complete": True},
            problems=Problems(summary.errors, "errors", total=summary.not_scored),
        )

    # ------------------------------------------------------------------ stored runs

    def rescore(
        self,
        items: Iterable[Mapping[str, Any]],
        settings: Mapping[str, Any],
        options: Mapping[str, Any],
        *,
        run: str,
        signature: Mapping[str, Any],
    ) -> tuple[dict[str, Any], Signature, Write]:
        """Its records' ground truth and output scored again under the run's configuration with
        ``strategies``, ``weights`` and ``thresholds`` replaced, streamed in chunks as ``json
        batch`` scores (the records checked first, kept in a temporary file, not in memory); its
        errors counted again, as the parent did."""
        from fieldcheck.jsoneval._evaluate import (
            UNSCORED_NESTED,
            build_matchers,
            make_signature,
            warn_unused_strategies,
        )

        if "tp" in options or "threshold" in options:
            raise InputError("--tp and --threshold re-score slot runs, not JSON runs")
        config_data = dict(settings.get("config") or {})
        if "strategies" in options:
            config_data["strategies"] = dict(options["strategies"])
        if "weights" in options:
            weights = options["weights"]
            config_data["weights"] = (
                weights.model_dump() if isinstance(weights, RqsWeights) else dict(weights)
            )
        config_data.update(options.get("thresholds") or {})
        config_data.update(options.get("matcher_config") or {})  # the API server's matcher
        config = EvalConfig.model_validate(config_data)
        boot = int(options.get("bootstrap", settings.get("bootstrap", 1000)))
        seed = int(options.get("seed", settings.get("seed", 0)))
        prior: list[RecordError] = []
        kept = tempfile.TemporaryFile()  # noqa: SIM115 (no name; closed by ``write`` or collected)
        for result in items:
            if "error" in result:
                prior.append(RecordError.model_validate(result["error"]))
            elif "ground_truth" not in result:
                raise InputError(
                    f"run {run} keeps no ground truth and output for record "
                    f"{result.get('id')!r}: import its folder with the batch file to re-score it"
                )
            else:
                r = BatchRecord(
                    id=result["id"],
                    ground_truth=result["ground_truth"],
                    output=result.get("output"),
                    safety_score=result.get("safety_score_given"),
                )
                marshal.dump((r.id, r.ground_truth, r.output, r.safety_score), kept)
        matchers = options.get("matchers") or build_matchers(config)

        def kept_items() -> Iterator[Item | Failed]:
            """The records again, each whose id an earlier one has a duplicate's error."""
            kept.seek(0)
            first: dict[str, int] = {}
            for i in itertools.count():
                try:
                    key, truth, output, safety = marshal.load(kept)
                except EOFError:
                    return
                item = Item(i, key, None, truth, output, safety)
                if item.key in first:
                    error = duplicate_id(first[item.key], file=None, line=i + 1, record=item.key)
                    yield Failed(i, RecordError.of(error), error)
                else:
                    first[item.key] = i + 1
                    yield item

        def write(recorder: RunRecorder) -> tuple[Any, Any]:
            hint = UNSCORED_NESTED.set(
                f" (run {run} was scored without flatten: its nested paths are not fields)"
            )
            with kept:
                try:
                    digest = run_stream(
                        chunked(kept_items(), CHUNK_LINES),
                        Job(config, matchers, store=True),
                        prior=prior,
                        bootstrap=boot,
                        seed=seed,
                        recorder=recorder,
                    )
                    if digest.scored + digest.not_scored > len(prior):
                        warn_unused_strategies(config, digest.unused(config))
                finally:
                    UNSCORED_NESTED.reset(hint)
            return _stored(digest.summary(signed).to_json())

        signed = make_signature(config, matchers, bootstrap=boot, seed=seed)
        stored = {"config": config.model_dump(mode="json"), "bootstrap": boot, "seed": seed}
        return stored, signed, write

    def import_folder(
        self, folder: Path, inputs: Sequence[tuple[str, str | Path]], *, model: str | None
    ) -> tuple[str, list[tuple[str, str | Path]], dict[str, Any], Any, Write]:
        """A ``json batch`` folder (summary.json, records.jsonl, errors.jsonl), its records'
        ground truth and output from the ``batch`` input or the folder's outputs.jsonl (a
        ``json run``), so that it can be re-scored; the configuration from its signature."""
        summary = loads((folder / "summary.json").read_bytes())
        info = loads((folder / "run.json").read_bytes()) if (folder / "run.json").is_file() else {}
        all_inputs = [*inputs]
        if (folder / "outputs.jsonl").is_file():
            all_inputs.append(("outputs", folder / "outputs.jsonl"))
        raw = {
            str(line["id"]): line
            for _, path in all_inputs
            for line in _jsonl(Path(path), given=True)
            if "id" in line and "ground_truth" in line
        }
        first = next(_jsonl(folder / "records.jsonl"), {})  # its strategies: those it scored
        strategies: dict[str, str] = {}
        for name, scored in (first.get("fields") or {}).items():
            strategies.setdefault(wildcard_path(name), scored.get("strategy", "EXACT"))
        signature = summary.get("signature") or {}
        sig = signature.get("settings", {})
        written = info.get("settings")  # what the run was scored with (its run.json)
        stored: dict[str, Any] = {}
        if isinstance(written, Mapping) and isinstance(written.get("config"), Mapping):
            stored = dict(written)
        stored.setdefault(
            "config",
            {
                "strategies": strategies,
                "weights": sig.get("weights") or {},
                "fuzzy_threshold": sig.get("fuzzy_threshold", 0.85),
                "semantic_threshold": sig.get("semantic_threshold", 0.8),
                "flatten": bool(sig.get("flatten", False)),
                "safety_check": sig.get("safety_check", "off"),
            },
        )
        stored.setdefault("bootstrap", sig.get("bootstrap", 1000))
        stored.setdefault("seed", sig.get("seed", 0))

        def items() -> Iterator[dict[str, Any]]:
            for line in _jsonl(folder / "records.jsonl"):
                source = raw.get(str(line.get("id")))
                if source is not None:
                    line["ground_truth"] = source["ground_truth"]
                    line["output"] = source.get("output")
                    if source.get("safety_score") is not None:
                        line["safety_score_given"] = source["safety_score"]
                yield line
            for error in _jsonl(folder / "errors.jsonl"):
                yield {"id": error.get("record") or f"line {error.get('line')}", "error": error}

        def write(recorder: RunRecorder) -> tuple[Any, Any]:
            for chunk in chunked(items(), 1000):
                recorder.add_items(chunk, self.item_columns)
            return _stored(summary)

        name = model or (info.get("model") or {}).get("name") or folder.name
        return name, all_inputs, stored, signature, write


SYSTEM = JsonSystem()


def _judges(read: _Read) -> dict[str, Matcher] | None:
    """The judges of an llm matcher, caching as the command stores (none: the local matchers,
    built where the records are scored)."""
    if read.config.matcher != "llm":
        return None
    from fieldcheck.jsoneval._evaluate import build_matchers
    from fieldcheck.matchers import judge_options

    return build_matchers(read.config, judge=judge_options(read.extras))

"""The slot benchmark as a system of the registry (``fieldcheck.core.System``): a stored run holds
several models; its files are scored bucket by bucket (docs/slots.md "Large files")."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from fieldcheck._util.errors import MAX_SEED, CannotWrite, InputError, UsageProblem, whole_number
from fieldcheck._util.executor import Executor, InProcess, LocalPool, run_map
from fieldcheck._util.jsonio import loads
from fieldcheck._util.models import label_models, models_label
from fieldcheck._util.paths import file_bytes
from fieldcheck._util.sniff import check_input_file
from fieldcheck.metrics import forget_slots
from fieldcheck.reports import Problems, RunFolder, Scored, Views, Write
from fieldcheck.slots._extract import SlotsRuns
from fieldcheck.slots._loaders import JudgeFile, LatencyFile, SlotFile, load_latencies, load_slots
from fieldcheck.slots._report import METRIC_COLUMNS, write_outputs
from fieldcheck.slots._score import (
    _PAIR_F1,
    _PAIR_STREAM,
    ModelInput,
    SlotJob,
    SlotScorer,
    SlotsRun,
    TPMode,
    headers,
    item_columns,
    make_matcher,
    score_chunk,
    score_models,
)
from fieldcheck.slots._story import slots_story
from fieldcheck.slots._stream import (
    BUCKET_BYTES,
    PARALLEL_BYTES,
    Partition,
    ScratchError,
    SideKind,
    SlotInput,
    partitioned,
)
from fieldcheck.store import ERROR, FAILED, ItemColumn, Pairing, item_value

if TYPE_CHECKING:
    from fieldcheck.matchers import Matcher
    from fieldcheck.store import RunRecorder

Progress = Callable[[str, int, int], None]

_COUNTS = ("tp", "fp", "fn")
_TP, _FP, _FN = (item_value(f'$.counts."{name}"', "BIGINT") for name in _COUNTS)
# a session's F1 (spec: 2TP / (2TP + FP + FN)); none for a session of no slot either side
_F1 = f"CASE WHEN 2 * {_TP} + {_FP} + {_FN} > 0 THEN 2.0 * {_TP} / (2 * {_TP} + {_FP} + {_FN}) END"
_OPTIONS = {"gold": "--gold", "pred": "--pred", "latency": "--latency", "judge": "--judge"}
_KINDS = {
    "gold": "slot-lines",
    "pred": "slot-lines",
    "latency": "slot-latency",
    "judge": "slot-judge",
}

log = logging.getLogger("fieldcheck")

POOL_BYTES = 4 * BUCKET_BYTES
"""Inputs from which ``--tp presence`` without a judge model is scored by a pool of two processes
(timings in docs/decisions.md); from ``PARALLEL_BYTES`` on, a pool also reads the last files."""


def _topic_f1(metrics: Mapping[str, Any]) -> dict[str, Any]:
    topics = metrics.get("per_topic") or {}
    return {topic: (s or {}).get("f1") for topic, s in topics.items()}


def slot_metrics(run: SlotsRun) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metrics, intervals) the store keeps of a slot run (``_stored``)."""
    return _stored(run.metrics_json())


def _stored(data: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metrics, intervals) of a metrics.json object: its models without their ``ci``, the
    paired F1 tests; the intervals by model."""
    models = {n: {k: v for k, v in m.items() if k != "ci"} for n, m in data["models"].items()}
    intervals = {n: m.get("ci") for n, m in data["models"].items()}
    return {"models": models, "paired_f1": data.get("paired_f1") or []}, intervals


@dataclass
class SlotsRead:
    """What ``prepare`` read: the files split by session, their headers (path and bad lines), the
    judge model asked when no judge file is given, and the pool of large inputs (or None)."""

    partition: Partition
    gold: SlotFile
    models: list[ModelInput]
    judge: Matcher | None
    pool: Executor | None = None


def _settings(settings: Mapping[str, Any]) -> tuple[TPMode, float | None, int, int]:
    """The stored settings ``{tp, threshold, bootstrap, seed}`` (and ``judge_base_url`` with
    ``judge_model`` when a judge model is asked), checked."""
    known = {"tp", "threshold", "bootstrap", "seed", "judge_base_url", "judge_model"}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise UsageProblem(f"slots takes the settings {', '.join(sorted(known))}", unknown[0])
    tp = settings.get("tp", "presence")
    if tp not in get_args(TPMode):
        allowed = ", ".join(repr(m) for m in get_args(TPMode))
        raise UsageProblem(f"{tp!r} is not one of {allowed}", "--tp")
    threshold = settings.get("threshold")
    number = isinstance(threshold, int | float) and not isinstance(threshold, bool)
    if threshold is not None and not (number and 0.0 <= threshold <= 1.0):
        raise UsageProblem(f"{threshold!r} is not a number in [0, 1]", "--threshold")
    bootstrap = whole_number(settings.get("bootstrap", 1000), "--bootstrap")
    seed = whole_number(settings.get("seed", 0), "--seed", MAX_SEED)
    if bool(settings.get("judge_base_url")) != bool(settings.get("judge_model")):
        raise UsageProblem(
            "give both --judge-base-url and --judge-model, or neither", "--judge-model"
        )
    return tp, threshold, bootstrap, seed


def _by_role(inputs: Sequence[tuple[str, Path]]) -> tuple[Path, dict[str, dict[str, Path]]]:
    """The gold file, and per role (``pred``, ``latency``, ``judge``) the files by model, in
    the order given: one gold, models named once each, side files only of a model given."""
    gold: Path | None = None
    files: dict[str, dict[str, Path]] = {"pred": {}, "latency": {}, "judge": {}}
    names: list[str] = []
    for role, path in inputs:
        kind, _, name = role.partition(":")
        if role == "gold" and gold is None:
            gold = Path(path)
        elif role == "conversations":  # a model run's: recorded as its dataset, not read
            continue
        elif kind == "pred" and name:
            names.append(name)
            files["pred"].setdefault(name, Path(path))
        elif kind in files and name:
            if name in files[kind]:
                raise UsageProblem(f"model {name!r} given twice", _OPTIONS[kind], role=role)
            files[kind][name] = Path(path)
        else:
            roles = ", ".join(role for role, _ in SlotsSystem.inputs)
            raise UsageProblem(f"unexpected input {role!r}: slots takes one of each of {roles}")
    if gold is None or not names:
        raise UsageProblem(
            "slots needs a gold file and at least one pred:NAME",
            "--gold" if gold is None else "--pred",
        )
    if len(set(names)) != len(names):
        raise UsageProblem(f"model names must be unique (got {', '.join(names)})", "--pred")
    for kind in ("latency", "judge"):
        for name in files[kind]:
            if name not in files["pred"]:
                shown = ", ".join(names)
                raise UsageProblem(
                    f"unknown model {name!r}; models given with --pred: {shown}",
                    _OPTIONS[kind],
                    role=f"{kind}:{name}",
                )
    return gold, files


def _checked(
    item: SlotInput, role: str, *, check: bool = True, model: str | None = None
) -> SlotInput:
    """One input file as read: unreadable, or (``check``: the user's files) with no valid line, it
    is a usage problem (``check_input_file``) naming ``role:model`` as given; an empty pred file
    predicted no slot."""
    option, given = _OPTIONS[role], f"{role}:{model}" if model is not None else None
    if item.failure is not None:
        raise UsageProblem(item.failure.one_line(), option, role=given)
    if not check:  # the files of a model run: a dead model's are empty
        return item
    if role == "pred" and not item.records and not item.errors:
        log.warning("%s: the file is empty: this model predicted no slot", item.path)
        return item
    others = {_OPTIONS[r]: k for r, k in _KINDS.items() if r != role and k != _KINDS[role]}
    check_input_file(
        item.path,
        records=item.records,
        errors=item.errors,
        option=option,
        expected=_KINDS[role],
        others=others,
        role=given,
    )
    return item


def _session(key: tuple[str, int] | None) -> str:
    return "none" if key is None else f"{key[0]}/{key[1]}"


def _no_session_shared(pred: SlotInput, gold: SlotInput, name: str) -> str:
    """The usage line of a --pred file of no gold session (another dataset's predictions would
    score as total misses): both files and the first session of each."""
    return (
        f"{pred.path}: no session of model {name!r} is a session of {gold.path} (first "
        f"prediction: {_session(pred.first)}; first gold session: {_session(gold.first)}): are "
        "--gold and --pred for the same users and sessions?"
    )


def check_gold(path: Path, conversations: Path, keys: Sequence[tuple[str, int]]) -> None:
    """``slots run``: the gold file read and checked before any model is called, against the
    sessions of the conversations (``keys``): none of them a gold session is a usage problem;
    gold sessions without a conversation are said (their gold slots count as missed)."""
    try:
        loaded = load_slots(path)
    except InputError as exc:
        raise UsageProblem(exc.one_line(), "--gold") from None
    _checked(SlotInput(path, loaded.records, loaded.errors), "gold")
    asked = set(keys)
    missed = sum(key not in asked for key in loaded.sessions)
    if keys and missed == len(loaded.sessions):
        raise UsageProblem(
            f"{conversations}: no conversation is a session of {path} (first conversation: "
            f"{_session(keys[0])}; first gold session: {_session(next(iter(loaded.sessions)))}): "
            "are --conversations and --gold for the same users and sessions?",
            "conversations",
        )
    if missed:
        log.warning(
            "%s: %d of %d gold session(s) have no conversation in %s: no model is asked about "
            "them, and their gold slots count as missed",
            path,
            missed,
            len(loaded.sessions),
            conversations,
        )


def _read(
    part: Partition,
    files: dict[str, dict[str, Path]],
    not_scored: Mapping[str, Mapping[tuple[str, int], str]],
    *,
    check: bool,
    invalid: Mapping[str, Collection[tuple[str, int]]],
) -> tuple[SlotFile, list[ModelInput]]:
    """Every file the partition read, checked in input order (see ``_checked``), as headers:
    path and bad lines, no sessions (each bucket brings its own)."""
    gold_item, *pred_items = part.inputs
    sides = iter(part.sides)
    gold = _checked(gold_item, "gold")
    models = []
    for name, item in zip(files["pred"], pred_items, strict=True):
        latency = judge = None
        if name in files["latency"]:
            side = _checked(next(sides), "latency", check=check, model=name)
            latency = LatencyFile(side.path, errors=side.errors)
        if name in files["judge"]:
            side = _checked(next(sides), "judge", check=check, model=name)
            judge = JudgeFile(side.path, errors=side.errors)
        pred = _checked(item, "pred", check=check, model=name)
        if check and pred.records and not pred.shared:  # a model run's: its conversations were
            message = _no_session_shared(pred, gold, name)  # checked
            raise UsageProblem(message, "--pred", role=f"pred:{name}")
        predictions = SlotFile(pred.path, errors=pred.errors)
        models.append(
            ModelInput(
                name, predictions, latency, judge, not_scored.get(name, {}), invalid.get(name, ())
            )
        )
    return SlotFile(gold.path, errors=gold.errors), models


class SlotsSystem(SlotsRuns, Views):
    name = "slots"
    summary_file = "metrics.json"
    row_file: str | None = None
    title = "Slot extraction benchmark"
    item = "session"
    inputs = (
        ("gold", "gold slots, JSONL: one {user, session, topic, field, values} per line"),
        ("pred:NAME", "model NAME's predicted slots (the gold's format)"),
        ("latency:NAME", "seconds per session of model NAME, JSONL {user, session, seconds}"),
        ("judge:NAME", "judge scores of model NAME, JSONL {user, session, topic, field, score}"),
    )
    optional_inputs = ("latency:NAME", "judge:NAME")
    headline = METRIC_COLUMNS
    headline_metric = "f1"  # the runs list's, for each model (core.headline_metric)
    breakdowns = (("Per-topic F1", "topic", _topic_f1),)
    export_columns = (
        ("user", '$."user"', "VARCHAR"),
        ("session", '$."session"', "BIGINT"),
        *((name, f'$.counts."{name}"', "BIGINT") for name in _COUNTS),
        ("not_scored", '$."not_scored"', "VARCHAR"),
    )
    latency_key = "latency"
    item_tag = "topic"
    problems_file = "errors.jsonl"
    item_table = (
        ItemColumn("model", "model", "model"),
        ItemColumn("user", "user", item_value('$."user"')),
        ItemColumn("session", "session", item_value('$."session"', "BIGINT"), "count"),
        ItemColumn("f1", "F1", _F1, "number"),
        ItemColumn("hallucinated", "hallucinated", _FP, "count"),  # spec: extra slots (FP)
        ItemColumn("missed", "missed", _FN, "count"),
        FAILED,
        ERROR,
    )
    pairing = Pairing(  # a session of any model (its key names the model), its predicted slots
        key="json_extract_string(result, '$.user') || '/' || json_extract_string(result, '$.session')",
        value="json_extract(result, '$.pred')",
        shown="(SELECT string_agg(json_extract_string(x, '$[0]') || '.' || "
        "json_extract_string(x, '$[1]') || ': ' || "
        "array_to_string(CAST(json_extract(x, '$[2]') AS VARCHAR[]), ' | '), chr(10)) "
        "FROM unnest(CAST(json_extract(result, '$.pred') AS JSON[])) AS t(x))",
        metric="f1",
        rows=tuple(f"json_extract(result, '$.counts.{n}')" for n in _COUNTS),
        statistic=_PAIR_F1,
        stream=_PAIR_STREAM,  # the scorer's own paired test's (slots/_score.py)
    )
    dataset_inputs = ("gold", "conversations")

    def columns(
        self, model: str, metrics: Mapping[str, Any], intervals: Mapping[str, Any]
    ) -> list[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
        models = metrics.get("models") or {}
        # the scorer's (--pred) order, as its paired tests keep it: stored metrics' keys are sorted
        pairs = [(p.get("model_a"), p.get("model_b")) for p in self.paired(metrics)]
        names = dict.fromkeys([*(n for pair in pairs for n in pair if n in models), *models])
        return [(n, models[n], intervals.get(n) or {}) for n in names]

    def paired(self, metrics: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        return list(metrics.get("paired_f1") or [])

    def export_row(self, result: Mapping[str, Any]) -> list[Any]:
        counts = result.get("counts") or {}
        return [
            counts.get(name) if name in _COUNTS else result.get(name)
            for name, _, _ in self.export_columns
        ]

    item_columns = staticmethod(item_columns)
    item_story = staticmethod(slots_story)

    @contextmanager
    def prepare(
        self,
        inputs: Sequence[tuple[str, Path]],
        settings: Mapping[str, Any],
        *,
        beside: Path,
        progress: Progress | None,
        extras: Mapping[str, Any],
    ) -> Iterator[SlotsRead]:
        """Read and check every file, split by session into scratch buckets beside ``beside``;
        ``extras["not_scored"]``: a model run's failed sessions per model (its files unchecked);
        ``extras["invalid_replies"]``: its sessions per model that got an invalid reply."""
        tp, _, _, _ = _settings(settings)
        gold, files = _by_role(inputs)
        not_scored = extras.get("not_scored")
        preds = files["pred"]
        sides: list[tuple[SideKind, Path]] = []
        for name in preds:  # per model its latency then its judge file: the order scored
            sides += [
                (kind, files[kind][name]) for kind in ("latency", "judge") if name in files[kind]
            ]
        if progress is not None:
            progress(f"reading {1 + len(preds) + len(sides)} slot file(s)", 0, 0)
        size = file_bytes([gold, *preds.values(), *(path for _, path in sides)])
        scores = tp == "presence" and not settings.get("judge_model")  # no matcher, no judge
        workers = 2 if scores and size >= POOL_BYTES else 1 if size >= PARALLEL_BYTES else 0
        with ExitStack() as stack:
            pool = stack.enter_context(_pool(workers)) if workers else None
            try:
                part = stack.enter_context(
                    partitioned([gold, *preds.values()], beside=beside, sides=sides, pool=pool)
                )
            except ScratchError as exc:  # a full disk while splitting the inputs
                raise CannotWrite(
                    f"--out: cannot write the run's scratch file {exc.filename}: {exc.strerror}"
                ) from None
            gold_file, models = _read(
                part,
                files,
                not_scored or {},
                check=not_scored is None,
                invalid=extras.get("invalid_replies") or {},
            )
            judge = None
            url, model = settings.get("judge_base_url"), settings.get("judge_model")
            if url and model:
                from fieldcheck.matchers import LLMJudge, judge_options

                judge = LLMJudge(model=model, base_url=url, kind="slot", **judge_options(extras))
            yield SlotsRead(part, gold_file, models, judge, pool if workers == 2 else None)

    def score(
        self,
        read: SlotsRead,
        folder: RunFolder,
        settings: Mapping[str, Any],
        *,
        recorder: RunRecorder | None,
        progress: Progress | None,
        executor: Executor | None = None,
    ) -> Scored:
        """Score the buckets (``score_chunk``) through ``executor`` (None: ``prepare``'s pool or
        this process; a matcher or a judge always runs here) and write the spec's files."""
        tp, threshold, bootstrap, seed = _settings(settings)
        part = read.partition
        options: dict[str, Any] = {"tp": tp, "threshold": threshold, "judge": read.judge}
        options["matcher"] = make_matcher(tp)
        shown = None if progress is None else lambda text: progress(text, 0, 0)
        scorer = SlotScorer(
            read.gold, read.models, **options, bootstrap=bootstrap, seed=seed, progress=shown
        )
        forget_slots()  # this process's chunks share it (a pool's start afresh)
        run_on = executor or read.pool or InProcess()
        if options["matcher"] is not None or read.judge is not None:  # a model or an endpoint:
            run_on = InProcess()  # not copied into every pool process
        job = SlotJob(
            SlotFile(read.gold.path), headers(read.models), options,
            store=recorder is not None, built=not isinstance(run_on, InProcess),
        )  # fmt: skip
        if progress is not None:
            progress("scoring", 0, part.k)
        try:
            for done, (rows, digest) in enumerate(
                run_map(run_on, partial(score_chunk, job), part.chunks()), start=1
            ):
                if recorder is not None:
                    for builder, payload, count in rows:
                        recorder.add_built(builder, payload, count, plain=True)
                scorer.absorb(digest)
                if progress is not None:
                    progress("scoring", done, part.k)
        except OSError as exc:  # the bucket files: removed, or the disk gone, while scoring
            gone = not part.folder.is_dir()  # its folder removed: named, as the reading does
            raise CannotWrite(
                f"--out: cannot read the run's scratch file "
                f"{part.folder if gone else exc.filename or part.folder}: "
                f"{exc.strerror or exc} (was its folder removed?)"
            ) from None
        run = scorer.finish()
        if progress is not None:
            progress("writing", 0, 0)
        files = write_outputs(run, folder)
        metrics, intervals = slot_metrics(run)
        return Scored(
            result=run,
            files=files,
            metrics=metrics,
            intervals=intervals,
            signature=run.signature,
            failed=bool(run.errors),
            gate={  # per model the metrics --fail-under can gate; none when nothing scored
                **{u.name: {} for u in run.unscored},
                **{m.name: {k: getattr(m.result, k) for k in METRIC_COLUMNS} for m in run.models},
            },
            summary={**run.metrics_json(), "complete": True},
            problems=Problems(run.errors, "errors.jsonl"),
        )

    def rescore(
        self,
        items: Iterable[Mapping[str, Any]],
        settings: Mapping[str, Any],
        options: Mapping[str, Any],
        *,
        run: str,
        signature: Mapping[str, Any],
    ) -> tuple[dict[str, Any], Any, Write]:
        """Its sessions' gold and predicted slots (with latencies, judge scores and why a
        session was not scored) scored again under ``tp`` and ``threshold``; the judge scores
        its items keep are signed as the run signed them (a judge file's or a judge model's)."""
        if {"strategies", "weights", "thresholds"} & set(options):
            raise InputError(
                "--strategies, --weights, --fuzzy-threshold and --semantic-threshold re-score "
                "JSON runs"
            )
        gold = SlotFile(Path(f"run {run} gold"))
        models: dict[str, ModelInput] = {}
        for r in items:
            if "gold" not in r or "pred" not in r:
                raise InputError(f"run {run} keeps no gold and predicted slots per session")
            key, name = (str(r["user"]), int(r["session"])), str(r["model"])
            if key not in gold.sessions:
                _add(gold, key, r["gold"])
            path = f"run {run} {name}"
            if name not in models:
                models[name] = ModelInput(name, SlotFile(Path(path)))
            model = models[name]
            _add(model.predictions, key, r["pred"])
            if r.get("latency_s") is not None:  # a latency or judge file where the run had one
                model.latencies = model.latencies or LatencyFile(Path(f"{path} latency"))
                model.latencies.seconds[key] = float(r["latency_s"])
            if r.get("judge"):
                model.judge_scores = model.judge_scores or JudgeFile(Path(f"{path} judge"))
                model.judge_scores.scores[key] = {(t, f): float(s) for t, f, s in r["judge"]}
            if r.get("not_scored"):
                model.not_scored[key] = str(r["not_scored"])  # type: ignore[index]
        if not models:
            raise InputError(f"run {run} has no stored session to re-score")
        inputs = list(models.values())
        tp = options.get("tp") or settings.get("tp", "presence")
        given = "threshold" in options or "tp" in options
        cut = (options if given else settings).get("threshold")
        cut = None if tp in ("presence", "exact") else cut
        boot = int(options.get("bootstrap", settings.get("bootstrap", 1000)))
        seed = int(options.get("seed", settings.get("seed", 0)))
        stored = {"tp": tp, "threshold": cut, "bootstrap": boot, "seed": seed}
        scorer = SlotScorer(gold, inputs, **stored)  # the signature; its matcher scores
        signed = scorer.signature()
        judge = (signature.get("settings") or {}).get("judge")
        if signed.settings["judge"] != "none" and isinstance(judge, str):
            signed = signed.model_copy(update={"settings": {**signed.settings, "judge": judge}})

        def write(recorder: RunRecorder) -> tuple[Any, Any]:
            run = score_models(gold, inputs, **stored, matcher=scorer.matcher, recorder=recorder)
            return slot_metrics(run)

        return stored, signed, write

    def import_folder(
        self, folder: Path, inputs: Sequence[tuple[str, str | Path]], *, model: str | None
    ) -> tuple[str, list[tuple[str, str | Path]], dict[str, Any], Any, Write]:
        """A ``slots score`` or ``slots run`` folder's metrics, and its sessions when the gold and
        every model's predictions are at hand (inputs, or the files runs.json names)."""
        data = loads((folder / "metrics.json").read_bytes())
        signature = data.get("signature") or {}
        sig = signature.get("settings", {})
        stored = {key: sig[key] for key in ("tp", "threshold", "bootstrap", "seed") if key in sig}
        names = list(data.get("models") or {})
        renamed = model is not None and sorted(label_models(model)) != sorted(names)
        if renamed and len(names) != 1:
            raise UsageProblem(
                f"names one model, and {folder} holds the slots of {len(names)} "
                f"({', '.join(names)}), each under its own name",
                "--model",
            )
        named = {n: str(model) if renamed else n for n in names}
        files = dict(inputs)
        preds = {k[5:]: Path(v) for k, v in files.items() if k.startswith("pred:")}
        lats = {k[8:]: Path(v) for k, v in files.items() if k.startswith("latency:")}
        runs_json = folder / "runs.json"
        if runs_json.is_file():
            for name, entry in (loads(runs_json.read_bytes()).get("runs") or {}).items():
                written = entry.get("files") or {}  # not ``named``: the models' names
                if "pred" in written:
                    preds.setdefault(name, folder / written["pred"])
                if "latency" in written:
                    lats.setdefault(name, folder / written["latency"])
        held = {"gold": "gold" in files, **{f"pred:{n}": n in preds for n in names}}
        if any(r in files for r in held) and not all(held.values()):  # no run of 0 items
            raise UsageProblem(
                f"{folder} scored {', '.join(names)}: its sessions are read from the gold and "
                "every model's predictions, and no file was given, nor is one unchanged where its "
                f"run.json names it, for {', '.join(r for r, h in held.items() if not h)}; give "
                "each with --input (or none, to store its metrics alone); nothing was stored",
                "--input",
            )
        all_inputs: list[tuple[str, str | Path]] = [*inputs]
        all_inputs += [(f"pred:{n}", p) for n, p in preds.items() if f"pred:{n}" not in files]

        def write(recorder: RunRecorder) -> tuple[Any, Any]:
            if all(held.values()):
                score_models(
                    load_slots(files["gold"]),
                    [
                        ModelInput(
                            named[n],
                            load_slots(preds[n]),
                            load_latencies(lats[n]) if n in lats else None,
                        )
                        for n in names
                    ],
                    tp=stored.get("tp", "presence"),
                    threshold=stored.get("threshold"),
                    bootstrap=0,
                    recorder=recorder,
                )
            return _stored({**data, "models": {named[n]: m for n, m in data["models"].items()}})

        return models_label(named.values()), all_inputs, stored, signature, write


def _add(file: SlotFile, key: tuple[str, int], slots: list[list[Any]]) -> None:
    """A stored session's slots ([topic, field, values]) added to ``file``, as if read."""
    session = file.sessions.setdefault(key, {})
    for topic, name, values in slots:
        slot = (str(topic), str(name))
        session[slot] = [str(v) for v in values]
        file.lines[(key, slot)] = len(file.lines) + 1


def _pool(workers: int) -> LocalPool:
    """A pool of ``workers`` processes scoring or reading the buckets, a task in flight each."""
    return LocalPool(workers, in_flight=workers, warm=("fieldcheck.slots._score",))


SYSTEM = SlotsSystem()

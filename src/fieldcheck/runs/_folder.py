"""``record_folder``: store a finished output folder of any system as a scored run (folders of
older runs, and tests). The system is the one its run.json names (core ``RunFolder``); a folder
of an earlier version, without one, is told by its files: summary.json + records.jsonl (json
batch), metrics.json (slots score), statistics.json + turns.csv (numeric score)."""

from __future__ import annotations

import csv
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from fieldcheck import core
from fieldcheck._util.errors import InputError
from fieldcheck._util.iters import chunked
from fieldcheck._util.jsonio import loads
from fieldcheck.numeric import stored_cell, stored_metrics
from fieldcheck.runs._items import json_metrics, slot_items
from fieldcheck.store import RunInfo, RunRecorder, Store, field_name, sha256_file

CHUNK = 1000


def system_of(folder: Path) -> str:
    """``json``, ``slots`` or ``numeric``: run.json's system, or, without one, told by the files
    of the folder; InputError for a folder that is not complete or not fieldcheck's."""
    info = _read_json(folder / "run.json") if (folder / "run.json").is_file() else None
    if isinstance(info, dict) and isinstance(info.get("system"), str):
        if info.get("complete") is not True:
            raise InputError(
                "the run is not complete (its run.json says complete: false); run its command "
                "again to finish it",
                file=folder,
            )
        return str(info["system"])
    if (folder / "summary.json").is_file() and (folder / "records.jsonl").is_file():
        return "json"
    if (folder / "metrics.json").is_file():
        return "slots"
    if (folder / "statistics.json").is_file() and (folder / "turns.csv").is_file():
        return "numeric"
    raise InputError(
        "not an output folder of fieldcheck (no summary.json + records.jsonl, metrics.json, or "
        "statistics.json + turns.csv)",
        file=folder,
    )


def _read_json(path: Path) -> Any:
    return loads(path.read_bytes())


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    if not path.is_file():
        return
    with path.open("rb") as handle:
        for line in handle:
            if line.strip():
                value = loads(line)
                if isinstance(value, dict):
                    yield value


def record_folder(
    store: Store,
    out_dir: str | Path,
    *,
    inputs: Sequence[tuple[str, str | Path]] = (),
    model: str | None = None,
    settings: Mapping[str, Any] | None = None,
) -> RunInfo:
    """Store the finished output folder ``out_dir`` as a scored run and return it.

    ``inputs`` name the files it was scored from: for json ``("batch", FILE)`` (the JSONL of
    {id, ground_truth, output}; a ``json run`` folder has them in outputs.jsonl) so the run
    can be re-scored; for slots ``("gold", FILE)`` and ``("pred:NAME", FILE)`` per model (a
    ``slots run`` folder names its prediction files in runs.json), without which only the
    metrics are stored. Those run.json names that were not given are used when unchanged
    (``_named_inputs``). ``model`` defaults to run.json's model or the folder's name.
    """
    folder = Path(out_dir)
    system = system_of(folder)
    inputs = [*inputs, *_named_inputs(folder, {name for name, _ in inputs})]
    summaries = ("summary.json", "metrics.json", "statistics.json")
    if not any((folder / name).is_file() for name in summaries):
        models = sorted(p.name for p in folder.iterdir() if (p / "run.json").is_file())
        if models:  # json run's and numeric evaluate's folder: one run per model inside
            listed = ", ".join(str(folder / m) for m in models)
            raise InputError(
                f"holds a run per model; import each model's folder: {listed}", file=folder
            )
    if system == "json":
        return _record_json(store, folder, inputs, model, settings)
    if system == "slots":
        return _record_slots(store, folder, inputs, settings)
    return _record_numeric(store, folder, inputs, model, settings)


def _named_inputs(folder: Path, given: set[str]) -> Iterator[tuple[str, Path]]:
    """The inputs run.json names (role, path) that were not given, where the path still holds
    the file it scored (same sha256): a slots folder's sessions are read back from them."""
    info = _read_json(folder / "run.json") if (folder / "run.json").is_file() else {}
    for entry in (info.get("inputs") if isinstance(info, dict) else None) or []:
        if not isinstance(entry, dict) or not entry.get("role") or entry["role"] in given:
            continue
        role, path = str(entry["role"]), Path(str(entry.get("path") or ""))
        if path.is_file() and sha256_file(path) == entry.get("sha256"):
            yield role, path


def _json_config(signature: Mapping[str, Any], strategies: Mapping[str, str]) -> dict[str, Any]:
    s = signature.get("settings", {})
    return {
        "strategies": dict(strategies),
        "weights": s.get("weights") or {},
        "fuzzy_threshold": s.get("fuzzy_threshold", 0.85),
        "semantic_threshold": s.get("semantic_threshold", 0.8),
        "flatten": bool(s.get("flatten", False)),
        "safety_check": s.get("safety_check", "off"),
    }


def _record_json(
    store: Store,
    folder: Path,
    inputs: Sequence[tuple[str, str | Path]],
    model: str | None,
    settings: Mapping[str, Any] | None,
) -> RunInfo:
    summary = _read_json(folder / "summary.json")
    run_json = _read_json(folder / "run.json") if (folder / "run.json").is_file() else {}
    raw_files = [Path(p) for _, p in inputs]
    if (folder / "outputs.jsonl").is_file():
        raw_files.append(folder / "outputs.jsonl")
    raw: dict[str, dict[str, Any]] = {}
    for path in raw_files:
        for line in _jsonl(path):
            if "id" in line and "ground_truth" in line:
                raw[str(line["id"])] = line
    strategies: dict[str, str] = {}
    for line in _jsonl(folder / "records.jsonl"):  # the strategies the records were scored with
        for name, field in (line.get("fields") or {}).items():
            strategies.setdefault(field_name(name), field.get("strategy", "EXACT"))
        break
    signature = summary.get("signature") or {}
    sig_settings = signature.get("settings", {})
    stored = dict(settings or {})
    stored.setdefault("config", _json_config(signature, strategies))
    stored.setdefault("bootstrap", sig_settings.get("bootstrap", 1000))
    stored.setdefault("seed", sig_settings.get("seed", 0))
    name = model or (run_json.get("model") or {}).get("name") or folder.name
    all_inputs = [*inputs]
    if (folder / "outputs.jsonl").is_file():
        all_inputs.append(("outputs", folder / "outputs.jsonl"))

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

    metrics, intervals = json_metrics(summary)
    return _store_run(
        store, "json", name, all_inputs, stored, signature, folder, items(), metrics, intervals
    )


def _store_run(
    store: Store,
    system: str,
    model: str,
    inputs: Sequence[tuple[str, str | Path]],
    settings: Mapping[str, Any],
    signature: Any,
    folder: Path,
    items: Iterator[dict[str, Any]],
    metrics: Mapping[str, Any],
    intervals: Mapping[str, Any],
) -> RunInfo:
    recorder = RunRecorder.open(
        store,
        system=system,
        inputs=inputs,
        settings=settings,
        signature=signature,
        out=folder,
        model=model,
        task="import",
    )
    with recorder:
        for chunk in chunked(items, CHUNK):
            recorder.add_items(chunk, core.get(system).item_columns)
        return recorder.finish(metrics=metrics, intervals=intervals)


def _record_slots(
    store: Store,
    folder: Path,
    inputs: Sequence[tuple[str, str | Path]],
    settings: Mapping[str, Any] | None,
) -> RunInfo:
    from fieldcheck.slots import ModelInput, load_latencies, load_slots, score_models

    data = _read_json(folder / "metrics.json")
    signature = data.get("signature") or {}
    sig = signature.get("settings", {})
    stored = dict(settings or {})
    for key in ("tp", "threshold", "bootstrap", "seed"):
        if key in sig:
            stored.setdefault(key, sig[key])
    names = list(data.get("models") or {})
    files = dict(inputs)
    gold_path = files.get("gold")
    preds = {k.removeprefix("pred:"): Path(v) for k, v in files.items() if k.startswith("pred:")}
    lats = {
        k.removeprefix("latency:"): Path(v) for k, v in files.items() if k.startswith("latency:")
    }
    runs_json = folder / "runs.json"
    if runs_json.is_file():
        for name, entry in (_read_json(runs_json).get("runs") or {}).items():
            named = entry.get("files") or {}
            if "pred" in named:
                preds.setdefault(name, folder / named["pred"])
            if "latency" in named:
                lats.setdefault(name, folder / named["latency"])
    all_inputs: list[tuple[str, str | Path]] = [*inputs]
    all_inputs += [(f"pred:{n}", p) for n, p in preds.items() if f"pred:{n}" not in files]
    metrics = {
        "models": {n: {k: v for k, v in m.items() if k != "ci"} for n, m in data["models"].items()},
        "paired_f1": data.get("paired_f1") or [],
    }
    intervals = {n: m.get("ci") for n, m in data["models"].items()}
    items: Iterator[dict[str, Any]] = iter(())
    if gold_path is not None and all(n in preds for n in names):
        gold = load_slots(gold_path)
        models = [
            ModelInput(n, load_slots(preds[n]), load_latencies(lats[n]) if n in lats else None)
            for n in names
        ]
        tp = stored.get("tp", "presence")
        run = score_models(gold, models, tp=tp, threshold=stored.get("threshold"), bootstrap=0)
        items = slot_items(run, gold, models)
    return _store_run(
        store,
        "slots",
        ", ".join(names),
        all_inputs,
        stored,
        signature,
        folder,
        items,
        metrics,
        intervals,
    )


def _record_numeric(
    store: Store,
    folder: Path,
    inputs: Sequence[tuple[str, str | Path]],
    model: str | None,
    settings: Mapping[str, Any] | None,
) -> RunInfo:
    statistics = _read_json(folder / "statistics.json")
    signature = statistics.get("signature") or {}

    def items() -> Iterator[dict[str, Any]]:
        with (folder / "turns.csv").open(newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                yield {k: stored_cell(v) for k, v in row.items()}

    metrics, intervals = stored_metrics(statistics)
    return _store_run(
        store,
        "numeric",
        model or folder.name,
        inputs,
        dict(settings or {}),
        signature,
        folder,
        items(),
        metrics,
        intervals,
    )


__all__ = ["record_folder", "system_of"]

"""A stored JSON record's story (issue 28, "An item"): its scores, then a row per field with the
ground truth, the output, its bucket (json-evaluation.md Phase 2), the strategy and whether it
was auto-detected (Phase 3), the similarity, the threshold and the verdict."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fieldcheck._util.jsonio import dumps
from fieldcheck.jsoneval._stream import SCORES
from fieldcheck.metrics import configured_strategy, flatten
from fieldcheck.reports import section, table_block, text_block, tone, values_block

BUCKETS = (
    ("both_non_null", "both non-null"),
    ("aio_missing_or_null", "missing in output"),
    ("gt_null_aio_has_value", "hallucinated (gold null)"),
    ("extra_keys", "extra key"),
)
FIELD_COLUMNS = (
    "field",
    "ground truth",
    "output",
    "bucket",
    "strategy",
    "auto-detected",
    "similarity",
    "threshold",
    "verdict",
)
_ABSENT = object()


def _shown(values: Mapping[str, Any], path: str) -> Any:
    """A flattened value as the table shows it: text as written, anything else as JSON."""
    value = values.get(path, _ABSENT)
    if value is _ABSENT:
        return "(absent)"
    return value if isinstance(value, str) and value else dumps(value)


def json_story(
    item: Mapping[str, Any], settings: Mapping[str, Any], related: Mapping[str, Any]
) -> list[dict[str, Any]]:
    result = item.get("result") or {}
    error = result.get("error")
    if isinstance(error, Mapping):
        rows = [[k, v] for k, v in error.items()]
        return [section("error", "Not scored", values_block(rows, ["fail"]))]
    given = settings.get("config")
    config: Mapping[str, Any] = given if isinstance(given, Mapping) else settings
    strategies = config.get("strategies") or {}
    thresholds = {
        "FUZZY": config.get("fuzzy_threshold"),
        "SEMANTIC": config.get("semantic_threshold"),
    }
    scores = [[name, result.get(name)] for name in SCORES]
    scores += [["output kind", result.get("output_kind")], ["flags", result.get("flags") or None]]
    scores.append(["safety findings", result.get("safety_findings") or None])
    flat = bool(config.get("flatten"))  # the fields as scored: dotted paths, or top-level keys
    gold = _flat(result.get("ground_truth"), flat)
    output = _flat(result.get("output"), flat)
    buckets = result.get("buckets") or {}
    bucket_of: dict[str, str] = {}
    for name, label in BUCKETS:
        for path in buckets.get(name) or ():
            bucket_of.setdefault(str(path), label)
    fields = result.get("fields") or {}
    rows, tones = [], []
    for path in sorted(set(fields) | set(bucket_of) | set(gold)):
        scored = fields.get(path) or {}
        configured = configured_strategy(path, strategies)
        strategy = scored.get("strategy") or configured
        bucket = bucket_of.get(path, "both null" if gold.get(path, 0) is None else "-")
        score = scored.get("score")
        if bucket == "missing in output":
            verdict, passed = "missing", False
        elif bucket in ("hallucinated (gold null)", "extra key"):
            verdict, passed = bucket.split(" ")[0], False
        elif strategy == "IGNORE" or (strategy is not None and score is None):
            verdict, passed = "ignored", None
        elif score is None:
            verdict, passed = "-", None
        else:
            verdict, passed = ("match", True) if score >= 1 else ("no match", False)
        auto = None if strategy is None else configured is None
        rows.append(
            [
                path,
                _shown(gold, path),
                _shown(output, path),
                bucket,
                strategy,
                auto,
                scored.get("similarity"),
                thresholds.get(strategy or ""),
                verdict,
            ]
        )
        tones.append(tone(passed))
    blocks = [values_block(scores)]
    if not isinstance(result.get("output"), Mapping):  # not an object: shown as it came
        blocks.append(text_block("output", dumps(result.get("output")), code=True))
    failed = [row[0] for row, t in zip(rows, tones, strict=True) if t == "fail"]
    tally: list[list[Any]] = [["fields", len(rows)], ["failed", ", ".join(failed) or None]]
    table = [values_block(tally, [None, tone(not failed)]), table_block(FIELD_COLUMNS, rows, tones)]
    return [section("scores", "Scores", *blocks), section("fields", "Fields", *table)]


def _flat(value: Any, flat: bool) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        return {}
    return flatten(value) if flat else dict(value)

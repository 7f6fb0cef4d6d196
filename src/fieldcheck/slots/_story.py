"""A stored session's story (issue 28, "An item"): its counts, then each slot's gold and predicted
values, canonical (slot spec §4), token P/R (§6), BLEU-1 (§9), verdict and judge score, as
recomputed by the scorer's ``metrics.score_slot`` (a matcher's verdicts: the stored
``unmatched``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fieldcheck.metrics import canonical_set, score_slot, token_precision, token_recall
from fieldcheck.reports import section, table_block, tone, values_block

SLOT_COLUMNS = (
    "topic",
    "field",
    "gold",
    "predicted",
    "gold canonical",
    "predicted canonical",
    "token P",
    "token R",
    "BLEU-1",
    "verdict",
    "judge score",
)


def _slots(listed: Any) -> dict[tuple[str, str], list[str]]:
    return {(str(t), str(f)): list(v) for t, f, v in listed or ()}


def slots_story(
    item: Mapping[str, Any], settings: Mapping[str, Any], related: Mapping[str, Any]
) -> list[dict[str, Any]]:
    result = item.get("result") or {}
    rule = str(settings.get("tp") or "presence")
    gold, pred = _slots(result.get("gold")), _slots(result.get("pred"))
    judged = {(str(t), str(f)): s for t, f, s in result.get("judge") or ()}
    counts = result.get("counts") or {}
    session: list[list[Any]] = [
        ["model", result.get("model")],
        ["user", result.get("user")],
        ["session", result.get("session")],
        [
            "TP rule",
            rule + (f" (threshold {settings['threshold']})" if settings.get("threshold") else ""),
        ],
        ["latency (s)", result.get("latency_s")],
    ]
    tones: list[str | None] = [None] * len(session)
    if result.get("not_scored"):
        session.append(["not scored", result["not_scored"]])
        tones.append("fail")
    outcome = (result.get("call") or {}).get("result") or {}  # slots run: the session's own
    if outcome.get("error_type"):  # a failed call or an invalid reply, as session_errors.jsonl
        session.append(
            ["session error", f"{outcome['error_type']}: {outcome.get('error_message')}"]
        )
        tones.append("fail")
    failed_on = [
        t for t, c in (result.get("per_topic") or {}).items() if c.get("fp") or c.get("fn")
    ]
    if counts:  # where it failed: the topic filter's ``failed`` (docs/slots.md glossary)
        session.append(["failed on topics", failed_on])
        tones.append(tone(not failed_on))
    if judged:
        session.append(["judge reason", "not recorded: a judge replies with a score only"])
    sections = [section("session", "Session", values_block(session, tones))]
    if counts:
        matched = int(counts.get("token_matched") or 0)
        totals = [[k, counts.get(k)] for k in ("tp", "fp", "fn", "gold_slots", "exact_match")]
        totals.append(
            ["token P", token_precision(matched, int(counts.get("token_predicted") or 0))]
        )
        totals.append(["token R", token_recall(matched, int(counts.get("token_gold") or 0))])
        sections.append(section("counts", "Counts", values_block(totals)))
    scores = {slot: score_slot(pred.get(slot, ()), values) for slot, values in gold.items()}
    present = [slot for slot, s in scores.items() if s is not None and s[0]]
    # the slots a matcher rejected; runs stored before ``unmatched`` tell it only when the TP
    # count settles it (all or none of the predicted gold slots matched)
    unmatched = {(str(t), str(f)) for t, f in result.get("unmatched") or ()}
    wrong = len(present) - int(counts.get("tp") or 0)
    rejected = (
        unmatched if len(unmatched) == wrong else set(present) if wrong == len(present) else None
    )
    rows, row_tones = [], []
    for slot in sorted(gold.keys() | pred.keys()):
        s = scores.get(slot)
        if result.get("not_scored"):  # the call failed: the run's metrics count none of them
            verdict, passed = "not scored", None
            p = r = bleu = None
        elif s is None:  # a predicted slot that is not a gold slot
            extra = bool(pred.get(slot)) and any(v.strip() for v in pred[slot])
            verdict, passed = ("FP (extra slot)", False) if extra else ("-", None)
            p = r = bleu = None
        else:
            has_pred, matched, n_pred, n_gold, bleu, _ = s
            p, r = token_precision(matched, n_pred), token_recall(matched, n_gold)
            if not has_pred:
                verdict, passed = "FN (missed)", False
            elif rule == "presence":
                verdict, passed = "TP", True
            elif rejected is None:
                verdict, passed = "TP or FP + FN (the matcher's verdict is not stored)", None
            else:
                verdict, passed = ("FP + FN", False) if slot in rejected else ("TP", True)
        rows.append(
            [
                slot[0],
                slot[1],
                gold.get(slot),
                pred.get(slot),
                sorted(canonical_set(gold.get(slot, ()))),
                sorted(canonical_set(pred.get(slot, ()))),
                p,
                r,
                bleu,
                verdict,
                judged.get(slot),
            ]
        )
        row_tones.append(tone(passed))
    sections.append(section("slots", "Slots", table_block(SLOT_COLUMNS, rows, row_tones)))
    return sections

"""A stored turn's story for the viewer (issue 28, "An item"; numeric-qa-evaluation.md): the
question and earlier turns, the table, gold, the plan, validator checks, the answer and matches."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fieldcheck._util.jsonio import dumps
from fieldcheck.numeric._records import turn_key
from fieldcheck.numeric._scoring import MATCH_FIELDS
from fieldcheck.reports import section, table_block, text_block, tone, values_block

MATCHES = tuple((f, f.replace("_agnostic", "-agnostic").replace("_", " ")) for f in MATCH_FIELDS)
"""Each match field and its label ("unit-agnostic match")."""
REPAIR = "repair round"
PLAN_COLUMNS = (
    "step",
    "tool",
    "operation or source",
    "arguments or value",
    "row",
    "column",
    "result",
)
CHECK_COLUMNS = ("round", "check", "passed", "message")
EARLIER_COLUMNS = ("turn", "question", "gold answer", "model's answer", "numerical match")
EARLIER_KEYS = ("turn_idx", "question", "expected_answer", "predicted_answer", "numerical_match")


def earlier_keys(item: Mapping[str, Any]) -> list[str]:
    """The conversation's earlier turns, and its first (which holds the document's table)."""
    result = item.get("result") or {}
    conversation, turn = result.get("conversation_id"), result.get("turn_idx")
    if not isinstance(turn, int) or conversation is None:
        return []
    return [turn_key(str(conversation), i) for i in range(turn)]


def _plan_and_checks(result: Mapping[str, Any]) -> tuple[Any, list[Any]]:
    """The plan and validator log: stored with the turn, else (a run before issue 28) those
    of its model call."""
    called = ((result.get("call") or {}).get("result")) or {}
    plan = result["plan"] if "plan" in result else called.get("plan")
    checks = result["validation"] if "validation" in result else called.get("validation")
    return plan, list(checks or ())


def _step_rows(plan: Any) -> list[list[Any]]:
    """The plan's steps as rows (#, tool, what, arguments or value, row, column, computes)."""
    steps = plan.get("steps") if isinstance(plan, Mapping) else None
    rows, compute = [], 0
    for n, step in enumerate(steps if isinstance(steps, list) else ()):
        if not isinstance(step, Mapping):
            rows.append([n, None, None, dumps(step), None, None, None])
            continue
        tool = step.get("tool")
        made = None
        if tool == "compute":
            made, compute = f"#{compute}", compute + 1
            what, given = step.get("operation"), step.get("args")
        else:
            what, given = step.get("source"), step.get("value")
        rows.append([n, tool, what, given, step.get("row"), step.get("column"), made])
    return rows


def table_rows(table: Mapping[str, Mapping[str, Any]] | None) -> list[list[Any]] | None:
    """The document's table as lists (an item's keys are sorted): a header row, then each row's
    name and cells, sorted by name as the trace keeps them (so an import stores the same)."""
    if not table:
        return None
    columns = sorted({str(column) for cells in table.values() for column in cells})
    rows = sorted(table.items())
    return [["", *columns], *([row, *(cells.get(c) for c in columns)] for row, cells in rows)]


def _table(rows: Any) -> dict[str, Any] | None:
    if not isinstance(rows, list) or not rows or not isinstance(rows[0], list):
        return None
    return table_block([str(c) for c in rows[0]], rows[1:])


def numeric_story(
    item: Mapping[str, Any], settings: Mapping[str, Any], related: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    result = item.get("result") or {}
    conversation, turn = result.get("conversation_id"), result.get("turn_idx")
    head = [
        ["conversation", conversation],
        ["turn", turn],
        ["question split (qa_split)", result.get("qa_split")],
    ]
    question = text_block("question", str(result.get("question") or ""))
    sections = [section("turn", "The question", values_block(head), question)]
    earlier = [related[k].get("result") or {} for k in earlier_keys(item) if k in related]
    if earlier:
        rows = [[r.get(key) for key in EARLIER_KEYS] for r in earlier]
        tones = [tone(r.get("numerical_match")) for r in earlier]
        block = table_block(EARLIER_COLUMNS, rows, tones)
        sections.append(section("earlier", "Earlier turns", block))
    first = related.get(turn_key(str(conversation), 0), item) if turn else item
    table = _table((first.get("result") or {}).get("table"))
    if table is not None:
        sections.append(section("document-table", "The document's table", table))
    gold = [
        ["program", result.get("ground_truth_program")],
        ["operations", result.get("ground_truth_operations")],
        ["answer", result.get("expected_answer")],
    ]
    sections.append(section("gold", "Gold", values_block(gold)))
    plan, checks = _plan_and_checks(result)
    rows, tones = [], []
    for check in checks:
        message = str(check.get("message") or "")
        said = REPAIR if message.startswith(REPAIR) else "first"
        if said == REPAIR:
            message = message[len(REPAIR) :].lstrip(": ")
        rows.append([said, check.get("check"), check.get("passed"), message or None])
        tones.append(tone(check.get("passed")))
    repaired = any(r[0] == REPAIR for r in rows)
    steps = _step_rows(plan)
    title = "The model's plan" + (" (after the repair round)" if repaired else "")
    if steps:
        plan_block = table_block(PLAN_COLUMNS, steps)
    else:
        plan_block = values_block([["plan", "none (no reply, or one that is not a plan)"]])
    sections.append(section("plan", title, plan_block))
    if checks:
        if repaired:
            said = "yes: the first plan failed a check, the model was asked again"
        elif "fail" in tones:
            said = "no: the reply was not a plan, or the repair call failed"
        else:
            said = "no: every check passed"
        repair = values_block([["repair round", said]])
        sections.append(
            section("checks", "Validator checks", repair, table_block(CHECK_COLUMNS, rows, tones))
        )
    answer = [
        ["predicted answer", result.get("predicted_answer")],  # the plan's, or a given one
        ["parsed answer", result.get("parsed_answer")],
        ["answer rule", result.get("answer_rule")],
        ["plan steps", result.get("plan_steps")],
        ["plan operations", result.get("plan_operations")],
        ["error", result.get("error_type")],
        ["error message", result.get("error_message")],
    ]
    answer_tones = [None] * 5 + [tone(not result.get("error_type"))] * 2
    sections.append(section("answer", "The answer", values_block(answer, answer_tones)))
    mode = result.get("failure_mode")
    matches = [[label, result.get(name)] for name, label in MATCHES]
    matches += [["failure mode", mode], ["not scored", result.get("not_scored")]]
    match_tones = [tone(result.get(name)) for name, _ in MATCHES]
    match_tones += [None if mode is None else "fail", None]
    logic = [
        [name.replace("_", " "), result.get(name)]
        for name in ("logic_recall", "logic_precision", "logic_order_score")
    ]
    blocks = (values_block(matches, match_tones), values_block(logic))
    sections.append(section("matches", "Matches", *blocks))
    return sections

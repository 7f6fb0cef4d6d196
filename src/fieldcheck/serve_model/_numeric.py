"""Synthetic ConvFinQA responder (``convfinqa-plan-v1``): the plan of the turn's gold program with
each model's mistakes (``RATES``: docs/numeric.md "The synthetic model"), seeded per turn."""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from fieldcheck.metrics import (
    ConstArg,
    NumberArg,
    ProgramParseError,
    RefArg,
    RowArg,
    cell_number,
    parse_program,
)
from fieldcheck.numeric import (
    DOC_END,
    DOC_START,
    PROMPT_ID,
    REPAIR_INTRO,
    Conversation,
    DocumentNumbers,
    load_convfinqa,
    render_document,
)
from fieldcheck.serve_model._base import SYNTHETIC_MODELS, Message, Responder, digest_seed

DATA_PATH = Path("convfinqa") / "dev.json"


@dataclass(frozen=True)
class Rates:
    """Per-turn chances of each mistake of a synthetic model."""

    wrong_operation: float
    sign: float
    scale: float
    extra_step: float
    ungrounded: float
    repair_fixes: float
    invalid_json: float


RATES: dict[str, Rates] = {
    "synthetic-careful": Rates(0.02, 0.01, 0.02, 0.0, 0.03, 0.9, 0.0),
    "synthetic-eager": Rates(0.05, 0.03, 0.10, 0.25, 0.08, 0.7, 0.01),
    "synthetic-fast": Rates(0.12, 0.08, 0.08, 0.0, 0.12, 0.5, 0.05),
}

_SWAP = {
    "add": "subtract",
    "subtract": "add",
    "multiply": "divide",
    "divide": "multiply",
    "exp": "multiply",
    "greater": "subtract",
    "table_max": "table_min",
    "table_min": "table_max",
    "table_sum": "table_average",
    "table_average": "table_sum",
}
_Q_LINE = re.compile(r"^Q(\d+): (.*)$", re.MULTILINE)
_QUESTION = re.compile(r"^Question: (.*)$", re.MULTILINE)
_FIRST_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def conversation_key(document: str, first_question: str) -> str:
    """Digest of a rendered document and the conversation's first question (whitespace-normalised)."""
    text = document + "\n\x00" + " ".join(first_question.split())
    return hashlib.sha256(text.encode()).hexdigest()


def _plain(value: float) -> float | int:
    return int(value) if value == int(value) and abs(value) < 1e15 else value


def gold_plan(conversation: Conversation, turn: int) -> dict[str, Any] | None:
    """The plan that a perfect model would write for the turn's gold program (None: no program)."""
    program_text = conversation.turns[turn].program
    if not program_text:
        return None
    try:
        program = parse_program(program_text)
    except ProgramParseError:
        return None
    table = conversation.doc.table

    def extract(value: float) -> dict[str, Any]:
        step = {"tool": "extract", "value": _plain(value), "source": "text"}
        tolerance = 1e-9 * max(1.0, abs(value))
        for row, cells in table.items():
            for column, cell in cells.items():
                number = cell_number(cell)
                if number is not None and abs(abs(number) - abs(value)) <= tolerance:
                    return step | {"source": "table", "row": row, "column": column}
        return step

    if program.value is not None:
        return {"steps": [extract(program.value.value)]}
    extracts: list[dict[str, Any]] = []
    seen: set[float] = set()
    computes: list[dict[str, Any]] = []
    for step in program.steps:
        args: list[Any] = []
        for arg in step.args:
            if isinstance(arg, NumberArg):
                shown = arg.value * 100 if arg.percent else arg.value
                if shown not in seen:
                    seen.add(shown)
                    extracts.append(extract(shown))
                args.append(arg.text if arg.percent else _plain(arg.value))
            elif isinstance(arg, ConstArg):
                args.append(arg.text)
            elif isinstance(arg, RefArg):
                args.append(f"#{arg.index}")
            elif isinstance(arg, RowArg):
                args.append(arg.name)
        computes.append({"tool": "compute", "operation": step.operation, "args": args})
    return {"steps": extracts + computes}


def _append(plan: dict[str, Any], operation: str, constant: str) -> None:
    steps = plan["steps"]
    computed = sum(1 for s in steps if s["tool"] == "compute")
    first = f"#{computed - 1}" if computed else steps[-1]["value"]
    steps.append({"tool": "compute", "operation": operation, "args": [first, constant]})


def _ungrounded(plan: dict[str, Any], known: DocumentNumbers) -> None:
    """Change the first extracted number (and its uses) to one the document does not hold."""
    steps = plan["steps"]
    target = next((s for s in steps if s["tool"] == "extract"), None)
    if target is None:
        return
    old = target["value"]
    new = round(float(old) * 1.07 + 0.31, 2)
    while new in known:
        new = round(new + 0.17, 2)
    target["value"] = new
    for step in steps:
        if step["tool"] == "compute":
            step["args"] = [new if a == old and not isinstance(a, str) else a for a in step["args"]]


@dataclass(frozen=True)
class Draws:
    wrong_operation: bool
    sign: bool
    scale: bool
    extra_step: bool
    ungrounded: bool
    invalid_json: bool


def draws(rates: Rates, seed_text: str) -> Draws:
    """The turn's mistakes, drawn in ``Draws``' order from a generator seeded by model,
    conversation and turn."""
    rng = random.Random(digest_seed(seed_text.encode()))
    return Draws(*(rng.random() < getattr(rates, f.name) for f in fields(Draws)))


def mistaken_plan(
    conversation: Conversation, turn: int, drawn: Draws, *, ungrounded: bool
) -> dict[str, Any] | None:
    """The gold plan with the drawn mistakes (``ungrounded`` decides that one separately)."""
    plan = gold_plan(conversation, turn)
    if plan is None:
        return None
    steps = plan["steps"]
    computes = [s for s in steps if s["tool"] == "compute"]
    if drawn.wrong_operation and computes:
        computes[-1]["operation"] = _SWAP.get(computes[-1]["operation"], "add")
    if drawn.sign:
        subtracts = [s for s in computes if s["operation"] == "subtract" and len(s["args"]) == 2]
        if subtracts:
            subtracts[-1]["args"] = subtracts[-1]["args"][::-1]
        else:
            _append(plan, "multiply", "const_m1")
    if drawn.scale:
        _append(plan, "multiply", "const_100")
    if drawn.extra_step and computes and steps[-1]["operation"] != "greater":  # no yes/no
        _append(plan, "multiply", "const_1")
    if ungrounded:
        _ungrounded(plan, DocumentNumbers(conversation.doc))
    return plan


def naive_plan(document: str) -> dict[str, Any]:
    """An unknown document: its first number as the answer (valid, usually wrong)."""
    match = _FIRST_NUMBER.search(document)
    if match is None:
        return {"steps": [{"tool": "compute", "operation": "add", "args": ["const_0", "const_0"]}]}
    value = float(match.group().replace(",", ""))
    return {"steps": [{"tool": "extract", "value": _plain(value), "source": "text"}]}


class NumericResponder:
    """Answers ``convfinqa-plan-v1`` requests from the indexed dev split."""

    prompt_id = PROMPT_ID

    def __init__(self, conversations: list[Conversation]) -> None:
        self.conversations: dict[str, Conversation] = {}
        for conversation in conversations:
            if conversation.turns:
                document = render_document(conversation.doc)
                key = conversation_key(document, conversation.turns[0].question)
                self.conversations.setdefault(key, conversation)
        self.missing = None if self.conversations else f"ConvFinQA ({DATA_PATH})"

    def respond(self, messages: list[Message], model: str, rng: random.Random) -> str:
        users = [m.get("content") or "" for m in messages if m.get("role") == "user"]
        first = users[0] if users else ""
        start, end = first.find(DOC_START + "\n"), first.find("\n" + DOC_END)
        document = first[start + len(DOC_START) + 1 : end] if 0 <= start < end else ""
        rest = first[end:] if end >= 0 else first
        earlier = _Q_LINE.findall(rest)
        asked = _QUESTION.search(rest)
        turn = len(earlier)
        first_question = earlier[0][1] if earlier else (asked.group(1) if asked else "")
        key = conversation_key(document, first_question)
        conversation = self.conversations.get(key)
        if conversation is None or turn >= len(conversation.turns):
            return json.dumps(naive_plan(document))
        rates = RATES.get(model, RATES[SYNTHETIC_MODELS[0]])
        drawn = draws(rates, f"{model}|{key}|{turn}")
        repair = len(users) > 1 and users[-1].startswith(REPAIR_INTRO)
        ungrounded = drawn.ungrounded and not (repair and rng.random() < rates.repair_fixes)
        plan = mistaken_plan(conversation, turn, drawn, ungrounded=ungrounded)
        if plan is None:
            return json.dumps(naive_plan(document))
        text = json.dumps(plan)
        if drawn.invalid_json and not repair:
            return text[: len(text) // 2]
        return text


def build(responses_dir: Path) -> list[Responder]:
    """The numeric responder over ``<responses_dir>/convfinqa/dev.json`` (empty index if missing)."""
    try:
        conversations = list(load_convfinqa(Path(responses_dir) / DATA_PATH).conversations)
    except Exception:  # a missing or broken file: the responder still answers (naive plans)
        conversations = []
    return [NumericResponder(conversations)]

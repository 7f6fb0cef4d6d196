"""The ConvFinQA plan-and-execute agent: per turn the model writes a plan, the validator checks it
(one repair round-trip when it fails), the safe program engine runs it (never eval). What the model
sees and the error types: docs/numeric.md, "Running a model"; spec numeric-qa-evaluation.md."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fieldcheck._util.jsonio import write_jsonl
from fieldcheck.numeric._loaders import LoadResult
from fieldcheck.numeric._records import Conversation, Document, turn_key
from fieldcheck.numeric._validator import validate_reply
from fieldcheck.runner import (
    CALL_ERRORS,
    Asked,
    CallResult,
    ChatClient,
    Message,
    ModelSpec,
    RunHandle,
    Runner,
    RunSpec,
    estimate_tokens,
    in_order,
    item_calls,
    run_task,
)

PROMPT_ID = "convfinqa-plan-v1"
TASK = "convfinqa-plan"
PREDICTIONS = "predictions.jsonl"
REPAIR_ROUNDS = 1
DOC_START = "<document>"
DOC_END = "</document>"
REPAIR_INTRO = "Your plan did not pass these checks:"
MAX_ECHOED_REPLY_CHARS = 8000  # the bad reply sent back in the repair round, cut to this
OUTPUT_TOKENS_PER_CALL = 120  # for the estimate printed before a large run

SYSTEM_PROMPT = f"""\
You answer questions about one page of a company's financial report, one turn of a conversation \
at a time (prompt {PROMPT_ID}). You do not write the answer: you write a plan, and a calculator \
runs it.

Reply with ONE JSON object and nothing else:
{{"steps": [
  {{"tool": "extract", "value": 206588, "source": "table", "row": "net revenue", "column": "2008"}},
  {{"tool": "extract", "value": 181001, "source": "text"}},
  {{"tool": "compute", "operation": "subtract", "args": [206588, 181001]}},
  {{"tool": "compute", "operation": "divide", "args": ["#0", 181001]}}
]}}

Rules:
- An extract step copies one number exactly as the document shows it, without $, commas or %. \
"source" is "table" (then give the "row" name from the first column and the "column" header, as \
written in the table) or "text".
- Operations of compute steps: add, subtract, multiply, divide, exp (the first argument to the \
power of the second), greater ("yes" when the first is larger), each with two arguments; \
table_max, table_min, table_sum, table_average, each with one argument: a row name of the table.
- An argument is a number from the document, "#k" for the result of compute step k (compute \
steps are counted from 0; extract steps do not count), or a constant written as "const_100", \
"const_1000" or "const_m1" (-1).
- The answer is the result of the last compute step, or the value of the last extract step when \
there is no compute step.
- Give ratios, changes and percentages as fractions: a 14% increase is 0.14. Do not multiply by 100.
- The earlier answers are yours; you may use their numbers as arguments.
"""


def _cell_text(cell: float | str) -> str:
    if isinstance(cell, float):
        return format_number(cell)
    return " ".join(str(cell).split()).replace("|", "\\|")


def render_table(table: dict[str, dict[str, float | str]]) -> str:
    """The table as Markdown: the row names, then the union of the rows' columns in first-seen
    order (a missing cell is empty)."""
    if not table:
        return ""
    columns = list(dict.fromkeys(column for cells in table.values() for column in cells))
    head = "| | " + " | ".join(_cell_text(c) for c in columns) + " |"
    rule = "|---|" + "---|" * len(columns)
    lines = [head, rule]
    for row, cells in table.items():
        values = [_cell_text(cells[c]) if c in cells else "" for c in columns]
        lines.append("| " + _cell_text(row) + " | " + " | ".join(values) + " |")
    return "\n".join(lines)


def render_document(doc: Document) -> str:
    """pre_text, the Markdown table, post_text, separated by blank lines (empty parts left out)."""
    parts = [doc.pre_text.strip(), render_table(doc.table), doc.post_text.strip()]
    return "\n\n".join(p for p in parts if p)


def format_number(value: float) -> str:
    """A number for the prompt: integers without ``.0``, others with at most 6 decimals."""
    if not math.isfinite(value):
        return str(value)
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    if abs(value) >= 1e-3:
        return f"{value:.6f}".rstrip("0").rstrip(".")
    return f"{value:.6g}"


def format_answer(answer: float | str | None) -> str:
    if answer is None:
        return "(no answer)"
    if isinstance(answer, str):
        return " ".join(answer.split())[:200]
    return format_number(answer)


def user_message(conversation: Conversation, turn: int, earlier: Sequence[Any]) -> str:
    """The turn's user message: the document, earlier questions with the model's answers, then
    the question."""
    lines = [DOC_START, render_document(conversation.doc), DOC_END, ""]
    if turn:
        lines.append("Earlier questions and your answers:")
        for i in range(turn):
            question = " ".join(conversation.turns[i].question.split())
            lines.append(f"Q{i}: {question}")
            lines.append(f"A{i}: {format_answer(earlier[i] if i < len(earlier) else None)}")
        lines.append("")
    lines.append(f"Question: {' '.join(conversation.turns[turn].question.split())}")
    lines.append("Reply with the plan: one JSON object.")
    return "\n".join(lines)


def repair_message(failures: Sequence[dict[str, Any]]) -> str:
    """The repair round's user message: the validator's messages of the failed checks."""
    lines = [f"- {f['check']}: {f['message']}" for f in failures]
    return "\n".join([REPAIR_INTRO, *lines, "Reply with a corrected plan: one JSON object."])


def _numbers(answers: Sequence[Any]) -> list[float]:
    """Earlier numeric answers, exact and as shown in the prompt (both count as grounded)."""
    out: list[float] = []
    for answer in answers:
        if isinstance(answer, int | float) and not isinstance(answer, bool):
            value = float(answer)
            out += [value, float(format_number(value))] if math.isfinite(value) else [value]
    return out


async def run_turn(
    client: ChatClient, conversation: Conversation, turn: int, earlier: Sequence[Any]
) -> tuple[dict[str, Any], list[CallResult]]:
    """Ask for a plan, validate it, repair once if needed, run it: the predictions line and the
    turn's model calls; a bad reply is an error type of the line (docs/numeric.md), never raised."""
    messages: list[Message] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": user_message(conversation, turn, earlier)},
    ]
    known = _numbers(earlier[:turn])
    line: dict[str, Any] = {
        "conversation_id": conversation.id,
        "turn": turn,
        "answer": None,
        "plan": None,
        "input_tokens": 0,
        "output_tokens": 0,
        "latency_s": 0.0,
        "error": None,
        "validation": [],
    }
    log: list[CallResult] = []
    for round_ in range(REPAIR_ROUNDS + 1):
        result = await client.complete(messages)
        log.append(result)
        line["input_tokens"] += result.input_tokens
        line["output_tokens"] += result.output_tokens
        if result.tokens_estimated:  # the endpoint sent no usable usage: characters / 4
            line["tokens_estimated"] = True
        line["latency_s"] += result.latency_s
        if not result.ok or result.text is None:
            line["error"] = {
                "type": result.error_type or "invalid_reply",
                "message": result.error_message or "",
            }
            break
        checked = validate_reply(result.text, conversation.doc, known)
        for entry in checked.log:
            message = entry["message"]
            if round_:  # the repair round's log lines say so
                message = "repair round" + (f": {message}" if message else "")
            line["validation"].append({**entry, "message": message})
        line["plan"] = checked.plan
        if not checked.is_json:
            line["error"] = {"type": "invalid_reply", "message": checked.failures[0]["message"]}
            break
        if checked.ok:
            line["answer"] = checked.answer
            break
        if round_ == REPAIR_ROUNDS:
            failed = "; ".join(f"{f['check']}: {f['message']}" for f in checked.failures)
            line["error"] = {"type": "invalid_plan", "message": failed[:500]}
            break
        messages = [
            *messages,
            {"role": "assistant", "content": result.text[:MAX_ECHOED_REPLY_CHARS]},
            {"role": "user", "content": repair_message(checked.failures)},
        ]
    line["latency_s"] = round(line["latency_s"], 6)
    return line, log


async def _ask(
    item: tuple[Conversation, int], earlier: list[dict[str, Any]], client: ChatClient
) -> Asked:
    """A turn asked after the conversation's earlier turns (their answers in the prompt)."""
    conversation, turn = item
    line, log = await run_turn(client, conversation, turn, [e.get("answer") for e in earlier])
    return line, line["error"]["type"] if line["error"] else None, log


def estimate(conversations: Sequence[Conversation]) -> tuple[int, int, int]:
    """(calls, input tokens, output tokens) expected without repairs, for the line before a run."""
    calls = input_tokens = 0
    system = estimate_tokens(SYSTEM_PROMPT) + 4
    for conversation in conversations:
        doc = estimate_tokens(render_document(conversation.doc)) + 40
        asked = 0
        for turn in conversation.turns:
            asked += estimate_tokens(turn.question) + 8
            calls += 1
            input_tokens += system + doc + asked
    return calls, input_tokens, calls * OUTPUT_TOKENS_PER_CALL


@dataclass
class NumericTask:
    """The dataset as read with the run's split and sample, and the settings it is scored
    with (each model's prices added)."""

    data: Path
    loaded: LoadResult
    settings: dict[str, Any]


@dataclass
class AgentRun:
    """One model's finished agent run (its items, resumed and estimated counts in ``handle``)."""

    spec: ModelSpec
    handle: RunHandle

    @property
    def run_id(self) -> str:
        return self.handle.id

    @property
    def item_calls(self) -> dict[str, dict[str, Any]]:
        return item_calls(self.handle)

    @property
    def errors(self) -> Counter[str]:
        """Turns by error type."""
        return Counter(i.error_type for i in self.handle.items() if i.error_type)

    @property
    def failures(self) -> int:
        """Turns whose call failed (not the model's answer): the evaluation is incomplete."""
        return sum(n for kind, n in self.errors.items() if kind in CALL_ERRORS)


class NumericRuns:
    """What ``numeric evaluate`` asks a model (``core.Runs``): the agent on every turn, its answers
    written as predictions.jsonl and scored as ``numeric score`` scores them, one run per model."""

    run_inputs = (("data", "ConvFinQA: the derived {'train','dev'} format or the original list"),)
    together = False
    folder_per_model = False

    def read_task(
        self,
        inputs: Sequence[tuple[str, Any]],
        settings: Mapping[str, Any],
        extras: Mapping[str, Any],
    ) -> NumericTask:
        """The dataset's split and sample (``settings``), read and checked (no conversation to
        run: ``UsageProblem``) before the folder is opened and any model called."""
        from fieldcheck.numeric._system import check_data, check_settings, read_data, whole_split

        found = check_settings(settings)
        data = Path(dict(inputs)["data"])
        loaded = read_data(data, split=found.split, sample_size=found.sample_size, seed=found.seed)
        check_data(data, loaded)
        found = whole_split(found, loaded, extras.get("note"))
        return NumericTask(data, loaded, found.model_dump())

    async def run_model(
        self,
        task: NumericTask,
        runner: Runner,
        spec: ModelSpec,
        *,
        console: Any,
        show_progress: bool,
    ) -> AgentRun:
        """Run (or resume) the agent on every loaded conversation for one model."""
        conversations, size = task.loaded.conversations, task.settings["sample_size"]
        settings = {  # everything besides model and dataset that changes the results
            "prompt": PROMPT_ID,
            "split": task.loaded.split,
            "sample_size": size,
            "seed": task.settings["seed"] if size is not None else None,  # it picks the sample
            "repair_rounds": REPAIR_ROUNDS,
        }
        handle = await run_task(
            runner,
            RunSpec("numeric", TASK, task.data, spec, settings),
            [[(c, turn.index) for turn in c.turns] for c in conversations],
            in_order(lambda item: turn_key(item[0].id, item[1]), _ask),
            total_items=sum(len(c.turns) for c in conversations),
            estimate=estimate(conversations),
            console=console,
            show_progress=show_progress,
        )
        return AgentRun(spec, handle)

    def predictions(
        self, task: NumericTask, calls: Sequence[AgentRun], specs: Sequence[ModelSpec], folder: Any
    ) -> tuple[list[tuple[str, Path]], dict[str, Any], dict[str, Any]]:
        """predictions.jsonl of one model in conversation and turn order, scored with its
        prices."""
        [run], [spec] = calls, specs
        keys = (turn_key(c.id, turn.index) for c in task.loaded.conversations for turn in c.turns)
        lines = [stored for stored in map(run.handle.result, keys) if stored is not None]
        folder.expect(PREDICTIONS)
        with folder.atomic(PREDICTIONS) as path:
            write_jsonl(path, lines)
        prices = {"price_in": spec.price_in, "price_out": spec.price_out}
        inputs = [("data", task.data), ("predictions", folder / PREDICTIONS)]
        return inputs, {**task.settings, **prices}, {"data": task.loaded}

    def comparison(self, task: NumericTask, calls: AgentRun, scored: Any) -> None:
        """None: ``numeric evaluate`` prints the models side by side and writes no file."""
        return None

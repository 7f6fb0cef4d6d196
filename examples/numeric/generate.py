"""Write the bundled numeric-QA example: synthetic ConvFinQA-style data and two models' predictions.

Everything here is invented (companies, tables, questions); nothing is copied from ConvFinQA.
Deterministic: the same script writes byte-identical files. Run from the repository root:

    .venv/bin/python examples/numeric/generate.py

Writes ``data.json`` (derived format: ``{"train": [...], "dev": [...]}``) and
``predictions_model_a.jsonl`` / ``predictions_model_b.jsonl`` (the predictions format).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from fieldcheck.metrics import execute_program, failure_mode, parse_answer, parse_program

HERE = Path(__file__).resolve().parent
YEARS = ("2021", "2022", "2023")
COMPANIES = (
    "Aldenmoor Freight",
    "Brightwell Foods",
    "Corran Mining",
    "Duskfield Media",
    "Eastbrook Water",
    "Fenwick Tooling",
    "Glasston Health",
    "Harlow Aerospace",
    "Ivel Software",
    "Juniper Lettings",
    "Kestrel Paper",
    "Lanyard Textiles",
    "Morrow Shipping",
    "Northgate Energy",
    "Orland Retail",
    "Pellham Chemicals",
)
METRICS = (
    "net revenue",
    "operating income",
    "net income",
    "capital expenditures",
    "free cash flow",
    "research and development",
    "interest expense",
)


def _num(x: float) -> str:
    text = f"{x:.2f}".rstrip("0").rstrip(".")
    return text


def _gold(value: Any) -> Any:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return round(value, 5)


def _make_table(
    rng: random.Random, *, non_numeric: bool, duplicate: bool
) -> dict[str, dict[str, Any]]:
    metrics = rng.sample(METRICS, 4)
    columns: dict[str, dict[str, Any]] = {}
    base = {m: rng.randint(200, 9000) for m in metrics}
    for k, year in enumerate(YEARS):
        name = f"{year} (1)" if duplicate and year == "2023" else year
        columns[name] = {}
        for m in metrics:
            drift = rng.uniform(-0.25, 0.3)
            columns[name][m] = float(round(base[m] * (1 + drift * k / 2), 1))
    if duplicate:
        columns["2023 (2)"] = {m: float(round(v * 1.1, 1)) for m, v in columns["2023 (1)"].items()}
    if non_numeric:
        columns[YEARS[0]][metrics[-1]] = "nm"
    return columns


def _cell(table: dict[str, dict[str, Any]], year: str, metric: str) -> float:
    column = year if year in table else f"{year} (1)"
    value = table[column][metric]
    return float(value)


def _numeric_metrics(table: dict[str, dict[str, Any]]) -> list[str]:
    metrics = list(next(iter(table.values())))
    return [m for m in metrics if all(isinstance(col.get(m), float) for col in table.values())]


def _change_turns(
    rng: random.Random, table: dict[str, dict[str, Any]], company: str
) -> list[tuple[str, str]]:
    metric = rng.choice(_numeric_metrics(table))
    y0, y1 = "2022", "2023"
    a, b = _num(_cell(table, y1, metric)), _num(_cell(table, y0, metric))
    return [
        (f"what was the {metric} of {company} in {y1}?", a),
        (f"and in {y0}?", b),
        ("what was the change over the year?", f"subtract({a}, {b})"),
        ("and what percentage change does that represent?", f"subtract({a}, {b}), divide(#0, {b})"),
    ]


def _sum_turns(
    rng: random.Random, table: dict[str, dict[str, Any]], company: str
) -> list[tuple[str, str]]:
    m1, m2 = rng.sample(_numeric_metrics(table), 2)
    year = rng.choice(YEARS[1:])
    a, b = _num(_cell(table, year, m1)), _num(_cell(table, year, m2))
    return [
        (f"what was the combined {m1} and {m2} in {year}?", f"add({a}, {b})"),
        ("what is the average of the two?", f"add({a}, {b}), divide(#0, const_2)"),
        (f"what is the ratio of {m1} to {m2} in {year}?", f"divide({a}, {b})"),
        (f"was the {m1} greater than the {m2}?", f"greater({a}, {b})"),
    ]


def _table_turns(
    rng: random.Random, table: dict[str, dict[str, Any]], company: str
) -> list[tuple[str, str]]:
    metric = rng.choice(_numeric_metrics(table))
    return [
        (f"what is the total {metric} over the three years?", f"table_sum({metric}, none)"),
        (f"and the average {metric}?", f"table_average({metric}, none)"),
        (
            f"what was the highest yearly {metric}, in thousands?",
            f"table_max({metric}, none), multiply(#0, const_1000)",
        ),
    ]


TEMPLATES = (_change_turns, _sum_turns, _table_turns)
MODEL_B_CYCLE = ("scale", "sign", "error", "wrong", "rounding", "no_answer")


def make_record(rng: random.Random, index: int, *, split: str) -> dict[str, Any]:
    company = COMPANIES[index % len(COMPANIES)]
    double = index % 3 == 1
    non_numeric = index % 5 == 2
    duplicate = index % 7 == 3
    table = _make_table(rng, non_numeric=non_numeric, duplicate=duplicate)
    first, second = rng.sample(TEMPLATES, 2)
    turns = first(rng, table, company)
    split_flags = [False] * len(turns)
    if double:
        more = second(rng, table, company)[:2]
        turns += more
        split_flags += [True] * len(more)
    rows = {m: {c: table[c][m] for c in table} for m in next(iter(table.values()))}
    executed = [_gold(execute_program(parse_program(p), table=rows)) for _, p in turns]
    answers = []
    for value in executed:
        if isinstance(value, str):
            answers.append(value)
        elif abs(value) < 1 and value != 0:
            answers.append(f"{value * 100:.1f}%")
        else:
            answers.append(_num(value))
    kind = "Double" if double else "Single"
    return {
        "id": f"{kind}_EX{index:02d}/{2023}/page_{10 + index}.pdf",
        "doc": {
            "pre_text": f"{company} (a fictional company) reports its results for {YEARS[0]} to {YEARS[-1]} .",
            "post_text": "all amounts are in millions of dollars unless stated otherwise .",
            "table": table,
        },
        "dialogue": {
            "conv_questions": [q for q, _ in turns],
            "conv_answers": answers,
            "turn_program": [p for _, p in turns],
            "executed_answers": executed,
            "qa_split": split_flags,
        },
        "features": {
            "num_dialogue_turns": len(turns),
            "has_type2_question": double,
            "has_duplicate_columns": duplicate,
            "has_non_numeric_values": non_numeric,
        },
    }


def gold_plan(program: str) -> dict[str, Any]:
    parsed = parse_program(program)
    steps: list[dict[str, Any]] = []
    if parsed.value is not None:
        return {"steps": [{"tool": "extract", "value": parsed.value.value}]}
    for step in parsed.steps:
        for arg in step.args:
            if arg.kind in ("number", "row"):
                steps.append({"tool": "extract", "source": "table", "value": arg.model_dump()})
        steps.append(
            {
                "tool": "compute",
                "operation": step.operation,
                "args": [a.model_dump() for a in step.args],
            }
        )
    return {"steps": steps}


def _answer_text(value: Any, *, percent: bool) -> str:
    if isinstance(value, str):
        return value
    if percent:
        return f"{value * 100:.1f}%"
    return f"{value:,.2f}"


def _rounded_answer(gold: float) -> str | None:
    """An answer rounded so coarsely that it is no longer a numerical match, if one exists."""
    options = [f"{gold * 100:.0f}%"] if abs(gold) < 1 else []
    options += [f"{gold:.1f}", f"{gold:.0f}"]
    for text in options:
        if failure_mode(parse_answer(text), gold) == "rounding":
            return text
    return None


def predict(
    record: dict[str, Any], model: str, rng: random.Random, counter: list[int]
) -> list[dict[str, Any]]:
    """One model's prediction lines for a record; ``counter`` counts turns across records."""
    dialogue = record["dialogue"]
    lines = []
    for turn, (question, program, gold) in enumerate(
        zip(
            dialogue["conv_questions"],
            dialogue["turn_program"],
            dialogue["executed_answers"],
            strict=True,
        )
    ):
        percent = "percentage" in question or "ratio" in question
        plan: dict[str, Any] | None = gold_plan(program)
        answer: Any = _answer_text(gold, percent=percent and not isinstance(gold, str))
        error = None
        ops = [s for s in (plan or {}).get("steps", []) if s["tool"] == "compute"]
        numeric = not isinstance(gold, str)
        modes = ["wrong", "error", "no_answer"]
        if numeric and gold:
            modes += ["sign", "scale"]
            rounded = _rounded_answer(gold)
            if rounded is not None:
                modes.append("rounding")
        # mistakes come in a fixed cycle, on every 7th turn (model_a) or every 4th (model_b)
        every, cycle = (
            (7, ("rounding", "scale", "wrong")) if model == "model_a" else (4, MODEL_B_CYCLE)
        )
        mistake = None
        if counter[0] % every == every - 1:
            wanted = cycle[(counter[0] // every) % len(cycle)]
            mistake = wanted if wanted in modes else "wrong"
        counter[0] += 1
        if mistake == "wrong":
            answer = f"{gold * 1.25 + 3:.2f}" if numeric else ("no" if gold == "yes" else "yes")
        elif mistake == "sign":
            answer = f"{-gold:.2f}"
        elif mistake == "scale":
            answer = f"{gold * 100:.2f}" if abs(gold) < 1 else f"{gold / 100:.4f}"
        elif mistake == "rounding":
            answer = _rounded_answer(gold)
        elif mistake == "error":
            answer = None
            error = {"type": "TimeoutError", "message": "model did not answer within 30 s"}
        elif mistake == "no_answer":
            answer = '=HYPERLINK("http://example.invalid")' if rng.random() < 0.5 else ""
        if model == "model_a":
            if len(ops) > 1 and plan is not None and (turn + len(record["id"])) % 3 == 0:
                plan["steps"] = [
                    s for s in plan["steps"] if s is not ops[-1]
                ]  # forgot the last step
        else:
            if plan is not None and ops:
                renamed = {"divide": "percentage_change", "subtract": "difference", "add": "sum"}
                for step in plan["steps"]:
                    if step["tool"] == "compute":
                        step["operation"] = renamed.get(step["operation"], step["operation"])
                if rng.random() < 0.3:
                    plan["steps"] = list(reversed(plan["steps"]))
                if rng.random() < 0.2 and len(ops) > 1:
                    plan["steps"] = [s for s in plan["steps"] if s is not ops[0]]
            if rng.random() < 0.08:
                plan = None
        base_tokens = 600 + len(record["doc"]["pre_text"]) // 4 + 90 * turn
        validation = [
            {
                "check": "answer_is_number",
                "passed": (answer is not None and any(ch.isdigit() for ch in str(answer)))
                or answer in ("yes", "no"),
                "message": "" if answer is not None else "empty answer",
            }
        ]
        lines.append(
            {
                "conversation_id": record["id"],
                "turn": turn,
                "answer": answer,
                "plan": plan,
                "input_tokens": base_tokens + (400 if model == "model_b" else 0),
                "output_tokens": 40 + 12 * len(ops) + (30 if model == "model_b" else 0),
                "latency_s": round(0.8 + rng.random() * (2.5 if model == "model_b" else 1.2), 3),
                "error": error,
                "validation": validation,
            }
        )
    return lines


def build() -> dict[str, str]:
    """Every example file's name and text (deterministic)."""
    rng = random.Random(20240611)
    data = {
        "train": [make_record(rng, i, split="train") for i in range(12, 16)],
        "dev": [make_record(rng, i, split="dev") for i in range(12)],
    }
    files = {"data.json": json.dumps(data, indent=1) + "\n"}
    for model, seed in (("model_a", 1), ("model_b", 2)):
        model_rng = random.Random(seed)
        counter = [0]
        lines = [
            line for record in data["dev"] for line in predict(record, model, model_rng, counter)
        ]
        files[f"predictions_{model}.jsonl"] = "".join(
            json.dumps(x, sort_keys=True) + "\n" for x in lines
        )
    return files


def main() -> None:
    for name, text in build().items():
        (HERE / name).write_text(text, encoding="utf-8")
        print(f"wrote {HERE / name}")


if __name__ == "__main__":
    main()

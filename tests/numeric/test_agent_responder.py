"""The synthetic ConvFinQA responder of serve-model: gold plans reproduce gold answers, mistakes
follow the documented seeded rates, and `numeric evaluate` runs end to end against serve-model."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck._cli.numeric_cmd import CONVFINQA_DEV, run_model_demo
from fieldcheck.metrics import program_from_plan
from fieldcheck.metrics._programs import execute_program
from fieldcheck.numeric import Conversation, load_convfinqa
from fieldcheck.numeric._agent import (
    SYSTEM_PROMPT,
    render_document,
    repair_message,
    user_message,
)
from fieldcheck.numeric._validator import validate_reply
from fieldcheck.serve_model import BackgroundServer, create_app
from fieldcheck.serve_model._numeric import (
    RATES,
    Rates,
    build,
    conversation_key,
    draws,
    gold_plan,
    mistaken_plan,
)

EXAMPLES = CONVFINQA_DEV.parents[1]
NO_MISTAKES = Rates(0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0)


@pytest.fixture(scope="module")
def dev() -> list[Conversation]:
    return load_convfinqa(CONVFINQA_DEV).conversations


def gold_matches(answer: float | str | None, gold: float | str | None) -> bool:
    if isinstance(gold, str) or isinstance(answer, str) or answer is None or gold is None:
        return answer == gold
    return abs(answer - gold) <= 1e-4 * max(1.0, abs(gold))


def run(plan: dict[str, object], conversation: Conversation) -> float | str:
    value = execute_program(program_from_plan(plan), table=conversation.doc.table)
    return ("yes" if value else "no") if isinstance(value, bool) else value


def test_gold_plans_reproduce_every_gold_answer_of_the_dev_split(
    dev: list[Conversation],
) -> None:
    turns = 0
    for conversation in dev:
        for turn in conversation.turns:
            plan = gold_plan(conversation, turn.index)
            assert plan is not None
            assert gold_matches(run(plan, conversation), turn.executed_answer), (
                conversation.id,
                turn.index,
            )
            turns += 1
    assert (len(dev), turns) == (421, 1490)


def test_gold_plans_pass_the_validator_but_where_the_gold_uses_numbers_not_in_the_document(
    dev: list[Conversation],
) -> None:
    failed = Counter[str]()
    for conversation in dev:
        for turn in conversation.turns:
            checked = validate_reply(
                json.dumps(gold_plan(conversation, turn.index)), conversation.doc
            )
            failed.update(f["check"] for f in checked.failures)
            if checked.ok:
                assert gold_matches(checked.answer, turn.executed_answer)
    assert failed == {"values_in_document": 24}


def test_an_error_free_model_answers_every_turn_of_a_few_conversations(
    dev: list[Conversation],
) -> None:
    for conversation in dev[:5]:
        for turn in conversation.turns:
            plan = mistaken_plan(
                conversation, turn.index, draws(NO_MISTAKES, "x"), ungrounded=False
            )
            assert plan == gold_plan(conversation, turn.index)


def test_careful_replies_through_the_prompt_reproduce_gold_when_no_mistake_is_drawn(
    dev: list[Conversation],
) -> None:
    responder = build(EXAMPLES)[0]
    correct = mistakes = quirks = 0
    for conversation in dev[:20]:
        answers: list[float | str | None] = []
        key = conversation_key(render_document(conversation.doc), conversation.turns[0].question)
        for turn in conversation.turns:
            messages = [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": user_message(conversation, turn.index, answers)},
            ]
            reply = responder.respond(messages, "synthetic-careful", random.Random(0))
            assert reply == responder.respond(messages, "synthetic-careful", random.Random(0))
            checked = validate_reply(reply, conversation.doc)
            answers.append(checked.answer)
            drawn = draws(RATES["synthetic-careful"], f"synthetic-careful|{key}|{turn.index}")
            if any(vars(drawn).values()):
                mistakes += 1
                continue
            gold = json.dumps(gold_plan(conversation, turn.index))
            if not validate_reply(gold, conversation.doc).ok:
                quirks += 1  # the gold program uses a number that is not in the document
                continue
            assert checked.ok, (conversation.id, turn.index, checked.failures)
            assert gold_matches(checked.answer, turn.executed_answer)
            correct += 1
    assert (correct, mistakes, quirks) == (66, 9, 6)


def test_mistake_counts_over_the_dev_split_follow_the_documented_rates(
    dev: list[Conversation],
) -> None:
    counts: dict[str, Counter[str]] = {}
    for model, rates in RATES.items():
        seen = Counter[str]()
        for conversation in dev:
            key = conversation_key(
                render_document(conversation.doc), conversation.turns[0].question
            )
            for turn in conversation.turns:
                drawn = draws(rates, f"{model}|{key}|{turn.index}")
                seen.update(k for k, v in vars(drawn).items() if v)
        counts[model] = seen
    # 1,490 turns: each count is near rate x 1490 (seeded, so exact)
    assert counts["synthetic-careful"] == {
        "wrong_operation": 31,
        "sign": 15,
        "scale": 35,
        "ungrounded": 46,
    }
    assert counts["synthetic-fast"]["invalid_json"] == 69
    assert counts["synthetic-eager"]["extra_step"] == 347


def test_the_repair_round_fixes_a_value_not_in_the_document(dev: list[Conversation]) -> None:
    """Find careful's first 'ungrounded' turn: the first reply fails values_in_document, the
    repair round (server generator) fixes it with the documented chance."""
    responder = build(EXAMPLES)[0]
    for conversation in dev:
        key = conversation_key(render_document(conversation.doc), conversation.turns[0].question)
        for turn in conversation.turns:
            drawn = draws(RATES["synthetic-careful"], f"synthetic-careful|{key}|{turn.index}")
            if drawn.ungrounded and not any(
                (drawn.wrong_operation, drawn.sign, drawn.scale, drawn.invalid_json)
            ):
                break
        else:
            continue
        break
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": user_message(conversation, turn.index, [None] * turn.index)},
    ]
    first = responder.respond(messages, "synthetic-careful", random.Random(1))
    checked = validate_reply(first, conversation.doc)
    assert next(f["check"] for f in checked.failures) == "values_in_document"
    repair = [
        *messages,
        {"role": "assistant", "content": first},
        {"role": "user", "content": repair_message(checked.failures)},
    ]
    fixed = sum(
        validate_reply(
            responder.respond(repair, "synthetic-careful", random.Random(seed)), conversation.doc
        ).ok
        for seed in range(200)
    )
    assert fixed == 175  # about 90% of 200 seeds


def test_unknown_documents_and_models_still_get_valid_plans(tmp_path: Path) -> None:
    responder = build(tmp_path)[0]  # no convfinqa/dev.json there: nothing indexed
    text = "<document>\nsales were $ 1,234 in 2019 .\n</document>\n\nQuestion: what were sales?\n"
    reply = responder.respond(
        [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": text}],
        "gpt-unknown",
        random.Random(0),
    )
    assert json.loads(reply) == {"steps": [{"tool": "extract", "value": 1234, "source": "text"}]}
    empty = responder.respond([{"role": "user", "content": "hello"}], "x", random.Random(0))
    assert json.loads(empty)["steps"][0]["operation"] == "add"


def test_evaluate_against_serve_model_end_to_end(tmp_path: Path) -> None:
    with BackgroundServer(create_app()) as server:
        result = CliRunner().invoke(
            app,
            [
                "numeric",
                "evaluate",
                "--data",
                str(CONVFINQA_DEV),
                "--sample-size",
                "5",
                "--seed",
                "3",
                "--model",
                "synthetic-careful",
                "--model",
                "fast=synthetic-fast",
                "--base-url",
                server.base_url,
                "--out",
                str(tmp_path / "out"),
                "--bootstrap",
                "50",
                "--no-progress",
            ],
        )
    assert result.exit_code == 0, result.output
    careful = json.loads((tmp_path / "out" / "synthetic-careful" / "statistics.json").read_text())
    fast = json.loads((tmp_path / "out" / "fast" / "statistics.json").read_text())
    assert careful["num_turns"] == fast["num_turns"] == 20
    assert careful["numerical_match_accuracy"] == 1.0
    # seeded by the messages: the repair prompt names values in full since 759de03 (was 12/20)
    assert fast["numerical_match_accuracy"] == pytest.approx(11 / 20)
    assert careful["total_input_tokens"] > 10_000  # serve-model reports real usage


def test_run_model_demo_compares_the_models(tmp_path: Path) -> None:
    from rich.console import Console

    console = Console(record=True, width=200)
    with BackgroundServer(create_app()) as server:
        status = run_model_demo(
            server.base_url, tmp_path, ["synthetic-careful", "synthetic-fast"], console=console
        )
    assert status == 0
    text = console.export_text()
    assert "ConvFinQA dev (30 conversations, seed 0)" in text
    for model in ("synthetic-careful", "synthetic-fast"):
        lines = (tmp_path / model / "predictions.jsonl").read_text().splitlines()
        assert len(lines) == 100


def test_the_extra_step_is_left_out_after_a_yes_no_step(dev: list[Conversation]) -> None:
    """The extra step (``multiply(#k, const_1)``) is harmless as docs/numeric.md says: after a
    yes/no step (``greater``) it is left out, since a multiply of yes/no fails validation (no
    turn of the dev split draws it there, so no number changes); after a number it is added."""
    from fieldcheck.serve_model._numeric import Draws

    extra = Draws(False, False, False, True, False, False)
    [conversation] = [c for c in dev if c.id == "Single_AES/2002/page_46.pdf-1"]
    yes_no = mistaken_plan(conversation, 4, extra, ungrounded=False)
    assert yes_no == gold_plan(conversation, 4)
    assert yes_no is not None and yes_no["steps"][-1]["operation"] == "greater"
    assert validate_reply(json.dumps(yes_no), conversation.doc).ok
    assert run(yes_no, conversation) == conversation.turns[4].executed_answer == "no"
    number = mistaken_plan(conversation, 3, extra, ungrounded=False)
    assert number is not None and number["steps"][-1] == {
        "tool": "compute",
        "operation": "multiply",
        "args": ["#1", "const_1"],
    }
    assert validate_reply(json.dumps(number), conversation.doc).ok
    assert run(number, conversation) == pytest.approx(60.15 - 41.30)

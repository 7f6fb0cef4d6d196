"""The agent's document renderer, prompt pieces and plan validator: one test per check."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fieldcheck.numeric import Conversation, Document, Features, Turn
from fieldcheck.numeric._agent import (
    DOC_END,
    DOC_START,
    format_answer,
    render_document,
    render_table,
    repair_message,
    user_message,
)
from fieldcheck.numeric._validator import CHECKS, DocumentNumbers, parse_reply, validate_reply

DOC = Document(
    pre_text="net revenue was $ 206,588 in 2008 , up 13.4% from .",
    post_text="the rate was ( 45 ) basis points .",
    table={
        "net revenue": {"2008": 206588.0, "2007": 181001.0},
        "margin": {"2008": "14%", "2007": "nm"},
        "a | b": {"2008": 3.5},
    },
)


def checks(text: str, earlier: list[float] | None = None) -> list[tuple[str, bool, str]]:
    return [
        (e["check"], e["passed"], e["message"])
        for e in validate_reply(text, DOC, earlier or []).log
    ]


def plan(*steps: dict[str, Any]) -> str:
    return json.dumps({"steps": list(steps)})


def failed(text: str) -> dict[str, str]:
    return {c: m for c, p, m in checks(text) if not p}


def test_render_table_is_markdown_with_row_names_first() -> None:
    assert render_table(DOC.table) == (
        "| | 2008 | 2007 |\n"
        "|---|---|---|\n"
        "| net revenue | 206588 | 181001 |\n"
        "| margin | 14% | nm |\n"
        "| a \\| b | 3.5 |  |"
    )
    assert render_table({}) == ""


def test_render_document_joins_text_table_text() -> None:
    text = render_document(DOC)
    assert text.startswith("net revenue was $ 206,588 in 2008 , up 13.4% from .\n\n| | 2008 |")
    assert text.endswith("| a \\| b | 3.5 |  |\n\nthe rate was ( 45 ) basis points .")
    assert render_document(Document(pre_text="only text")) == "only text"


def test_format_answer() -> None:
    assert format_answer(1200.0) == "1200"
    assert format_answer(0.14125) == "0.14125"
    assert format_answer(1 / 3) == "0.333333"
    assert format_answer(0.0000123456) == "1.23456e-05"
    assert format_answer("yes") == "yes"
    assert format_answer(None) == "(no answer)"


def test_user_message_first_turn_and_repair_message() -> None:
    conversation = Conversation(
        id="c",
        split="dev",
        source_format="derived",
        doc=Document(pre_text="x 5", table={}),
        turns=(Turn(index=0, question="what  was\nx?"),),
        features=Features(
            num_dialogue_turns=1,
            has_type2_question=False,
            has_duplicate_columns=False,
            has_non_numeric_values=False,
        ),
    )
    assert user_message(conversation, 0, []) == (
        f"{DOC_START}\nx 5\n{DOC_END}\n\nQuestion: what was x?\nReply with the plan: one JSON object."
    )
    assert repair_message([{"check": "schema", "message": "'steps' is empty"}]) == (
        "Your plan did not pass these checks:\n- schema: 'steps' is empty\n"
        "Reply with a corrected plan: one JSON object."
    )


def test_a_good_plan_passes_every_check_and_gives_the_answer() -> None:
    text = plan(
        {
            "tool": "extract",
            "value": 206588,
            "source": "table",
            "row": "Net Revenue",
            "column": "2008",
        },
        {
            "tool": "extract",
            "value": 181001,
            "source": "table",
            "row": "net revenue",
            "column": "2007",
        },
        {"tool": "compute", "operation": "subtract", "args": [206588, 181001]},
        {"tool": "Compute", "operation": "Percentage Change", "args": ["#0", 181001]},
    )  # "Compute": a tool's case is ignored, as an operation name's is
    result = validate_reply(text, DOC)
    assert [e["check"] for e in result.log] == list(CHECKS)
    assert result.ok
    assert result.answer == pytest.approx(25587 / 181001)


def test_json_check() -> None:
    assert checks("the answer is 5")[0][:2] == ("json", False)
    assert checks("[1, 2]") == [("json", False, "the reply is a JSON list, not an object")]
    deep = "[" * 5000 + "]" * 5000
    assert checks(deep)[0][:2] == ("json", False)  # no RecursionError
    assert checks('{"steps": NaN}')[0][:2] == ("json", False)
    fenced = "```json\n" + plan({"tool": "extract", "value": 45, "source": "text"}) + "\n```"
    assert validate_reply(fenced, DOC).answer == 45
    assert not validate_reply("not json", DOC).is_json


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ({"plan": []}, "'steps' is missing or not a list"),
        ({"steps": []}, "'steps' is empty"),
        ({"steps": [1]}, "step 0 is not an object"),
        (
            {"steps": [{"tool": "search"}]},
            "step 0: 'tool' must be 'extract' or 'compute', got 'search'",
        ),
        (
            {"steps": [{"tool": "extract", "value": "5", "source": "text"}]},
            "step 0: extract needs a number 'value'",
        ),
        (
            {"steps": [{"tool": "extract", "value": 5, "source": "table"}]},
            "step 0: a table extract needs 'row' and 'column' texts",
        ),
        (
            {"steps": [{"tool": "extract", "value": 5, "source": "web"}]},
            "step 0: extract 'source' must be 'table' or 'text'",
        ),
        (
            {"steps": [{"tool": "compute", "operation": 3, "args": "1, 2"}]},
            "step 0: compute needs an 'operation' text; step 0: compute needs a list 'args'",
        ),
        (
            {"steps": [{"tool": "extract", "value": 45, "source": "text"}] * 21},
            "21 steps; at most 20 are allowed",
        ),
    ],
)
def test_schema_check(reply: dict[str, Any], message: str) -> None:
    assert checks(json.dumps(reply)) == [("json", True, ""), ("schema", False, message)]


def test_operations_check() -> None:
    text = plan({"tool": "compute", "operation": "__import__", "args": [1, 100]})
    assert failed(text) == {"operations": "step 0: unknown operation '__import__'"}


def test_arguments_check() -> None:
    assert failed(plan({"tool": "compute", "operation": "add", "args": [1, 100, 1000]})) == {
        "arguments": "step 0: add takes 2 arguments, got 3"
    }
    assert failed(plan({"tool": "compute", "operation": "add", "args": ["os.system", 1]})) == {
        "arguments": "step 0: argument 'os.system' is not a number, '#k' or 'const_N'"
    }
    assert failed(plan({"tool": "compute", "operation": "table_max", "args": ["profit"]})) == {
        "arguments": "step 0: table_max: no table row named 'profit'"
    }
    good = validate_reply(
        plan({"tool": "compute", "operation": "table_sum", "args": ["net revenue"]}), DOC
    )
    assert good.ok and good.answer == 206588 + 181001


def test_references_check() -> None:
    text = plan(
        {"tool": "extract", "value": 45, "source": "text"},
        {"tool": "compute", "operation": "add", "args": ["#0", 45]},
        {"tool": "compute", "operation": "add", "args": ["#0", "#1"]},
    )
    assert failed(text) == {
        "references": "step 1: #0 refers to compute step 0, but no compute steps come before it; "
        "step 2: #1 refers to compute step 1, but only 1 compute step come before it"
    }


def test_values_in_document_check() -> None:
    # 13.4% may be used as 0.134, ( 45 ) as 45, a table cell "14%" as 0.14; 100 is a constant
    ok = plan(
        {"tool": "extract", "value": 0.134, "source": "text"},
        {"tool": "compute", "operation": "multiply", "args": ["13.4%", 45]},
        {"tool": "compute", "operation": "divide", "args": ["#0", 0.14]},
        {"tool": "compute", "operation": "multiply", "args": ["#1", 100]},
    )
    assert failed(ok) == {}
    bad = plan(
        {"tool": "extract", "value": 777, "source": "text"},
        {"tool": "compute", "operation": "add", "args": [206588, 12.5]},
    )
    assert failed(bad) == {
        "values_in_document": "step 0: extracted value 777 is not in the document; "
        "step 1: argument 12.5 is not in the document"
    }
    # a value of many digits is named as the plan gave it, not cut to 6 digits (538440)
    long = plan({"tool": "extract", "value": 538440.36, "source": "text"})
    assert failed(long) == {
        "values_in_document": "step 0: extracted value 538440.36 is not in the document"
    }
    # the model's own earlier answers count as known numbers
    reuse = plan({"tool": "compute", "operation": "add", "args": [25587, 1]})
    assert [c for c, p, _ in checks(reuse, [25587.0]) if not p] == []
    assert "values_in_document" in failed(reuse)


def test_table_cells_check() -> None:
    wrong_cell = plan(
        {
            "tool": "extract",
            "value": 181001,
            "source": "table",
            "row": "net revenue",
            "column": "2008",
        }
    )
    assert failed(wrong_cell) == {
        "table_cells": "step 0: the cell (net revenue, 2008) holds 206588.0, not 181001"
    }
    no_row = plan({"tool": "extract", "value": 45, "source": "table", "row": "x", "column": "2008"})
    assert failed(no_row) == {"table_cells": "step 0: no table row named 'x'"}
    no_column = plan(
        {"tool": "extract", "value": 45, "source": "table", "row": "margin", "column": "2006"}
    )
    assert failed(no_column) == {"table_cells": "step 0: row 'margin' has no column '2006'"}
    text_cell = plan(
        {"tool": "extract", "value": 45, "source": "table", "row": "margin", "column": "2007"}
    )
    assert failed(text_cell) == {
        "table_cells": "step 0: the cell (margin, 2007) holds 'nm', not 45"
    }
    percent = plan(
        {"tool": "extract", "value": 0.14, "source": "table", "row": "margin", "column": "2008"}
    )
    assert failed(percent) == {}


def test_executes_check() -> None:
    zero = plan({"tool": "compute", "operation": "divide", "args": [45, "const_0"]})
    assert failed(zero) == {"executes": "division by zero"}
    huge = plan({"tool": "compute", "operation": "exp", "args": [206588, 181001]})
    assert list(failed(huge)) == ["executes"]
    yes = validate_reply(plan({"tool": "compute", "operation": "greater", "args": [45, 3.5]}), DOC)
    assert yes.ok and yes.answer == "yes"


def test_document_numbers() -> None:
    numbers = DocumentNumbers(DOC)
    for value in (206588, 2008, 0.134, 13.4, 45, -45, 3.5, 0.14, 14, 1000):
        assert value in numbers, value
    for value in (777, 206589, float("nan"), True, "45"):
        assert value not in numbers, value


def test_parse_reply_strips_one_fence() -> None:
    assert parse_reply('```\n{"a": 1}\n```') == {"a": 1}
    with pytest.raises(ValueError, match="not JSON"):
        parse_reply("{'a': 1}")


def test_docs_show_the_prompt_in_full_and_the_synthetic_rates() -> None:
    import re
    from pathlib import Path

    from fieldcheck.numeric._agent import SYSTEM_PROMPT
    from fieldcheck.serve_model._numeric import RATES

    doc = (Path(__file__).resolve().parents[2] / "docs" / "numeric.md").read_text()
    assert f"```text\n{SYSTEM_PROMPT}```" in doc
    rows = re.findall(
        r"^\| (synthetic-\w+) \| (\d+)% \| (\d+)% \| (\d+)% \| (\d+)% \| (\d+)% \((\d+)%\) \| (\d+)% \|$",
        doc,
        flags=re.MULTILINE,
    )
    documented = {name: tuple(int(x) / 100 for x in rest) for name, *rest in rows}
    assert documented == {
        name: (
            r.wrong_operation,
            r.sign,
            r.scale,
            r.extra_step,
            r.ungrounded,
            r.repair_fixes,
            r.invalid_json,
        )
        for name, r in RATES.items()
    }
    for check in CHECKS:
        assert f"| `{check}` |" in doc

"""The real ConvFinQA samples in ../shared/data/convfinqa (read only): loaders and gold programs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from tests.numeric.programs import run_program

from fieldcheck.numeric import load_convfinqa

# Gold programs of sample_dev.json whose execution does not reproduce executed_answers within
# 1e-5. None today: every one of the 166 reproduces. (docs/numeric.md, "Data quirks", lists the
# turns whose conv_answers text disagrees with the executed answer instead.)
EXECUTION_QUIRKS: set[tuple[str, int]] = set()

# Turns whose conv_answers text disagrees with executed_answers beyond the numerical-match
# tolerance (documented in docs/numeric.md, "Data quirks").
ANSWER_TEXT_QUIRKS = {
    ("Single_UNP/2008/page_77.pdf-2", 4),
    ("Single_UNP/2014/page_35.pdf-3", 4),
    ("Single_CDNS/2018/page_31.pdf-1", 2),
    ("Single_ETR/2008/page_355.pdf-4", 3),
    ("Single_CB/2010/page_88.pdf-1", 4),
    ("Single_IPG/2008/page_93.pdf-3", 2),
    ("Single_IPG/2008/page_93.pdf-3", 3),
    ("Single_IPG/2008/page_93.pdf-3", 4),
    ("Single_PM/2015/page_85.pdf-1", 0),
    ("Single_PM/2015/page_85.pdf-1", 2),
    ("Single_PM/2017/page_38.pdf-4", 4),
}


@pytest.fixture(scope="module")
def sample_dir(shared_dir: Path) -> Path:
    return shared_dir / "data" / "convfinqa"


def test_every_gold_program_reproduces_executed_answers(sample_dir: Path) -> None:
    loaded = load_convfinqa(sample_dir / "sample_dev.json")
    assert loaded.errors == []
    assert len(loaded.conversations) == 44
    turns = [(c, t) for c in loaded.conversations for t in c.turns]
    assert len(turns) == 166
    failures = set()
    for conversation, turn in turns:
        assert turn.program is not None
        result = run_program(turn.program, table=conversation.doc.table)
        gold = turn.executed_answer
        if isinstance(result, bool):
            ok = gold == ("yes" if result else "no")
        else:
            ok = isinstance(gold, float) and math.isclose(result, gold, rel_tol=0, abs_tol=1e-5)
        if not ok:
            failures.add((conversation.id, turn.index))
    assert failures == EXECUTION_QUIRKS


def test_answer_text_quirks_are_the_documented_ones(sample_dir: Path) -> None:
    from fieldcheck.metrics import numerical_match, parse_answer

    loaded = load_convfinqa(sample_dir / "sample_dev.json")
    found = {
        (c.id, t.index)
        for c in loaded.conversations
        for t in c.turns
        if not numerical_match(parse_answer(t.answer), t.executed_answer)
    }
    assert found == ANSWER_TEXT_QUIRKS


def test_derived_loader_fields(sample_dir: Path) -> None:
    loaded = load_convfinqa(sample_dir / "sample_dev.json", split="dev")
    first = loaded.conversations[0]
    assert first.id == "Single_MRO/2007/page_134.pdf-1"
    assert first.split == "dev" and first.source_format == "derived"
    # the derived table is column -> row; records hold row -> column
    assert first.doc.table["weighted average exercise price per share"]["2007"] == 60.94
    assert first.turns[4].program == "subtract(60.94, 25.14), divide(#0, 25.14)"
    assert first.turns[4].executed_answer == 1.42403
    assert first.features.num_dialogue_turns == 5
    by_id = {c.id: c for c in loaded.conversations}
    assert by_id["Double_PNC/2013/page_207.pdf"].turns[1].executed_answer == "no"
    assert by_id["Double_PNC/2013/page_207.pdf"].features.has_duplicate_columns
    assert by_id["Single_AES/2003/page_52.pdf-2"].features.has_non_numeric_values
    assert sum(c.features.has_type2_question for c in loaded.conversations) == 15


def test_unknown_split_names_the_ones_present(sample_dir: Path) -> None:
    from fieldcheck._util.errors import InputError

    with pytest.raises(InputError, match=r"no split 'train' in file; it has \['dev'\]"):
        load_convfinqa(sample_dir / "sample_dev.json", split="train")


def test_sample_size_and_seed(sample_dir: Path) -> None:
    first = load_convfinqa(sample_dir / "sample_dev.json", sample_size=3)
    assert [c.id for c in first.conversations] == [
        "Single_MRO/2007/page_134.pdf-1",
        "Double_HII/2017/page_104.pdf",
        "Single_IPG/2009/page_85.pdf-3",
    ]
    a = load_convfinqa(sample_dir / "sample_dev.json", sample_size=5, seed=7)
    b = load_convfinqa(sample_dir / "sample_dev.json", sample_size=5, seed=7)
    c = load_convfinqa(sample_dir / "sample_dev.json", sample_size=5, seed=8)
    assert [x.id for x in a.conversations] == [x.id for x in b.conversations]
    assert [x.id for x in a.conversations] != [x.id for x in c.conversations]
    assert len(a.conversations) == 5


def test_original_train_format(sample_dir: Path) -> None:
    loaded = load_convfinqa(sample_dir / "sample_train_original.json", split="train")
    assert loaded.source_format == "original" and loaded.errors == []
    jkhy = loaded.conversations[0]
    assert jkhy.id == "Single_JKHY/2009/page_28.pdf-3"
    assert [t.question for t in jkhy.turns][1] == "what about in 2008?"
    assert jkhy.turns[3].program == "subtract(206588, 181001), divide(#0, 181001)"
    assert jkhy.turns[3].executed_answer == 0.14136
    # header repeats "year ended june 30 2009 2008": duplicate columns, told apart
    assert jkhy.features.has_duplicate_columns
    assert jkhy.doc.table["change in receivables"]["year ended june 30 2009 2008 (2)"] == -2913.0
    assert jkhy.features.has_type2_question is False
    for conversation in loaded.conversations:
        for turn in conversation.turns:
            assert turn.program is not None
            value = run_program(turn.program, table=conversation.doc.table)
            assert isinstance(turn.executed_answer, float)
            assert math.isclose(float(value), turn.executed_answer, abs_tol=1e-5)


def test_original_test_private_without_answers(sample_dir: Path) -> None:
    loaded = load_convfinqa(sample_dir / "sample_test_private_original.json", split="test")
    assert loaded.errors == []
    assert len(loaded.conversations) == 10
    mas = loaded.conversations[0]
    assert mas.id == "Single_MAS/2012/page_26.pdf-2"
    assert len(mas.turns) == 2
    assert all(t.program is None and t.executed_answer is None for t in mas.turns)
    assert mas.doc.table["masco"]["2012"] == 92.49
    double = next(c for c in loaded.conversations if c.id == "Double_UNP/2007/page_25.pdf")
    assert double.features.has_type2_question  # no qa_split: a Double_ id


def test_scoring_the_answer_texts_finds_exactly_the_quirks(
    sample_dir: Path, tmp_path: Path
) -> None:
    """Predict every turn's own conv_answers text with the gold program as plan: every turn
    matches except the 11 documented answer-text quirks, and logic recall is 1.0 throughout."""
    import json

    from tests.numeric.scoring import score

    from fieldcheck.metrics import parse_program
    from fieldcheck.numeric import load_predictions

    loaded = load_convfinqa(sample_dir / "sample_dev.json")
    lines = []
    for c in loaded.conversations:
        for t in c.turns:
            assert t.program is not None
            steps = [
                {"tool": "compute", "operation": op} for op in parse_program(t.program).operations
            ]
            plan = {"steps": steps or [{"tool": "extract"}]}
            lines.append(
                json.dumps(
                    {"conversation_id": c.id, "turn": t.index, "answer": t.answer, "plan": plan}
                )
            )
    preds = tmp_path / "oracle.jsonl"
    preds.write_text("\n".join(lines) + "\n")
    result, traces = score(loaded, load_predictions(preds), tmp_path / "out", bootstrap=0)
    failed = {
        (t["conversation_id"], t["turn_idx"])
        for trace in traces
        for t in trace["turns"]
        if not t["numerical_match"]
    }
    assert failed == ANSWER_TEXT_QUIRKS
    assert result.statistics["numerical_match_accuracy"] == (166 - 11) / 166
    assert result.statistics["avg_logic_recall"] == 1.0
    assert result.statistics["avg_logic_order_score"] == 1.0
    assert result.input_errors == []

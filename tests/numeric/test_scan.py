"""The dataset read one record at a time (issue 10) gives what reading the file whole gives:
the same conversations, errors and ids, across window boundaries, multi-byte characters, long
records, both formats and samples; a broken file gets read_json's own error."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from fieldcheck._util.errors import InputError
from fieldcheck._util.jsonio import read_json
from fieldcheck.numeric._loaders import (
    StoredConversations,
    _load_whole,
    load_convfinqa,
    read_record,
)


def _derived(rng: random.Random, c: int) -> dict[str, object]:
    n = rng.randint(1, 4)
    long = "é€😀 " * rng.choice([1, 2000])  # some records far past the first 4 KB window
    return {
        "id": f"c{c}-ü",
        "doc": {"pre_text": long, "post_text": "", "table": {"2019": {"r": c}}},
        "dialogue": {
            "conv_questions": [f"q{t} {long[:9]}" for t in range(n)],
            "conv_answers": ["1"] * n,
            "turn_program": [rng.choice(["5", "add(1, 2)", "add(1 2)"]) for _ in range(n)],
            "executed_answers": [float(t) for t in range(n)],
        },
    }


def _load_both(
    path: Path, split: str | None = None, sample_size: int | None = None, seed: int | None = None
) -> tuple[object, object]:
    streamed = load_convfinqa(path, split=split, sample_size=sample_size, seed=seed)
    whole = _load_whole(path, split=split, sample_size=sample_size, seed=seed)
    return streamed, whole


def _same(streamed: object, whole: object) -> None:
    from fieldcheck.numeric import LoadResult

    assert isinstance(streamed, LoadResult) and isinstance(whole, LoadResult)
    assert isinstance(streamed.conversations, StoredConversations)
    assert [c.model_dump() for c in streamed.conversations] == [
        c.model_dump() for c in whole.conversations
    ]
    assert [e.to_dict() for e in streamed.errors] == [e.to_dict() for e in whole.errors]
    assert streamed.all_ids == whole.all_ids
    assert streamed.total_records == whole.total_records
    assert streamed.conversation_ids() == [c.id for c in whole.conversations]
    assert streamed.turn_counts() == {c.id: len(c.turns) for c in whole.conversations}


@pytest.mark.parametrize("seed", [1, 2])
def test_streamed_records_are_those_of_the_whole_file(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    records: list[object] = [_derived(rng, c) for c in range(60)]
    records[7] = {"id": "c7-ü", "doc": {"table": []}}  # a bad record: an error, skipped
    records[9] = dict(records[8])  # type: ignore[call-overload]  # a duplicate id
    path = tmp_path / "data.json"
    # white space and a byte order mark where a reader could trip
    text = json.dumps({"train": records[:5], "dev": records}, ensure_ascii=False, indent=1)
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    streamed, whole = _load_both(path)
    _same(streamed, whole)
    assert len(streamed.errors) >= 3  # type: ignore[attr-defined]
    _same(*_load_both(path, split="train"))
    _same(*_load_both(path, sample_size=17, seed=3))
    _same(*_load_both(path, sample_size=17))
    conversations = streamed.conversations  # type: ignore[attr-defined]
    assert (
        conversations[-1].id == "c59-ü" and conversations[3].turns == list(conversations)[3].turns
    )


def test_original_format_is_streamed_too(tmp_path: Path) -> None:
    record = {
        "id": "o1",
        "pre_text": ["a"],
        "post_text": [],
        "table": [["", "2019"], ["rev", "5"]],
        "annotation": {"dialogue_break": ["q?"], "turn_program": ["5"], "exe_ans_list": [5.0]},
    }
    path = tmp_path / "original.json"
    path.write_text(json.dumps([record, {**record, "id": "o2"}]), encoding="utf-8")
    streamed, whole = _load_both(path)
    _same(streamed, whole)
    assert streamed.source_format == "original"  # type: ignore[attr-defined]
    assert streamed.conversation_ids() == ["o1", "o2"]  # type: ignore[attr-defined]


def test_a_broken_file_gets_the_whole_file_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"dev": [{"id": "a"}, {"id": ]}', encoding="utf-8")
    with pytest.raises(InputError) as whole:
        read_json(path)
    with pytest.raises(InputError) as streamed:
        load_convfinqa(path)
    assert streamed.value.one_line() == whole.value.one_line()
    assert "line 1" in streamed.value.one_line() or ":1" in streamed.value.one_line()


def test_a_record_read_again_keeps_its_bad_program_without_a_second_warning(
    tmp_path: Path,
) -> None:
    """The loader warns once of a gold program that does not parse; scoring's second read of the
    record (``read_record``) keeps the program as written and warns of nothing (issue 27: the
    parse was half a re-read's cost)."""
    record = _derived(random.Random(0), 0)
    record["dialogue"] = {  # type: ignore[assignment]
        "conv_questions": ["q0", "q1"],
        "turn_program": ["5", "subtract(#3, 2)"],
        "executed_answers": [5.0, 1.0],
    }
    path = tmp_path / "data.json"
    path.write_text(json.dumps({"dev": [record]}), encoding="utf-8")
    loaded = load_convfinqa(path)
    assert [e.field for e in loaded.errors] == ["dialogue.turn_program[1]"]
    stored = loaded.conversations
    assert isinstance(stored, StoredConversations)
    index, start, size = stored.spans
    plain, warnings = read_record("derived", path.read_bytes()[start : start + size], index, path)
    assert ([t.program for t in plain.turns], warnings) == (["5", "subtract(#3, 2)"], [])

"""A file of bad lines (trial a, finding 1: it held the API ~9x as long as one of valid lines; its
cost is a benchmark's matter, not a timed test's): refused naming the first and counting all.
Its message and errors.jsonl line are pinned elsewhere (test_json_hostile, test_bad_lines)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fieldcheck._util.errors import UsageProblem
from fieldcheck.jsoneval._stream import BatchReader
from fieldcheck.jsoneval._system import _checked_chunks

BAD = b'{"id": "x", "ground_truth": {"a": 1}, "output": {"a": 1, "b": oops}}\n'


def test_a_file_of_bad_lines_is_refused_naming_the_first_and_counting_all(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_bytes(BAD * 3 + b"[1]\n" + BAD * 9_000)
    with pytest.raises(UsageProblem) as caught:
        _checked_chunks(BatchReader(path))
    assert caught.value.message == (
        f"{path}: no valid record (9004 problems; first: {path}:1: invalid JSON: unexpected "
        "character, expected a JSON value at column 63)"
    )

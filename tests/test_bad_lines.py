"""Bad input in bounded memory (issue 26, item 15): a file of many invalid lines keeps the first
errors in detail and counts the rest, every one in the errors file, memory flat in their count;
a line longer than the limit is refused without being read whole, the next lines read."""

from __future__ import annotations

import csv
import io
import json
import os
import pickle
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck._util import errors as error_module
from fieldcheck._util import jsonio, sniff
from fieldcheck._util.errors import KEPT_ERRORS, ErrorList, InputError
from fieldcheck._util.jsonio import iter_jsonl, read_lines
from fieldcheck.numeric import load_predictions
from fieldcheck.slots import load_slots

NUMERIC_EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "numeric"

WIDE = {"COLUMNS": "400"}
GOOD_BATCH = '{"id": "ok", "ground_truth": {"a": 1}, "output": {"a": 1}}\n'
GOOD_SLOT = '{"user": "u1", "session": 1, "topic": "t", "field": "f", "values": ["x"]}\n'


# --- ErrorList: the first errors kept, the rest in a temporary file ------------------------------


def _errors(lines: list[int]) -> list[InputError]:
    return [
        InputError("bad", file="f.jsonl", line=n, field="x", value={"n": i})
        for i, n in enumerate(lines)
    ]


def test_error_list_keeps_the_first_counts_all_and_gives_them_back_in_order() -> None:
    made = _errors(list(range(1, 251)))
    errors = ErrorList(made)
    assert len(errors) == 250 and errors  # the exact count
    assert errors._kept == made[:KEPT_ERRORS]  # the first ones, as raised
    assert errors[0] is made[0] and errors[:5] == made[:5]
    # a spilled one comes back with the same words (its value as its short repr)
    assert [e.to_dict() for e in errors] == [e.to_dict() for e in made]
    assert errors[200].one_line() == "f.jsonl:201: field 'x': bad (got {'n': 200})"
    assert errors[-1].line == 250
    both = errors + _errors([7])
    assert [e.line for e in both][-2:] == [250, 7] and len(errors) == 250
    copied = pickle.loads(pickle.dumps(both))
    assert [e.one_line() for e in copied] == [e.one_line() for e in both]


def test_error_list_files_go_with_the_lists(tmp_path: Path) -> None:
    errors = ErrorList(_errors(list(range(1, 251))), spill_dir=tmp_path)
    assert len(list(tmp_path.iterdir())) == 1  # the 150 after the first 100
    copied = pickle.loads(pickle.dumps(errors))  # a helper process's copy: the file by name
    errors.append(InputError("later", line=300))  # the sender goes on; the copy reads its 250
    copied.append(InputError("copy", line=400))  # and writes its own later errors elsewhere
    assert [e.line for e in copied][-3:] == [249, 250, 400]
    assert [e.line for e in errors][-2:] == [250, 300]
    del copied  # the copy owns the file now: it goes with it, the sender still reads it
    assert len(errors) == 251 and errors[-2].line == 250
    del errors
    assert list(tmp_path.iterdir()) == []


def test_error_list_by_line_is_a_stable_merge_of_sorted_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = [(i * 37) % 101 for i in range(400)]  # every line 0-100, each about 4 times
    expected = [e.one_line() for e in sorted(_errors(lines), key=lambda e: e.line or 0)]
    assert [e.one_line() for e in ErrorList(_errors(lines)).by_line()] == expected
    monkeypatch.setattr(error_module, "_SORT_RUN", 30)  # 14 runs merged from files
    merged = ErrorList(_errors(lines)).by_line()
    assert [e.one_line() for e in merged] == expected
    assert merged.in_line_order and len(merged) == 400


# --- memory flat in the count of bad lines --------------------------------------------------------


def _peak(run: Callable[[], None]) -> int:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _json_batch(tmp_path: Path, n: int) -> Callable[[], None]:
    data = tmp_path / f"batch{n}.jsonl"
    with data.open("w", encoding="utf-8") as handle:
        handle.write(GOOD_BATCH)
        handle.writelines(f'{{"id": {i}, "ground_truth": 5}}\n' for i in range(n))
    out = tmp_path / f"json{n}"

    def run() -> None:
        args = ["json", "batch", str(data), "--out", str(out), "--bootstrap", "0", "--no-store"]
        result = CliRunner().invoke(app, args, env=WIDE)
        assert result.exit_code == 3, result.output
        assert f"... and {n - 5} more ({n} problems in all" in result.stderr
        summary = json.loads((out / "summary.json").read_text("utf-8"))
        assert (summary["records"], summary["not_scored"]) == (n + 1, n)
        assert len(summary["errors"]) == KEPT_ERRORS  # the first ones; errors.jsonl has all
        assert (
            summary["errors"][0]
            == f"{data}:2: record 0: field 'ground_truth': must be a JSON object (got 5)"
        )

    return run


def _slots(tmp_path: Path, n: int) -> Callable[[], None]:
    gold = tmp_path / "gold.jsonl"
    gold.write_text(GOOD_SLOT, encoding="utf-8")
    pred = tmp_path / f"pred{n}.jsonl"
    with pred.open("w", encoding="utf-8") as handle:
        handle.write(GOOD_SLOT)
        handle.writelines(f'{{"user": "u1", "session": {i}, "topic": 5}}\n' for i in range(n))
    out = tmp_path / f"slots{n}"

    def run() -> None:
        args = ["slots", "score", "--gold", str(gold), "--pred", f"m={pred}", "--out", str(out)]
        result = CliRunner().invoke(app, [*args, "--bootstrap", "0", "--no-store"], env=WIDE)
        assert result.exit_code == 3, result.output
        assert f"... and {n - 5} more ({n} problems in all" in result.output

    return run


def _numeric(tmp_path: Path, n: int) -> Callable[[], None]:
    source = (NUMERIC_EXAMPLES / "predictions_model_a.jsonl").read_text("utf-8")
    pred = tmp_path / f"pred{n}.jsonl"
    with pred.open("w", encoding="utf-8") as handle:
        handle.write(source)
        handle.writelines(f'{{"conversation_id": "x{i}", "turn": "a"}}\n' for i in range(n))
    out = tmp_path / f"numeric{n}"

    def run() -> None:
        args = ["numeric", "score", "--data", str(NUMERIC_EXAMPLES / "data.json")]
        args += ["--predictions", str(pred), "--out", str(out), "--bootstrap", "0", "--no-store"]
        result = CliRunner().invoke(app, args, env=WIDE)
        assert result.exit_code == 3, result.output
        assert f"... and {n - 5} more ({n} problems in all" in " ".join(result.output.split())

    return run


@pytest.mark.parametrize(
    "system", [_json_batch, _slots, _numeric], ids=["json", "slots", "numeric"]
)
def test_memory_stays_flat_with_the_count_of_bad_lines(
    tmp_path: Path, system: Callable[[Path, int], Callable[[], None]]
) -> None:
    # before: about 1-2 KB held per bad line (each error's object, its message in summary.json,
    # the chunks before the first valid record), so 10x the bad lines took about 10x the memory
    # the readers' buffers are bounded (json holds up to 8,192 lines looking for a first record,
    # chunks of thousands of lines): they are full from about 20,000 lines on, so the sizes
    # compared are past them, and a first small run keeps the imports out of the peaks
    system(tmp_path, KEPT_ERRORS + 10)()
    small, large = 20_000, 80_000
    peak_small = _peak(system(tmp_path, small))
    peak_large = _peak(system(tmp_path, large))
    assert peak_large < 1.5 * peak_small + 4_000_000, (peak_small, peak_large)


def test_every_bad_line_is_in_the_errors_files(tmp_path: Path) -> None:
    n = 3 * KEPT_ERRORS
    _json_batch(tmp_path, n)()
    lines = (tmp_path / f"json{n}" / "errors.jsonl").read_text("utf-8").splitlines()
    assert [json.loads(x)["line"] for x in lines] == list(range(2, n + 2))
    _slots(tmp_path, n)()
    lines = (tmp_path / f"slots{n}" / "errors.jsonl").read_text("utf-8").splitlines()
    assert [json.loads(x)["line"] for x in lines] == list(range(2, n + 2))
    assert json.loads(lines[-1])["value"] == "5"  # a spilled error keeps its value's repr
    _numeric(tmp_path, n)()
    with (tmp_path / f"numeric{n}" / "input_errors.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(r["line"]) for r in rows] == list(range(52, n + 52))
    assert {r["reason"] for r in rows} == {"must be a valid integer"}


def test_a_huge_record_id_or_field_name_is_cut_in_every_error_line(tmp_path: Path) -> None:
    """A bad line with an id (or key) of 1 MB gives a short error line and errors.jsonl entry,
    the id cut to 200 characters with ``...`` (the whole id was printed: a 5 MB stderr line;
    a tester's finding)."""
    huge = "i" * 1_000_000
    bad = {"id": huge, "ground_truth": {"a": 1}, "output": {"a": 1}, "safety_score": "x"}
    batch = tmp_path / "b.jsonl"
    batch.write_text(GOOD_BATCH + json.dumps(bad) + "\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["json", "batch", str(batch), "--out", str(out), "--no-store"], env=WIDE
    )
    assert result.exit_code == 3, result.output
    assert max(map(len, result.stderr.splitlines())) < 1_000
    [error] = [json.loads(x) for x in (out / "errors.jsonl").read_text("utf-8").splitlines()]
    assert error["record"] == "i" * 197 + "..." and len(error["message"]) < 1_000
    assert error["line"] == 2 and error["field"] == "safety_score"
    cut = InputError("bad", field="k" * 300, record="r" * 200)
    assert (cut.field, cut.record) == ("k" * 197 + "...", "r" * 200)


def test_many_bad_lines_before_the_first_valid_one(tmp_path: Path) -> None:
    # more bad lines than json batch holds while looking for a valid record: read again
    data = tmp_path / "late.jsonl"
    with data.open("w", encoding="utf-8") as handle:
        handle.writelines("not json\n" for _ in range(10_000))
        handle.write(GOOD_BATCH)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["json", "batch", str(data), "--out", str(out)], env=WIDE)
    assert result.exit_code == 3, result.output
    summary = json.loads((out / "summary.json").read_text("utf-8"))
    assert (summary["records"], summary["scored"], summary["not_scored"]) == (10_001, 1, 10_000)
    assert len((out / "errors.jsonl").read_text("utf-8").splitlines()) == 10_000


def test_many_bad_lines_before_the_first_valid_one_in_a_pipe(tmp_path: Path) -> None:
    # a pipe cannot be read again: its lines are held (else the run would score nothing)
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)

    def feed() -> None:
        with fifo.open("w", encoding="utf-8") as handle:
            handle.writelines("not json\n" for _ in range(10_000))
            handle.write(GOOD_BATCH)

    writer = threading.Thread(target=feed)
    writer.start()
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["json", "batch", str(fifo), "--out", str(out)], env=WIDE)
    writer.join()
    assert result.exit_code == 3, result.output
    summary = json.loads((out / "summary.json").read_text("utf-8"))
    assert (summary["records"], summary["scored"], summary["not_scored"]) == (10_001, 1, 10_000)


# --- a line longer than the limit --------------------------------------------------------------------


class _Reads(io.BytesIO):
    """A file that records the most bytes one read gave."""

    most = 0

    def readline(self, size: int | None = -1) -> bytes:
        line = super().readline(size)
        self.most = max(self.most, len(line))
        return line


def test_a_long_line_is_skipped_in_bounded_reads() -> None:
    handle = _Reads(b"ab\n" + b"x" * 5_000 + b"\n" + b"y" * 100 + b"\ncd")
    lines = list(read_lines(handle, limit=100))
    assert lines[0] == b"ab\n" and lines[2] == b"y" * 100 + b"\n" and lines[3] == b"cd"
    assert isinstance(lines[1], jsonio.LongLine) and len(lines[1]) == 5_001  # offsets stay right
    assert handle.most <= 101


@pytest.fixture
def small_limit(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(jsonio, "MAX_LINE_BYTES", 1_000)
    return 1_000


def _long_reason(size: int) -> str:
    return f"line too long: {size:,} bytes, over the limit of 1,000 bytes a line (not read; the next lines are)"


def test_iter_jsonl_refuses_the_long_line_and_goes_on(tmp_path: Path, small_limit: int) -> None:
    path = tmp_path / "f.jsonl"
    path.write_text(json.dumps({"x": "a" * 2_000}) + "\n" + '{"y": 2}\n', encoding="utf-8")
    (line, error), (line2, value) = iter_jsonl(path)
    assert isinstance(error, InputError) and line == 1
    assert error.one_line() == f"{path}:1: {_long_reason(2_009)}"  # 7 + 2,000 + 2 bytes
    assert (line2, value) == (2, {"y": 2})


def test_each_system_refuses_the_long_line_and_reads_the_next(
    tmp_path: Path, small_limit: int
) -> None:
    slots = tmp_path / "slots.jsonl"
    long_slot = json.dumps(
        {"user": "u1", "session": 2, "topic": "t", "field": "f", "values": ["v" * 2_000]}
    )
    slots.write_text(long_slot + "\n" + GOOD_SLOT, encoding="utf-8")
    loaded = load_slots(slots)
    assert [e.one_line() for e in loaded.errors] == [f"{slots}:1: {_long_reason(len(long_slot))}"]
    assert loaded.lines == {(("u1", 1), ("t", "f")): 2}

    lines = (NUMERIC_EXAMPLES / "predictions_model_a.jsonl").read_text("utf-8").splitlines()
    first = json.loads(lines[0]) | {"note": "n" * 2_000}
    pred = tmp_path / "pred.jsonl"
    pred.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    result = load_predictions(pred)
    assert [e.line for e in result.errors] == [1]
    assert result.errors[0].reason == _long_reason(len(json.dumps(first)))
    assert len(result.predictions) == len(lines) - 1
    # the line after the long one is read back at its own offset
    second = json.loads(lines[1])
    assert (
        result.predictions[(second["conversation_id"], second["turn"])].answer == second["answer"]
    )


def test_json_batch_long_line_is_an_error_and_the_next_is_scored(
    tmp_path: Path, small_limit: int
) -> None:
    data = tmp_path / "b.jsonl"
    long_line = json.dumps({"id": "big", "ground_truth": {"a": "x" * 2_000}, "output": {}})
    data.write_text(long_line + "\n" + GOOD_BATCH, encoding="utf-8")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["json", "batch", str(data), "--out", str(out)], env=WIDE)
    assert result.exit_code == 3, result.output
    assert f"{data}:1: {_long_reason(len(long_line))}" in result.stderr
    records = (out / "records.jsonl").read_text("utf-8").splitlines()
    assert [json.loads(r)["id"] for r in records] == ["ok"]


def test_a_file_of_one_long_line_is_not_called_csv(
    tmp_path: Path, small_limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a JSONL line longer than what the sniffer reads (64 KB) in a file too large to parse whole
    # (over 256 MB; lowered here): its first bytes hold commas, which said "looks like CSV"
    monkeypatch.setattr(sniff, "_WHOLE_FILE_LIMIT", 100_000)
    data = tmp_path / "b.jsonl"
    line = json.dumps({"id": "big", "ground_truth": {"a": ["x, y"] * 40_000}, "output": {}})
    data.write_text(line + "\n", encoding="utf-8")
    assert sniff.sniff(data) is None
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["json", "batch", str(data), "--out", str(out)], env=WIDE)
    assert result.exit_code == 2, result.output
    message = " ".join(result.stderr.split())
    assert f"first: {data}:1: line too long: {len(line):,} bytes" in message
    assert "looks like" not in message

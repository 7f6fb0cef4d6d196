"""Identical numbers (issue 10): the streamed batch (chunks of 1, 7 and 10,000 lines), the
in-memory ``evaluate_batch`` and a literal reference of json-evaluation.md's pseudocode kept
here, on seeded random batches: the same records.jsonl lines, summary.json (minus the matcher
pair count, which is per chunk), fields.csv and report.md whatever the chunks, and the same
results, errors and summary in memory; flat memory; the CLI's behaviour."""

from __future__ import annotations

import contextlib
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fieldcheck import core
from fieldcheck._cli.main import app
from fieldcheck.jsoneval import (
    SYSTEM,
    BatchReader,
    BatchResult,
    EvalConfig,
    RecordError,
    evaluate_batch,
    read_batch,
    stream_batch_outputs,
)
from fieldcheck.jsoneval._stream import Item

from .conftest import TableMatcher

json_columns = SYSTEM.item_columns

STRATEGIES = {"name": "FUZZY", "note": "IGNORE", "code": "EXACT", "qty": "EXACT"}
KEYS = ["name", "note", "code", "qty", "tags", "when", "flag", "misc"]
WEIGHTS = {"accuracy": 0.45, "completeness": 0.25, "hallucination": 0.15, "safety": 0.15}


def _value(rng: random.Random) -> Any:
    return rng.choice(
        [
            None,
            "",
            "  ",
            rng.randrange(5),
            float(rng.randrange(3)),  # 1.0 is the JSON number 1
            rng.choice(["Alpha", "alpha", "ALPHA", "beta", "Beta Gamma", "gamma beta"]),
            rng.choice([True, False]),
            [rng.randrange(3), "x"],
            {"b": rng.randrange(2), "a": "y"},
            "2024-03-05",
            "SKU-1",
        ]
    )


# equal in Python (==) but not the same JSON value: a copied output with one of these swapped
# in looks identical to a dict comparison; EXACT tells them apart (1 vs true) or not (1 vs 1.0)
LOOK_ALIKE = [
    (1, True),
    (0, False),
    (1, 1.0),
    (0.0, -0.0),
    ([1, "x"], [True, "x"]),
    ({"a": 1}, {"a": 1.0}),
]


def _copied(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    """A ground truth over mostly EXACT/IGNORE keys and an output that copies it (the columnar
    kernel's identical records), sometimes with a null or blank value, a look-alike swapped in
    or a key whose strategy is detected."""
    gt = {k: _value(rng) for k in rng.sample(["code", "qty", "note", "when"], rng.randrange(0, 4))}
    out = dict(gt)
    if gt and rng.random() < 0.3:
        k = rng.choice(list(gt))
        a, b = rng.choice(LOOK_ALIKE)
        gt[k], out[k] = (a, b) if rng.random() < 0.5 else (b, a)
    return gt, out


def random_batch(seed: int, n: int) -> list[str]:
    """JSONL lines: random objects (nulls, case variants, numbers written as floats, arrays and
    objects, missing and extra keys), outputs that copy their ground truth (or seem to), outputs
    that are not objects or sit in text, some safety scores, and bad lines (invalid JSON, a
    missing output, a duplicate id)."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        gt = {k: _value(rng) for k in rng.sample(KEYS, rng.randrange(0, 6))}
        out: Any = {k: (v if rng.random() < 0.6 else _value(rng)) for k, v in gt.items()}
        for k in list(out):
            if rng.random() < 0.1:
                del out[k]
        if rng.random() < 0.2:
            out[rng.choice([*KEYS, "extra"])] = _value(rng)
        if rng.random() < 0.3:
            gt, out = _copied(rng)
        r = rng.random()
        if r < 0.05:
            out = rng.choice(["plain text", [1, 2], 3, None, True, "{broken"])
        elif r < 0.1:
            out = "```json\n" + json.dumps(out) + "\n```"
        record: dict[str, Any] = {"id": i if rng.random() < 0.5 else f"r{i}", "ground_truth": gt}
        if rng.random() > 0.02:
            record["output"] = out
        if rng.random() < 0.1:
            record["safety_score"] = rng.choice([0, 0.5, 1, 0.25])
        line = json.dumps(record)
        if rng.random() < 0.02:
            line = line[:-3]
        lines.append(line)
        if rng.random() < 0.02:
            lines.append(line)  # a duplicate id (or the same bad line again)
    return lines


# --- the literal reference: json-evaluation.md's pseudocode, one record at a time ------------


def is_null(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str) and value.strip() == "":  # noqa: SIM103 (the spec's code, verbatim)
        return True
    return False


def canonical(value: Any) -> str:
    """``str(v)`` with the documented JSON rules: sorted JSON for dict/list, integral floats as
    integers, ``true``/``false`` (docs/json.md "EXACT")."""

    def norm(v: Any) -> Any:
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        if isinstance(v, list):
            return [norm(x) for x in v]
        return v

    v = norm(value)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict | list):
        return json.dumps(v, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return str(v)


def reference_scores(aio: Any, gt: dict[str, Any], safety: float | None) -> tuple[float, ...]:
    """Phases 0-4 as the spec writes them (FUZZY: rapidfuzz's similarity >= 0.85; text outputs
    holding an object are parsed; any other non-object scores 0, 1, 0)."""
    safety_score = 1.0 if safety is None else float(safety)
    if isinstance(aio, str):
        text = aio.strip()
        if text.startswith("```"):
            text = text.split("\n", 1)[1].rsplit("```", 1)[0].strip()
        with contextlib.suppress(ValueError):
            aio = json.loads(text)
    if not isinstance(aio, dict):
        completeness, hallucination, accuracy = 0.0, 1.0, 0.0
    else:
        gt_keys, aio_keys = set(gt), set(aio)
        extra_keys = aio_keys - gt_keys
        gt_null_aio_has_value = {
            k for k in gt_keys & aio_keys if is_null(gt[k]) and not is_null(aio[k])
        }
        gt_non_null = {k for k in gt_keys if not is_null(gt[k])}
        aio_missing_or_null = {k for k in gt_non_null if k not in aio or is_null(aio[k])}
        both_non_null = gt_non_null - aio_missing_or_null
        completeness = len(both_non_null) / len(gt_non_null) if gt_non_null else 1.0
        total_distinct = len(gt_keys | aio_keys)
        count = len(extra_keys) + len(gt_null_aio_has_value)
        hallucination = count / total_distinct if total_distinct else 0.0
        scores = []
        for k in sorted(both_non_null):
            strategy = STRATEGIES.get(k, "EXACT")  # every other generated value is EXACT
            if strategy == "IGNORE":
                continue
            if strategy == "EXACT":
                scores.append(1.0 if canonical(gt[k]).lower() == canonical(aio[k]).lower() else 0.0)
            else:
                same = canonical(aio[k]) == canonical(gt[k])
                sim = (
                    1.0
                    if same
                    else TableMatcher("f")
                    .similarities([canonical(aio[k])], [canonical(gt[k])])[0]
                    .score
                )
                scores.append(1.0 if (sim or 0.0) >= 0.85 else 0.0)
        accuracy = math.fsum(scores) / len(scores) if scores else 1.0
    rqs = math.fsum(
        [
            WEIGHTS["accuracy"] * accuracy,
            WEIGHTS["completeness"] * completeness,
            WEIGHTS["safety"] * safety_score,
            -WEIGHTS["hallucination"] * hallucination,
        ]
    )
    return completeness, hallucination, accuracy, safety_score, min(1.0, max(0.0, rqs))


# --- the three paths -------------------------------------------------------------------------


def matchers() -> dict[str, TableMatcher]:
    return {"FUZZY": TableMatcher("table-fuzzy"), "SEMANTIC": TableMatcher("table-semantic")}


def streamed(data: Path, out: Path, chunk: int) -> dict[str, bytes]:
    config = EvalConfig(strategies=STRATEGIES)
    reader = BatchReader(data, chunk_lines=chunk)
    stream_batch_outputs(
        out, reader.chunks(), config, matchers=matchers(), source=str(data), bootstrap=200, seed=3
    )
    return _files(out)


def in_memory(data: Path) -> BatchResult:
    records, errors = read_batch(data)
    return evaluate_batch(
        records,
        EvalConfig(strategies=STRATEGIES),
        matchers=matchers(),
        errors=[RecordError.of(e) for e in errors],
        source=str(data),
        bootstrap=200,
        seed=3,
    )


def _files(out: Path) -> dict[str, bytes]:
    names = ("records.jsonl", "summary.json", "fields.csv", "report.md", "errors.jsonl")
    return {name: (out / name).read_bytes() for name in names}


def _summary(files: dict[str, bytes]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(files["summary.json"])
    data.pop("matcher_pairs")  # pairs sent: de-duplicated per chunk, so it depends on the chunk
    return data


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_streamed_in_memory_and_the_spec_reference_give_identical_numbers(
    tmp_path: Path, seed: int
) -> None:
    lines = random_batch(seed, 400)
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(lines) + "\n")
    one = streamed(data, tmp_path / "one", 10_000)
    for chunk in (1, 7):
        files = streamed(data, tmp_path / f"chunk{chunk}", chunk)
        for name in ("records.jsonl", "fields.csv", "report.md", "errors.jsonl"):
            assert files[name] == one[name], (chunk, name)
        assert _summary(files) == _summary(one), chunk
    batch = in_memory(data)  # evaluate_batch: the same results, errors and summary
    assert json.loads(one["summary.json"]) == {**batch.summary.to_json(), "complete": True}
    errors = [json.loads(line) for line in one["errors.jsonl"].splitlines()]
    assert errors == [e.model_dump(mode="json") for e in batch.errors]

    # the reference, record by record, and its means (fsum / n)
    by_id: dict[str, dict[str, Any]] = {}
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if "output" in record and str(record["id"]) not in by_id:
            by_id[str(record["id"])] = record
    rows = [json.loads(line) for line in one["records.jsonl"].splitlines()]
    assert [str(r["id"]) for r in rows] == list(by_id)  # every valid, first-seen record, in order
    names = ("completeness", "hallucination", "accuracy", "safety_score", "rqs")
    kept = (*names, "buckets", "fields", "output_kind", "flags", "safety_findings")
    results = [r.result.model_dump(mode="json") for r in batch.results]
    assert [r["id"] for r in rows] == [r.id for r in batch.results]
    assert [{k: r[k] for k in kept} for r in rows] == [{k: r[k] for k in kept} for r in results]
    expected = [
        reference_scores(r["output"], r["ground_truth"], r.get("safety_score"))
        for r in by_id.values()
    ]
    for row, ref in zip(rows, expected, strict=True):
        assert tuple(row[n] for n in names) == ref, row["id"]
    summary = json.loads(one["summary.json"])
    for j, name in enumerate(names):
        assert summary["means"][name] == math.fsum(e[j] for e in expected) / len(expected)
    assert (
        summary["scored"] == len(expected)
        and summary["records"] == len(expected) + summary["not_scored"]
    )
    # failed: the records the store calls failed, read from their records.jsonl lines (issue 26)
    assert summary["failed"] == sum(json_columns(r).failed is True for r in rows) > 0


def test_random_batches_have_every_kind_of_line(tmp_path: Path) -> None:
    # the generator is worth its name: each seed has failures, non-objects, text objects, IGNORE
    # fields and FUZZY fields that need the matcher
    for seed in (0, 1, 2):
        data = tmp_path / f"d{seed}.jsonl"
        data.write_text("\n".join(random_batch(seed, 400)) + "\n")
        files = streamed(data, tmp_path / f"m{seed}", 10_000)
        summary = json.loads(files["summary.json"])
        assert summary["not_scored"] > 0 and summary["not_an_object"] > 0
        assert b"parsed_from_text" in files["records.jsonl"]
        assert summary["fields"]["note"]["ignored"] > 0
        assert summary["matcher_pairs"]["FUZZY"] > 0
        assert b"duplicate id" in files["errors.jsonl"]


def test_memory_of_the_aggregates_does_not_grow_with_the_records(tmp_path: Path) -> None:
    # the streamed path keeps a chunk, the aggregates and 10 worst records: the same data
    # repeated 10x ends with the same number of kept records and the same field tallies x10
    line = {"ground_truth": {"a": 1, "b": "x"}, "output": {"a": 1, "b": "y"}}
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": i, **line}) + "\n" for i in range(3000)))
    reader = BatchReader(data, chunk_lines=100)
    batch = stream_batch_outputs(
        tmp_path / "o", reader.chunks(), EvalConfig(), matchers=matchers(), bootstrap=50
    )
    fields = batch.summary.fields
    assert (fields["a"].matched, fields["b"].matched, fields["b"].scored) == (3000, 0, 3000)
    assert batch.summary.means["accuracy"] == 0.5
    report = (tmp_path / "o" / "report.md").read_text()
    worst = [line.split(" | ")[0][2:] for line in report.splitlines() if " | b | " in line]
    assert worst == [str(i) for i in range(10)]  # the 10 worst (all tie): the first 10, in order


def test_cli_all_bad_file_is_refused_before_the_folder_is_touched(tmp_path: Path) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_text("\n".join(["{oops"] * 5000) + "\n")  # more than one chunk of bad lines
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["json", "batch", str(data), "--out", str(out)])
    assert result.exit_code == 2
    assert "no valid record (5000 problems; first:" in result.output
    assert not out.exists()


def test_chunks_of_the_pipeline_give_the_numbers_of_one_chunk(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(random_batch(10, 300)) + "\n")
    settings = {"config": {"strategies": {"name": "EXACT"}}, "bootstrap": 100}
    failed = []
    for chunk in (3, 10_000):
        outcome = core.score(
            "json",
            [("batch", data)],
            settings,
            out=tmp_path / f"o{chunk}",
            command="json batch",
            store=False,
            extras={"chunk_lines": chunk},
        )
        failed.append(outcome.scored.failed)
    assert failed == [True, True]  # some lines failed
    for name in ("records.jsonl", "fields.csv", "errors.jsonl", "report.md"):
        assert (tmp_path / "o3" / name).read_bytes() == (tmp_path / "o10000" / name).read_bytes()
    first = json.loads((tmp_path / "o3" / "summary.json").read_text())
    second = json.loads((tmp_path / "o10000" / "summary.json").read_text())
    assert first.pop("matcher_pairs") != second.pop("matcher_pairs")  # sent per chunk of 3
    assert first == second and first["complete"] is True


def test_duplicate_ids_are_found_across_the_older_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # older ids sit in sorted runs of hashes (a chunk's each, merged): a duplicate of any of
    # them names the first line exactly, and 1 and "1" are the same id
    from fieldcheck.jsoneval import _stream

    rows = [{"id": i, "ground_truth": {"a": 1}, "output": {"a": 1}} for i in range(20)]
    rows += [
        {"id": "3", "ground_truth": {}, "output": {}},
        {"id": 17, "ground_truth": {}, "output": {}},
    ]
    data = tmp_path / "d.jsonl"
    data.write_text("\ufeff" + "".join(json.dumps(r) + "\n" for r in rows))  # a BOM on line 1
    rows.append({"id": 0, "ground_truth": {}, "output": {}})
    with data.open("a") as handle:
        handle.write(json.dumps(rows[-1]) + "\n")
    reader = BatchReader(data, chunk_lines=3)
    failed = [x.error.message for c in reader.chunks() for x in c if isinstance(x, _stream.Failed)]
    assert failed == [
        f"{data}:21: record 3: field 'id': duplicate id (first on line 4)",
        f"{data}:22: record 17: field 'id': duplicate id (first on line 18)",
        f"{data}:23: record 0: field 'id': duplicate id (first on line 1)",
    ]
    assert reader.records == 20


@pytest.mark.parametrize("seed", range(5))
def test_duplicate_ids_match_a_naive_reference_and_the_runs_stay_few(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """Random ids, a quarter of them repeats, a run per chunk merged as they grow: every
    duplicate names the line a dict of first lines names, and the runs of N ids number at most
    log2(N) + 1 (they were one per chunk: 10x the records took 25x the lookups' time)."""
    import math
    import random

    from fieldcheck.jsoneval import _stream

    rng = random.Random(seed)
    ids: list[int | str] = []
    for _ in range(300):
        fresh = rng.random() > 0.25 or not ids
        ids.append(rng.randrange(10**6) if fresh else str(rng.choice(ids)))
    data = tmp_path / "d.jsonl"
    data.write_text(
        "".join(json.dumps({"id": i, "ground_truth": {}, "output": {}}) + "\n" for i in ids)
    )
    first: dict[str, int] = {}
    expected = []
    for line, i in enumerate(ids, 1):
        if str(i) in first:
            expected.append(
                f"{data}:{line}: record {i}: field 'id': duplicate id (first on line {first[str(i)]})"
            )
        else:
            first[str(i)] = line
    runs: list[int] = []
    real_add = _stream._SeenIds.add

    def add(self: Any, *args: Any) -> None:
        real_add(self, *args)
        runs.append(len(self.runs))

    monkeypatch.setattr(_stream._SeenIds, "add", add)
    reader = BatchReader(data, chunk_lines=rng.choice([1, 2, 7]))
    failed = [x.error.message for c in reader.chunks() for x in c if isinstance(x, _stream.Failed)]
    assert failed == expected
    assert reader.records == len(first)
    assert max(runs) <= math.log2(len(first)) + 1


def test_the_streamed_random_batches_use_the_exact_ignore_kernel_and_the_general_path(
    tmp_path: Path,
) -> None:
    # the identical-numbers test above covers both: records whose compared fields are all
    # EXACT/IGNORE go through Scorer._outcome, the others (a FUZZY field to compare, auto-detected
    # text) through prepare/assemble
    from fieldcheck.jsoneval._stream import Item, Scorer

    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(random_batch(0, 400)) + "\n")
    config = EvalConfig(strategies=STRATEGIES)
    scorer = Scorer(config, matchers())
    served = [
        scorer._outcome(x) is not None
        for chunk in BatchReader(data).chunks()
        for x in chunk
        if isinstance(x, Item) and isinstance(x.output, dict)
    ]
    assert min(served.count(True), served.count(False)) > 50


@pytest.mark.parametrize("chunk", [1, 7, 10_000])
def test_the_streamed_random_batches_reach_the_columnar_kernel(tmp_path: Path, chunk: int) -> None:
    # the identical-numbers test above reads chunks of 1, 7 and 10,000 lines: in each, records
    # whose output copies the ground truth are scored by Scorer.columnar without ``_outcome``, with
    # the result ``_outcome`` gives record by record (copies with a null, a look-alike value or a
    # detected strategy go to ``_outcome``)
    from fieldcheck.jsoneval._stream import Item, Scorer, _of_record, record_line

    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(random_batch(0, 400)) + "\n")
    config = EvalConfig(strategies=STRATEGIES)
    columnar = Scorer(config, matchers())
    one_by_one = Scorer(config, matchers())
    for part in BatchReader(data, chunk_lines=chunk).chunks():
        items = [x for x in part if isinstance(x, Item) and isinstance(x.output, dict)]
        got = columnar.columnar(items)
        want = [_of_record(one_by_one._outcome(x), x) for x in items]
        assert [None if r is None else record_line(r) for r in got] == [
            None if r is None else record_line(r) for r in want
        ]
    assert columnar.identical > 50
    assert one_by_one.identical == 0


@pytest.mark.parametrize("chunk", [1, 7])
def test_the_random_batches_reach_plain_items(tmp_path: Path, chunk: int) -> None:
    # the identical-numbers test reads its random batches in chunks of 1, 7 and 10,000 lines:
    # the chunks of plain lines are read by ``plain_items`` (no loop per record; a large file's
    # unparsed chunks) with the items the line reader gives them, the others left to it (None)
    from fieldcheck.jsoneval._stream import plain_items

    data = tmp_path / "d.jsonl"
    lines = [line.encode() + b"\n" for line in random_batch(0, 400)]
    data.write_bytes(b"".join(lines))
    chunks = list(BatchReader(data, chunk_lines=chunk).chunks())
    plain = 0
    for start, read in zip(range(0, len(lines), chunk), chunks, strict=True):
        numbers = range(start + 1, start + 1 + len(lines[start : start + chunk]))
        found = plain_items(numbers, lines[start : start + chunk], True)
        if found is not None and all(isinstance(x, Item) for x in read):
            plain += 1
            assert found[0] == read
            assert found[1] == [x.key for x in read]
    assert 10 < plain < len(chunks)


def test_plain_items_gives_the_items_of_the_line_reader(tmp_path: Path) -> None:
    from fieldcheck.jsoneval._stream import plain_items

    lines = [
        json.dumps({"id": i, "ground_truth": {"a": i}, "output": {"a": [i]}}) for i in range(9)
    ]
    lines += [json.dumps({"id": f"s{i}", "ground_truth": {}, "output": "x"}) for i in range(5)]
    records = [json.loads(line) for line in lines]
    raw = [line.encode() + b"\n" for line in lines]
    found = plain_items(range(1, 15), raw, False)
    assert found is not None and found[0] == [
        Item(n, r["id"], n, r["ground_truth"], r["output"], None, True)
        for n, r in enumerate(records, start=1)
    ]
    assert found[1] == [str(r["id"]) for r in records]
    # an id twice, an id that is a boolean, a safety score beyond [0, 1] or written as a
    # string (pydantic's error words it): the chunk is read line by line
    for bad in (
        {"id": 3, "ground_truth": {}, "output": 1},
        {"id": True, "ground_truth": {}, "output": 1},
        {"id": 99, "ground_truth": {}, "output": 1, "safety_score": 1.5},
        {"id": 99, "ground_truth": {}, "output": 1, "safety_score": "0.5"},
    ):
        assert plain_items(range(1, 16), [*raw, json.dumps(bad).encode()], False) is None, bad
    # a safety score null or in [0, 1] (an integer read as a float) is a plain chunk's, as the
    # line reader reads it
    for given, kept in ((0.5, 0.5), (1, 1.0), (None, None)):
        good = {"id": 99, "ground_truth": {}, "output": 1, "safety_score": given}
        found = plain_items(range(1, 16), [*raw, json.dumps(good).encode()], False)
        assert found is not None and found[0][-1] == Item(15, 99, 15, {}, 1, kept, True)
        assert type(found[0][-1].safety_score) is type(kept)
        data = tmp_path / "d.jsonl"
        data.write_text("\n".join([*lines, json.dumps(good)]) + "\n")
        assert [x for c in BatchReader(data).chunks() for x in c] == found[0]


def test_the_columnar_kernel_leaves_a_value_orjson_cannot_write_to_fast() -> None:
    # a 70-bit integer (not from a file: orjson reads one as a float) equal on both sides
    from fieldcheck.jsoneval._stream import Scorer

    config = EvalConfig(strategies={"n": "EXACT"})
    scorer = Scorer(config, matchers())
    items = [Item(1, "a", 1, {"n": 2**70}, {"n": 2**70}, None, True)]
    (scored,) = scorer.columnar(items)
    assert scorer.identical == 0
    assert scored is not None and scored.fields == {"n": ("EXACT", 1.0, 1.0)}


def test_a_blank_id_is_not_named_as_the_record(tmp_path: Path) -> None:
    """An empty or blank id is the error itself: the line reads ``field 'id': must not be
    empty``, never ``record : field 'id'`` (a tester's finding), as the documents reader words
    it, and errors.jsonl gives no record."""
    data = tmp_path / "ids.jsonl"
    lines = [{"id": i, "ground_truth": {"x": 1}, "output": {"x": 1}} for i in ("", "b", " ")]
    data.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["json", "batch", str(data), "--out", str(out), "--no-store"])
    assert result.exit_code == 3, result.output
    errors = [json.loads(x) for x in (out / "errors.jsonl").read_text().splitlines()]
    assert [(e["message"], e["record"]) for e in errors] == [
        (f"{data}:1: field 'id': must not be empty (got '')", None),
        (f"{data}:3: field 'id': must not be empty (got ' ')", None),
    ]
    assert f"{data}:1: field 'id': must not be empty (got '')" in " ".join(result.stderr.split())


def test_json_batch_hashes_its_input_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # run.json's sha256 (taken when the folder opens) is the one the store records: the input
    # is read once for it, not once more by the store (0.25 s of a million records)
    import hashlib

    from fieldcheck.store import Store

    hashed: list[Path] = []

    def counted(path: str | Path) -> str:
        hashed.append(Path(path))
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()

    monkeypatch.setattr("fieldcheck.reports._folder.sha256_file", counted)
    monkeypatch.setattr("fieldcheck.store._recorder.sha256_file", counted)
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": 1, "ground_truth": {"a": 1}, "output": {"a": 1}}) + "\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["json", "batch", str(data), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert hashed == [data]
    given = json.loads((out / "run.json").read_text())["inputs"][0]["sha256"]
    assert given == hashlib.sha256(data.read_bytes()).hexdigest()
    (run,) = Store().list_runs()
    assert [i["sha256"] for i in run.inputs] == [given]


def test_id_hashes_are_the_same_in_every_process_and_every_place_in_a_chunk() -> None:
    # a pool process hashes its chunk's ids, the reading process looks them up (``_SeenIds``):
    # unlike ``hash`` of a str, the value is fixed, and an id's hash does not depend on its
    # neighbours
    from fieldcheck.jsoneval._stream import id_hashes

    assert id_hashes(["1"]).tolist() == [170569142464476618]
    both = id_hashes(["x\ud800é", "1", ""])
    assert both.tolist() == [*id_hashes(["x\ud800é"]), 170569142464476618, 0]
    assert len(set(id_hashes([str(i) for i in range(100_000)]).tolist())) == 100_000

"""What a comparison keeps between its pages (the paired rows, the truth digests: read again for
each page of a run of 100,000 items they cost seconds): kept while both runs' items files are as
they were, read again once either changes."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck.runs import compare
from fieldcheck.store import Store


def test_a_comparison_reads_again_the_items_of_a_run_whose_file_changed(tmp_path: Path) -> None:
    ids = []
    for name, city in (("a", "Oslo"), ("b", "Rome")):
        rows = [
            {"id": f"r{i}", "ground_truth": {"city": "Oslo"}, "output": {"city": city}}
            for i in range(4)
        ]
        batch = tmp_path / f"{name}.jsonl"
        batch.write_text("".join(json.dumps(r) + "\n" for r in rows))
        out = tmp_path / name
        result = CliRunner().invoke(app, ["json", "batch", str(batch), "--out", str(out)])
        assert result.exit_code == 0, result.output
        ids.append(result.output.split("stored as run ")[1][:12])
    store = Store()
    runs = [store.get_run(i) for i in ids]
    assert None not in runs

    def paired() -> tuple[int, int, list[str]]:
        found = compare(store, runs, differ=True)  # type: ignore[arg-type]
        keys = [row["key"] for row in found["matrix"]["rows"]]
        return found["paired"][0]["items"], len(found["warnings"]), keys

    assert paired() == (4, 0, ["r0", "r1", "r2", "r3"])
    assert paired() == (4, 0, ["r0", "r1", "r2", "r3"])  # its second page: as the first
    path = store.items_file(ids[1])  # the second run's file made anew of 3 items: the same store
    assert path is not None and path.is_file()
    table = pq.read_table(path)
    path.unlink()
    pq.write_table(table.slice(0, 3), path, compression="zstd")
    # r3 in the first run alone: 3 items paired, other truth (3 items) and r3 differs still
    assert paired() == (3, 1, ["r0", "r1", "r2", "r3"])
    store.close()

"""A run's export read in one scan of its items file (``Store.iter_items``): every item once, in
seq order, as the keyset pages of ``page_items`` give them, across more than one page."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
from typer.testing import CliRunner

from fieldcheck._cli.main import app
from fieldcheck.runs._export import iter_export
from fieldcheck.store import Store
from fieldcheck.store._store import ITEM_PAGE


def test_iter_items_gives_the_keyset_pages_items_in_one_scan(tmp_path: Path) -> None:
    n = 2 * ITEM_PAGE + 7
    batch = tmp_path / "batch.jsonl"
    rows = ({"id": f"k{i}", "ground_truth": {"a": i}, "output": {"a": i % 3}} for i in range(n))
    batch.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = CliRunner().invoke(app, ["json", "batch", str(batch), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    run_id = result.output.split("stored as run ")[1][:12]
    store = Store()
    paged, after = [], -1
    while page := store.page_items(run_id, after=after, limit=ITEM_PAGE):
        paged += page
        after = page[-1].seq
    streamed = list(store.iter_items(run_id))
    assert len(streamed) == n and streamed == paged
    assert [i.seq for i in streamed] == sorted(i.seq for i in streamed)
    lines = b"".join(iter_export(store, run_id, "jsonl")).splitlines()
    assert [json.loads(line)["key"] for line in lines] == [i.key for i in paged]

    # a file's own order is read as it is only where its seqs ascend: a file of them reversed
    path = store.items_file(run_id)
    assert path is not None and path.is_file()
    table = pq.read_table(path)
    path.unlink()
    pq.write_table(table.take(list(range(n - 1, -1, -1))), path, compression="zstd")
    assert list(store.iter_items(run_id)) == paged
    store.close()

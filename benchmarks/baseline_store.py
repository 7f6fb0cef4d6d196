"""Baseline: the run store's item writes alone, what ``json batch`` cannot be faster than while
it records its run (the default). ``main([N, BYTES, TAGGED])`` writes N items of BYTES bytes of
result text each (a JSON item of the generated records is 1,096-1,252 bytes, 1,187 on average),
a tag for TAGGED of them (0.3: the records that failed on a field), in chunks of 4,096 through
``Store.items_writer`` (the writer process's own call) into the run's Parquet file under the
artifacts root of ``FIELDCHECK_DATABASE_URL``'s store, migrated before the clock by
``_driver``, and publishes it."""

from __future__ import annotations

CHUNK = 4_096
Item = tuple[str, int, str | None, bool | None, str | None, int | None, str | bytes]
Tag = tuple[str, int, bool]


def main(argv: list[str]) -> int:
    from fieldcheck.store import Store

    n, size, tagged = int(argv[0]), int(argv[1]), float(argv[2])
    store = Store()
    run = store.create_scored_run(
        system="json", model="", task="score", inputs=[], settings={}, signature="baseline",
        out_dir=None, parent_id=None,
    )  # fmt: skip
    text = '{"x":"' + "a" * max(0, size - 8) + '"}'
    every = round(1 / tagged) if tagged > 0 else 0
    writer = store.items_writer(run.id)
    for start in range(0, n, CHUNK):
        seqs = range(start, min(n, start + CHUNK))
        items: list[Item] = [
            (str(i), i, None, bool(every) and i % every == 0, None, None, text) for i in seqs
        ]
        tags = [("city", i, True) for i in seqs if every and i % every == 0]
        writer.write(items, tags)
    writer.close()
    store.publish_items(run.id)
    stored = store.count_items(run.id)
    store.close()
    return 0 if stored == n else 1

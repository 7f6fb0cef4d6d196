"""A scored run's items as one zstd Parquet file (issue 27 item 5, docs/runs.md): the indexed
columns of ``_items.ItemColumns`` typed, and the item's JSON as text, under the artifacts root at
``runs/<run id>/items.parquet``; read with DuckDB (pages, filters, counts, run-to-run joins).

Written in row groups as chunks arrive (at most ``ROW_GROUP_ROWS`` items or ``ROW_GROUP_BYTES``
of JSON held) into ``items-*.part`` files, one per writer (a run's inserts move from a thread to
a process), which ``publish`` renames, or merges, into ``items.parquet`` when the run ends.
pyarrow and DuckDB are imported on first use (commands that never read items start fast).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ITEMS = "items.parquet"
ROW_GROUP_ROWS = 65_536
ROW_GROUP_BYTES = 16 << 20
COLUMNS = ("key", "seq", "error_type", "failed", "model", "turn", "tags", "failed_tags", "result")
_Row = tuple[str, int, str | None, bool | None, str | None, int | None, str | bytes]
_Tag = tuple[str, int, bool]


def schema() -> Any:
    import pyarrow as pa

    text, names = pa.string(), pa.list_(pa.string())
    kinds = (text, pa.int64(), text, pa.bool_(), text, pa.int64(), names, names, text)
    return pa.schema(list(zip(COLUMNS, kinds, strict=True)))


class ItemsWriter:
    """Appends chunks of items (``(key, seq, error_type, failed, model, turn, result)`` rows
    and ``(tag, seq, failed)`` rows) to a part file of ``folder`` a row group at a time;
    ``on_write(items, errors)`` hears of each chunk taken (the run's counts: a closed writer
    has written them all)."""

    def __init__(self, folder: Path, on_write: Callable[[int, int], None] | None = None) -> None:
        self.folder = folder
        self.path = folder / f"items-{uuid.uuid4().hex[:12]}.part"
        self._on_write = on_write
        self._tables: list[Any] = []
        self._rows = self._bytes = 0
        self._writer: Any = None

    def write(self, items: Sequence[_Row], tags: Sequence[_Tag]) -> None:
        if not items:
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        if self._writer is None:  # made at the first chunk: a folder that cannot be is told now
            self.folder.mkdir(parents=True, exist_ok=True)
            self._writer = pq.ParquetWriter(self.path, schema(), compression="zstd")

        key, seq, error, failed, model, turn, result = zip(*items, strict=True)
        s = schema()
        arrays = [
            pa.array(c, s.field(i).type)
            for i, c in enumerate((key, seq, error, failed, model, turn))
        ]
        arrays += _tag_lists(seq, tags)
        # the JSON is orjson's UTF-8 (or a str, encoded): viewed as text without a second check
        arrays.append(pa.array(result, pa.binary()).view(pa.string()))
        table = pa.Table.from_arrays(arrays, schema=s)
        self._tables.append(table)
        self._rows += len(items)
        self._bytes += table.nbytes
        if self._on_write is not None:
            self._on_write(len(items), sum(1 for e in error if e))
        if self._rows >= ROW_GROUP_ROWS or self._bytes >= ROW_GROUP_BYTES:
            self.flush()

    def flush(self) -> None:
        """Write the items held as one row group."""
        if not self._tables:
            return
        import pyarrow as pa

        table = pa.concat_tables(self._tables)
        self._writer.write_table(table, row_group_size=len(table))
        self._tables, self._rows, self._bytes = [], 0, 0

    def close(self) -> None:
        """Close the part; one whose keys are all distinct is renamed ``*.unique.part``, which
        ``publish`` renames into place without reading it (nor importing DuckDB)."""
        self.flush()
        if self._writer is not None:
            import pyarrow.compute as pc
            import pyarrow.parquet as pq

            self._writer.close()
            self._writer = None
            keys = pq.read_table(self.path, columns=["key"]).column("key")
            if pc.count_distinct(keys).as_py() == len(keys):
                self.path = self.path.replace(self.path.with_suffix(".unique.part"))


def _tag_lists(seqs: Sequence[int], tags: Sequence[_Tag]) -> list[Any]:
    """The ``tags`` and ``failed_tags`` lists of each item of ``seqs``, from ``(tag, seq,
    failed)`` rows (few items have tags: built from offsets)."""
    import pyarrow as pa

    by_seq: dict[int, list[_Tag]] = {}
    for tag in tags:
        by_seq.setdefault(tag[1], []).append(tag)
    lists = []
    for only_failed in (False, True):
        offsets, names = [0], []
        for seq in seqs:
            names += [n for n, _, f in by_seq.get(seq, ()) if f or not only_failed]
            offsets.append(len(names))
        lists.append(
            pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(names, pa.string()))
        )
    return lists


def quote(text: str | Path, mark: str = "'") -> str:
    """``text`` as a DuckDB string literal (or, with ``mark`` ``"``, an identifier)."""
    return mark + str(text).replace(mark, mark * 2) + mark


def publish(folder: Path) -> Path:
    """Make the part files of ``folder`` its ``items.parquet``: one part of distinct keys renamed, or the
    parts merged in ``seq`` order (DuckDB, streamed), a key seen before in the run getting
    ``~<seq>`` appended; an empty file when there is none. Written beside it and renamed."""
    folder.mkdir(parents=True, exist_ok=True)
    final, tmp = folder / ITEMS, folder / (ITEMS + ".tmp")
    parts = sorted(folder.glob("items-*.part"))
    if len(parts) == 1 and parts[0].name.endswith(".unique.part"):
        return parts[0].replace(final)
    if not parts:
        import pyarrow.parquet as pq

        pq.write_table(schema().empty_table(), tmp, compression="zstd")
        return tmp.replace(final)
    import duckdb

    scan = f"read_parquet([{', '.join(quote(p) for p in parts)}])"
    with duckdb.connect() as con:
        key = (
            "CASE WHEN row_number() OVER (PARTITION BY key ORDER BY seq) > 1 "
            "THEN key || '~' || seq ELSE key END AS key"
        )
        rest = ", ".join(COLUMNS[1:])
        con.execute(
            f"COPY (SELECT {key}, {rest} FROM {scan} ORDER BY seq) TO {quote(tmp)} "
            f"(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {ROW_GROUP_ROWS})"
        )
    tmp.replace(final)
    for part in parts:
        part.unlink()
    return final


def remove(folder: Path) -> None:
    """Delete what fieldcheck wrote in a run's folder, then the folder if nothing else is in it
    (a user's own file there stays)."""
    for name in (ITEMS, ITEMS + ".tmp"):
        (folder / name).unlink(missing_ok=True)
    for part in folder.glob("items-*.part"):
        part.unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()


def _where(
    *, failed: bool | None, tag: str | None, model: str | None, turn: int | None
) -> tuple[str, list[Any]]:
    """The filters of ``Store.page_items`` as a DuckDB condition and its parameters."""
    terms: list[str] = ["TRUE"]
    params: list[Any] = []
    if tag is not None:
        terms.append("list_contains(tags, ?)")
        params.append(tag)
        if failed is not None:
            terms.append(("" if failed else "NOT ") + "list_contains(failed_tags, ?)")
            params.append(tag)
    elif failed is not None:
        terms.append("failed = ?")
        params.append(failed)
    for name, value in (("model", model), ("turn", turn)):
        if value is not None:
            terms.append(f"{name} = ?")
            params.append(value)
    return " AND ".join(terms), params


def page(con: Any, path: Path, *, after: int, limit: int, **filters: Any) -> list[tuple[Any, ...]]:
    """``(key, seq, error_type, failed, model, turn, result)`` of up to ``limit`` items with
    ``seq > after``, in ``seq`` order."""
    where, params = _where(**filters)
    return list(
        con.execute(
            "SELECT key, seq, error_type, failed, model, turn, result FROM read_parquet(?) "
            f"WHERE seq > ? AND {where} ORDER BY seq LIMIT ?",
            [str(path), after, *params, limit],
        ).fetchall()
    )


def count(con: Any, path: Path, *, not_scored: bool = False, **filters: Any) -> int:
    where, params = _where(**filters)
    if not_scored:
        where += " AND failed IS NULL"
    found = con.execute(
        f"SELECT count(*) FROM read_parquet(?) WHERE {where}", [str(path), *params]
    ).fetchone()
    return int(found[0])


def tag_names(con: Any, path: Path, limit: int) -> list[str]:
    rows = con.execute(
        "SELECT DISTINCT unnest(tags) AS name FROM read_parquet(?) ORDER BY name LIMIT ?",
        [str(path), limit],
    ).fetchall()
    return [r[0] for r in rows]


def join_counts(con: Any, first: Path, second: Path, model: str | None) -> dict[str, int]:
    """Two runs' items joined on their key (of ``model``'s items only, when given): how many
    have each pair of verdicts, ``"<in first> -> <in second>"``, a verdict being ``passed``,
    ``failed``, ``not scored`` or ``missing`` (no such key in that run)."""
    verdict = (
        "CASE WHEN {t}.key IS NULL THEN 'missing' WHEN {t}.failed IS NULL THEN 'not scored' "
        "WHEN {t}.failed THEN 'failed' ELSE 'passed' END"
    )
    side = "(SELECT key, failed FROM read_parquet(?) WHERE ? IS NULL OR model = ?)"
    rows = con.execute(
        f"SELECT {verdict.format(t='a')} || ' -> ' || {verdict.format(t='b')} AS pair, "
        f"count(*) FROM {side} a FULL OUTER JOIN {side} b ON a.key = b.key "
        "GROUP BY pair ORDER BY pair",
        [str(first), model, model, str(second), model, model],
    ).fetchall()
    return {r[0]: int(r[1]) for r in rows}

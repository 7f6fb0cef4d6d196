"""A scored run's items as zstd Parquet under the artifacts root (issue 27 item 5, docs/runs.md):
part files a recorder's task each, published as the run's items, read with DuckDB."""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

ITEMS = "items.parquet"
RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # a run's folder name: no path leads out of the root
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
    """Appends chunks of items (``_Row`` and ``_Tag`` rows) to a part file of ``folder`` a row
    group at a time; ``on_write(items, errors)`` hears of each chunk taken (the run's counts)."""

    def __init__(
        self,
        folder: Path,
        on_write: Callable[[int, int], None] | None = None,
        first: int = 0,
    ) -> None:
        self.folder = folder
        # parts sort by their first item's seq (``publish`` concatenates them in that order);
        # written as ``*.part.tmp``, renamed when closed: a killed task's part is never read
        self.path = folder / f"items-{first:012d}-{uuid.uuid4().hex[:12]}.part"
        self._tmp = self.path.with_name(self.path.name + ".tmp")
        self._on_write = on_write
        self._tables: list[Any] = []
        self._rows = self._bytes = 0
        self._writer: Any = None

    def write(self, items: Sequence[_Row] | Any, tags: Sequence[_Tag] = ()) -> None:
        """Hold rows, or a table of ``schema()`` (``spliced``'s), for the next row group."""
        if not len(items):
            return
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        if self._writer is None:  # made at the first chunk: a folder that cannot be is told now
            self.folder.mkdir(parents=True, exist_ok=True)
            self._writer = pq.ParquetWriter(self._tmp, schema(), compression="zstd")
        table = _table(items, tags) if isinstance(items, Sequence) else items
        self._tables.append(table)
        self._rows += len(table)
        self._bytes += table.nbytes
        if self._on_write is not None:
            errors = pc.sum(pc.not_equal(table.column("error_type"), "")).as_py()
            self._on_write(len(table), errors or 0)
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
        """Write what is held and close the part."""
        self.flush()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            self._tmp.replace(self.path)

    def discard(self) -> None:
        """Close the part unfinished and delete its file (its task stopped: Ctrl-C, an error)."""
        with contextlib.suppress(Exception):
            if self._writer is not None:
                self._writer.close()
        self._writer = None
        self._tmp.unlink(missing_ok=True)


def _table(items: Sequence[_Row], tags: Sequence[_Tag]) -> Any:
    import pyarrow as pa

    key, seq, error, failed, model, turn, result = zip(*items, strict=True)
    s = schema()
    arrays = [
        pa.array(c, s.field(i).type) for i, c in enumerate((key, seq, error, failed, model, turn))
    ]
    arrays += _tag_lists(seq, tags)
    # the JSON is orjson's UTF-8 (or a str, encoded): viewed as text without a second check
    arrays.append(pa.array(result, pa.binary()).view(pa.string()))
    return pa.Table.from_arrays(arrays, schema=s)


def spliced(
    keys: list[str], outcomes: Sequence[tuple[Any, ...]], which: Sequence[int], lines: bytes,
    mark: bytes, skip: int,
) -> Any:  # fmt: skip
    """Items as a table of ``schema()`` but ``seq``: ``keys`` with ``outcomes[which[i]]``'s
    (failed, tags, before, after), result ``before + line[skip:mark] + after + line[mark:]``."""

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n, line = len(keys), np.frombuffer(lines, np.uint8)
    ends = np.flatnonzero(line == 10)[:n]
    found = np.flatnonzero(line[: len(line) - len(mark) + 1] == mark[0])
    for i, byte in enumerate(mark[1:], 1):
        found = found[line[found + i] == byte]
    starts = np.append(0, ends[:-1] + 1)
    cuts = np.append(found, len(line))[np.searchsorted(found, starts)]
    if (cuts >= ends).any() or (cuts < starts + skip).any():
        raise ValueError(f"a line without {mark!r}")
    at = pa.array(which, pa.int32())
    before, after = (pa.array([o[i] for o in outcomes], pa.binary()).take(at) for i in (2, 3))
    middle, rest = _pieces(lines, starts + skip, cuts), _pieces(lines, cuts, ends)
    text = pc.binary_join_element_wise(
        before.view(pa.string()), middle, after.view(pa.string()), rest, ""
    )
    tags = pa.array([list(dict.fromkeys(o[1])) for o in outcomes], pa.list_(pa.string())).take(at)
    failed = pa.array([o[0] for o in outcomes], pa.bool_()).take(at)
    null = [pa.nulls(n, pa.string()), pa.nulls(n, pa.int64())]
    arrays = [pa.array(keys, pa.string()), null[0], failed, *null, tags, tags, text]
    return pa.Table.from_arrays(arrays, schema=schema().remove(1))


def _pieces(text: bytes, starts: Any, ends: Any) -> Any:
    """The strings ``text[starts[i]:ends[i]]`` (ascending, apart), one copy of them."""
    import numpy as np
    import pyarrow as pa

    bounds = np.stack((starts, ends), 1).ravel().astype(np.int32)
    cut = pa.StringArray.from_buffers(len(bounds) - 1, pa.py_buffer(bounds), pa.py_buffer(text))
    return cut.take(pa.array(np.arange(0, len(bounds), 2, dtype=np.int32)))


def _tag_lists(seqs: Sequence[int], tags: Sequence[_Tag]) -> list[Any]:
    """The ``tags`` and ``failed_tags`` lists of each item of ``seqs`` from ``_Tag`` rows (by a
    binary search where both ascend, as ``flat_rows`` makes them)."""
    import numpy as np
    import pyarrow as pa

    at = np.asarray(seqs, dtype=np.int64)
    lists = []
    for only_failed in (False, True):
        kept = [t for t in tags if t[2]] if only_failed else list(tags)
        of = np.fromiter((t[1] for t in kept), dtype=np.int64, count=len(kept))
        if np.all(at[1:] > at[:-1]) and np.all(of[1:] >= of[:-1]) and np.isin(of, at).all():
            offsets = np.append(np.searchsorted(of, at), len(kept)).astype(np.int32)
            names = [t[0] for t in kept]
        else:
            by_seq: dict[int, list[str]] = {}
            for name, seq, _ in kept:
                by_seq.setdefault(seq, []).append(name)
            names, ends = [], [0]
            for seq in seqs:
                names += by_seq.get(seq, ())
                ends.append(len(names))
            offsets = np.array(ends, dtype=np.int32)
        lists.append(pa.ListArray.from_arrays(pa.array(offsets), pa.array(names, pa.string())))
    return lists


def quote(text: str | Path, mark: str = "'") -> str:
    """``text`` as a DuckDB string literal (or, with ``mark`` ``"``, an identifier)."""
    return mark + str(text).replace(mark, mark * 2) + mark


def publish(folder: Path) -> Path:
    """Make ``folder``'s parts the run's items: renamed as they are when in order (joining cost
    0.9 s per 100,000 items), else merged by seq, a repeated key made ``key~seq``; ``located``."""
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    final, tmp = folder / ITEMS, folder / (ITEMS + ".tmp")
    parts = sorted(folder.glob("items-*.part"))
    if not parts:
        pq.write_table(schema().empty_table(), tmp, compression="zstd")
        tmp.replace(final)
    elif len(parts) == 1 and _in_order(parts):
        parts[0].replace(final)
    elif _in_order(parts):
        for i, part in enumerate(parts):
            part.replace(folder / f"items-{i:05d}.parquet")
    else:
        _merge(parts, tmp)
        tmp.replace(final)
        for part in parts:
            part.unlink()
    found = located(folder)
    assert found is not None
    return found


def located(folder: Path) -> Path | None:
    """A run's published items for DuckDB's ``read_parquet``: ``items.parquet``, or the glob
    of its several files; None when there are none."""
    if (folder / ITEMS).is_file():
        return folder / ITEMS
    if (folder / "items-00000.parquet").is_file():
        return folder / "items-*.parquet"
    return None


def _in_order(parts: Sequence[Path]) -> bool:
    """Whether the parts' keys are all distinct and their seqs ascend through the parts."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pa.concat_tables(pq.read_table(p, columns=["key", "seq"]) for p in parts)
    seqs = table.column("seq").combine_chunks()
    ascending = len(seqs) < 2 or pc.all(pc.greater(seqs[1:], seqs[:-1])).as_py()
    return bool(ascending) and pc.count_distinct(table.column("key")).as_py() == len(table)


def _merge(parts: Sequence[Path], out: Path) -> None:
    """The parts' rows in ``seq`` order, a repeated key made ``key~seq`` (DuckDB)."""
    import duckdb

    scan = f"read_parquet([{', '.join(quote(p) for p in parts)}])"
    with duckdb.connect() as con:
        key = (
            "CASE WHEN row_number() OVER (PARTITION BY key ORDER BY seq) > 1 "
            "THEN key || '~' || seq ELSE key END AS key"
        )
        rest = ", ".join(COLUMNS[1:])
        con.execute(
            f"COPY (SELECT {key}, {rest} FROM {scan} ORDER BY seq) TO {quote(out)} "
            f"(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {ROW_GROUP_ROWS})"
        )


def remove(folder: Path) -> None:
    """Delete what fieldcheck wrote in a run's folder, then the folder if nothing else is in it
    (a user's own file there stays)."""
    for name in (ITEMS, ITEMS + ".tmp"):
        (folder / name).unlink(missing_ok=True)
    for pattern in ("items-*.part", "items-*.part.tmp", "items-[0-9][0-9][0-9][0-9][0-9].parquet"):
        for part in folder.glob(pattern):
            part.unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()


Equals = tuple[tuple[str, Any], ...]
"""Conditions ``sql = value``: ``sql`` a system's column expression (``ItemColumn.sql``), the
value a bound parameter."""


def _where(
    *,
    failed: bool | None = None,
    tag: str | None = None,
    model: str | None = None,
    turn: int | None = None,
    error_type: str | None = None,
    q: str | None = None,
    equals: Equals = (),
) -> tuple[str, list[Any]]:
    """The filters of ``Store.page_items`` as a DuckDB condition and its parameters (user text
    only ever a parameter); ``q``: any case, in the key or the item's JSON text."""
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
    for name, value in (("model", model), ("turn", turn), ("error_type", error_type)):
        if value is not None:
            terms.append(f"{name} = ?")
            params.append(value)
    for sql, value in equals:
        terms.append(f"({sql}) = ?")
        params.append(value)
    if q:
        import orjson

        # RE2's case-insensitive match of the text as a literal: 2.7x as fast as contains()
        # of lower() at 1M items (no lowered copy of each item's JSON)
        terms.append("(regexp_matches(key, ?) OR regexp_matches(result, ?))")
        params += [_literal(q), _literal(orjson.dumps(q).decode()[1:-1])]
    return " AND ".join(terms), params


def _literal(text: str) -> str:
    """An RE2 pattern matching ``text`` ignoring case, every other character escaped."""
    return "(?i)" + "".join(c if c.isalnum() else f"\\x{{{ord(c):x}}}" for c in text)


SELECTED = "key, seq, error_type, failed, model, turn, result"


def page(
    con: Any,
    path: Path,
    *,
    after: int,
    limit: int,
    offset: int = 0,
    values: Sequence[str] = (),
    **filters: Any,
) -> list[tuple[Any, ...]]:
    """``SELECTED`` and ``values`` (expressions, read for the page's items alone) of up to
    ``limit`` items with ``seq > after``, from ``offset``, in ``seq`` order."""
    where, params = _where(**filters)
    extra = "".join(f", {v}" for v in values)
    return list(
        con.execute(
            f"SELECT {SELECTED}{extra} FROM (SELECT * FROM read_parquet(?) "
            f"WHERE seq > ? AND {where} ORDER BY seq LIMIT ? OFFSET ?) ORDER BY seq",
            [str(path), after, *params, limit, offset],
        ).fetchall()
    )


def stream(con: Any, path: Path, size: int) -> Iterator[list[tuple[Any, ...]]]:
    """``page``'s rows of every item by seq, ``size`` at a time, of one query: a file's own order
    where its seqs ascend (``publish`` writes them so), not sorted (a sort held 1.4 GB at 1M)."""
    import numpy as np

    seqs = con.execute("SELECT seq FROM read_parquet(?)", [str(path)]).fetchnumpy()["seq"]
    ordered = "" if bool(np.all(seqs[1:] > seqs[:-1])) else " ORDER BY seq"
    con.execute(f"SELECT {SELECTED} FROM read_parquet(?){ordered}", [str(path)])
    while rows := con.fetchmany(size):
        yield rows


def find(con: Any, path: Path, keys: list[str]) -> list[tuple[Any, ...]]:
    """``page``'s columns of the items of ``keys`` (of every model), by seq."""
    query = f"SELECT {SELECTED} FROM read_parquet(?) WHERE list_contains(?, key) ORDER BY seq"
    return list(con.execute(query, [str(path), keys]).fetchall())


def sorted_seqs(
    con: Any, path: Path, *, order: str, descending: bool, after: int = -1, **filters: Any
) -> Any:
    """The seqs of the items ``page``'s filters keep, sorted by the expression ``order``
    (nulls last, then ``seq``), as a NumPy array: a sorted table's pages are slices of it."""
    where, params = _where(**filters)
    way = "DESC" if descending else "ASC"
    found = con.execute(
        f"SELECT seq FROM read_parquet(?) WHERE seq > ? AND {where} "
        f"ORDER BY {order} {way} NULLS LAST, seq",
        [str(path), after, *params],
    ).fetchnumpy()
    return found["seq"]


def rows_of(
    con: Any, path: Path, seqs: Sequence[int], values: Sequence[str] = ()
) -> list[tuple[Any, ...]]:
    """``page``'s rows of the items ``seqs``, in that order (only they are read whole)."""
    if not seqs:
        return []
    extra = "".join(f", {v}" for v in values)
    rows = con.execute(  # the bounds skip the row groups (by their statistics) of none of them
        f"SELECT {SELECTED}{extra} FROM read_parquet(?) "
        "WHERE seq BETWEEN ? AND ? AND list_contains(?, seq)",
        [str(path), min(seqs), max(seqs), list(seqs)],
    ).fetchall()
    at = {seq: i for i, seq in enumerate(seqs)}
    return sorted(rows, key=lambda row: at[row[1]])


def count(con: Any, path: Path, *, not_scored: bool = False, **filters: Any) -> int:
    where, params = _where(**filters)
    if not_scored:
        where += " AND failed IS NULL"
    found = con.execute(
        f"SELECT count(*) FROM read_parquet(?) WHERE {where}", [str(path), *params]
    ).fetchone()
    return int(found[0])


def count_errors(con: Any, path: Path) -> tuple[int, int]:
    """The items, and of them with an error (as ``ItemsWriter`` counts them)."""
    sql = "SELECT count(*), count(nullif(error_type, '')) FROM read_parquet(?)"
    items, errors = con.execute(sql, [str(path)]).fetchone()
    return int(items), int(errors)


def distinct(con: Any, path: Path, sql: str, limit: int) -> list[Any]:
    """The distinct non-null values of the expression ``sql`` over the items, sorted."""
    rows = con.execute(
        f"SELECT DISTINCT {sql} AS v FROM read_parquet(?) WHERE v IS NOT NULL ORDER BY v LIMIT ?",
        [str(path), limit],
    ).fetchall()
    return [r[0] for r in rows]


def tag_names(con: Any, path: Path, limit: int) -> list[str]:
    rows = con.execute(
        "SELECT DISTINCT unnest(tags) AS name FROM read_parquet(?) ORDER BY name LIMIT ?",
        [str(path), limit],
    ).fetchall()
    return [r[0] for r in rows]

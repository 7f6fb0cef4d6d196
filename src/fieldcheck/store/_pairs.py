"""Items of several runs (or models of one run) paired on their key in DuckDB (docs/runs.md
"Comparing runs"): the item matrix and two columns' paired per-item statistics."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from fieldcheck.store._items import Pairing
from fieldcheck.store._parquet import quote

VALUE_CHARS = 300
"""A compared value is cut to this many characters in the matrix (the item page has it all)."""


NATURAL = (
    "array_to_string(list_transform(regexp_extract_all({0}, '[0-9]+|[^0-9]+'), "
    "lambda x: CASE WHEN x[1] BETWEEN '0' AND '9' THEN lpad(x, 40, '0') ELSE x END), '')"
)
"""The pair keys in natural order (``u1/2`` before ``u1/10``): each run of digits padded to 40."""


class Side(NamedTuple):
    """One column of a comparison: a run's items file and, for a run of several models, the
    model whose items it is (None: every item of the run)."""

    path: Path
    model: str | None


def _side(side: Side, pairing: Pairing, select: str) -> str:
    where = "" if side.model is None else f" WHERE model = {quote(side.model)}"
    return f"(SELECT {pairing.key} AS k, {select} FROM read_parquet({quote(side.path)}){where})"


def matrix(
    con: Any,
    sides: Sequence[Side],
    pairing: Pairing,
    *,
    differ: bool,
    offset: int,
    limit: int,
) -> tuple[int, int, list[tuple[Any, ...]]]:
    """(items, differing, rows): how many pair keys there are, how many disagree (right, value,
    presence), and a page by key (of those when ``differ``): pair, then key, right, value a side."""
    shown = pairing.shown or pairing.value
    select = (
        f"key AS item, ({pairing.right}) AS r, CAST(({pairing.value}) AS VARCHAR) AS v, "
        f"CAST(({shown}) AS VARCHAR) AS s"
    )
    joined = f"{_side(sides[0], pairing, select)} c0"
    for i, side in enumerate(sides[1:], 1):
        seen = ", ".join(f"c{j}.k" for j in range(i))
        joined += (
            f" FULL OUTER JOIN {_side(side, pairing, select)} c{i} ON coalesce({seen}) = c{i}.k"
        )
    key = f"coalesce({', '.join(f'c{i}.k' for i in range(len(sides)))})"
    differs = (
        " OR ".join(
            f"c0.k IS NULL OR c{i}.k IS NULL OR c0.r IS DISTINCT FROM c{i}.r "
            f"OR c0.v IS DISTINCT FROM c{i}.v"
            for i in range(1, len(sides))
        )
        or "FALSE"
    )
    named = ", ".join(
        f"c{i}.item AS i{i}, c{i}.r AS r{i}, left(c{i}.s, {VALUE_CHARS}) AS v{i}"
        for i in range(len(sides))
    )
    base = f"SELECT {key} AS pair, ({differs}) AS differs, {named} FROM {joined}"
    cells = ", ".join(f"i{i}, r{i}, v{i}" for i in range(len(sides)))
    # the join made once for the counts and the page (each its own: twice the time); the counts
    # come on every row, and on a row of nulls (``shown`` null) when the page is empty
    rows = con.execute(
        f"WITH base AS MATERIALIZED ({base}), "
        "counted AS (SELECT count(*) AS n, count(*) FILTER (WHERE differs) AS d FROM base), "
        f"shown AS (SELECT TRUE AS shown, pair, {cells}, {NATURAL.format('pair')} AS o FROM base "
        f"{'WHERE differs ' if differ else ''}ORDER BY o, pair LIMIT ? OFFSET ?) "
        f"SELECT n, d, shown, pair, {cells} FROM counted LEFT JOIN shown ON TRUE ORDER BY o, pair",
        [limit, offset],
    ).fetchall()
    items, differing = rows[0][:2]
    return int(items), int(differing), [r[3:] for r in rows if r[2]]


def truth_digest(con: Any, side: Side, pairing: Pairing, *, canonical: bool) -> tuple[int, int]:
    """(items, digest): an order-free digest of a side's (pair key, truth) pairs, of the stored
    text (DuckDB) or, ``canonical``, of each truth with sorted keys (orjson; this process only)."""
    select = f"CAST(({pairing.truth}) AS VARCHAR) AS t"
    query = f"SELECT k, t FROM {_side(side, pairing, select)}"
    if not canonical:
        found = con.execute(
            f"SELECT count(*), coalesce(bit_xor(hash(k || chr(31) || coalesce(t, ''))), 0) "
            f"FROM ({query})"
        ).fetchall()[0]
        return int(found[0]), int(found[1])
    import orjson

    loads, dumps, sort = orjson.loads, orjson.dumps, orjson.OPT_SORT_KEYS
    items = digest = 0
    for batch in con.sql(query).to_arrow_reader(100_000):
        keys, truths = batch.column(0).to_pylist(), batch.column(1).to_pylist()
        for key, truth in zip(keys, truths, strict=True):
            digest ^= hash((key, None if truth is None else dumps(loads(truth), option=sort)))
        items += len(keys)
    return items, digest


def paired_rows(con: Any, a: Side, b: Side, pairing: Pairing) -> tuple[Any, Any, Any]:
    """``pairing.rows`` of the items both sides hold (no null among them), grouped: (a's rows,
    b's rows, how many items each stands for), float arrays in no order (a multiset)."""
    import numpy as np

    width = len(pairing.rows)
    select = ", ".join(f"CAST(({expr}) AS DOUBLE) AS s{j}" for j, expr in enumerate(pairing.rows))
    counted = " AND ".join(f"{t}.s{j} IS NOT NULL" for t in ("a", "b") for j in range(width))
    columns = ", ".join(f"{t}.s{j} AS {t}{j}" for t in ("a", "b") for j in range(width))
    found = con.execute(
        f"SELECT {columns}, count(*) AS n FROM {_side(a, pairing, select)} a "
        f"JOIN {_side(b, pairing, select)} b ON a.k = b.k WHERE {counted} GROUP BY ALL"
    ).fetchnumpy()
    both = [np.asarray(found[f"{t}{j}"], dtype=float) for t in ("a", "b") for j in range(width)]
    shape = (len(found["n"]), width)
    rows_a = np.column_stack(both[:width]).reshape(shape)
    rows_b = np.column_stack(both[width:]).reshape(shape)
    return rows_a, rows_b, np.asarray(found["n"], dtype=float)

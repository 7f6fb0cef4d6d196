"""A run's items as CSV or JSONL, streamed a page at a time, or as typed Parquet: bytes of the
stored items alone (the same on either backend), CSV cells through the formula neutraliser."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

import orjson

from fieldcheck import core
from fieldcheck._util.iters import chunked
from fieldcheck._util.jsonio import dumps_bytes
from fieldcheck.reports import neutralise_cell
from fieldcheck.store import Store

ExportFormat = Literal["csv", "jsonl"]
PAGE = 1000
COMMON = ("key", "seq", "failed", "model", "turn", "error_type")


def write_parquet(store: Store, run_id: str, out: Path) -> None:
    """Run ``run_id``'s items to ``out`` as zstd Parquet: the CSV's columns, typed (null where an
    item has no such value); KeyError when there is no such run, FileExistsError when ``out``
    exists and is not an empty file (never replaced)."""
    run = store.get_run(run_id)
    if run is None:
        raise KeyError(run_id)
    kind = core.find(run.system)
    store.export_parquet(run_id, out, kind.export_columns if kind else (), model=run.model)


def iter_export(
    store: Store, run_id: str, fmt: ExportFormat, shown: Callable[[str], str] = str
) -> Iterator[bytes]:
    """The export of run ``run_id`` in blocks of bytes (KeyError when there is no such run); an
    item's ``model`` is the run's where the item names none (a run of one model). ``shown``
    changes each block's text (whole lines): the API names no server path with it."""
    run = store.get_run(run_id)
    if run is None:
        raise KeyError(run_id)
    if fmt == "jsonl":
        option = orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE
        for page in chunked(store.iter_items(run_id), PAGE):
            rows = (i.public_dict() | {"model": i.model or run.model} for i in page)
            yield shown(b"".join(dumps_bytes(row, option) for row in rows).decode()).encode()
        return
    kind = core.find(run.system)
    columns = kind.export_columns if kind else ()
    buffer = io.StringIO()
    writer = csv.writer(buffer)  # "\r\n" (RFC 4180): a cell with a lone "\r" is quoted too
    writer.writerow((*COMMON, *(name for name, _, _ in columns), "result"))  # the item's JSON last
    for n, item in enumerate(store.iter_items(run_id), 1):
        extra = kind.export_row(item.result) if kind else []
        model = item.model or run.model
        values = [item.key, item.seq, item.failed, model, item.turn, item.error_type, *extra]
        writer.writerow([neutralise_cell(v) for v in (*values, item.result)])
        if n % PAGE == 0:
            yield shown(buffer.getvalue()).encode()
            buffer.seek(0)
            buffer.truncate()
    yield shown(buffer.getvalue()).encode()

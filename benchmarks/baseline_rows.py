"""Baseline: writing numeric's row files alone (summary.csv, turns.csv, errors.csv,
validation.csv: the spec's "Output Files"), what ``numeric score`` cannot be faster than.
``main([FOLDER, NAME:ROWS:COLUMNS:CELL_BYTES, ...])`` creates FOLDER (which must not exist) and
writes each NAME with Python's ``csv.writer``: a header and ROWS rows of COLUMNS cells of
CELL_BYTES bytes each, the shape ``shape_of`` reads off a file ``numeric score`` wrote."""

from __future__ import annotations

import csv
import os
from itertools import repeat
from pathlib import Path


def shape_of(path: Path) -> str:
    """``NAME:ROWS:COLUMNS:CELL_BYTES`` of a CSV file: its data rows, its header's columns and
    the mean length of a data cell (rounded)."""
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        columns = len(next(reader, []))
        rows = cells = chars = 0
        for row in reader:
            rows += 1
            cells += len(row)
            chars += sum(map(len, row))
    return f"{path.name}:{rows}:{columns}:{round(chars / cells) if cells else 0}"


def main(argv: list[str]) -> int:
    folder = argv[0]
    os.mkdir(folder)
    for spec in argv[1:]:
        name, rows, columns, size = spec.rsplit(":", 3)
        width = int(columns)
        with open(os.path.join(folder, name), "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow([f"c{i}" for i in range(width)])
            writer.writerows(repeat(["x" * int(size)] * width, int(rows)))
    return 0 if len(os.listdir(folder)) == len(argv) - 1 else 1

"""Regenerate the bundled JSON example: ``python examples/json/generate.py`` (deterministic).

Writes ``invoices.jsonl`` (300 invoice-extraction records: ground truth and a simulated model's
output) and ``strategies.json`` next to this file. The records come from
``fieldcheck.jsoneval._example``; the same seed always gives the same bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fieldcheck.jsoneval._example import write_example


def main() -> int:
    data, strategies = write_example(Path(__file__).resolve().parent)
    print(f"wrote {data} and {strategies}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

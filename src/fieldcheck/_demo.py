"""``make demo``: every system scored on the bundled example data, outputs under ``demo-out/``."""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

from rich.console import Console

PARTS = [
    ("JSON evaluation", "fieldcheck._cli.json_cmd", "json"),
    ("Slot extraction benchmark", "fieldcheck._cli.slots_cmd", "slots"),
    ("Numeric QA (ConvFinQA)", "fieldcheck._cli.numeric_cmd", "numeric"),
]


def main(root: Path = Path("demo-out")) -> int:
    console = Console()
    status = 0
    for title, module_name, sub in PARTS:
        run_demo = getattr(importlib.import_module(module_name), "run_demo", None)
        if run_demo is None:
            continue
        console.rule(f"[bold]{title}")
        start = time.perf_counter()
        status = max(status, int(run_demo(root / sub) or 0))
        console.print(
            f"[dim]{title}: {time.perf_counter() - start:.1f}s, outputs in {root / sub}[/dim]"
        )
    return status


if __name__ == "__main__":
    sys.exit(main())

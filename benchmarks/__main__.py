"""Run every ``benchmarks/bench_*.py`` and print a table; ``--markdown`` prints it for docs."""

from __future__ import annotations

import importlib
import os
import pkgutil
import platform
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import benchmarks
from benchmarks._harness import Comparison


def _rate(value: float) -> str:
    """Thousands separators for large figures, three significant digits for small ones."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def main() -> int:
    results: list[Comparison] = []
    for info in sorted(pkgutil.iter_modules(benchmarks.__path__), key=lambda m: m.name):
        if info.name.startswith("bench_"):
            module = importlib.import_module(f"benchmarks.{info.name}")
            print(f"running {info.name} ...", file=sys.stderr, flush=True)
            results.extend(module.run())
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores")
    print("peak MiB: peak Python heap during one run (tracemalloc); ratio: ours / baseline items/s")
    header = "| benchmark | ours (items/s) | peak MiB | baseline | baseline (items/s) | peak MiB | ratio |"
    print(header)
    print("|---|---:|---:|---|---:|---:|---:|")
    for c in results:
        print(
            f"| {c.name} ({c.unit}) | {_rate(c.ours.per_second)} | {c.ours.peak_mib:.1f} | "
            f"{c.baseline_name} | {_rate(c.baseline.per_second)} | {c.baseline.peak_mib:.1f} | "
            f"{_rate(c.speedup)}x |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

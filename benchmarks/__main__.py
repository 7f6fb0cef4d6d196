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


def main() -> int:
    results: list[Comparison] = []
    for info in sorted(pkgutil.iter_modules(benchmarks.__path__), key=lambda m: m.name):
        if info.name.startswith("bench_"):
            module = importlib.import_module(f"benchmarks.{info.name}")
            print(f"running {info.name} ...", file=sys.stderr, flush=True)
            results.extend(module.run())
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores")
    header = "| benchmark | ours (items/s) | peak MiB | baseline | baseline (items/s) | peak MiB | ratio |"
    print(header)
    print("|---|---:|---:|---|---:|---:|---:|")
    for c in results:
        print(
            f"| {c.name} ({c.unit}) | {c.ours.per_second:,.0f} | {c.ours.peak_mib:.1f} | "
            f"{c.baseline_name} | {c.baseline.per_second:,.0f} | {c.baseline.peak_mib:.1f} | "
            f"{c.speedup:.1f}x |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``make bench``: run every ``benchmarks/bench_*.py`` and print ONE table (benchmark, ours,
baseline, ratio, target, holds, peak memory); exit 1 when any target does not hold.

``python -m benchmarks [--quick] [--only NAME ...]``: ``--quick`` runs smaller sizes (for trying;
its figures are not the ones that count), ``--only json`` runs ``bench_json.py`` alone.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import platform
import sys
import time
import traceback

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import benchmarks
from benchmarks._proc import empty_trash
from benchmarks._table import Row, Target, exit_status, failing, format_table


def names() -> list[str]:
    return sorted(
        m.name.removeprefix("bench_")
        for m in pkgutil.iter_modules(benchmarks.__path__)
        if m.name.startswith("bench_")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for trying")
    parser.add_argument(
        "--only",
        action="append",
        choices=names(),
        metavar="NAME",
        help=f"run only this benchmark module (repeatable): {', '.join(names())}",
    )
    args = parser.parse_args(argv)
    rows: list[Row] = []
    start = time.monotonic()
    try:
        for name in args.only or names():
            print(f"running bench_{name} ...", file=sys.stderr, flush=True)
            try:
                module = importlib.import_module(f"benchmarks.bench_{name}")
                done = module.run(quick=args.quick)
            except Exception as exc:  # one broken module must not lose the other rows
                traceback.print_exc()
                note = f"{type(exc).__name__}: {exc}"
                done = [Row(f"bench_{name}", "-", "-", float("nan"), Target(">=", 1.0), note=note)]
            print(format_table(done), file=sys.stderr, flush=True)  # each module's rows at once
            rows.extend(done)
    finally:
        empty_trash()  # the timed runs' earlier outputs, deleted once nothing is timed any more
    print(
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores"
        f"{', --quick' if args.quick else ''}; {time.monotonic() - start:,.0f} s"
    )
    print(
        "ratio: ours / baseline throughput (memory rows: peak RSS at the large size / the small "
        "one); '<' or '>' a bound from a run stopped at its limit; RSS: peak resident memory of "
        "the process, heap: peak Python heap (tracemalloc) of an in-process run"
    )
    print(format_table(rows))
    bad = failing(rows)
    if bad:
        print(f"\n{len(bad)} target(s) do not hold: " + "; ".join(r.name for r in bad))
    return exit_status(rows)


if __name__ == "__main__":
    sys.exit(main())

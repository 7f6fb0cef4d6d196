"""Child process of a subprocess benchmark: import the target, then time only its work.

``python -m benchmarks._driver OUT.json [--preload-model] -- TARGET ARG...``: TARGET is
``fieldcheck`` (the real CLI, as installed) or a module of ``benchmarks`` with ``main(argv)``.
Imports (and with ``--preload-model`` the sentence-transformers model) happen before the clock
starts, on every side alike; OUT.json gets ``{"seconds", "status", "peak_rss_mib",
"cpu_seconds"}`` (user + system CPU of the work, its ended child processes included).
"""

from __future__ import annotations

import importlib
import json
import resource
import sys
import time


def main() -> None:
    out, rest = sys.argv[1], sys.argv[2:]
    split = rest.index("--")
    flags, target, argv = rest[:split], rest[split + 1], rest[split + 2 :]
    if "--preload-model" in flags:
        from fieldcheck.matchers._semantic import load_model

        load_model()
    if target == "fieldcheck":
        from fieldcheck._cli.main import main as cli
        from fieldcheck.store import Store

        Store().close()  # a new store is migrated before the clock: a user's run finds it ready

        def call() -> int:
            sys.argv = ["fieldcheck", *argv]
            try:
                cli()
            except SystemExit as exc:
                return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            return 0

    else:
        module = importlib.import_module(f"benchmarks.{target}")
        if target == "baseline_store":
            from fieldcheck.store import Store

            Store().close()  # migrated before the clock, as for fieldcheck

        def call() -> int:
            return int(module.main(argv))

    cpu = _cpu_seconds()
    start = time.perf_counter()
    status = call()
    seconds = time.perf_counter() - start
    cpu = _cpu_seconds() - cpu
    with open(out, "w", encoding="utf-8") as f:
        json.dump(
            {
                "seconds": seconds,
                "status": status,
                "peak_rss_mib": _peak_rss_mib(),
                "cpu_seconds": cpu,
            },
            f,
        )


def _cpu_seconds() -> float:
    """User and system CPU of this process and of its children that have ended (a command's
    writer processes are waited for before it returns)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _peak_rss_mib() -> float:
    """VmHWM of this process: its own peak RSS since exec (``ru_maxrss`` of a forked child also
    counts the parent's pages at fork, so the parent cannot use it)."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


if __name__ == "__main__":
    main()

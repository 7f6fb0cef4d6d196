"""A run of one sequential unit of items, as its own process, for the kill and Ctrl-C tests.

Usage: python _kill_target.py BASE_URL DATASET N_ITEMS. Each item asks the model ``item-<i>`` and
stores the reply; items run strictly one after another, so at any moment at most one is in flight.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console

from fieldcheck._cli._runopts import make_runner, run_async
from fieldcheck.runner import ModelSpec, RunHandle, RunSpec, run_task


def main(base_url: str, dataset: str, n_items: int) -> int:
    runner = make_runner(concurrency=1, timeout=30, max_retries=0)
    spec = ModelSpec(name="target", model="scripted", base_url=base_url)

    async def work(unit: list[str], handle: RunHandle) -> None:
        for item in unit:
            if handle.result(item) is not None:
                continue
            reply = await handle.client.complete([{"role": "user", "content": item}])
            handle.save(item, {"text": reply.text}, error_type=reply.error_type, call_log=[reply])

    async def go() -> RunHandle:
        try:
            return await run_task(
                runner,
                RunSpec(system="test", task="kill", dataset=Path(dataset), model=spec),
                [[f"item-{i}" for i in range(n_items)]],
                work,
                total_items=n_items,
                console=Console(stderr=True),
                show_progress=False,
            )
        finally:
            await runner.aclose()

    try:
        handle = run_async(go())
    except typer.Exit as exc:
        return exc.exit_code
    runner.set_status(handle.id, "finished")  # as a command's scoring does: run_task leaves it
    print(f"done {handle.done}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))

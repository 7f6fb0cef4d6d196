"""The executors (ARCHITECTURE.md "Chunks, digests and executors"), made in ``fieldcheck._util``
so that the store and the systems below the core run their tasks on them too."""

from fieldcheck._util.executor import Executor, InProcess, LocalPool, finish, run_map

__all__ = ["Executor", "InProcess", "LocalPool", "finish", "run_map"]

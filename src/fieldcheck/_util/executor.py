"""Executors (ARCHITECTURE.md "Chunks, digests and executors"): what runs a task, a pure
module-level function of one chunk, ``fn(chunk) -> result``. ``InProcess`` runs it here (small
inputs, tests); ``LocalPool`` in a pool of local processes. A cluster executor (Ray Data's
``map_batches``) can run the same functions: they read only their chunk and return their result.

Both give every task's result once, in submission order, from ``submit`` (the ones finished by
then) or ``drain`` (the rest), and raise a task's exception (its type and message) there.

    pool = LocalPool(workers=1)
    for chunk in chunks:
        for result in pool.submit(write_part, chunk):  # waits while ``in_flight`` tasks run
            ...
    results = finish(pool)  # pool.drain() until it returns nothing
    pool.close()
"""

from __future__ import annotations

import atexit
import errno
import gc
import multiprocessing
import os
import pickle
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, suppress
from multiprocessing.connection import wait
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Protocol

from fieldcheck._util.errors import place_all, placed_paths

Task = Callable[[Any], Any]


class Executor(Protocol):
    def submit(self, fn: Task, chunk: Any) -> list[Any]:
        """Run ``fn(chunk)``; the results of the tasks finished so far, oldest first."""
        ...

    def drain(self) -> list[Any]:
        """Wait for every task submitted; their results not yet returned, oldest first. A
        task's error is raised here, or, after the results of the tasks before it, by the
        next call: ``finish`` drains to the end."""
        ...

    def close(self, *, kill: bool = False) -> None:
        """Stop: tasks not started are dropped, running ones finish (``kill``: are killed); no
        process is left running."""
        ...


@contextmanager
def few_collections() -> Iterator[None]:
    """Fewer cyclic garbage collections while scoring or calling: each full one walks every
    object of the process, the finished items included (docs/decisions.md)."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], 100_000), before[1], max(before[2], 100))
    try:
        yield
    finally:
        gc.set_threshold(*before)


def exit_without_collecting() -> None:
    """A command stopped by Ctrl-C ends: the interpreter's last full collection would walk every
    object left (the dataset, the items: about half of a second after a Ctrl-C of a 1,490-turn
    run, several under load), so it skips them (``gc.freeze`` at exit, registered once;
    docs/running.md)."""
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)


def run_map(executor: Executor, fn: Task, chunks: Iterable[Any]) -> Iterator[Any]:
    """``fn`` of each chunk, in order, through ``executor`` (at most its bound in flight)."""
    for chunk in chunks:
        yield from executor.submit(fn, chunk)
    yield from finish(executor)


def finish(executor: Executor) -> list[Any]:
    """Every result ``executor`` has not returned yet, oldest first (a task's error raised
    after them)."""
    results: list[Any] = []
    while done := executor.drain():
        results += done
    return results


class InProcess:
    """Runs each task at once, in the calling process."""

    def submit(self, fn: Task, chunk: Any) -> list[Any]:
        return [fn(chunk)]

    def drain(self) -> list[Any]:
        return []

    def close(self, *, kill: bool = False) -> None:
        pass


def _worker_start(warm: tuple[str, ...], placed: tuple[tuple[str, str], ...] = ()) -> None:
    """In each pool worker: a session of its own, so a terminal's Ctrl-C reaches the calling
    process only (which drains or stops the pool); an exit as soon as the caller is gone (a
    ``kill -9`` leaves no worker behind); ``warm``'s modules imported while the caller works;
    the caller's run folders ``placed`` (a path in one is shown where it will be)."""
    place_all(placed)
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # tasks build many small acyclic objects, freed by reference counting: the collector's
    # passes over them doubled the cost of a chunk of slot items (2.0 s against 1.0 s)
    gc.disable()
    parent = multiprocessing.parent_process()
    if parent is not None:
        sentinel = parent.sentinel

        def watch() -> None:
            wait([sentinel])
            os._exit(3)

        threading.Thread(target=watch, name="fieldcheck-parent", daemon=True).start()
    for name in warm:
        __import__(name)


class LocalPool:
    """Tasks in ``workers`` spawned processes (``spawn``: a fresh interpreter, never a fork of a
    process that has threads); at most ``in_flight`` tasks (default twice the workers) are
    queued or running, so the caller's memory stays flat. ``warm``: modules each worker imports
    as it starts (the pool starts its workers at once, while the caller reads its input)."""

    def __init__(self, workers: int = 1, *, in_flight: int | None = None, warm: Iterable[str] = ()):
        self.workers = max(1, workers)
        self.in_flight = max(1, in_flight or 2 * self.workers)
        self._pool: ProcessPoolExecutor | None = ProcessPoolExecutor(
            self.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_worker_start,
            initargs=(tuple(warm), placed_paths()),
        )
        self._futures: deque[Future[Any]] = deque()
        # started now (their start overlaps the caller's work), without importing the caller's
        # ``__main__`` (spawn's default: the CLI's, 1-2 s of imports): tasks are functions of
        # importable modules. A main named ``__main__`` is the one spawn skips.
        main = sys.modules.get("__main__")
        spec = getattr(main, "__spec__", None)
        try:
            if main is not None:
                main.__spec__ = SimpleNamespace(name="__main__")  # type: ignore[assignment]
            for _ in range(self.workers):
                self._futures.append(self._pool.submit(_nothing, None))
        finally:
            if main is not None:
                main.__spec__ = spec

    def submit(self, fn: Task, chunk: Any) -> list[Any]:
        if self._pool is None:
            raise RuntimeError("the pool is closed")
        done = self._finished(self.in_flight - 1)
        # pickled here, by the C pickler: the pool's feeder thread pickled it with
        # multiprocessing's reducers, 1.1 s more of this process's CPU for numeric score's
        # 100k turns (7.8 s against 6.7 s), its thread contending with the scoring's
        packed = pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self._futures.append(self._pool.submit(_unpacked, fn, packed))
        except BrokenProcessPool as error:
            raise OSError(errno.EIO, f"a pool process ended abruptly ({error})") from error
        return done

    def drain(self) -> list[Any]:
        return self._finished(0)

    def _finished(self, keep: int) -> list[Any]:
        """The results of the oldest tasks, waiting until at most ``keep`` are left and taking
        every finished one; a task's error is raised once (the tasks after it go on)."""
        results: list[Any] = []
        while self._futures and (len(self._futures) > keep or self._futures[0].done()):
            future = self._futures.popleft()
            if results and future.exception() is not None:
                self._futures.appendleft(future)  # raised at the next call, after these
                break
            try:
                result = future.result()
            except BrokenProcessPool as error:  # a full disk's error, not a traceback
                raise OSError(errno.EIO, f"a pool process ended abruptly ({error})") from error
            if result is not _NOTHING:
                results.append(result)
        return results

    def close(self, *, kill: bool = False) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        self._futures.clear()
        # the pool's own processes (Python 3.14 has ``kill_workers``): killed when asked, or
        # when the wait for their running tasks is interrupted (a second Ctrl-C)
        processes = list(getattr(pool, "_processes", {}).values())
        try:
            if kill:
                for process in processes:
                    process.kill()
                for process in processes:
                    process.join()
                # a worker killed while sending its result leaves the pool's thread waiting for
                # the rest of the message (shutdown then waits forever): with this process's
                # copy of the pipe's writing end closed, it reads the end and stops
                with suppress(AttributeError, OSError):
                    pool._result_queue._writer.close()  # type: ignore[attr-defined]
            pool.shutdown(wait=True, cancel_futures=True)
        except BaseException:
            for process in processes:
                process.kill()
            raise
        finally:
            for process in processes:
                process.join()

    def __enter__(self) -> LocalPool:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        """Closed when the block ends; on an error or Ctrl-C its tasks are killed, not waited
        for (no process is left behind)."""
        self.close(kill=kind is not None)


class _Nothing:
    def __reduce__(self) -> str:
        return "_NOTHING"


_NOTHING = _Nothing()


def _nothing(_: Any) -> _Nothing:
    return _NOTHING


def _unpacked(fn: Task, packed: bytes) -> Any:
    """In a worker: ``fn`` of the chunk ``LocalPool.submit`` pickled."""
    return fn(pickle.loads(packed))


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this host (another user's counts): the store's journal
    and a run folder's writer ask it. A zombie (killed, not yet reaped by its parent: ``kill
    -9`` from a shell) is not: its run was resumed by nobody until the shell reaped it (a
    tester's finding)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # Linux: the state after the command name's closing parenthesis
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"

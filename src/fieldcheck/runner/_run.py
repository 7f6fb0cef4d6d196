"""Runs: a task's items called through the runner and committed as they finish; the same
command resumes an unfinished run (docs/running.md "Runs, resume and the cache")."""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import shlex
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from fieldcheck._util.console import SafeConsole
from fieldcheck._util.errors import UsageProblem, open_destination
from fieldcheck._util.executor import exit_without_collecting
from fieldcheck._util.jsonio import dumps, loads
from fieldcheck._util.signature import Signature
from fieldcheck.runner._client import CallResult, ChatClient, Runner
from fieldcheck.runner._errors import CALL_ERRORS
from fieldcheck.runner._models import ModelSpec
from fieldcheck.store import RunInfo, StoredItem, sha256_file

T = TypeVar("T")
U = TypeVar("U")


@dataclass(frozen=True)
class RunSpec:
    """What defines a run: system, task, dataset, model and every setting that changes results."""

    system: str
    task: str
    dataset: Path
    model: ModelSpec
    settings: dict[str, Any] = field(default_factory=dict)

    def signature(self, runner_settings: dict[str, Any]) -> Signature:
        return Signature(
            system=self.system,
            settings={
                "task": self.task,
                "model": self.model.model,
                "endpoint": self.model.endpoint,
                "temperature": self.model.temperature,
                **({"seed": self.model.seed} if self.model.seed is not None else {}),
                **self.settings,
                **runner_settings,
            },
        )


class RunHandle:
    """A run in progress: read finished items (resume) and save new ones."""

    def __init__(
        self,
        runner: Runner,
        run_id: str,
        resumed: bool,
        client: ChatClient,
        units: Sequence[Sequence[str]] = (),
    ) -> None:
        self.runner = runner
        self.id = run_id
        self.resumed = resumed
        self.client = client
        self._units = units  # the keys of each unit, in order (``in_order``'s work)
        stored = runner.use_store(lambda store: store.journal(run_id)) or []
        self._done: dict[str, StoredItem] = {i.key: i for i in stored}
        # an item whose call failed is not finished, nor one built on it: they run again and
        # their rows are replaced
        kept = self.resumable()
        self._done = {k: i for k, i in self._done.items() if k in kept}
        self._in_store = {i.key for i in stored}  # rows a new save of the same key replaces
        self._next_seq = max((i.seq for i in stored), default=-1) + 1
        self.resumed_items = len(self._done)
        self.errors: Counter[str] = Counter(
            item.error_type for item in self._done.values() if item.error_type
        )
        self.on_save: Callable[[], None] | None = None
        self.finished = False  # every item done (run_task returned it)
        self.new_items = 0  # finished in this process (not resumed)
        self.new_calls = 0
        self.new_cached_calls = 0
        self._answered = False  # some new item got past the endpoint
        self._unreachable: Counter[str] = Counter()

    def result(self, key: str) -> dict[str, Any] | None:
        """A finished item's stored result, or None when it still has to run (as does every
        later item of its ``run_task`` unit: they were built on it)."""
        item = self._done.get(key)
        unit = _UNIT.get()
        if unit is not None and (item is None or unit.rerun):
            unit.rerun = True
            return None
        return item.result if item is not None else None

    def save(
        self,
        key: str,
        result: dict[str, Any],
        *,
        error_type: str | None = None,
        calls: int | None = None,
        latency_s: float | None = None,
        call_log: Sequence[CallResult] = (),
    ) -> None:
        """Save a finished item (``Runner.write``) with its ``call_log``, from which ``calls``
        and ``latency_s`` default."""
        calls = len(call_log) if calls is None else calls
        cached_calls = sum(c.cached for c in call_log)
        if latency_s is None:
            latency_s = sum((c.latency_s for c in call_log), 0.0)
        log = [c.to_dict() for c in call_log]
        item = StoredItem(
            key, self._next_seq, error_type, calls, cached_calls, latency_s, result, log
        )
        self._next_seq += 1
        if key in self._in_store:  # a failed item (or one built on it) run again
            self.runner.use_store(lambda store: store.forget_item(self.id, key))
            self._in_store.discard(key)
        # kept in ``_done`` too: the files are written from it
        self.runner.write({"run_id": self.id, **vars(item)})
        if key in self._done:  # a resumed item run again: count it once
            old = self._done[key].error_type
            if old:
                self.errors[old] -= 1
                self.errors += Counter()  # drop zero counts
        self._done[key] = item
        if error_type:
            self.errors[error_type] += 1
        self.new_items += 1
        self.new_calls += calls
        self.new_cached_calls += cached_calls
        if error_type in UNREACHABLE:
            self._unreachable[error_type] += 1
        else:
            self._answered = True
        if self.on_save is not None:
            self.on_save()
        if not self._answered and sum(self._unreachable.values()) >= ABORT_AFTER:
            raise RunAborted(self, self._unreachable.most_common(1)[0][0])

    @property
    def done(self) -> int:
        return len(self._done)

    def _with_call(self, flag: str) -> int:
        return sum(1 for i in self._done.values() if any(c.get(flag) for c in i.call_log))

    @property
    def tokens_estimated(self) -> int:
        """Finished items with a call whose token counts are estimated (no usable ``usage``)."""
        return self._with_call("tokens_estimated")

    def resumable(self) -> set[str]:
        """The items a resume reads back, never asking them: every saved item but those whose
        call failed and the later items of their unit (built on them)."""
        done = {k for k, i in self._done.items() if not call_failed(i)}
        for keys in self._units:
            cut = next((n for n, k in enumerate(keys) if k not in done), len(keys))
            done.difference_update(keys[cut:])
        return done

    @property
    def truncated(self) -> int:
        """Finished items with a reply cut by the token limit (``finish_reason: "length"``)."""
        return self._with_call("truncated")

    def items(self) -> list[StoredItem]:
        """Every finished item, in completion order."""
        return sorted(self._done.values(), key=lambda i: i.seq)


def item_calls(
    handle: RunHandle, key: Callable[[str], str] | None = None
) -> dict[str, dict[str, Any]]:
    """The run's items' calls (what a scored item keeps under ``call``) by scoring key:
    ``key`` of the journal key (the same by default)."""
    return {(key(i.key) if key is not None else i.key): i.call() for i in handle.items()}


Asked = tuple[dict[str, Any], str | None, list[CallResult]]
"""What asking one item gives: its result, its error type (None: answered) and its calls."""


@dataclass(frozen=True)
class InOrder(Generic[T]):
    """``run_task``'s work for units of items asked in order: ``ask(item, earlier results,
    client)``, its item saved; an item finished in an earlier run is read back, never asked.
    ``run_task`` reads each unit's keys (what a resume asks again)."""

    key: Callable[[T], str]
    ask: Callable[[T, list[dict[str, Any]], ChatClient], Awaitable[Asked]]

    async def __call__(self, items: Sequence[T], handle: RunHandle) -> None:
        earlier: list[dict[str, Any]] = []
        for item in items:
            result = handle.result(self.key(item))
            if result is None:
                result, error_type, log = await self.ask(item, earlier, handle.client)
                # a result that says its latency (numeric's, rounded) is saved with it
                latency_s = result.get("latency_s")
                handle.save(
                    self.key(item), result, error_type=error_type, latency_s=latency_s, call_log=log
                )
            earlier.append(result)


in_order = InOrder


def call_failed(item: StoredItem) -> bool:
    """Whether a stored item ended in a failed model call (not an answer, so not finished): an
    ``invalid_reply``, even one with no content, is the model's answer, final."""
    return item.error_type in CALL_ERRORS


@dataclass
class _Unit:
    rerun: bool = False  # an item of this unit has run in this process: later ones run too


_UNIT: contextvars.ContextVar[_Unit | None] = contextvars.ContextVar(
    "fieldcheck_unit", default=None
)


# Error types that mean the endpoint cannot answer at all (nothing listening, wrong URL, model or
# key, a server that takes the request and never answers): when the first ABORT_AFTER items of a
# run (or calls of a judge) all end so, it stops.
UNREACHABLE = frozenset({"connection", "bad_request", "bad_response", "timeout"})
ABORT_AFTER = 3


class RunAborted(UsageProblem):
    """The endpoint answered none of the first items (connection refused, 4xx): stop early, a
    usage error (the endpoint, model or key; exit 2)."""

    def __init__(self, handle: RunHandle, error_type: str) -> None:
        last = next(
            (
                c.get("error_message")
                for item in reversed(handle.items())
                for c in item.call_log
                if c.get("error_message")
            ),
            None,
        )
        super().__init__(
            f"stopped: the first {ABORT_AFTER} items of {handle.client.spec.name} all failed "
            f"with {error_type} at {handle.client.spec.endpoint}"
            + (f" ({last})" if last else "")
            + "; check --base-url, --model and the API key"
            + (" (or raise --timeout)" if error_type == "timeout" else "")
        )


class RunInterrupted(Exception):
    """Ctrl-C during a run: what was stored is kept and the run can be resumed (without the
    store, nothing is: the same command starts over)."""

    def __init__(self, handle: RunHandle, total: int) -> None:
        exit_without_collecting()
        done = len(handle.resumable())
        failed = handle.done - done  # stored, asked again: a call error or built on one
        built = failed - sum(call_failed(i) for i in handle.items())
        others = [h for h in handle.runner.runs if h.finished]
        if handle.runner.store is None:  # --no-store, or no usable store: nothing to resume
            again = f"all {_plural(total, 'item')}"
            if others:
                again = f"{', '.join(h.client.spec.name for h in others)} and {again} of "
                again += handle.client.spec.name
            super().__init__(
                f"interrupted: {done} of {_plural(total, 'item')} finished, {NOT_STORED}; the "
                f"same command starts over, calling {again} again: {resume_command()}"
            )
            return
        # "finished" as the resume counts it: items with a call error are asked again
        asked = (
            f", {_plural(failed, 'more item')} with a call error"
            f"{' or built on one' if built else ''}, asked again on resume"
            if failed
            else ""
        )
        left = unwritten_note() if done == total else ""
        super().__init__(
            f"interrupted: {done} of {_plural(total, 'item')} finished and stored{asked} "
            f"(run {handle.id}){finished_note(others)}{left}; resume with: {resume_command()}"
        )


NOT_STORED = "none stored (no store: nothing to resume)"
"""What a Ctrl-C of a run without the store (``--no-store``, or none usable) leaves."""


def unwritten_note() -> str:
    """After the last call: the output folder is not complete (docs/running.md: a Ctrl-C after
    the calls says so; it said only what was stored, a tester's finding)."""
    dest = open_destination()
    return f"; every call was made, but the output folder {dest} was not completed" if dest else ""


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def finished_note(finished: Sequence[RunHandle], *, named: bool = True) -> str:
    """What a resume does with the models this command had finished: takes their runs up again
    with no call, but for the items whose call failed (and those built on them). ``named``: say
    which runs (not when the line lists them already)."""
    if not finished:
        return ""
    again = sum(h.done - len(h.resumable()) for h in finished)
    how = "with no call"
    if again:
        how = f"asking again only {_plural(again, 'item')} (a failed call or one built on it)"
    if not named:
        names = ", ".join(h.client.spec.name for h in finished)
        return f"; the command below resumes {names} {how}"
    runs = ", ".join(f"{h.client.spec.name} (run {h.id})" for h in finished)
    done, it = (
        ("had finished its", "it") if len(finished) == 1 else ("had all finished their", "them")
    )
    return f"; {runs} {done} calls, and the command below resumes {it} {how}"


def interrupted_line(runner: Runner) -> str | None:
    """After a second Ctrl-C cut the first one's report: the runs opened (each marked
    interrupted) and the command that resumes; None when it opened none."""
    if not runner.runs:
        return None
    exit_without_collecting()
    parts = []
    for h in runner.runs:
        runner.set_status(h.id, "interrupted")
        state = "finished" if h.finished else f"{_plural(len(h.resumable()), 'item')} finished"
        parts.append(
            f"{h.client.spec.name} ({state})"
            if runner.store is None
            else f"{h.client.spec.name} (run {h.id}, {state})"
        )
    if runner.store is None:
        return (
            f"interrupted: {', '.join(parts)}, {NOT_STORED}; the same command starts over, "
            f"calling every item again: {resume_command()}"
        )
    finished = [h for h in runner.runs if h.finished]
    note = finished_note(finished, named=False) if len(finished) < len(runner.runs) else ""
    note = note or unwritten_note()
    return f"interrupted: {', '.join(parts)}{note}; resume with: {resume_command()}"


def resume_command() -> str:
    """The command line that resumes this run: the same command, with ``--out`` the folder its
    unfinished folder goes to when none was given (else a new folder would be made)."""
    argv = list(sys.argv)
    if argv and Path(argv[0]).name in {"__main__.py", "fieldcheck"}:
        argv[0] = "fieldcheck"
    dest = open_destination()
    if dest and not any(a == "--out" or a.startswith("--out=") for a in argv[1:]):
        argv += ["--out", dest]
    return shlex.join(argv)


def _progress(console: Console | None, disable: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[extra]}", markup=False),
        console=console,
        disable=disable,
        transient=False,
    )


def estimate_line(calls: int, input_tokens: int, output_tokens: int, spec: ModelSpec) -> str:
    """One line: the expected calls and, with prices, the expected cost in USD."""
    line = f"about {calls} model calls for {spec.name} (fewer if replies are cached)"
    line += f" (~{input_tokens:,} input / ~{output_tokens:,} output tokens, estimated)"
    cost = spec.cost_usd(input_tokens, output_tokens)
    if cost is not None:
        line += f"; about ${cost:.4g} at the given prices"
    return line


async def run_task(
    runner: Runner,
    spec: RunSpec,
    units: Sequence[U],
    work: Callable[[U, RunHandle], Awaitable[None]],
    *,
    total_items: int,
    estimate: tuple[int, int, int] | None = None,
    console: Console | None = None,
    show_progress: bool = True,
) -> RunHandle:
    """Run ``work(unit, handle)`` over ``units`` (each run in order, concurrently with the
    others) for one model; ``estimate``: (calls, tokens in, out) for a line before 100+ calls."""
    console = console or SafeConsole(stderr=True)
    signature = spec.signature({"json_mode": runner.settings.json_mode})
    defining = {
        **spec.settings,
        "model_spec": spec.model.public(),
        "json_mode": runner.settings.json_mode,
    }
    digest = sha256_file(spec.dataset) if runner.store is not None else ""
    here = open_destination()
    out_dir = str(Path(here).resolve()) if here else None
    opened = runner.use_store(
        lambda store: store.open_run(
            system=spec.system,
            task=spec.task,
            dataset=str(spec.dataset),
            dataset_sha256=digest,
            model=spec.model.name,
            endpoint=spec.model.endpoint,
            settings=defining,
            signature=signature.format(),
            n_items=total_items if runner.part_of else total_items * runner.models,
            out_dir=out_dir,
            part_of=runner.part_of,
        )
    )
    # without a store the run lives in this process only: an id, nothing stored
    run_id, resumed = (opened[0].id, opened[1]) if opened else (uuid.uuid4().hex[:12], False)
    keys = (
        [list(map(work.key, cast(Sequence[Any], u))) for u in units]
        if isinstance(work, InOrder)
        else []
    )
    handle = RunHandle(runner, run_id, resumed, runner.client(spec.model), keys)
    runner.runs.append(handle)
    if opened and not resumed:
        other = runner.use_store(lambda store: store.unresumed_run(opened[0]))
        if other is not None:
            line = not_resumed_line(other, loads(dumps(defining)), run_id)
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    if resumed and handle.resumed_items:
        # begun for another --out: that folder's unfinished copy is not this process's to remove
        earlier, moved = opened[0].out_dir if opened else None, ""
        if earlier and out_dir and not Path(earlier).is_relative_to(out_dir):  # a model's: under
            moved = f" (begun for {earlier}, whose unfinished copy is left as it is; the outputs "
            moved += f"go to {here})"
        console.print(
            f"resuming run {run_id}{moved}: {handle.resumed_items} of "
            f"{_plural(total_items, 'item')} already finished are not called again",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    if estimate is not None and total_items:  # the items still to run (a resume skips some)
        share = (total_items - handle.resumed_items) / total_items
        calls, tokens_in, tokens_out = (round(x * share) for x in estimate)
        if calls > 100:
            line = estimate_line(calls, tokens_in, tokens_out, spec.model)
            console.print(line, markup=False, highlight=False)
    start = time.perf_counter()
    with _progress(console, not show_progress) as bar:
        task: TaskID = bar.add_task(
            spec.model.name, total=total_items, completed=handle.done, rate="", extra=""
        )
        first_done = handle.done
        shown = [0.0]

        def refresh(every: float = 0.05) -> None:
            """The bar's counts, at most every ``every`` seconds (it redraws 10 times a second)."""
            now = time.perf_counter()
            if now - shown[0] < every:
                return
            shown[0], elapsed = now, max(now - start, 1e-9)
            fresh = handle.done - first_done
            errors = " ".join(f"{k}={v}" for k, v in sorted(handle.errors.items()))
            extra = f"calls {handle.new_calls} ({handle.new_cached_calls} cached)"
            if errors:
                extra += f", errors {errors}"
            bar.update(task, completed=handle.done, rate=f"{fresh / elapsed:.1f}/s", extra=extra)

        handle.on_save = refresh
        try:
            await _gather_bounded(units, work, handle, runner.settings.concurrency)
        except RunAborted:
            runner.set_status(run_id, "failed")  # never resumed: the next run asks again
            raise
        except (KeyboardInterrupt, asyncio.CancelledError):
            for run in (handle, *(h for h in runner.runs if h.finished)):
                # the models this command had finished are not scored yet: the resume takes
                # their runs up again (one run per model), with no call
                runner.set_status(run.id, "interrupted")
            raise RunInterrupted(handle, total_items) from None
        finally:
            handle.on_save = None
            refresh(0)
    runner.flush()  # its journal committed; the run stays running until scored (docs/runs.md)
    handle.finished = True
    console.print(summary_line(handle), markup=False, highlight=False, soft_wrap=True)
    return handle


def not_resumed_line(other: RunInfo, settings: dict[str, Any], run_id: str) -> str:
    """One line: interrupted run ``other`` (of the same data and model) is not resumed by new
    run ``run_id``, whose ``settings`` (as stored) differ from its own, named."""
    changed = ", ".join(_changed_settings(other, settings)) or "settings"
    return (
        f"not resuming run {other.id} ({other.model}, interrupted, {other.n_done} of "
        f"{_plural(other.n_items, 'item')} done): it ran with other {changed}; this is a new run "
        f"{run_id} (the old one is resumed by the command with its settings)"
    )


def _changed_settings(other: RunInfo, settings: dict[str, Any]) -> list[str]:
    """The names of ``settings`` whose values ``other`` ran with differ. Its stored settings
    are those its scoring merged in when interrupted while scoring (bootstrap, seed, split:
    ``Store.begin_scoring``), so the fewest of the keys whose values differ there that, taken
    from it, give its run key are those that changed (a tester's finding: it named bootstrap,
    split, seed, that had not changed); none found: every one that differs."""
    from fieldcheck.store import model_run_key  # the store's ORM: not for a command's --help

    old = other.settings
    differ = [k for k in settings if old.get(k) != settings[k]]
    for size in range(min(len(differ), 4) + 1):
        for keys in itertools.combinations(differ, size):
            tried = {**settings, **{k: old.get(k) for k in keys}}
            key = (other.system, other.task, other.dataset_sha256, other.model, other.endpoint)
            if model_run_key(*key, tried) == other.run_key:
                return _changed({k: old.get(k) for k in keys}, {k: settings[k] for k in keys})
    return _changed({k: v for k, v in old.items() if k in settings}, settings)


def _changed(old: Any, new: Any) -> list[str]:
    """The names of the settings whose values differ (those of a nested dict by their own)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return []
    names: list[str] = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        nested = isinstance(a, dict) and isinstance(b, dict)
        names += _changed(a, b) if nested else [key] if a != b else []
    return names


def summary_line(handle: RunHandle) -> str:
    """One line after a run: items, resumed, calls, cache hits, errors, cut and estimated."""
    resumed = f" ({handle.resumed_items} resumed)" if handle.resumed_items else ""
    calls = handle.new_calls
    if calls and handle.new_cached_calls == calls:
        source = f"{calls} calls, all answered from the cache"
    else:
        source = f"{calls} calls, {handle.new_cached_calls} answered from the cache"
    errors = ", ".join(f"{k} {v}" for k, v in sorted(handle.errors.items())) or "none"
    stored = "" if handle.runner.store is not None else " (not stored)"
    cut = handle.truncated
    truncated = (
        f"; {cut} of {handle.done} items had a reply cut by the token limit (finish_reason "
        "length): raise --max-tokens"
        if cut
        else ""
    )
    guessed = handle.tokens_estimated
    estimated = (
        f"; tokens of {guessed} of {handle.done} items estimated (characters / 4: the endpoint "
        "sent no usable usage)"
        if guessed
        else ""
    )
    return (
        f"{handle.client.spec.name}: run {handle.id}{stored} finished: {handle.done} items"
        f"{resumed}; {source}; errors: {errors}{truncated}{estimated}"
    )


async def _gather_bounded(
    units: Sequence[U],
    work: Callable[[U, RunHandle], Awaitable[None]],
    handle: RunHandle,
    concurrency: int,
) -> None:
    """Run units with at most ``2 * concurrency`` in progress (the runner bounds requests)."""
    pending = iter(units)  # shared by the workers: each takes the next unit

    async def worker() -> None:
        for unit in pending:
            token = _UNIT.set(_Unit())
            try:
                await work(unit, handle)
            except Exception:  # the early stop: the others end at once, not after a step each
                # in which a freed slot let a new call out (up to 2 x concurrency were made)
                for other in workers:
                    if other is not asyncio.current_task():
                        other.cancel()
                raise
            finally:
                _UNIT.reset(token)

    workers = [
        asyncio.create_task(worker()) for _ in range(max(1, min(len(units), 2 * concurrency)))
    ]
    try:
        await asyncio.gather(*workers)
    finally:
        for w in workers:
            w.cancel()

"""Options shared by every command that calls a model (``slots run``, ``numeric evaluate``,
``json run``): the same names, meanings and defaults everywhere, and one way to build the runner."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar
from urllib.parse import urlsplit

import typer
from pydantic import ValidationError
from rich.console import Console

from fieldcheck import core
from fieldcheck._cli._common import (
    _RUNNING,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    Options,
    ProgressBar,
    command_name,
    events,
    finish_run,
    interrupt_reported,
    option,
    pipeline_errors,
)
from fieldcheck._cli._record import runner_store_failed, runner_store_unavailable, say, store_failed
from fieldcheck._util.console import SafeConsole
from fieldcheck._util.errors import InputError, input_error_of
from fieldcheck.reports import RunFolder
from fieldcheck.runner import (
    API_KEY_ENV,
    MAX_REPLY_BYTES,
    ModelSpec,
    RunAborted,
    RunInterrupted,
    Runner,
    RunnerSettings,
    interrupted_line,
    load_model_specs,
)
from fieldcheck.store import describe_url

if TYPE_CHECKING:  # the store's ORM: imported to open one, not for a command's --help
    from fieldcheck.store import Store

T = TypeVar("T")


MODEL_OPTIONS: Options = {
    "model": option(
        list[str] | None,
        None,
        "--model",
        metavar="[NAME=]MODEL",
        help="A model at --base-url; NAME labels it in every output (default MODEL). Repeat "
        "for several models.",
    ),
    "base_url": option(
        str | None,
        None,
        "--base-url",
        help="OpenAI-compatible endpoint, e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1.",
    ),
    "models_file": option(
        Path | None,
        None,
        "--models",
        exists=True,
        dir_okay=False,
        readable=True,
        metavar="FILE",
        help="YAML or JSON list of {name, model, base_url, api_key_env, temperature, max_tokens, "
        "price_in, price_out}: models behind different endpoints in one run.",
    ),
    "concurrency": option(
        int, 8, "--concurrency", min=1, max=1024, help="Requests in flight at once."
    ),
    "timeout": option(
        float,
        60.0,
        "--timeout",
        min=0.1,
        help="Seconds one request may take in all (connecting, waiting, reading the reply).",
    ),
    "max_retries": option(
        int,
        3,
        "--max-retries",
        min=0,
        help="Retries on 429, 5xx, timeouts and connection errors (0: none); never on other 4xx.",
    ),
    "max_reply_bytes": option(
        int,
        MAX_REPLY_BYTES,
        "--max-reply-bytes",
        min=1024,
        help="Largest reply body read, in bytes; a longer one is a bad_response (8 MiB).",
    ),
    "temperature": option(
        float, 0.0, "--temperature", min=0.0, max=2.0, help="Sampling temperature."
    ),
    "max_tokens": option(
        int | None, None, "--max-tokens", min=1, help="Most tokens a reply may have."
    ),
    "model_seed": option(
        int | None,
        None,
        "--model-seed",
        help="The 'seed' sent to the endpoint (where it takes one).",
    ),
    "json_mode": option(
        bool,
        False,
        "--json-mode",
        metavar="",
        help="Send response_format={'type': 'json_object'} (where the endpoint takes it).",
    ),
    "no_cache": option(
        bool, False, "--no-cache", metavar="", help="Neither read nor write the reply cache."
    ),
    "cache_nonzero_temperature": option(
        bool,
        False,
        "--cache-nonzero-temperature",
        metavar="",
        help="Cache replies at temperature > 0 too (by default only temperature 0 is cached).",
    ),
    "no_progress": option(bool, False, "--no-progress", metavar="", help="No progress bar."),
}
"""The options of every command that calls a model, with ``PRICE_OPTIONS``."""

PRICE_OPTIONS: Options = {
    "price_in": option(
        float | None,
        None,
        "--price-in",
        min=0.0,
        help="USD per 1M input tokens (with --price-out).",
    ),
    "price_out": option(
        float | None,
        None,
        "--price-out",
        min=0.0,
        help="USD per 1M output tokens (with --price-in).",
    ),
}
"""``--price-in`` and ``--price-out``: dollar costs (model runs and ``numeric score``)."""


def model_specs(
    *,
    models: list[str] | None,
    models_file: Path | None,
    base_url: str | None,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    model_seed: int | None = None,
    price_in: float | None = None,
    price_out: float | None = None,
) -> list[ModelSpec]:
    """The models of a run: ``--models FILE``, or each ``--model [NAME=]MODEL`` at ``--base-url``;
    ``typer.BadParameter`` when they are missing or malformed."""
    if (price_in is None) != (price_out is None):
        raise typer.BadParameter(
            "give --price-in and --price-out together", param_hint="--price-in/--price-out"
        )
    if models_file is not None:
        if models:
            raise typer.BadParameter("give --model or --models, not both", param_hint="--models")
        try:
            return check_keys(load_model_specs(models_file))
        except InputError as exc:
            raise typer.BadParameter(exc.one_line(), param_hint="--models") from None
    if not models:
        raise typer.BadParameter("give --model MODEL (with --base-url) or --models FILE")
    if not base_url:
        raise typer.BadParameter("--model needs --base-url", param_hint="--base-url")
    specs: list[ModelSpec] = []
    try:
        ModelSpec(name="x", model="x", base_url=base_url)
    except ValidationError as exc:
        message = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        raise typer.BadParameter(message, param_hint="--base-url") from None
    for text in models:
        name, sep, model = text.partition("=")
        if not sep:
            name, model = text, text
        if not name.strip() or not model.strip():
            raise typer.BadParameter(
                f"expected NAME=MODEL or MODEL, got {text!r}", param_hint="--model"
            )
        try:
            specs.append(
                ModelSpec(
                    name=name.strip(),
                    model=model.strip(),
                    base_url=base_url,
                    temperature=temperature,
                    max_tokens=max_tokens,
                    seed=model_seed,
                    price_in=price_in,
                    price_out=price_out,
                )
            )
        except ValidationError as exc:  # a name past 200 characters, as a --models file's
            error = input_error_of(exc).replace(value=...)
            raise typer.BadParameter(error.one_line(), param_hint="--model") from None
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise typer.BadParameter("model names must be unique", param_hint="--model")
    return check_keys(specs)


_LOOPBACK = ("127.", "localhost", "::1", "[::1]")


def check_keys(specs: list[ModelSpec]) -> list[ModelSpec]:
    """A model whose ``api_key_env`` is unset is a usage error; no key at all for a remote
    endpoint gets one warning line (local servers take any key)."""
    for spec in specs:
        if spec.api_key_env and not os.environ.get(spec.api_key_env):
            raise typer.BadParameter(
                f"model {spec.name!r}: ${spec.api_key_env} (its api_key_env) is not set",
                param_hint="--models",
            )
    remote = [
        s
        for s in specs
        if not s.api_key_env
        and not any(os.environ.get(n) for n in API_KEY_ENV)
        and not (urlsplit(s.base_url).hostname or "").startswith(_LOOPBACK)
    ]
    if remote:
        typer.echo(
            f"warning: no API key set (${' or $'.join(API_KEY_ENV)}) for "
            f"{', '.join(s.name for s in remote)} at {remote[0].endpoint}",
            err=True,
        )
    return specs


def make_runner(*, no_store: bool = False, no_cache: bool = False, **settings: Any) -> Runner:
    """A runner with ``RunnerSettings`` on the store; without one for ``no_store``, or when the
    store cannot be opened or written (then one warning, docs/runs.md)."""
    from fieldcheck.store import Store

    store: Store | None = None
    if not no_store and not store_failed():  # else the command has warned already
        try:
            store = Store()
            store.check_writable()
        except Exception as exc:  # a bad URL, an unreachable or read-only database
            runner_store_unavailable(exc)
            store = None
    return Runner(
        RunnerSettings(use_cache=not no_cache, **settings),
        store=store,
        on_store_error=runner_store_failed,
    )


JUDGE_OPTIONS: Options = {name: MODEL_OPTIONS[name] for name in ("concurrency", "timeout")}
"""A scoring command's judge calls, limited as a model run's calls are (its judge's too)."""
PROGRESS_OPTIONS: Options = {"no_progress": MODEL_OPTIONS["no_progress"]}
"""A scoring command's: it draws the bar a model run draws (a script passes both the flag)."""

_SPEC_OPTIONS = ("base_url", "temperature", "max_tokens", "model_seed", "price_in", "price_out")
_RUNNER_OPTIONS = (
    *("concurrency", "timeout", "max_retries", "max_reply_bytes", "no_cache"),
    *("cache_nonzero_temperature", "json_mode", "no_store"),
)


def _shutdown_report(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's exception handler: while a KeyboardInterrupt leaves the loop (a second Ctrl-C
    close behind the first, before the first's cancellation reached the run's task), asyncio.run's
    shutdown cancels the tasks left, and what they end with (the run's ``RunInterrupted``, an
    interrupt wrapped in an exception group) is the interrupt's doing: not reported as
    "unhandled exception during asyncio.run() shutdown" with a traceback, as ``run_async`` says
    what was left in one line. Anything else as asyncio would."""
    if not isinstance(sys.exc_info()[1], KeyboardInterrupt):
        loop.default_exception_handler(context)


async def _interruptible(coro: Coroutine[Any, Any, T]) -> T:
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(_shutdown_report)
    calls = [0]

    def interrupt() -> None:
        calls[0] += 1
        if calls[0] > 1 or task is None or task.done():
            raise KeyboardInterrupt
        task.cancel()
        loop.call_soon_threadsafe(lambda: None)  # wake a select() waiting with a long timeout

    _RUNNING.append(interrupt)
    try:
        return await coro
    finally:
        _RUNNING.remove(interrupt)


def run_async(
    coro: Coroutine[Any, Any, T], *, console: Console | None = None, runner: Runner | None = None
) -> T:
    """Run a coroutine; on Ctrl-C print one line (what is stored, how to resume) and exit 130.
    ``runner``: the runs it opened are named even when a second Ctrl-C cut the first's report."""
    try:
        return asyncio.run(_interruptible(coro))
    except RunInterrupted as exc:
        line = str(exc)
    except KeyboardInterrupt:
        stored = interrupted_line(runner) if runner is not None else None
        line = stored or "interrupted before any run started; nothing was stored"
    say(console or SafeConsole(stderr=True), line)
    interrupt_reported()
    raise typer.Exit(EXIT_INTERRUPTED)


def run_models(
    command: str,
    inputs: list[tuple[str, Path]],
    settings: dict[str, Any],
    specs: list[ModelSpec],
    runner: Runner,
    out: Path | RunFolder | None,
    *,
    errors: Console,
    names: dict[str, str] | None = None,
    show_progress: bool = False,
    store: bool = True,
    say_store: bool = False,
) -> core.Ran:
    """A ``run``/``evaluate`` command's ``core.run`` (``command``: ``SYSTEM [NAME]``, as stored
    outside a command line, ``make demo``'s); a Ctrl-C during the calls one line saying how to
    resume (``say_store``: the store first)."""

    def loop(calls: Coroutine[Any, Any, list[Any]]) -> list[Any]:
        if say_store:
            say(errors, store_line(runner))
        return run_async(calls, console=errors, runner=runner)

    with pipeline_errors(names=names), ProgressBar(errors) as bar:
        try:
            return core.run(
                command.partition(" ")[0],
                inputs,
                settings,
                specs,
                runner,
                out=out,
                command=command_name() or command,
                store=store and not store_failed(),
                events=events(errors, bar if show_progress else None),
                loop=loop,
                console=errors,
                show_progress=show_progress,
            )
        except RunAborted as exc:  # a usage error (the endpoint, model or key): its one line
            say(errors, f"error: {exc}")
            raise typer.Exit(EXIT_USAGE) from None


def run_and_exit(
    system: str,
    inputs: list[tuple[str, Path]],
    settings: dict[str, Any],
    options: dict[str, Any],
    show: Callable[[core.Ran, Runner, Console, Console], None],
    *,
    out: Path | None,
    names: dict[str, str] | None = None,
    say_store: bool = False,
) -> NoReturn:
    """A model-running command once its options are read: its models and runner, ``run_models``,
    ``show`` on stdout (stderr under ``--json``) and stderr, and exit as ``finish_run`` says."""
    given = {name: options[name] for name in _SPEC_OPTIONS}
    specs = model_specs(models=options["model"], models_file=options["models_file"], **given)
    runner = make_runner(**{name: options[name] for name in _RUNNER_OPTIONS})
    console, errors = SafeConsole(stderr=options["as_json"]), SafeConsole(stderr=True)
    ran = run_models(
        system,
        inputs,
        settings,
        specs,
        runner,
        out,
        errors=errors,
        names=names,
        show_progress=not options["no_progress"],
        store=not options["no_store"],
        say_store=say_store,
    )
    show(ran, runner, console, errors)
    raise typer.Exit(finish_run(ran, options["fail_under"], options["as_json"]))


def store_line(runner: Runner) -> str:
    store = runner.store
    return f"store: {describe_url(store.url)}" if store is not None else "store: none"

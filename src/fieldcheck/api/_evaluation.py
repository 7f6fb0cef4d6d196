"""The library calls behind the scoring routes and the pages: ``json score``'s and the one pipeline
(``core.score``) with the app's matchers (built once) and store, and the saved configuration."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

import orjson
from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from fieldcheck import core
from fieldcheck._util.errors import CannotWrite, InputError, UsageProblem
from fieldcheck._util.jsonio import document_error, loads, repeated_key
from fieldcheck._util.paths import safe_filename, unique_filenames
from fieldcheck.api._errors import ApiError
from fieldcheck.jsoneval import (
    LISTED_TWICE,
    NESTED_HINT,
    EvalConfig,
    JsonEvalResult,
    MatcherError,
    SavedConfig,
    Section,
    SectionError,
    build_matchers,
    evaluate,
    merged_config,
)
from fieldcheck.matchers import Matcher
from fieldcheck.reports import interrupt_thread, interrupt_withdrawn

if TYPE_CHECKING:
    from fieldcheck.api._deps import AppContext
    from fieldcheck.store import RunInfo

_log = logging.getLogger("fieldcheck")


class Matchers:
    """The server's FUZZY and SEMANTIC matchers, built on first use (loading MiniLM or opening
    the judge client once, not per request), and its matcher settings (``server``)."""

    def __init__(self, config: EvalConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._matchers: dict[str, Matcher] | None = None

    def get(self) -> dict[str, Matcher]:
        with self._lock:
            if self._matchers is None:
                self._matchers = build_matchers(self.config)
            return self._matchers

    def server(self) -> dict[str, Any]:
        """The server's matcher settings: what every run of the server is scored and signed
        with, whatever a request says (a request never points the server at another judge)."""
        return self.config.model_dump(include={"matcher", "judge_base_url", "judge_model"})

    def extras(self) -> dict[str, Any]:
        """What ``core.score`` and ``runs.rescore`` take of the server's matcher: the matchers
        (built in the caller's thread on first use) and their settings (``server``)."""
        return {"matchers": self.get(), "matcher_config": self.server()}


_COPY_BLOCK = 1 << 20
RUNS = "fieldcheck-runs"  # under --data-root: each API run's uploads and run folder
UPLOADS = "fieldcheck-upload-"  # without a data root: a request's temporary folder


def parse_ground_truth_text(text: str, *, file: str | None = None) -> dict[str, Any]:
    """Pasted or uploaded (``file``: its name) ground truth: a JSON object, else ApiError naming
    ``ground_truth``; invalid JSON at its line and column (an upload in the CLI's words)."""
    data = text.encode().removeprefix(b"\xef\xbb\xbf")
    try:
        value = loads(data)
    except orjson.JSONDecodeError as exc:
        if file is not None:
            error = document_error(exc, data, file=file)
            raise ApiError.invalid(error, field="ground_truth") from None
        where = f"at line {exc.lineno} column {exc.colno}"
        message = f"ground truth: invalid JSON: {exc.msg} {where}"
        raise ApiError(422, message, field="ground_truth") from None
    if not isinstance(value, dict):
        name = file or "ground truth"
        error = InputError("ground truth must be a JSON object", file=name, value=value)
        raise ApiError.invalid(error, field="ground_truth")
    return value


def parse_json_file(raw: bytes, *, name: str) -> Any:
    """An uploaded JSON file's content (a UTF-8 byte order mark allowed), or InputError in the
    CLI's words (``f.json:1: invalid JSON: not UTF-8 text (byte 0xff at column 2)``)."""
    data = raw.removeprefix(b"\xef\xbb\xbf")
    try:
        value = loads(data)  # integers beyond 64 bits exact, as every JSON input
    except orjson.JSONDecodeError as exc:
        raise document_error(exc, data, file=name) from None
    if twice := repeated_key(data):  # the last one would win without a word
        raise InputError(LISTED_TWICE, file=name, line=twice[1], field=twice[0])
    return value


def strategy_rows(rows: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """The Configuration page's table (field, strategy) as a mapping for ``parse_strategies``:
    an empty field name or one listed twice is refused."""
    mapping: dict[str, Any] = {}
    for field, strategy in rows:
        if not field.strip():
            raise InputError("a field name must not be empty", value=strategy)
        if field in mapping:
            raise InputError(LISTED_TWICE, field=field)
        mapping[field] = strategy
    return mapping


REQUEST_PARTS: dict[Section, str] = {  # a section by the name a request gives it
    "strategies": "field_strategies",
    "thresholds": "thresholds",
    "weights": "weights",
}


def merged(saved: SavedConfig, given: Mapping[str, Any]) -> EvalConfig:
    """A request's configuration (its sections checked, the server's matcher) merged with the
    saved one (``jsoneval.merged_config``); a bad section is a 422 naming the request's part."""
    try:
        return merged_config(given, saved, lambda _: None)
    except SectionError as exc:
        part = REQUEST_PARTS[exc.section]
        field = f"{part}.{exc.error.field}" if exc.error.field and not exc.saved else part
        raise ApiError.invalid(exc.error, field=field) from None


@contextmanager
def logged_warnings(flatten: str = " (nested paths need flatten)") -> Iterator[list[str]]:
    """The warnings fieldcheck logs in this thread meanwhile, which the CLI prints on stderr (a
    concurrent request's are its own), for the answer's ``warnings``; ``flatten``: how the caller
    names ``--flatten`` in the unused strategies' warning."""
    lines: list[str] = []
    thread = threading.get_ident()

    class Kept(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.thread == thread:
                lines.append(record.getMessage().replace(NESTED_HINT, flatten))

    handler = Kept(logging.WARNING)
    logger = logging.getLogger("fieldcheck")
    logger.addHandler(handler)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)


def with_warnings(answer: dict[str, Any], warnings: Sequence[str]) -> dict[str, Any]:
    """``answer`` with its ``warnings``, when there are any (docs/api.md)."""
    return {**answer, "warnings": list(warnings)} if warnings else answer


def evaluate_one(
    output: Any,
    ground_truth: Mapping[str, Any],
    config: EvalConfig,
    matchers: Matchers,
    *,
    safety_score: float | None = None,
    flatten: str = " (nested paths need flatten)",
) -> tuple[JsonEvalResult, list[str]]:
    """``json score``: one output against one ground truth, and its warnings (``flatten``: how
    the caller names ``--flatten``). A side nesting too deep is a 422 naming it; a judge that
    gives no similarity is a 502."""
    try:
        with logged_warnings(flatten) as lines:
            result = evaluate(
                output, ground_truth, config, safety_score=safety_score, matchers=matchers.get()
            )
    except InputError as exc:
        raise ApiError.invalid(exc, field=exc.field or "output") from None
    except MatcherError as exc:
        raise ApiError(502, f"the matcher failed: {exc}") from None
    return result, lines


def score_run(
    ctx: AppContext,
    system: str,
    inputs: core.Inputs,
    settings: Mapping[str, Any],
    *,
    out: Path,
    shown: Mapping[str, str],
    params: Mapping[str, str] | None = None,
) -> tuple[core.Outcome, list[str]]:
    """``core.score`` into the run folder ``out`` and the store, in the caller's thread, and its
    warnings, server paths named as ``shown``; a usage problem is a 422 naming its param (by
    ``params``, else ``settings.KEY`` or the role), ``CannotWrite`` a 507, a failed judge a 502."""
    label, models = core.model_label(core.get(system), inputs)
    events = core.Events(warn=lambda line: _log.warning("%s", hidden(line, shown)))
    try:
        with logged_warnings() as lines:
            outcome = core.score(
                system,
                inputs,
                settings,
                out=out,
                command=f"api score {system}",
                label=label,
                models=models,
                store=ctx.store,
                events=events,
                extras=ctx.matchers.extras(),
            )
    except UsageProblem as exc:
        if params is None:  # the generic route: a setting by its key, an input by its role
            message, name, setting = core.renamed(core.get(system), settings, exc)
            field = f"settings.{name}" if setting else name or None
        else:
            message, field = exc.message, params.get(exc.param or "", exc.param)
        raise ApiError(422, hidden(message, shown), field=field) from None
    except CannotWrite as exc:
        raise ApiError(507, hidden(str(exc), shown)) from None
    except MatcherError as exc:
        raise ApiError(502, f"the matcher failed: {exc}") from None
    return outcome, [hidden(line, shown) for line in lines]


class ClientGone(Exception):
    """The client of a request closed its connection while its run was scored: the scoring was
    stopped as Ctrl-C stops the CLI's (the run interrupted, its folder left unfinished)."""


WATCH_S = 0.25
"""How often a request whose run is scored checks that its client is still connected."""


class _Worker:
    """The worker thread that scores a request's run, stopped (``interrupt_thread``: the CLI's
    Ctrl-C) when its client leaves; KeyboardInterrupt leaves it as ``ClientGone``, which the
    event loop can take (a KeyboardInterrupt in a task stops the server)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: int | None = None
        self._over = self.stopped = False

    def run(self, work: Callable[[], Any]) -> Any:
        try:
            with self._lock:
                self._thread = threading.get_ident()
            try:
                return work()
            finally:
                with self._lock:
                    self._over = True
                    interrupt_withdrawn(self._thread)
        except KeyboardInterrupt:
            raise ClientGone from None

    def stop(self) -> None:
        with self._lock:
            if self._thread is not None and not self._over and not self.stopped:
                self.stopped = True
                interrupt_thread(self._thread)


async def _scored_while_connected(request: Request | None, work: Callable[[], Any]) -> Any:
    """``work()`` in a worker thread; stopped when ``request``'s client disconnects meanwhile
    (``ClientGone``, once the thread has stopped)."""
    worker = _Worker()
    task = asyncio.ensure_future(run_in_threadpool(worker.run, work))
    while request is not None and not worker.stopped:
        done, _ = await asyncio.wait({task}, timeout=WATCH_S)
        if done:
            break
        if await request.is_disconnected():
            worker.stop()
    try:
        return await task
    except ClientGone:  # nobody reads the answer: what a proxy logs of a client that left
        path = request.url.path if request is not None else ""
        _log.warning("%s: the client left: its run was stopped, as Ctrl-C stops one", path)
        raise ApiError(499, "the client closed the connection: its run was stopped") from None


async def score_uploads(
    ctx: AppContext,
    system: str,
    uploads: Sequence[tuple[str, UploadFile]],
    settings: Mapping[str, Any],
    *,
    root: Path | None,
    params: Mapping[str, str] | None = None,
    request: Request | None = None,
) -> tuple[core.Outcome, list[str], dict[str, str]]:
    """Each upload kept in a new ``request_folder`` (``inputs/ROLE/FILE``, roles that clean to one
    folder name kept apart by ``-2``...) and scored into its ``run/`` in a worker thread: the
    outcome, its warnings, and each server path as the client names it. A ``request`` whose
    client disconnects meanwhile has its run stopped (``ClientGone``), left as Ctrl-C leaves a
    CLI run: interrupted in the store, its folder unfinished, nothing removed."""
    folders = unique_filenames(role for role, _ in uploads)
    with request_folder(root, system) as base:
        inputs, shown = [], {str(base): f"{RUNS}/{base.name}"}
        for role, upload in uploads:
            sent = os.path.basename(upload.filename or "") or role
            path = base / "inputs" / folders[role] / safe_filename(sent)
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("xb") as handle:  # a block at a time
                while block := await upload.read(_COPY_BLOCK):
                    handle.write(block)
            inputs.append((role, path))
            shown[str(path)] = sent
        outcome, warnings = await _scored_while_connected(
            request,
            partial(
                score_run,
                ctx,
                system,
                inputs,
                settings,
                out=base / "run",
                shown=shown,
                params=params,
            ),
        )
    if root is None and outcome.run_id is not None:  # its temporary folder is gone
        ctx.store.forget_folder(outcome.run_id)
    return outcome, warnings, shown


def hidden(value: Any, shown: Mapping[str, str]) -> Any:
    """``value`` (text or JSON) with each server path of ``shown`` in its strings replaced by
    what the client sent (a message never holds a server path)."""
    paths = sorted(shown.items(), key=lambda p: -len(p[0]))

    def replaced(text: str) -> str:
        for path, name in paths:
            text = text.replace(path, name)
        return text

    return each_text(value, replaced)


def each_text(value: Any, change: Callable[[str], str]) -> Any:
    """``value`` (JSON) with ``change`` applied to each of its strings."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        return [each_text(v, change) for v in value]
    if isinstance(value, dict):
        return {k: each_text(v, change) for k, v in value.items()}
    return value


def client_paths(value: Any, root: Path | None, run: RunInfo | None = None) -> Any:
    """``value`` (a stored run's JSON) with server paths named as the scoring routes name them: an
    upload by its file name, any other path under the data root relative to it, and each other
    path of ``run`` (the inputs and output folder of a run the CLI made) by its name alone."""
    return each_text(value, path_namer(root, run))


def path_namer(root: Path | None, run: RunInfo | None = None) -> Callable[[str], str]:
    """``client_paths``'s change of one text (the export's blocks of lines go through it)."""
    temp = f"{Path(tempfile.gettempdir()).resolve()}/{UPLOADS}"
    folders = [temp] + ([f"{root.resolve()}/{RUNS}/"] if root is not None else [])
    upload = re.compile("(?:" + "|".join(map(re.escape, folders)) + r")[^/]*/inputs/[^/]+/")
    under = f"{root.resolve()}/" if root is not None else None
    named = {
        path: PurePath(path).name
        for path in _run_paths(run)
        if PurePath(path).is_absolute()
        and PurePath(path).name
        and not (under and path.startswith(under))
        and not upload.match(path)
    }
    elsewhere = sorted(named, key=len, reverse=True)

    def shown(text: str) -> str:
        text = upload.sub("", text)
        text = text.replace(under, "") if under else text
        for path in elsewhere:
            text = text.replace(path, named[path])
        return text

    return shown


def _run_paths(run: RunInfo | None) -> list[str]:
    """The server paths a stored run names: its inputs', its dataset and its output folder."""
    if run is None:
        return []
    given = [i.get("path") for i in run.inputs if isinstance(i, dict)]
    return [p for p in (*given, run.dataset, run.out_dir) if isinstance(p, str) and p]


@contextmanager
def request_folder(root: Path | None, system: str) -> Iterator[Path]:
    """A new folder under ``root``/fieldcheck-runs/ for one API run's ``inputs/`` and ``run/``,
    removed on a 422 (nothing written); without ``root``, a temporary folder. A fieldcheck-runs
    that leads out of ``root`` (a symlink) is refused with 403, as a read there is."""
    if root is None:
        with tempfile.TemporaryDirectory(prefix=UPLOADS) as temp:
            yield Path(temp)
        return
    try:
        runs = root.resolve() / RUNS
        if not runs.resolve().is_relative_to(root.resolve()):
            raise ApiError(403, f"{RUNS}: outside the data root (a symlink leading out)")
        runs.mkdir(exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        base = Path(tempfile.mkdtemp(prefix=f"api-{safe_filename(system)}-{stamp}-", dir=runs))
    except OSError as exc:
        raise ApiError(507, f"cannot write under the data root: {exc.strerror or exc}") from None
    try:
        yield base
    except ApiError as exc:
        if exc.status == 422:
            shutil.rmtree(base, ignore_errors=True)
        raise

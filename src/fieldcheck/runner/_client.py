"""The async model client: a shared in-flight limit, retries, typed errors returned (never
raised), token counts and the reply cache (docs/running.md "Retries and errors")."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from fieldcheck._util.digest import cache_key
from fieldcheck._util.errors import shown_text
from fieldcheck.runner._errors import CALL_ERRORS
from fieldcheck.runner._models import ModelSpec, redact_url

if TYPE_CHECKING:  # openai is imported on the first call: a second off every command's start
    import openai

    from fieldcheck.runner._run import RunHandle
    from fieldcheck.store import Store

Message = dict[str, str]

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 30.0
RETRY_AFTER_CAP_S = 120.0
MAX_REPLY_BYTES = 8 * 1024 * 1024  # the default cap on one reply's body
# The most tokens one call's ``usage`` may report: more is not a count any model spends (so
# numeric's 1e9 per predictions line and every sum stay in range); such a ``usage`` is dropped
MAX_CALL_TOKENS = 100_000_000


T = TypeVar("T")

# journal items and cached replies are committed together: when this many wait, when no request
# is in flight, or this long after the first finished (all a killed process loses)
FLUSH_ITEMS = 64
FLUSH_AFTER_S = 0.5


@dataclass(frozen=True)
class RunnerSettings:
    """How calls are made; the same for every model of a run."""

    concurrency: int = 8
    timeout: float = 60.0
    max_retries: int = 3
    use_cache: bool = True
    cache_nonzero_temperature: bool = False
    json_mode: bool = False
    max_reply_bytes: int = MAX_REPLY_BYTES
    # what the messages of a call error name: the options of the command that sets them (a
    # judge's command has --judge-base-url and no --max-reply-bytes: None names the limit alone)
    base_url_option: str = "--base-url"
    reply_cap_option: str | None = "--max-reply-bytes"
    retry_timeouts: bool = True  # False: a call that passed its deadline is not asked again


@dataclass(frozen=True)
class CallResult:
    """One model call: the reply or the error, with tokens (estimated without a usable
    ``usage``), latency in requests over every attempt (a cache hit: its filler's) and attempts."""

    text: str | None
    input_tokens: int = 0
    output_tokens: int = 0
    tokens_estimated: bool = False
    latency_s: float = 0.0
    attempts: int = 0
    error_type: str | None = None
    error_message: str | None = None
    cached: bool = False
    truncated: bool = False
    messages: list[Message] | None = None  # the prompt, kept with the run's item (not cached)

    @property
    def ok(self) -> bool:
        return self.error_type is None

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))  # the fields (no deep copy: nothing changes a reply)


KEY_RUN_CHARS = 16
"""Any run of this many characters of an API key or more is masked, wherever it stands."""
_KEY_PREFIXES = ("sk-proj-", "sk-ant-", "sk-")


def mask_key(text: str, key: str) -> str:
    """``text`` with ``key`` masked ``***``: the whole key, the key without a known prefix
    (``sk-``, ``sk-proj-``), and any run of ``KEY_RUN_CHARS`` characters of it or more. Runs are
    found from the key's aligned slices of half that length (a few ``str.find`` on ``text``),
    each grown to the longest stretch the text shares with the key there."""
    text = text.replace(key, "***")
    for prefix in _KEY_PREFIXES:
        if key.startswith(prefix) and len(key) - len(prefix) >= KEY_RUN_CHARS // 2:
            text = text.replace(key[len(prefix) :], "***")
            break
    step = KEY_RUN_CHARS // 2
    spans: list[tuple[int, int]] = []
    for j in range(0, len(key) - step + 1, step):
        at = text.find(key[j : j + step])
        while at >= 0:
            start, end, k = at, at + step, j
            while start > 0 and k > 0 and text[start - 1] == key[k - 1]:
                start, k = start - 1, k - 1
            while (
                end < len(text) and k + end - start < len(key) and text[end] == key[k + end - start]
            ):
                end += 1
            if end - start >= KEY_RUN_CHARS:
                spans.append((start, end))
            at = text.find(key[j : j + step], at + 1)
    if not spans:
        return text
    out, last = [], 0
    for start, end in sorted(spans):
        if start >= last:
            out += [text[last:start], "***"]
        last = max(last, end)
    return "".join(out) + text[last:]


def estimate_tokens(text: str) -> int:
    """A tokenizer-free token estimate: about four characters a token."""
    return math.ceil(len(text) / 4)


def messages_tokens(messages: Sequence[Message]) -> int:
    return sum(estimate_tokens(m.get("content") or "") + 4 for m in messages)


def retry_after_seconds(headers: Any) -> float | None:
    """``Retry-After`` (or ``retry-after-ms``) as seconds: a number or an HTTP date."""
    if headers is None:
        return None
    with contextlib.suppress(TypeError, ValueError):  # absent, or not a number
        return max(0.0, float(headers.get("retry-after-ms")) / 1000)
    value = headers.get("retry-after")
    if not value:
        return None
    with contextlib.suppress(ValueError):  # else an HTTP date
        return max(0.0, float(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def retry_wait(attempt: int, headers: Any = None, rng: random.Random | None = None) -> float:
    """Seconds to wait before retry number ``attempt``: the server's ``Retry-After`` when it sends
    one (at most 120 s), else full-jitter exponential backoff (0.5 s x 2^attempt, at most 30 s)."""
    wait = retry_after_seconds(headers)
    if wait is None:
        wait = (rng or random).uniform(0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt))
    return min(wait, RETRY_AFTER_CAP_S)


class InvalidReply(Exception):
    """A reply that is not a chat completion (or too large): a ``bad_response``."""


class ReplyTooLarge(InvalidReply):
    """A body longer than ``max_reply_bytes``: not read further."""


# How servers say the prompt is over the model's context, in this order: OpenAI, vLLM (two),
# llama.cpp (three), Ollama, LiteLLM's proxy, Hugging Face TGI (two)
_CONTEXT_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "is longer than the maximum model length",
    "context size has been exceeded",
    "exceed_context_size_error",
    "exceeds the available context size",
    "input length exceeds the context length",
    "contextwindowexceedederror",
    "`inputs` must have less than",
    "`inputs` tokens + `max_new_tokens` must be <=",
)


def _over_context(exc: Any) -> bool:
    """Whether an error status says the prompt does not fit the model's context."""
    try:
        body = json.dumps(exc.body, default=str)
    except (TypeError, ValueError, RecursionError):
        body = ""
    text = f"{getattr(exc, 'message', '')} {body}".lower()
    return any(marker in text for marker in _CONTEXT_MARKERS)


def classify(exc: BaseException) -> tuple[str, bool]:
    """``(error_type, retryable)`` for an exception from the ``openai`` client."""
    import openai

    if isinstance(exc, InvalidReply):
        return "bad_response", False  # the same prompt gets the same reply: not retried
    if isinstance(exc, openai.APITimeoutError):
        return "timeout", True
    if isinstance(exc, openai.APIConnectionError):
        return "connection", True
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code >= 400 and _over_context(exc):
            return "context_length", False  # the same prompt never fits: not retried
        if exc.status_code < 400:  # a redirect, never followed
            return "bad_request", False
        if exc.status_code == 429:
            return "rate_limited", True
        if exc.status_code >= 500:
            return "server_error", True
        return "bad_request", False
    if isinstance(exc, openai.APIResponseValidationError | ValueError):
        return "bad_response", False  # a 200 whose body is not a chat completion
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return "timeout", True
    return "connection", True


@functools.cache
def _capped_client() -> type[Any]:
    """``openai``'s ``httpx`` client class, redirects never followed, no body read past
    ``max_reply_bytes``."""
    import openai

    class CappedClient(openai.DefaultAsyncHttpxClient):  # type: ignore[misc,valid-type]
        """Reads each body itself, up to the cap; a redirect is returned, not followed."""

        max_reply_bytes: int
        cap_option: str | None

        async def send(self, request: Any, *, stream: bool = False, **kwargs: Any) -> Any:
            kwargs["follow_redirects"] = False
            response = await super().send(request, stream=True, **kwargs)
            if stream:
                return response
            try:
                body = await _read_capped(response, self.max_reply_bytes, self.cap_option)
            finally:
                await response.aclose()
            skip = {"content-encoding", "content-length", "transfer-encoding"}
            return type(response)(
                response.status_code,
                headers=[(k, v) for k, v in response.headers.multi_items() if k not in skip],
                content=body,
                request=request,
                extensions=response.extensions,
            )

    return CappedClient


def _http_client(max_reply_bytes: int, cap_option: str | None) -> Any:
    client = _capped_client()(follow_redirects=False)
    client.max_reply_bytes = max_reply_bytes
    client.cap_option = cap_option
    return client


def _size_text(n: int) -> str:
    return f"{n / 1024 / 1024:g} MiB" if n >= 1024 * 1024 else f"{n:,} bytes"


async def _read_capped(response: Any, cap: int, option: str | None) -> bytes:
    """The body, or ``ReplyTooLarge`` (naming ``option``) once it is known to pass ``cap``."""
    declared = response.headers.get("content-length")
    limit = f"{option} ({_size_text(cap)})" if option else f"the limit of {_size_text(cap)}"
    if declared is not None and declared.strip().isdigit() and int(declared) > cap:
        raise ReplyTooLarge(f"the reply is {_size_text(int(declared))}, over {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > cap:
            raise ReplyTooLarge(f"the reply is over {limit}; not read further")
        chunks.append(chunk)
    return b"".join(chunks)


@dataclass(frozen=True)
class Completion:
    """What a chat completion body says: the text (or why there is none), tokens, truncation."""

    text: str | None
    problem: str | None  # why the reply has no usable text
    input_tokens: int | None  # None: no usable count (then estimated)
    output_tokens: int | None
    truncated: bool


def _count(value: Any) -> int | None:
    """A token count as sent, when it is one: an integer from 0 to ``MAX_CALL_TOKENS``."""
    if type(value) is int and 0 <= value <= MAX_CALL_TOKENS:
        return value
    return None


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number" if isinstance(value, int | float) else "a value")


def read_completion(body: bytes, content_type: str = "") -> Completion:
    """A chat completion body read by hand: ``InvalidReply`` (``bad_response``) when it is not
    one; ``problem`` says why one has no usable text (``invalid_reply``)."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        shown = body[:80].decode("utf-8", "replace")
        kind = f" ({content_type})" if content_type else ""
        raise InvalidReply(f"the reply is not JSON{kind}: {shown!r}") from None
    if not isinstance(data, dict):
        raise InvalidReply(f"the reply is {_kind(data)}, not a chat completion object")
    usage = data.get("usage")
    tokens_in = tokens_out = None
    if isinstance(usage, dict):
        tokens_in, tokens_out = (
            _count(usage.get("prompt_tokens")),
            _count(usage.get("completion_tokens")),
        )
        if tokens_in is None or tokens_out is None:  # one count wrong: neither is trusted
            tokens_in = tokens_out = None
    choices = data.get("choices")
    problem = None
    text = None
    truncated = False
    if not isinstance(choices, list):
        kind = f"{_kind(choices)}, not a list" if "choices" in data else "missing"
        raise InvalidReply(f"'choices' is {kind}")
    if not choices:
        problem = "the reply has no message content ('choices' is empty)"
    elif not isinstance(choices[0], dict):
        raise InvalidReply(f"'choices[0]' is {_kind(choices[0])}, not an object")
    else:
        truncated = choices[0].get("finish_reason") == "length"
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise InvalidReply(f"'choices[0].message' is {_kind(message)}, not an object")
        content = message.get("content")
        if content is None:
            problem = "the reply has no message content"
        elif not isinstance(content, str):
            raise InvalidReply(f"'choices[0].message.content' is {_kind(content)}, not a string")
        else:
            text = shown_text(content)  # a lone surrogate (JSON allows one) as U+FFFD
    return Completion(text, problem, tokens_in, tokens_out, truncated)


@dataclass
class CallStats:
    """Counts over every call of a runner (the LLM judge counts its requests from them)."""

    calls: int = 0
    cache_hits: int = 0


class ChatClient:
    """Calls one model; every client of a ``Runner`` shares its in-flight limit and cache."""

    def __init__(self, spec: ModelSpec, runner: Runner, *, api_key: str | None = None) -> None:
        self.spec = spec
        self._runner = runner
        self._api_key = api_key or spec.api_key()
        self._endpoint = spec.endpoint  # redacted once, not for every call's cache key
        self._client: openai.AsyncOpenAI | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _openai(self) -> openai.AsyncOpenAI:
        """The ``openai`` client of the running loop (its connections belong to one loop)."""
        import openai

        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            settings = self._runner.settings
            self._client = openai.AsyncOpenAI(
                base_url=self.spec.base_url,
                api_key=self._api_key,
                timeout=settings.timeout,
                max_retries=0,
                http_client=_http_client(settings.max_reply_bytes, settings.reply_cap_option),
            )
            self._loop = loop
        return self._client

    def __repr__(self) -> str:  # never show the key
        return f"ChatClient(name={self.spec.name!r}, endpoint={self.spec.endpoint!r})"

    def _params(self) -> dict[str, Any]:
        spec = self.spec
        params: dict[str, Any] = {"temperature": spec.temperature}
        if spec.max_tokens is not None:
            params["max_tokens"] = spec.max_tokens
        if spec.seed is not None:
            params["seed"] = spec.seed
        if self._runner.settings.json_mode:
            params["response_format"] = {"type": "json_object"}
        return params

    async def complete(
        self, messages: Sequence[Message], *, usable: Callable[[str | None], bool] | None = None
    ) -> CallResult:
        """Ask the model; retries per the settings; never raises for model or transport errors.
        ``usable``: whether a reply's text is an answer (a judge's score); one that is not is
        neither cached nor taken from the cache, as an error is not."""
        runner, settings = self._runner, self._runner.settings
        runner.stats.calls += 1
        params = self._params()
        cacheable = (
            runner.store is not None
            and settings.use_cache
            and (self.spec.temperature == 0 or settings.cache_nonzero_temperature)
        )
        key = (
            cache_key(self._endpoint, self.spec.model, list(messages), params) if cacheable else ""
        )
        filling: asyncio.Event | None = None
        if cacheable:
            hit = self._hit(key, usable)
            if hit is None and (filling := runner.filling.get(key)) is not None:
                # the same request in flight: its reply, as a cache hit (one call, its latency
                # and tokens); a failed one leaves none, and this one is asked, as a miss is
                await filling.wait()
                hit = self._hit(key, usable)
            if hit is not None:
                runner.stats.cache_hits += 1
                return CallResult(**{**hit, "cached": True, "messages": list(messages)})
            runner.filling[key] = filling = asyncio.Event()
        try:
            result = await self._call(list(messages), params)
            # an invalid_reply (no content) is the model's answer: cached, final (docs/running.md)
            answered = result.error_type in (None, "invalid_reply")
            if cacheable and answered and (usable is None or usable(result.text)):
                value = {**result.to_dict(), "cached": False}
                del value["messages"]
                runner.write(cached=(key, self.spec.model, value))
        finally:  # cancelled too (Ctrl-C): its waiters go on
            if filling is not None:
                if runner.filling.get(key) is filling:
                    del runner.filling[key]
                filling.set()
        return replace(result, messages=list(messages))

    def _hit(self, key: str, usable: Callable[[str | None], bool] | None) -> dict[str, Any] | None:
        """The cached reply of ``key``; None when there is none or it is not ``usable``."""
        hit = self._runner.cached(key)
        if hit is not None and usable is not None and not usable(hit.get("text")):
            self._runner.forget(key)  # asked again: a usable reply takes its place
            return None
        return hit

    async def _call(self, messages: list[Message], params: dict[str, Any]) -> CallResult:
        runner = self._runner
        retries = max(0, runner.settings.max_retries)
        in_requests = 0.0  # time in requests: not waiting for a free slot, not backing off
        attempts = 0
        while True:
            attempts += 1
            try:
                client = self._openai()
                async with runner.limit():
                    runner.in_flight += 1
                    sent = time.perf_counter()
                    try:
                        # the deadline covers the whole call: a body sent a byte at a time
                        # passes every per-read timeout of httpx
                        async with asyncio.timeout(runner.settings.timeout):
                            raw = await client.chat.completions.with_raw_response.create(
                                model=self.spec.model,
                                messages=messages,  # type: ignore[arg-type]
                                **params,
                            )
                    finally:
                        runner.in_flight -= 1
                        in_requests += time.perf_counter() - sent
                http = raw.http_response
                reply = read_completion(http.content, http.headers.get("content-type", ""))
            except Exception as exc:
                error_type, retryable = classify(exc)
                if error_type == "timeout" and not runner.settings.retry_timeouts:
                    retryable = False
                if retryable and attempts <= retries:
                    headers = getattr(getattr(exc, "response", None), "headers", None)
                    await asyncio.sleep(retry_wait(attempts, headers))
                    continue
                return CallResult(
                    text=None,
                    latency_s=in_requests,
                    attempts=attempts,
                    error_type=error_type,
                    error_message=self._message(exc),
                )
            # both counts or neither (``read_completion``): estimated without them
            estimated = reply.input_tokens is None or reply.output_tokens is None
            return CallResult(
                text=None if reply.text is None else self._hidden(reply.text),  # a key echoed
                input_tokens=messages_tokens(messages) if estimated else reply.input_tokens or 0,
                output_tokens=estimate_tokens(reply.text or "")
                if estimated
                else reply.output_tokens or 0,
                tokens_estimated=estimated,
                latency_s=in_requests,
                attempts=attempts,
                error_type="invalid_reply" if reply.problem else None,
                error_message=reply.problem,
                truncated=reply.truncated,
            )

    def _message(self, exc: BaseException) -> str:
        import openai

        if isinstance(exc, InvalidReply):
            return f"{self.spec.endpoint}: {exc}"
        if isinstance(exc, TimeoutError):  # the deadline of the whole call
            return f"{self.spec.endpoint}: no complete reply within {self._runner.settings.timeout:g} s"
        text = f"{type(exc).__name__}: {exc}".replace("\n", " ")[:300]
        status = getattr(exc, "status_code", None)
        if isinstance(exc, openai.APIStatusError) and 300 <= exc.status_code < 400:
            where = exc.response.headers.get("location")
            target = redact_url(where) if where else "no Location"
            text = (
                f"{self.spec.endpoint}: redirected ({exc.status_code}) to {target}; not "
                "followed, so the prompt goes nowhere else (give the final URL as "
                f"{self._runner.settings.base_url_option})"
            )
        elif status in (404, 405):
            option = self._runner.settings.base_url_option
            text = f"{self.spec.endpoint}/chat/completions: {text} (does {option} end in /v1?)"
        elif status in (401, 403):
            text = f"{self.spec.endpoint}: {text} (is the API key set?)"
        else:  # every error names the endpoint (docs/running.md)
            text = f"{self.spec.endpoint}: {text}"
        return self._hidden(text)

    def _hidden(self, text: str) -> str:
        """``text`` with the API key masked ``***`` (an endpoint may echo it, in an error or a
        reply): it is written nowhere (``mask_key``)."""
        key = self._api_key
        return mask_key(text, key) if key and key != "not-set" else text

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


class Runner:
    """The model-calling side of a run: settings, store (cache), shared limit, call counts."""

    def __init__(
        self,
        settings: RunnerSettings | None = None,
        *,
        store: Store | None = None,
        on_store_error: Callable[[BaseException], None] | None = None,
    ):
        self.settings = settings or RunnerSettings()
        self.store = store
        self.on_store_error = on_store_error  # told once when the store stops working
        self.stats = CallStats()
        self.runs: list[RunHandle] = []  # opened by run_task in this process, in order
        self.part_of: str | None = None  # the run a model run opened now is a ``calls`` part of
        self.models = 1  # the models asked into one run in turn: its first plans all their items
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._clients: dict[str, ChatClient] = {}
        self.in_flight = 0  # requests sent and not yet answered
        self._items: list[dict[str, Any]] = []  # journal items not yet committed
        self._cached: dict[str, tuple[str, dict[str, Any]]] = {}  # replies not yet committed
        self._timer: asyncio.TimerHandle | None = None
        # the store held no cached reply when first asked: only keys this runner cached since
        # can be found there (one query, not one per call; another process's meanwhile are not)
        self._store_empty: bool | None = None
        self._written: set[str] = set()
        self.filling: dict[str, asyncio.Event] = {}  # cache keys of calls in flight: set when done

    def write(
        self,
        item: dict[str, Any] | None = None,
        cached: tuple[str, str, dict[str, Any]] | None = None,
    ) -> None:
        """Queue a finished journal item or a reply to cache (key, model, value), committed
        together (``FLUSH_ITEMS``)."""
        if self.store is None:
            return
        if item is not None:
            self._items.append(item)
        if cached is not None:
            self._cached[cached[0]] = cached[1:]
            self._written.add(cached[0])
        if not self.in_flight or len(self._items) + len(self._cached) >= FLUSH_ITEMS:
            self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(FLUSH_AFTER_S, self.flush)

    def flush(self) -> None:
        """Commit the queued items and replies in one transaction (before a run's status
        changes, and when the runner closes)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        items, cached = self._items, [(k, *v) for k, v in self._cached.items()]
        self._items, self._cached = [], {}
        if items or cached:
            self.use_store(lambda store: store.save_items(items, cached))

    def cached(self, key: str) -> dict[str, Any] | None:
        """The cached reply of ``key`` (queued or stored), or None."""
        queued = self._cached.get(key)
        if queued:
            return queued[1]
        if self._store_empty is None:
            self._store_empty = self.use_store(lambda store: store.cache_count() == 0)
        if self._store_empty and key not in self._written:
            return None
        return self.use_store(lambda store: store.cache_get(key))

    def forget(self, key: str) -> None:
        """Drop the cached reply of ``key`` (queued or stored)."""
        self._cached.pop(key, None)
        self.use_store(lambda store: store.cache_drop(key))

    def use_store(self, call: Callable[[Store], T]) -> T | None:
        """``call(store)``; None without a store. A store that fails is dropped (the run goes on
        without it, docs/runs.md), ``on_store_error`` told once."""
        store = self.store
        if store is None:
            return None
        from sqlalchemy.exc import SQLAlchemyError  # loaded with the store: not for --help

        try:
            return call(store)
        except (SQLAlchemyError, OSError) as error:  # a full disk, a read-only file, a lost server
            self.store = None
            if self.on_store_error is not None:
                self.on_store_error(error)
            return None

    def set_status(self, run_id: str, status: str) -> None:
        """Run ``run_id``'s status in the store, when it still has one (its items committed
        first); one stopped (failed, interrupted) before it is scored gets its call errors,
        tokens and latency."""
        self.flush()
        errors = None if status == "finished" else CALL_ERRORS
        self.use_store(lambda store: store.set_status(run_id, status, call_errors=errors))

    def limit(self) -> asyncio.Semaphore:
        """The semaphore of requests in flight (made in the running loop)."""
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._loop is not loop:
            self._semaphore = asyncio.Semaphore(max(1, self.settings.concurrency))
            self._loop = loop
        return self._semaphore

    def client(self, spec: ModelSpec, *, api_key: str | None = None) -> ChatClient:
        """The client of ``spec``, one per model name; ``api_key`` overrides its key (a judge's)."""
        existing = self._clients.get(spec.name)
        if existing is None or existing.spec != spec:
            existing = ChatClient(spec, self, api_key=api_key)
            self._clients[spec.name] = existing
        return existing

    async def aclose(self) -> None:
        self.flush()
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()

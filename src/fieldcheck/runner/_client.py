"""The async model client: one ``openai`` client per endpoint, a shared in-flight limit, retries
with backoff, typed errors, token counts and the response cache.

Retries (exponential backoff with full jitter, ``Retry-After`` honoured) happen on 429, 5xx,
timeouts and connection errors, never on another 4xx. A failure is returned as a ``CallResult``
with its ``error_type``, never raised, so a task records it apart from a wrong answer.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy.exc import SQLAlchemyError

from fieldcheck._util.digest import cache_key
from fieldcheck.runner._models import ModelSpec

if TYPE_CHECKING:  # openai is imported on the first call: a second off every command's start
    import openai

    from fieldcheck.runner._run import RunHandle
    from fieldcheck.store import Store

Message = dict[str, str]

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 30.0
RETRY_AFTER_CAP_S = 120.0


T = TypeVar("T")

# what a store that stops working raises (a full disk, a file made read-only, a lost server)
STORE_ERRORS = (SQLAlchemyError, OSError)


@dataclass(frozen=True)
class RunnerSettings:
    """How calls are made; the same for every model of a run."""

    concurrency: int = 8
    timeout: float = 60.0
    max_retries: int = 3
    use_cache: bool = True
    cache_nonzero_temperature: bool = False
    json_mode: bool = False


@dataclass(frozen=True)
class CallResult:
    """One model call: the reply or the error, with tokens, latency and attempts.

    ``tokens_estimated`` is true when the endpoint sent no ``usage`` and the counts are the
    tokenizer-free estimate (characters / 4). ``latency_s`` is the wall time spent in requests, over
    every attempt (not the wait for a free slot, not the backoff between attempts); a cache hit
    carries the latency of the call that filled the cache.
    """

    text: str | None
    input_tokens: int = 0
    output_tokens: int = 0
    tokens_estimated: bool = False
    latency_s: float = 0.0
    attempts: int = 0
    error_type: str | None = None
    error_message: str | None = None
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.error_type is None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def estimate_tokens(text: str) -> int:
    """A tokenizer-free token estimate: about four characters a token."""
    return math.ceil(len(text) / 4)


def messages_tokens(messages: Sequence[Message]) -> int:
    return sum(estimate_tokens(m.get("content") or "") + 4 for m in messages)


def retry_after_seconds(headers: Any) -> float | None:
    """``Retry-After`` (or ``retry-after-ms``) as seconds: a number or an HTTP date."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
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


_SURROGATE = re.compile("[\ud800-\udfff]")


def _clean_text(text: str | None) -> str | None:
    """A reply as valid Unicode: a lone surrogate (JSON allows ``"\\udfff"``) becomes U+FFFD, so
    the reply can be cached, stored and written like any other."""
    if text is None:
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def classify(exc: BaseException) -> tuple[str, bool]:
    """``(error_type, retryable)`` for an exception from the ``openai`` client."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return "timeout", True
    if isinstance(exc, openai.APIConnectionError):
        return "connection", True
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code == 429:
            return "rate_limited", True
        if exc.status_code >= 500:
            return "server_error", True
        return "bad_request", False
    if isinstance(exc, openai.APIResponseValidationError | ValueError):
        return "invalid_reply", False  # a 200 whose body is not a chat completion
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return "timeout", True
    return "connection", True


@dataclass
class CallStats:
    """Counts over every call of a runner: for the progress bar and the run summary."""

    calls: int = 0
    requests: int = 0
    cache_hits: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    input_tokens: int = 0
    output_tokens: int = 0


class ChatClient:
    """Calls one model; every client of a ``Runner`` shares its in-flight limit and cache."""

    def __init__(self, spec: ModelSpec, runner: Runner, *, api_key: str | None = None) -> None:
        self.spec = spec
        self._runner = runner
        self._api_key = api_key or spec.api_key()
        self._client: openai.AsyncOpenAI | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _openai(self) -> openai.AsyncOpenAI:
        """The ``openai`` client of the running loop (its connections belong to one loop)."""
        import openai

        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = openai.AsyncOpenAI(
                base_url=self.spec.base_url,
                api_key=self._api_key,
                timeout=self._runner.settings.timeout,
                max_retries=0,
            )
            self._loop = loop
        return self._client

    def __repr__(self) -> str:  # never show the key
        return f"ChatClient(name={self.spec.name!r}, endpoint={self.spec.endpoint!r})"

    def _params(self, json_mode: bool, max_tokens: int | None) -> dict[str, Any]:
        params: dict[str, Any] = {"temperature": self.spec.temperature}
        tokens = max_tokens if max_tokens is not None else self.spec.max_tokens
        if tokens is not None:
            params["max_tokens"] = tokens
        if self.spec.seed is not None:
            params["seed"] = self.spec.seed
        if json_mode:
            params["response_format"] = {"type": "json_object"}
        return params

    def _cacheable(self) -> bool:
        settings = self._runner.settings
        return settings.use_cache and (
            self.spec.temperature == 0 or settings.cache_nonzero_temperature
        )

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        json_mode: bool | None = None,
        max_tokens: int | None = None,
    ) -> CallResult:
        """Ask the model; retries per the settings; never raises for model or transport errors."""
        runner = self._runner
        stats = runner.stats
        stats.calls += 1
        params = self._params(
            runner.settings.json_mode if json_mode is None else json_mode, max_tokens
        )
        cacheable = runner.store is not None and self._cacheable()
        key = (
            cache_key(self.spec.endpoint, self.spec.model, list(messages), params)
            if cacheable
            else ""
        )
        if cacheable:
            hit = runner.use_store(lambda store: store.cache_get(key))
            if hit is not None:
                stats.cache_hits += 1
                result = CallResult(**{**hit, "cached": True})
                stats.input_tokens += result.input_tokens
                stats.output_tokens += result.output_tokens
                return result
        result = await self._call(list(messages), params)
        stats.input_tokens += result.input_tokens
        stats.output_tokens += result.output_tokens
        if result.error_type:
            stats.errors[result.error_type] += 1
        elif cacheable:
            value = {**result.to_dict(), "cached": False}
            runner.use_store(lambda store: store.cache_put(key, self.spec.model, value))
        return result

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
                    runner.stats.requests += 1
                    sent = time.perf_counter()
                    try:
                        response = await client.chat.completions.create(
                            model=self.spec.model,
                            messages=messages,  # type: ignore[arg-type]
                            **params,
                        )
                    finally:
                        in_requests += time.perf_counter() - sent
            except Exception as exc:
                error_type, retryable = classify(exc)
                if retryable and attempts <= retries:
                    headers = getattr(getattr(exc, "response", None), "headers", None)
                    await asyncio.sleep(retry_wait(attempts, headers))
                    continue
                return CallResult(
                    text=None,
                    input_tokens=0,
                    output_tokens=0,
                    latency_s=in_requests,
                    attempts=attempts,
                    error_type=error_type,
                    error_message=self._message(exc),
                )
            latency = in_requests
            choice = response.choices[0] if response.choices else None
            text = _clean_text(choice.message.content) if choice is not None else None
            usage = response.usage
            estimated = usage is None
            input_tokens = usage.prompt_tokens if usage else messages_tokens(messages)
            output_tokens = usage.completion_tokens if usage else estimate_tokens(text or "")
            if text is None:
                return CallResult(
                    text=None,
                    input_tokens=input_tokens,
                    output_tokens=output_tokens,
                    tokens_estimated=estimated,
                    latency_s=latency,
                    attempts=attempts,
                    error_type="invalid_reply",
                    error_message="the reply has no message content",
                )
            return CallResult(
                text=text,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                tokens_estimated=estimated,
                latency_s=latency,
                attempts=attempts,
            )

    def _message(self, exc: BaseException) -> str:
        import openai

        text = f"{type(exc).__name__}: {exc}".replace("\n", " ")[:300]
        status = getattr(exc, "status_code", None)
        if isinstance(exc, openai.APIConnectionError | openai.APITimeoutError):
            text = f"{self.spec.endpoint}: {text}"
        elif status in (404, 405):
            text = f"{self.spec.endpoint}/chat/completions: {text} (does --base-url end in /v1?)"
        elif status in (401, 403):
            text = f"{self.spec.endpoint}: {text} (is the API key set?)"
        key = self._api_key
        return text.replace(key, "***") if key and key != "not-set" else text

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
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._clients: dict[str, ChatClient] = {}

    def use_store(self, call: Callable[[Store], T]) -> T | None:
        """``call(store)``; None without a store. A store that fails (a full disk, a file made
        read-only) is dropped: the run goes on as with no store (nothing more cached, stored or
        resumable; the files are written from what the run holds), ``on_store_error`` told once."""
        store = self.store
        if store is None:
            return None
        try:
            return call(store)
        except STORE_ERRORS as error:
            self.store = None
            if self.on_store_error is not None:
                self.on_store_error(error)
            return None

    def limit(self) -> asyncio.Semaphore:
        """The semaphore of requests in flight (made in the running loop)."""
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._loop is not loop:
            self._semaphore = asyncio.Semaphore(max(1, self.settings.concurrency))
            self._loop = loop
        return self._semaphore

    def client(self, spec: ModelSpec, *, api_key: str | None = None) -> ChatClient:
        """The client of ``spec`` (one per model name, made once); ``api_key`` overrides the
        key ``spec`` names (the LLM judge reads its own variable)."""
        existing = self._clients.get(spec.name)
        if existing is None or existing.spec != spec:
            existing = ChatClient(spec, self, api_key=api_key)
            self._clients[spec.name] = existing
        return existing

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()

"""LLM judge: a chat model rates the similarity of two values in [0, 1] (json spec Phase 3 "LLM
fuzzy/semantic similarity", slot spec §5 "LLM Judge Score"); a failed call or an unparsable
reply is a judge error, never 0. The API key comes from the environment and is never written."""

from __future__ import annotations

import asyncio
import math
import os
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import orjson

from fieldcheck.matchers._base import Similarity, check_pairs
from fieldcheck.runner import (
    ABORT_AFTER,
    UNREACHABLE,
    CallResult,
    ModelSpec,
    Runner,
    RunnerSettings,
)

if TYPE_CHECKING:  # the store's ORM: opened with the first call, not for a command's --help
    from fieldcheck.store import Store

JudgeKind = Literal["fuzzy", "semantic", "slot"]
API_KEY_ENV = ("FIELDCHECK_JUDGE_API_KEY", "OPENAI_API_KEY")


@dataclass(frozen=True)
class JudgePrompt:
    version: str
    system: str
    user: str  # str.format template with {prediction} and {reference}, each escaped (``_quoted``)


_REPLY_RULE = (
    "Reply with only a number between 0 and 1 (for example 0.85), or the JSON object "
    '{"score": <number>}. No other text.'
)

PROMPTS: dict[JudgeKind, JudgePrompt] = {
    "fuzzy": JudgePrompt(
        version="fuzzy-v2",
        system=(
            "You compare two short values for surface similarity: spelling variants, typos, "
            "abbreviations, formatting and word order count as similar; different content does "
            "not. 1 means the same value written differently or identically, 0 means unrelated. "
            + _REPLY_RULE
        ),
        user="Reference value:\n<<<{reference}>>>\n\nCandidate value:\n<<<{prediction}>>>\n\nScore:",
    ),
    "semantic": JudgePrompt(
        version="semantic-v2",
        system=(
            "You compare two values for meaning: paraphrases and equivalent statements are "
            "similar even when the words differ; contradictions, missing key facts or different "
            "entities are not. 1 means the same meaning, 0 means unrelated or contradictory. "
            + _REPLY_RULE
        ),
        user="Reference value:\n<<<{reference}>>>\n\nCandidate value:\n<<<{prediction}>>>\n\nScore:",
    ),
    "slot": JudgePrompt(
        version="slot-v2",
        system=(
            "You grade information a model extracted from a conversation into a memory slot "
            "against the gold value of that slot. Judge semantic correctness: 1 means the "
            "extracted value states the same facts as the gold, 0 means wrong or unrelated; "
            "partial credit for partially correct values. " + _REPLY_RULE
        ),
        user="Gold value:\n<<<{reference}>>>\n\nExtracted value:\n<<<{prediction}>>>\n\nScore:",
    ),
}


def _quoted(value: str) -> str:
    """A value as the prompt shows it between ``<<<`` and ``>>>``: ``<`` and ``>`` escaped as
    ``\\u003c`` and ``\\u003e`` (as ``slot-memory-v1``'s memory), so a value can never close its
    block and open another (the ``-v2`` prompts; ``-v1`` showed values as they are)."""
    return value.replace("<", "\\u003c").replace(">", "\\u003e")


_NUMBER = re.compile(r"^\s*([01](?:\.\d+)?|\.\d+)\s*$")


class JudgeReplyError(ValueError):
    """The judge's reply is not a number in [0, 1]."""


def parse_judge_reply(text: str | None) -> float:
    """A judge reply that is a bare number in [0, 1] or ``{"score": x}``, maybe in a code fence;
    anything else (prose) raises JudgeReplyError."""
    if text is None:
        raise JudgeReplyError("empty judge reply")
    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`").removeprefix("json").strip()
    match = _NUMBER.match(body)
    if match:
        value = float(match.group(1))
    else:
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise JudgeReplyError(f"judge reply is not a score: {body[:60]!r}") from None
        if not (isinstance(data, dict) and set(data) == {"score"}):
            raise JudgeReplyError(f"judge reply is not a score: {body[:60]!r}")
        raw = data["score"]
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise JudgeReplyError(f"judge score is not a number: {raw!r}")
        value = float(raw)
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise JudgeReplyError(f"judge score {value} is outside [0, 1]")
    return value


def judge_options(extras: Mapping[str, Any]) -> dict[str, Any]:
    """``LLMJudge``'s cache and call arguments from a scoring's ``extras``: its ``store`` (True:
    the default one), or no cache read or written and no store opened, for a command without the
    store (``--no-store``, ``store`` False or None) or under ``no_cache`` (``--no-cache``); and
    the command's ``timeout`` and ``concurrency`` (``--timeout``, ``--concurrency``) when given."""
    limits = {k: extras[n] for k, n in _LIMITS.items() if extras.get(n) is not None}
    store = extras.get("store", True)
    if extras.get("no_cache") or store is None or store is False:
        return {"use_cache": False, "store": None, **limits}
    return {"use_cache": True, "store": None if store is True else store, **limits}


_LIMITS = {"timeout": "timeout", "max_concurrency": "concurrency"}
"""``LLMJudge``'s arguments by the ``extras`` key (the command's option) that sets them."""


class LLMJudge:
    """Rates (prediction, reference) pairs with a chat model, one request per distinct pair,
    through the runner (its in-flight limit, retries, typed errors and reply cache)."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        kind: JudgeKind = "semantic",
        api_key: str | None = None,
        use_cache: bool = True,
        store: Store | None = None,
        max_concurrency: int = 4,
        timeout: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        if kind not in PROMPTS:
            raise ValueError(f"unknown judge kind {kind!r}; allowed: {', '.join(PROMPTS)}")
        self.model = model
        self.base_url = base_url
        self.kind: JudgeKind = kind
        self.prompt = PROMPTS[kind]
        self.use_cache = use_cache
        self._store = store
        self.max_concurrency = max(1, max_concurrency)
        # given, else the first of API_KEY_ENV set, else a placeholder (a local server takes any)
        keys = (api_key, *(os.environ.get(name) for name in API_KEY_ENV))
        self._api_key = next((key for key in keys if key), "not-set")
        self._timeout = timeout
        self._max_retries = max_retries
        self.request_count = 0
        self.name = f"llm:{model}:{self.prompt.version}"
        self._spec = ModelSpec(name=f"judge:{model}", model=model, base_url=base_url)

    def __repr__(self) -> str:  # never show the key
        return (
            f"LLMJudge(model={self.model!r}, base_url={self._spec.endpoint!r}, kind={self.kind!r})"
        )

    def _runner(self) -> Runner:
        if self.use_cache and self._store is None:
            from fieldcheck.store import Store

            self._store = Store()
        return Runner(
            RunnerSettings(
                concurrency=self.max_concurrency,
                timeout=self._timeout,
                max_retries=self._max_retries,
                use_cache=self.use_cache,
                # the commands with a judge (json score/batch, serve, slots) name its URL so and
                # have no option for the reply cap
                base_url_option="--judge-base-url",
                reply_cap_option=None,
                # a judge that gave no reply within the deadline is not asked again: a stalled
                # judge held an API request for 3 x 60 s
                retry_timeouts=False,
            ),
            store=self._store if self.use_cache else None,
        )

    def _messages(self, prediction: str, reference: str) -> list[dict[str, str]]:
        user = self.prompt.user.format(prediction=_quoted(prediction), reference=_quoted(reference))
        return [
            {"role": "system", "content": self.prompt.system},
            {"role": "user", "content": user},
        ]

    async def asimilarities(
        self, predictions: Sequence[str], references: Sequence[str]
    ) -> list[Similarity]:
        """The async core: each distinct pair asked once, concurrently, through the runner."""
        pairs = list(zip(predictions, references, strict=True))
        distinct = list(dict.fromkeys(pairs))
        runner = self._runner()
        client = runner.client(self._spec, api_key=self._api_key)
        # the runner's early stop for an endpoint that cannot answer, timeouts counted (a judge
        # that never answers held each call its deadline): when the first calls
        # to finish all failed so, the calls still waiting for a free slot are not made
        gate = asyncio.Semaphore(self.max_concurrency)
        first: list[str | None] = []  # the error types of the first calls to finish
        stopped: list[str] = []

        async def ask(prediction: str, reference: str) -> CallResult | str:
            async with gate:
                if stopped:
                    return stopped[0]
                reply = await client.complete(
                    self._messages(prediction, reference), usable=_is_score
                )
                if len(first) < ABORT_AFTER and not reply.cached:
                    first.append(reply.error_type)
                    if len(first) == ABORT_AFTER and all(t in UNREACHABLE for t in first):
                        stopped.append(
                            f"judge_error: not asked: the first {ABORT_AFTER} judge calls all "
                            f"failed ({', '.join(sorted(set(map(str, first))))}) at "
                            f"{self._spec.endpoint}; check --judge-base-url and --judge-model"
                        )
                return reply

        try:
            replies = await asyncio.gather(*(ask(p, r) for p, r in distinct))
        finally:
            await runner.aclose()
        self.request_count += runner.stats.calls - runner.stats.cache_hits
        answers = {pair: _similarity(reply) for pair, reply in zip(distinct, replies, strict=True)}
        return [answers[pair] for pair in pairs]

    def similarities(
        self, predictions: Sequence[str], references: Sequence[str]
    ) -> list[Similarity]:
        check_pairs(predictions, references)
        if not predictions:
            return []
        coro = self.asimilarities(predictions, references)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coro)
        with ThreadPoolExecutor(max_workers=1) as pool:  # called from async code: own loop
            return pool.submit(asyncio.run, coro).result()

    def signature(self) -> dict[str, Any]:
        return {"matcher": "llm", "judge_model": self.model, "prompt_version": self.prompt.version}


def _is_score(text: str | None) -> bool:
    """Whether a judge reply is a score: one that is not is neither cached nor read back from
    the cache (a judge replaced at the same URL is asked again)."""
    try:
        parse_judge_reply(text)
    except JudgeReplyError:
        return False
    return True


def _similarity(reply: CallResult | str) -> Similarity:
    """A judge reply as a score; a failed call, an unparsable reply or a call not made (its
    reason) is a judge error, never 0."""
    if isinstance(reply, str):
        return Similarity(None, reply)
    if reply.error_type is not None:
        return Similarity(None, f"judge_error: {reply.error_type}: {reply.error_message}")
    try:
        return Similarity(parse_judge_reply(reply.text))
    except JudgeReplyError as exc:
        return Similarity(None, f"judge_error: {exc}")

"""LLM judge: a model behind an OpenAI-compatible endpoint rates the similarity of two values.

This is the json spec's literal "LLM fuzzy/semantic similarity" (Phase 3) and the slot spec's
"LLM Judge Score" (§5). Prompts are versioned; replies are parsed strictly into [0, 1]; replies
are cached keyed on model, prompt version, kind and both values. A failed call or an unparsable
reply is a judge error, never a score of 0. The API key is read from the environment and never
written anywhere.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from fieldcheck.matchers._base import Similarity, check_pairs
from fieldcheck.matchers._cache import DiskCache, cache_key

JudgeKind = Literal["fuzzy", "semantic", "slot"]
API_KEY_ENV = ("FIELDCHECK_JUDGE_API_KEY", "OPENAI_API_KEY")


@dataclass(frozen=True)
class JudgePrompt:
    version: str
    system: str
    user: str  # str.format template with {prediction} and {reference}


_REPLY_RULE = (
    "Reply with only a number between 0 and 1 (for example 0.85), or the JSON object "
    '{"score": <number>}. No other text.'
)

PROMPTS: dict[JudgeKind, JudgePrompt] = {
    "fuzzy": JudgePrompt(
        version="fuzzy-v1",
        system=(
            "You compare two short values for surface similarity: spelling variants, typos, "
            "abbreviations, formatting and word order count as similar; different content does "
            "not. 1 means the same value written differently or identically, 0 means unrelated. "
            + _REPLY_RULE
        ),
        user="Reference value:\n<<<{reference}>>>\n\nCandidate value:\n<<<{prediction}>>>\n\nScore:",
    ),
    "semantic": JudgePrompt(
        version="semantic-v1",
        system=(
            "You compare two values for meaning: paraphrases and equivalent statements are "
            "similar even when the words differ; contradictions, missing key facts or different "
            "entities are not. 1 means the same meaning, 0 means unrelated or contradictory. "
            + _REPLY_RULE
        ),
        user="Reference value:\n<<<{reference}>>>\n\nCandidate value:\n<<<{prediction}>>>\n\nScore:",
    ),
    "slot": JudgePrompt(
        version="slot-v1",
        system=(
            "You grade information a model extracted from a conversation into a memory slot "
            "against the gold value of that slot. Judge semantic correctness: 1 means the "
            "extracted value states the same facts as the gold, 0 means wrong or unrelated; "
            "partial credit for partially correct values. " + _REPLY_RULE
        ),
        user="Gold value:\n<<<{reference}>>>\n\nExtracted value:\n<<<{prediction}>>>\n\nScore:",
    ),
}

_NUMBER = re.compile(r"^\s*([01](?:\.\d+)?|\.\d+)\s*$")


class JudgeReplyError(ValueError):
    """The judge's reply is not a number in [0, 1]."""


def parse_judge_reply(text: str | None) -> float:
    """Parse a judge reply strictly: a bare number in [0, 1] or ``{"score": x}``; else raise.

    Surrounding whitespace and a Markdown code fence are tolerated; prose is not.
    """
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


def resolve_api_key(explicit: str | None = None) -> str:
    """The judge's key: explicit, else the first of ``API_KEY_ENV`` set, else a placeholder."""
    if explicit:
        return explicit
    for name in API_KEY_ENV:
        value = os.environ.get(name)
        if value:
            return value
    return "not-set"  # local OpenAI-compatible servers accept any key


class LLMJudge:
    """Rates (prediction, reference) pairs with a chat model; one request per uncached pair."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        kind: JudgeKind = "semantic",
        api_key: str | None = None,
        cache: DiskCache | None = None,
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
        self.cache = cache
        self.max_concurrency = max(1, max_concurrency)
        self._api_key = resolve_api_key(api_key)
        self._timeout = timeout
        self._max_retries = max_retries
        self._client: Any = None
        self.request_count = 0
        self.name = f"llm:{model}:{self.prompt.version}"

    def __repr__(self) -> str:  # never show the key
        return f"LLMJudge(model={self.model!r}, base_url={self.base_url!r}, kind={self.kind!r})"

    def _get_client(self) -> Any:
        if self._client is None:
            from openai import OpenAI

            self._client = OpenAI(
                base_url=self.base_url,
                api_key=self._api_key,
                timeout=self._timeout,
                max_retries=self._max_retries,
            )
        return self._client

    def _key(self, prediction: str, reference: str) -> str:
        return cache_key(self.model, self.prompt.version, self.kind, prediction, reference)

    def _ask(self, prediction: str, reference: str) -> Similarity:
        try:
            response = self._get_client().chat.completions.create(
                model=self.model,
                temperature=0,
                messages=[
                    {"role": "system", "content": self.prompt.system},
                    {
                        "role": "user",
                        "content": self.prompt.user.format(
                            prediction=prediction, reference=reference
                        ),
                    },
                ],
            )
            self.request_count += 1
            text = response.choices[0].message.content if response.choices else None
            return Similarity(parse_judge_reply(text))
        except JudgeReplyError as exc:
            return Similarity(None, f"judge_error: {exc}")
        except Exception as exc:  # any transport or API failure is a judge error, not a 0
            return Similarity(
                None, f"judge_error: {type(exc).__name__}: {_redact(str(exc), self._api_key)}"
            )

    def similarities(
        self, predictions: Sequence[str], references: Sequence[str]
    ) -> list[Similarity]:
        check_pairs(predictions, references)
        pairs = list(zip(predictions, references, strict=True))
        keys = [self._key(p, r) for p, r in pairs]
        namespace = "judge"
        cached = self.cache.get_many(namespace, keys) if self.cache is not None else {}
        results: dict[str, Similarity] = {
            k: Similarity(float(cached[k])) for k in keys if k in cached
        }
        todo = {k: pair for k, pair in zip(keys, pairs, strict=True) if k not in results}
        if todo:
            with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
                answers = list(pool.map(lambda kp: self._ask(*kp[1]), todo.items()))
            fresh = dict(zip(todo, answers, strict=True))
            results.update(fresh)
            if self.cache is not None:
                self.cache.put_many(
                    namespace,
                    [(k, repr(s.score).encode()) for k, s in fresh.items() if s.ok],
                )
        return [results[k] for k in keys]

    def signature(self) -> dict[str, Any]:
        return {"matcher": "llm", "judge_model": self.model, "prompt_version": self.prompt.version}


def _redact(text: str, secret: str) -> str:
    return text.replace(secret, "***") if secret and secret != "not-set" else text

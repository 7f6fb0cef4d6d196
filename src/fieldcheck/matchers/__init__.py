"""Matchers: exact, fuzzy, semantic and LLM-judge similarity behind one small interface.

Each takes paired ``predictions`` and ``references`` and returns a ``Similarity`` in [0, 1] per
pair (or an error); the caller compares it with a threshold.
"""

from fieldcheck.matchers._base import Matcher, MatcherKind, Similarity
from fieldcheck.matchers._cache import DiskCache, cache_key, default_cache_path
from fieldcheck.matchers._exact import ExactMatcher, exact_similarity
from fieldcheck.matchers._fuzzy import (
    LONG_VALUE_CHARS,
    FuzzyMatcher,
    compared_linearly,
    fuzzy_similarity,
    long_value_similarity,
)
from fieldcheck.matchers._llm import PROMPTS, JudgeReplyError, LLMJudge, parse_judge_reply
from fieldcheck.matchers._semantic import SemanticMatcher

__all__ = [
    "LONG_VALUE_CHARS",
    "PROMPTS",
    "DiskCache",
    "ExactMatcher",
    "FuzzyMatcher",
    "JudgeReplyError",
    "LLMJudge",
    "Matcher",
    "MatcherKind",
    "SemanticMatcher",
    "Similarity",
    "cache_key",
    "compared_linearly",
    "default_cache_path",
    "exact_similarity",
    "fuzzy_similarity",
    "long_value_similarity",
    "parse_judge_reply",
]

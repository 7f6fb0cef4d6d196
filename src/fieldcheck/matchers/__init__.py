"""Matchers: exact, fuzzy, semantic and LLM-judge similarity of paired strings, each a
``Similarity`` in [0, 1] (or an error) that the caller compares with a threshold."""

from typing import TYPE_CHECKING

from fieldcheck._util.lazy import typed_lazy_names

if TYPE_CHECKING:  # the names as type checkers and editors see them
    from fieldcheck._util.digest import cache_key
    from fieldcheck.matchers._base import Matcher, Similarity
    from fieldcheck.matchers._cache import DiskCache
    from fieldcheck.matchers._exact import ExactMatcher
    from fieldcheck.matchers._fuzzy import (
        LONG_VALUE_CHARS,
        FuzzyMatcher,
        compared_linearly,
        fuzzy_similarity,
        long_value_similarity,
    )
    from fieldcheck.matchers._llm import (
        PROMPTS,
        JudgeReplyError,
        LLMJudge,
        judge_options,
        parse_judge_reply,
    )
    from fieldcheck.matchers._semantic import SemanticMatcher

__getattr__, __dir__, __all__ = typed_lazy_names(globals())

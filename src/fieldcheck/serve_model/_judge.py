"""Synthetic judge: fieldcheck's LLM-judge prompts answered with rapidfuzz's token-sort ratio of
the two values (string similarity, not judgement), so judge metrics run with no model."""

from __future__ import annotations

import random
import re
from pathlib import Path

from rapidfuzz import fuzz, utils

from fieldcheck.serve_model._base import Message, Responder, last_user_text

_VALUE = re.compile(r"<<<(.*?)>>>", re.DOTALL)


class JudgeResponder:
    prompt_id = "Reply with only a number between 0 and 1"
    missing = None  # it needs no data

    def respond(self, messages: list[Message], model: str, rng: random.Random) -> str:
        values = _VALUE.findall(last_user_text(messages))
        if len(values) != 2:
            return "0"
        score = fuzz.token_sort_ratio(values[0], values[1], processor=utils.default_process) / 100
        return f"{score:.2f}"


def build(responses_dir: Path) -> list[Responder]:
    return [JudgeResponder()]

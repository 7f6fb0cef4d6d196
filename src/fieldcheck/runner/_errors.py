"""The kinds of failed model call, as the runner records them and the reports count them: a
module of its own, so scoring code that names them loads nothing else of the runner."""

from typing import Literal

ErrorType = Literal[
    "rate_limited",
    "server_error",
    "timeout",
    "connection",
    "bad_request",
    "context_length",
    "invalid_reply",
]
ERROR_TYPES: tuple[str, ...] = (
    "rate_limited",
    "server_error",
    "timeout",
    "connection",
    "bad_request",
    "context_length",
    "invalid_reply",
)

"""The kinds of failed model call (docs/running.md's table): a module of its own, so scoring
code that names them loads nothing else of the runner."""

ERROR_TYPES: tuple[str, ...] = (
    "rate_limited",
    "server_error",
    "timeout",
    "connection",
    "bad_request",
    "context_length",
    "bad_response",
    "invalid_reply",
)
CALL_ERRORS: tuple[str, ...] = tuple(t for t in ERROR_TYPES if t != "invalid_reply")
"""The types only a failed call gives (never a reply that did not parse): the item is not scored."""

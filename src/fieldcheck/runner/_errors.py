"""The kinds of failed model call, as the runner records them and the reports count them: a
module of its own, so scoring code that names them loads nothing else of the runner.

Every type but ``invalid_reply`` is the endpoint's failure, not the model's: the item is not
scored and a resume asks it again. ``bad_response`` is a reply that is not a chat completion
(not JSON, not an object, ``choices`` or its message of the wrong shape, a body over
``--max-reply-bytes``); ``invalid_reply`` is a chat completion with no content the task can use
(none, or text the task cannot read), which each system scores as its doc says."""

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

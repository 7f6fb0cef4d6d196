"""The async model runner (layer 2): OpenAI-compatible calls with a shared in-flight limit,
retries, typed errors, token counts, a response cache in the store, and resumable runs.

Names are imported on first use: a process that needs one module of the runner (scoring code
naming ``ERROR_TYPES``) does not load the store, Rich and the client with it.
"""

from typing import TYPE_CHECKING

from fieldcheck._util.lazy import lazy_names

if TYPE_CHECKING:  # the names as type checkers and editors see them
    from fieldcheck.runner._client import (
        MAX_REPLY_BYTES,
        CallResult,
        CallStats,
        ChatClient,
        Message,
        Runner,
        RunnerSettings,
        estimate_tokens,
        messages_tokens,
        retry_after_seconds,
        retry_wait,
    )
    from fieldcheck.runner._errors import ERROR_TYPES, ErrorType
    from fieldcheck.runner._models import (
        API_KEY_ENV,
        ModelSpec,
        load_model_specs,
        redact_url,
    )
    from fieldcheck.runner._run import (
        RunAborted,
        RunHandle,
        RunInterrupted,
        RunSpec,
        estimate_line,
        interrupted_line,
        item_calls,
        resume_command,
        run_task,
    )

_HOME = {
    "API_KEY_ENV": "_models",
    "MAX_REPLY_BYTES": "_client",
    "CallResult": "_client",
    "CallStats": "_client",
    "ChatClient": "_client",
    "ERROR_TYPES": "_errors",
    "ErrorType": "_errors",
    "Message": "_client",
    "ModelSpec": "_models",
    "RunAborted": "_run",
    "RunHandle": "_run",
    "RunInterrupted": "_run",
    "RunSpec": "_run",
    "Runner": "_client",
    "RunnerSettings": "_client",
    "estimate_line": "_run",
    "estimate_tokens": "_client",
    "interrupted_line": "_run",
    "item_calls": "_run",
    "load_model_specs": "_models",
    "messages_tokens": "_client",
    "redact_url": "_models",
    "resume_command": "_run",
    "retry_after_seconds": "_client",
    "retry_wait": "_client",
    "run_task": "_run",
}


__getattr__, __dir__ = lazy_names(__name__, _HOME, globals())

__all__ = [
    "API_KEY_ENV",
    "ERROR_TYPES",
    "MAX_REPLY_BYTES",
    "CallResult",
    "CallStats",
    "ChatClient",
    "ErrorType",
    "Message",
    "ModelSpec",
    "RunAborted",
    "RunHandle",
    "RunInterrupted",
    "RunSpec",
    "Runner",
    "RunnerSettings",
    "estimate_line",
    "estimate_tokens",
    "interrupted_line",
    "item_calls",
    "load_model_specs",
    "messages_tokens",
    "redact_url",
    "resume_command",
    "retry_after_seconds",
    "retry_wait",
    "run_task",
]

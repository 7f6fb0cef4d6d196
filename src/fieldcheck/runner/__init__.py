"""The async model runner (layer 2): OpenAI-compatible calls with a shared in-flight limit,
retries, typed errors, token counts, a response cache in the store, and resumable runs."""

from fieldcheck.runner._client import (
    ERROR_TYPES,
    CallResult,
    CallStats,
    ChatClient,
    ErrorType,
    Message,
    Runner,
    RunnerSettings,
    estimate_tokens,
    messages_tokens,
    retry_after_seconds,
    retry_wait,
)
from fieldcheck.runner._models import API_KEY_ENV, ModelSpec, load_model_specs, redact_url
from fieldcheck.runner._run import (
    RunAborted,
    RunHandle,
    RunInterrupted,
    RunSpec,
    estimate_line,
    resume_command,
    run_task,
)

__all__ = [
    "API_KEY_ENV",
    "ERROR_TYPES",
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
    "load_model_specs",
    "messages_tokens",
    "redact_url",
    "resume_command",
    "retry_after_seconds",
    "retry_wait",
    "run_task",
]

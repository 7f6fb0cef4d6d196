"""The async model runner (layer 2): OpenAI-compatible calls, retries, typed errors, the reply
cache and resumable runs; names imported on first use (``ERROR_TYPES`` loads no client)."""

from typing import TYPE_CHECKING

from fieldcheck._util.lazy import typed_lazy_names

if TYPE_CHECKING:  # the names as type checkers and editors see them
    from fieldcheck.runner._client import (
        MAX_REPLY_BYTES,
        CallResult,
        ChatClient,
        Message,
        Runner,
        RunnerSettings,
        estimate_tokens,
        messages_tokens,
        retry_after_seconds,
        retry_wait,
    )
    from fieldcheck.runner._errors import CALL_ERRORS, ERROR_TYPES
    from fieldcheck.runner._models import (
        API_KEY_ENV,
        ModelSpec,
        load_model_specs,
    )
    from fieldcheck.runner._run import (
        ABORT_AFTER,
        UNREACHABLE,
        Asked,
        RunAborted,
        RunHandle,
        RunInterrupted,
        RunSpec,
        in_order,
        interrupted_line,
        item_calls,
        run_task,
    )

__getattr__, __dir__, __all__ = typed_lazy_names(globals())

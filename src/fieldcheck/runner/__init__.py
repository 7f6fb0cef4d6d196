"""The async model runner (layer 2): OpenAI-compatible calls with a shared in-flight limit,
retries, typed errors, token counts, a response cache in the store, and resumable runs.

Names are imported on first use: a process that needs one module of the runner (scoring code
naming ``ERROR_TYPES``) does not load the store, Rich and the client with it.
"""

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
        RunAborted,
        RunHandle,
        RunInterrupted,
        RunSpec,
        interrupted_line,
        item_calls,
        run_task,
    )

__getattr__, __dir__, __all__ = typed_lazy_names(globals())

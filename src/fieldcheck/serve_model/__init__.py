"""``fieldcheck serve-model``: a local OpenAI-compatible server playing synthetic example models."""

from typing import TYPE_CHECKING

from fieldcheck._util.lazy import typed_lazy_names

if TYPE_CHECKING:  # the names as type checkers and editors see them
    from fieldcheck.serve_model._app import (
        EXAMPLES,
        FINGERPRINT,
        BackgroundServer,
        create_app,
        free_port,
        parse_fail_rates,
    )
    from fieldcheck.serve_model._base import SYNTHETIC_MODELS, LookupResponder, Responder

__getattr__, __dir__, __all__ = typed_lazy_names(globals())

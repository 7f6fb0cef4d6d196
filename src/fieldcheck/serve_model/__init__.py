"""``fieldcheck serve-model``: a local OpenAI-compatible server playing synthetic example models."""

from fieldcheck.serve_model._app import (
    EXAMPLES,
    FINGERPRINT,
    BackgroundServer,
    create_app,
    free_port,
    parse_fail_rates,
)
from fieldcheck.serve_model._base import SYNTHETIC_MODELS, Responder

__all__ = [
    "EXAMPLES",
    "FINGERPRINT",
    "SYNTHETIC_MODELS",
    "BackgroundServer",
    "Responder",
    "create_app",
    "free_port",
    "parse_fail_rates",
]

"""The HTTP API and web app of ``fieldcheck serve`` (json-evaluation.md's API, Configuration and
Test evaluation pages): ``create_app(ApiSettings(...))`` builds the FastAPI app."""

from typing import TYPE_CHECKING

from fieldcheck._util.lazy import typed_lazy_names

if TYPE_CHECKING:  # the names as type checkers and editors see them
    from fieldcheck.api._app import create_app
    from fieldcheck.api._bundle import write_bundle
    from fieldcheck.api._settings import MB, ApiSettings, check_binding, is_loopback, needs_token

__getattr__, __dir__, __all__ = typed_lazy_names(globals())

"""fieldcheck: trustworthy numbers for structured extraction and numeric QA by language models.

The public surface lives in the subpackages: ``fieldcheck.metrics`` (pure metric functions),
``fieldcheck.matchers`` (exact, fuzzy, semantic and LLM-judge similarity), ``fieldcheck.jsoneval``,
``fieldcheck.slots`` and ``fieldcheck.numeric`` (each system's records, loaders and scoring),
``fieldcheck.store`` and ``fieldcheck.reports``. Importing this package loads nothing heavy.
"""

from fieldcheck._version import __version__

__all__ = ["__version__"]

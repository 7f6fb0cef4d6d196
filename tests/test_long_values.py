"""FUZZY on long values (issue 10): beyond LONG_VALUE_CHARS characters the quadratic edit distance
gives way to the 3-gram Dice coefficient, and the output says so."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rapidfuzz import fuzz, utils

from fieldcheck._util.digest import cache_key
from fieldcheck.matchers import (
    LONG_VALUE_CHARS,
    FuzzyMatcher,
    SemanticMatcher,
    compared_linearly,
    fuzzy_similarity,
    long_value_similarity,
)
from fieldcheck.slots import ModelInput, load_slots, score_models


def test_long_value_similarity_by_hand() -> None:
    # 3-grams abc, bcd against abc, bce: one in common, 2 * 1 / (2 + 2)
    assert long_value_similarity("abcd", "abce") == 0.5
    # words are sorted first, as token_sort_ratio does
    assert long_value_similarity("b a", "a b") == 1.0
    # 19,998 "xxx" against 9,998 "xxx": 2 * 9,998 / 29,996
    assert long_value_similarity("x" * 20_000, "x" * 10_000) == 2 * 9_998 / 29_996
    # a text of one or two characters is one short gram, never equal to a full 3-gram
    assert long_value_similarity("ab", "ab") == 1.0
    assert long_value_similarity("ab", "abab") == 0.0
    assert long_value_similarity("", "abc") == 0.0


def test_the_limit_is_on_the_longer_processed_value() -> None:
    short = "a" * LONG_VALUE_CHARS
    assert not compared_linearly(short, "b")
    assert not compared_linearly("  " + short + "  ", short)  # trimmed by processing
    assert compared_linearly(short + "a", "b")
    assert compared_linearly("b", short + "a")
    # at the limit: still rapidfuzz's token_sort_ratio, its exact ratio (n - d) / n
    other = "a" * (LONG_VALUE_CHARS - 10) + "b" * 10
    expected = fuzz.token_sort_ratio(utils.default_process(short), utils.default_process(other))
    assert fuzzy_similarity(short, other) == (20_000 - 20) / 20_000 == 0.999
    assert math.isclose(expected / 100, 0.999, rel_tol=0, abs_tol=1e-12)


def test_ten_times_the_slow_length_is_fast_and_exact() -> None:
    # 3M characters (edit distance: 104 s; 300k took 1.4 s). Every word differs in one letter of
    # five: 3-grams "abc" and " ab" in common, 2 * 1,199,999 / (2 * 2,999,997)
    a, b = "abcd " * 600_000, "ABCE " * 600_000
    start = time.perf_counter()
    similarity = fuzzy_similarity(a, b)
    elapsed = time.perf_counter() - start
    assert compared_linearly(a, b)
    assert similarity == 1_199_999 / 2_999_997
    assert elapsed < 20.0  # about 1 s on 2 cores


def test_matcher_results_and_signature_say_how_long_values_are_compared() -> None:
    long = "the quick brown fox " * 1_000  # 20,000 characters, 19,999 after processing
    matcher = FuzzyMatcher()
    (sim,) = matcher.similarities([long.upper()], [long])
    assert sim.score == 1.0
    assert matcher.signature() == {
        "matcher": "fuzzy:rapidfuzz.token_sort_ratio",
        "long_values": "3gram_dice_over_10000_chars",
    }


def _rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_slots_fuzzy_counts_long_values_in_a_warning(tmp_path: Path) -> None:
    long = "word " * 3_000  # 15,000 characters
    gold = [
        {"user": "u", "session": 1, "topic": "t", "field": "notes", "values": [long]},
        {"user": "u", "session": 1, "topic": "t", "field": "name", "values": ["Alice"]},
    ]
    pred = [
        {"user": "u", "session": 1, "topic": "t", "field": "notes", "values": [long + "extra"]},
        {"user": "u", "session": 1, "topic": "t", "field": "name", "values": ["alice"]},
    ]
    run = score_models(
        load_slots(_rows(tmp_path / "gold.jsonl", gold)),
        [ModelInput("m<b>", load_slots(_rows(tmp_path / "m.jsonl", pred)), None, None)],
        tp="fuzzy",
        bootstrap=0,
    )
    assert run.models[0].result.counts.tp == 2
    assert run.warnings == [
        "model 'm<b>': 1 slot value(s) longer than 10,000 characters compared by 3-gram "
        "similarity, not edit distance (docs/slots.md)"
    ]
    assert run.signature.settings["matcher"]["long_values"] == "3gram_dice_over_10000_chars"


@pytest.mark.slow
def test_semantic_reads_a_long_value_to_its_first_ten_thousand_characters(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # a 30 MB value took 8 minutes and 8.8 GB (a new-user trial): one encode per window, whole
    from fieldcheck.matchers._cache import DiskCache
    from fieldcheck.matchers._semantic import LONG_TEXT_CHARS, _encode, load_model

    assert LONG_TEXT_CHARS == 10_000
    words = " ".join(f"item{i % 40} shipped" for i in range(1_000))
    head = words[:LONG_TEXT_CHARS]  # exactly at the cap: read whole, as before
    model = load_model()
    cache = DiskCache(tmp_path / "cache.sqlite3")
    matcher = SemanticMatcher(cache=cache)
    with caplog.at_level("WARNING", logger="fieldcheck"):
        under = matcher.embed([head])
    assert caplog.messages == []
    assert np.array_equal(under[head], _encode(model, [head], 64)[0])
    # 100 times the cap: embedded (and cached) as its first 10,000 characters, with one warning
    long, other = head + " tail" * 200_000, head + " end" * 200_000
    with caplog.at_level("WARNING", logger="fieldcheck"):
        got = matcher.embed([long, other, long])
    assert caplog.messages == [
        "SEMANTIC reads the first 10,000 characters of a value: 2 value(s) are longer "
        '(docs/json.md "Matchers")'
    ]
    assert np.array_equal(got[long], under[head]) and np.array_equal(got[other], under[head])
    assert matcher.encoded_count == 1  # the head, once, from the cache the second time
    assert cache.get_many(matcher.cache_namespace, [cache_key(long)]) == {}
    # two values alike in what is read but not after it: their FUZZY similarity, not 1.0
    (sim, same, apart) = matcher.similarities([long, long, "x" + long], [other, long, other])
    assert sim.score == fuzzy_similarity(long, other) and sim.score < 0.8
    assert same.score == 1.0
    shifted = _encode(model, [("x" + long)[:LONG_TEXT_CHARS]], 64)[0]
    assert apart.score == float(np.dot(shifted, under[head])) < 1.0


def test_a_long_texts_type_and_3_grams_are_read_without_a_copy_per_word() -> None:
    # a 40 MB record took 1.4 GB (the API's and json batch's, a trial): auto-detection split the
    # whole text into words twice, and the 3-grams were built and counted through temporaries
    import tracemalloc

    from fieldcheck.matchers._fuzzy import _counted, _trigrams
    from fieldcheck.metrics import detect_value_type

    text = "lorem ipsum " * 100_000
    tracemalloc.start()
    try:
        kind = detect_value_type(text)
        detected = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        grams, counts = _counted(_trigrams(text))
        counted = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert kind == "text" and detected < 2 * len(text)  # 10 bytes a character before
    # one 8-byte gram a character, its codes and a mask (24 bytes a character before)
    assert counted < 16 * len(text)
    expected = np.unique(_trigrams(text), return_counts=True)
    assert np.array_equal(grams, expected[0]) and np.array_equal(counts, expected[1])


def test_semantic_values_alike_in_what_is_read_need_no_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # their FUZZY similarity: loading the model for its tokenizer cost the scoring ~500 MB
    from fieldcheck.matchers import _semantic

    def no_model(*_: Any) -> Any:
        raise AssertionError("the model was loaded")

    class Embedded(SemanticMatcher):
        def embed(self, texts: Any, **_: Any) -> dict[str, np.ndarray]:
            unit = np.ones(4, np.float32) / 2
            return {t: unit for t in texts}  # every head alike

    monkeypatch.setattr(_semantic, "load_model", no_model)
    long = "the shipment left on time " * 500
    (sim,) = Embedded().similarities([long + " late"], [long + " lost"])
    assert sim.score == fuzzy_similarity(long + " late", long + " lost") < 1.0

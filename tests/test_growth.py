"""Inputs whose cost grew faster than the input (issue 10): each is run at 10x the size that used
to be slow and checked for its exact result, against the old function kept here as a reference."""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fieldcheck._util.paths import safe_filename
from fieldcheck.metrics import flatten, flatten_pair, is_null
from fieldcheck.numeric import load_convfinqa, trace_ids

# --- --flatten: a chain of long keys ------------------------------------------------------------


def old_flatten_pair(
    output: Mapping[str, Any], ground_truth: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """flatten_pair before issue 10: every prefix built by copying and kept as text."""

    def walk_all(value: Mapping[str, Any]) -> tuple[dict[str, Any], set[str]]:
        out: dict[str, Any] = {}
        subtrees: set[str] = set()

        def walk(node: Any, path: str) -> None:
            if isinstance(node, Mapping) and node:
                subtrees.add(path)
                for key, child in node.items():
                    walk(child, f"{path}.{key}")
            elif isinstance(node, list | tuple) and node:
                subtrees.add(path)
                for i, child in enumerate(node):
                    walk(child, f"{path}[{i}]")
            elif path not in out:
                out[path] = node

        for key, child in value.items():
            walk(child, str(key))
        return out, subtrees

    def empty(v: Any) -> bool:
        return isinstance(v, Mapping | list | tuple) and len(v) == 0

    (flat_out, out_sub), (flat_gt, gt_sub) = walk_all(output), walk_all(ground_truth)

    def prune(flat: dict[str, Any], subtrees: set[str]) -> dict[str, Any]:
        return {p: v for p, v in flat.items() if not ((is_null(v) or empty(v)) and p in subtrees)}

    return prune(flat_out, gt_sub), prune(flat_gt, out_sub)


# keys that collide once joined ("a.b" against "a" then "b") and long ones that cross the length
# beyond which a subtree path is kept as its digest (1,024 characters) after one to three levels
KEYS = st.sampled_from(["a", "b", "a.b", "b[0]", "", "k" * 400, "k" * 1100, "é" * 700])
LEAVES = st.one_of(
    st.none(), st.just(""), st.just(" "), st.integers(0, 2), st.just([]), st.just({})
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)),
    max_leaves=12,
)
OBJECTS = st.dictionaries(KEYS, VALUES, max_size=4)


@settings(max_examples=400, deadline=None)
@given(OBJECTS, OBJECTS)
def test_flatten_pair_same_as_before(output: dict[str, Any], gt: dict[str, Any]) -> None:
    assert flatten_pair(output, gt) == old_flatten_pair(output, gt)
    assert flatten(output) == old_flatten_pair(output, {})[0]


def chain(depth: int, leaf: Any) -> dict[str, Any]:
    node: Any = leaf
    for i in range(depth):
        node = {f"{i:05d}" + "k" * 10_000: node}
    return node


def test_flatten_chain_of_long_keys_memory_is_linear() -> None:
    # depth 200 of 10 KB keys: 402 MB traced peak before (every prefix copied and kept), now the
    # input's own size plus the one 2 MB leaf path on each side
    out, gt = chain(200, "v"), chain(200, None)
    path = ".".join(f"{i:05d}" + "k" * 10_000 for i in reversed(range(200)))
    tracemalloc.start()
    try:
        flat_out, flat_gt = flatten_pair(out, gt)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert flat_out == {path: "v"}
    assert flat_gt == {path: None}
    assert peak < 20_000_000


def test_flatten_null_against_deep_long_subtree_is_dropped() -> None:
    # the pruning still finds a long subtree path: a null where the other side goes deeper
    deep = chain(3, "v")
    (top,) = deep
    (middle,) = deep[top]
    output = {top: {middle: None}}
    flat_out, flat_gt = flatten_pair(output, deep)
    assert flat_out == {}
    assert list(flat_gt.values()) == ["v"]


# --- numeric trace ids: ids sharing their first 120 characters -----------------------------------


def old_trace_ids(conversation_ids: Sequence[str]) -> dict[str, str]:
    """trace_ids before issue 10: the search from -2 on every clash (quadratic)."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for cid in conversation_ids:
        base = safe_filename(cid)
        name, k = base, 2
        while name.lower() in used:
            name, k = f"{base}-{k}", k + 1
        used.add(name.lower())
        out[cid] = name
    return out


IDS = st.lists(
    st.one_of(
        st.sampled_from(["a", "A", "a-2", "a-3", "A-2", "a/2", "a?", "", ".a", "b" * 130]),
        st.builds(lambda n: "c" * 119 + str(n), st.integers(0, 30)),
        st.text(alphabet="aA-23/.", max_size=5),
    ),
    unique=True,
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(IDS)
def test_trace_ids_same_as_before(ids: list[str]) -> None:
    assert trace_ids(ids) == old_trace_ids(ids)


def test_trace_ids_of_20k_ids_sharing_120_characters() -> None:
    # 20,000 numeric ids whose first 120 characters agree: 44 s of the command was this search
    prefix = "9" * 120
    ids = [f"{prefix}{i}" for i in range(20_000)]
    start = time.perf_counter()
    names = trace_ids(ids)
    elapsed = time.perf_counter() - start
    assert names[ids[0]] == prefix
    assert names[ids[1]] == f"{prefix}-2"
    assert names[ids[-1]] == f"{prefix}-20000"
    assert len(set(names.values())) == 20_000
    assert elapsed < 2.0  # about 0.05 s; the old search took tens of seconds


# --- original-format tables: many rows of the same name ------------------------------------------


def original_file(path: Path, names: Sequence[str]) -> Path:
    rows = [["", "2020"], *([name, str(i)] for i, name in enumerate(names))]
    record = {
        "id": "r1",
        "pre_text": [],
        "post_text": [],
        "table": rows,
        "annotation": {
            "dialogue_break": ["what were sales?"],
            "turn_program": ["100"],
            "exe_ans_list": [100.0],
            "answer_list": ["100"],
        },
    }
    path.write_text(json.dumps([record]), encoding="utf-8")
    return path


def test_20k_rows_of_the_same_name(tmp_path: Path) -> None:
    # 20,000 rows named "sales" (26.5 s when each name was searched from (2) up): the last row is
    # "sales" (as upstream), the earlier ones "sales (1)" .. "sales (19999)" in table order
    n = 20_000
    path = original_file(tmp_path / "rows.json", ["sales"] * n)
    start = time.perf_counter()
    result = load_convfinqa(path)
    elapsed = time.perf_counter() - start
    (conversation,) = result.conversations
    table = conversation.doc.table
    assert list(table)[:2] == ["sales (1)", "sales (2)"]
    assert list(table)[-2:] == [f"sales ({n - 1})", "sales"]
    assert table["sales"] == {"2020": n - 1}
    assert table["sales (1)"] == {"2020": 0}
    assert len(table) == n
    assert elapsed < 5.0  # about 0.25 s


def test_repeated_rows_skip_names_already_taken(tmp_path: Path) -> None:
    # literal rows "x (1)" and "x (3)" are kept; the earlier "x" rows take the free numbers
    names = ["x (1)", "x", "x (3)", "x", "x", "x"]
    (conversation,) = load_convfinqa(original_file(tmp_path / "rows.json", names)).conversations
    table = conversation.doc.table
    assert table == {
        "x (1)": {"2020": 0},
        "x (2)": {"2020": 1},
        "x (3)": {"2020": 2},
        "x (4)": {"2020": 3},
        "x (5)": {"2020": 4},
        "x": {"2020": 5},
    }

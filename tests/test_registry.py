"""The System registry (issue 27 item 1): a small fourth system (label classification accuracy)
registered in one place is listed, filtered, compared, exported and shown like the built-in
ones, with no change to ``runs``, the API or the pages."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from fieldcheck import core
from fieldcheck.api import ApiSettings, create_app
from fieldcheck.runs import compare_runs, iter_export
from fieldcheck.store import ItemColumns, RunInfo, RunRecorder, Store


def _per_label(metrics: Mapping[str, Any]) -> Mapping[str, Any]:
    return metrics.get("per_label") or {}


class LabelSystem:
    """Accuracy of predicted labels: the smallest system the registry takes."""

    name = "label"
    title = "Label accuracy"
    item = "example"
    headline = ("accuracy",)
    breakdowns = (("Accuracy by label", "label", _per_label),)
    export_columns = (("gold", '$."gold"', "VARCHAR"), ("predicted", '$."predicted"', "VARCHAR"))

    def columns(
        self, model: str, metrics: Mapping[str, Any], intervals: Mapping[str, Any]
    ) -> list[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
        return [(model, metrics, intervals)]

    def estimate(self, metrics: Mapping[str, Any], name: str) -> Any:
        return metrics.get(name)

    def interval(self, intervals: Mapping[str, Any], name: str) -> Any:
        return intervals.get(name)

    def latency(self, metrics: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return None

    def paired(self, metrics: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        return []

    def item_summary(self, result: Mapping[str, Any]) -> list[tuple[str, Any]]:
        return [("gold", result.get("gold")), ("predicted", result.get("predicted"))]

    def export_row(self, result: Mapping[str, Any]) -> list[Any]:
        return [result.get("gold"), result.get("predicted")]

    def item_columns(self, item: Mapping[str, Any]) -> ItemColumns:
        return ItemColumns(item["key"], item["gold"] != item["predicted"])


ITEMS = [("cat", "cat"), ("dog", "cat"), ("dog", "dog"), ("cat", "cat")]


@pytest.fixture
def label_system() -> Iterator[LabelSystem]:
    system = LabelSystem()
    core.register(system)
    yield system
    core.unregister(system.name)


def _run(store: Store, model: str, predictions: list[tuple[str, str]]) -> RunInfo:
    """A run of the label system scored here (accuracy and per-label accuracy by hand)."""
    recorder = RunRecorder.open(
        store, system="label", inputs=[], settings={}, signature=None, out=None, model=model
    )
    items = [{"key": f"i{n}", "gold": g, "predicted": p} for n, (g, p) in enumerate(predictions)]
    recorder.add_items(items, core.get("label").item_columns)
    right = [g == p for g, p in predictions]
    per_label = {
        label: sum(r for (g, _), r in zip(predictions, right, strict=True) if g == label)
        / sum(g == label for g, _ in predictions)
        for label in sorted({g for g, _ in predictions})
    }
    accuracy = sum(right) / len(right)
    return recorder.finish(
        metrics={"accuracy": accuracy, "per_label": per_label},
        intervals={"accuracy": {"low": accuracy / 2, "high": 1.0}},
    )


def test_registry_lists_built_in_systems_and_refuses_a_non_system() -> None:
    assert core.names()[:3] == ["json", "slots", "numeric"]
    assert all(isinstance(core.get(n), core.System) for n in ("json", "slots", "numeric"))
    with pytest.raises(TypeError, match="does not implement"):
        core.register(object())  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="no system 'label'"):
        core.get("label")


def test_a_fourth_system_is_compared_exported_listed_and_shown(
    label_system: LabelSystem, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'label.sqlite3'}"
    store = Store(url)
    a = _run(store, "model-a", ITEMS)  # 3 of 4 right; cat 2/2, dog 1/2
    b = _run(store, "model-b", [("cat", "dog"), ("dog", "dog"), ("dog", "dog"), ("cat", "dog")])
    assert core.names()[-1] == "label"

    table = compare_runs([a, b])
    assert table["system"] == "label"
    assert [c["model"] for c in table["columns"]] == ["model-a", "model-b"]
    [accuracy] = table["metrics"]
    assert accuracy["name"] == "accuracy"
    assert [(v["estimate"], v["low"]) for v in accuracy["values"]] == [(0.75, 0.375), (0.5, 0.25)]
    [by_label] = table["tables"]
    assert by_label["title"] == "Accuracy by label"
    assert by_label["rows"] == [
        {"name": "cat", "values": [1.0, 0.0]},
        {"name": "dog", "values": [0.5, 1.0]},
    ]

    text = b"".join(iter_export(store, a.id, "csv")).decode()
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][-3:] == ["gold", "predicted", "result"]
    assert [(r[0], r[2], r[-3], r[-2]) for r in rows[1:]] == [
        ("i0", "False", "cat", "cat"),
        ("i1", "True", "dog", "cat"),
        ("i2", "False", "dog", "dog"),
        ("i3", "False", "cat", "cat"),
    ]
    store.close()

    app = create_app(ApiSettings(database_url=url, data_root=tmp_path))
    client = TestClient(app, base_url="http://127.0.0.1")
    listed = client.get("/api/runs", params={"system": "label"}).json()
    assert sorted(r["model"] for r in listed["runs"]) == ["model-a", "model-b"]
    unknown = client.get("/api/runs", params={"system": "nope"})
    assert unknown.status_code == 422 and unknown.json()["field"] == "system"
    compared = client.get("/api/runs/compare", params={"ids": f"{a.id},{b.id}"}).json()
    assert compared["metrics"][0]["values"][1]["estimate"] == 0.5
    page = client.get(f"/runs/{a.id}").text
    assert "Accuracy by label" in page and "predicted" in page
    assert client.get("/runs", params={"system": "label"}).text.count("model-") >= 2

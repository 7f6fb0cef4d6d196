"""The line naming an interrupted run not resumed names only the settings that changed, also
when the run was interrupted while scoring (a tester's finding: "other bootstrap, base_url,
split" when only --base-url had changed: the settings its scoring added were counted)."""

from __future__ import annotations

from pathlib import Path

from fieldcheck.runner._run import not_resumed_line
from fieldcheck.store import Store


def test_a_run_interrupted_while_scoring_names_only_what_changed(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'runs.sqlite3'}", artifacts=tmp_path / "artifacts")
    spec = {"base_url": "http://a/v1", "temperature": 0.0}  # the runner's model_spec
    defining = {"model_spec": spec, "split": "dev", "json_mode": True}
    run, _ = store.open_run(
        system="numeric",
        task="evaluate",
        dataset="data.json",
        dataset_sha256="0" * 64,
        model="m",
        endpoint="http://a/v1",
        settings=defining,
        signature="{}",
        n_items=8,
    )
    scoring = {"bootstrap": 100, "seed": 0, "split": None, "config": {"x": 1}}
    store.begin_scoring(run.id, inputs=[], settings=scoring, out_dir=None)
    store.set_status(run.id, "interrupted")
    other = store.get_run(run.id)
    assert other is not None and other.settings["bootstrap"] == 100
    # split as the run read it ("dev"), as scoring stored it (None): unchanged all the same
    line = not_resumed_line(
        other, {**defining, "model_spec": {**spec, "base_url": "http://b/v1"}}, "new1"
    )
    assert "it ran with other base_url; this is a new run new1" in line
    line = not_resumed_line(other, {**defining, "split": "test"}, "new2")
    assert "it ran with other split; this is a new run new2" in line

"""``make demo`` (``fieldcheck._demo``): a Ctrl-C in a part ends the demo with its exit status and
one line, no traceback; each demo writes a new folder; the closing lines count the store's runs."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
import typer

from fieldcheck import _demo


def _part(monkeypatch: pytest.MonkeyPatch, run_model_demo: object) -> None:
    module = types.ModuleType("fieldcheck_demo_part")
    module.run_model_demo = run_model_demo  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(_demo, "PARTS", [("Part", module.__name__, "part")])


def test_a_ctrl_c_in_a_part_stops_the_demo_with_its_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{tmp_path / 's.sqlite3'}")

    def interrupted(*_: object, **__: object) -> int:
        raise typer.Exit(130)

    _part(monkeypatch, interrupted)
    assert _demo.main(tmp_path / "demo-out") == 130
    out = " ".join(capsys.readouterr().out.split())  # as one line, however it wrapped
    assert (
        "make demo stopped; `make demo` again starts anew in another folder, the model calls "
        "made so far answered from the cache" in out
    )
    assert "Traceback" not in out and "the store holds" not in out


def test_the_closing_line_counts_every_run_in_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fieldcheck.store import Store

    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{tmp_path / 's.sqlite3'}")
    store = Store()
    store.open_run(  # a run of an earlier demo
        system="json",
        task="run",
        dataset="d",
        dataset_sha256="x",
        model="m",
        endpoint="e",
        settings={},
        signature="",
        n_items=1,
    )
    _part(monkeypatch, lambda *_, **__: 0)
    assert _demo.main(tmp_path / "demo-out") == 0
    assert "the store holds 1 runs (0 begun by this demo)" in capsys.readouterr().out


def test_a_second_demo_writes_a_new_folder_and_leaves_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{tmp_path / 's.sqlite3'}")
    given: list[Path] = []

    def part(_url: str, out_dir: Path, *_: object, **__: object) -> int:
        given.append(out_dir)
        out_dir.mkdir(parents=True)
        (out_dir / "report.md").write_text(f"demo {len(given)}")
        return 0

    _part(monkeypatch, part)
    assert _demo.main(tmp_path / "demo-out") == 0
    assert _demo.main(tmp_path / "demo-out") == 0
    first, second = given
    assert first.parent != second.parent and first.name == second.name == "part"
    assert first.parent.parent == second.parent.parent == tmp_path / "demo-out"
    assert (first / "report.md").read_text() == "demo 1"
    assert (second / "report.md").read_text() == "demo 2"
    assert f"outputsin{second}" in "".join(capsys.readouterr().out.split())  # however it wrapped


def test_the_closing_line_counts_only_the_demos_own_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run another process begins in the same store while the demo runs (a shared PostgreSQL
    store, a second terminal) is not the demo's: it counted in `N model runs`, the calls and
    `begun by this demo` (a new-user trial's finding: 616 calls said where serve-model had 556)."""
    from fieldcheck.store import Store

    monkeypatch.setenv("FIELDCHECK_DATABASE_URL", f"sqlite:///{tmp_path / 's.sqlite3'}")
    store = Store()

    def part(_url: str, out_dir: Path, *_: object, **__: object) -> int:
        for model, folder in [("mine", out_dir), ("theirs", tmp_path / "elsewhere")]:
            store.open_run(
                system="json",
                task="run",
                dataset="d",
                dataset_sha256="x",
                model=model,
                endpoint="e",
                settings={},
                signature="",
                n_items=1,
                out_dir=str(folder),
            )
        return 0

    _part(monkeypatch, part)
    assert _demo.main(tmp_path / "demo-out") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "1 runs, 1 model runs (a slots run holds one per model), in" in out
        and "the store holds 2 runs (1 begun by this demo)" in out
    )

"""Reading a run folder back in tests."""

from __future__ import annotations

from pathlib import Path


def folder_files(out: Path) -> dict[str, bytes]:
    """Every file under ``out`` by its path inside it, but run.json and the reports (they name
    the run's id and folder) and the plots."""
    skip = {"run.json", "report.html", "report.md"}
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name not in skip and p.suffix != ".png"
    }

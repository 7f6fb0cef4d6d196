"""fieldcheck's helper processes (``python -P -m fieldcheck....``) import the fieldcheck of the
process that starts them (``fieldcheck._util.child``), also when it is not installed for the
interpreter, and never a ``fieldcheck`` folder in their working folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import fieldcheck
from fieldcheck._util.child import ROOT, child_env

WHERE = "import fieldcheck; print(fieldcheck.__file__)"


def test_a_helper_imports_this_fieldcheck_not_the_working_folders(tmp_path: Path) -> None:
    decoy = tmp_path / "fieldcheck"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise SystemExit('the decoy was imported')\n")
    # -S: no site folders, as an interpreter fieldcheck is not installed for
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    bare = subprocess.run(
        [sys.executable, "-S", "-P", "-c", WHERE],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert bare.returncode == 1 and "No module named 'fieldcheck'" in bare.stderr
    helper = subprocess.run(
        [sys.executable, "-S", "-P", "-c", WHERE],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
    )
    assert helper.returncode == 0, helper.stderr
    assert helper.stdout.strip() == str(Path(fieldcheck.__file__).resolve())
    assert Path(ROOT) / "fieldcheck" == Path(fieldcheck.__file__).resolve().parent


def test_the_pythonpath_keeps_what_the_user_set_after_ours(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/somewhere", ROOT]))
    assert child_env()["PYTHONPATH"].split(os.pathsep) == [ROOT, "/somewhere"]


def test_how_a_helper_ended_is_said_in_words() -> None:
    """A signal is named (Popen gives its number, negated): "exit status -9" read as a code
    (a tester's finding)."""
    from fieldcheck._util.child import ended

    assert ended(5, "x\nboom\n") == "exit status 5: boom"
    assert ended(-9, "") == "killed by SIGKILL"
    assert ended(-15, "last\n") == "killed by SIGTERM: last"
    assert ended(-200, "") == "killed by signal 200"

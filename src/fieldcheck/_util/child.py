"""The environment of fieldcheck's own helper processes (the store's writer, the slot reader and
second scorer, the numeric writer), started as ``python -P -m fieldcheck....``: ``-P`` keeps the
working folder off ``sys.path`` (a ``fieldcheck`` package there must not stand in for this one),
and ``PYTHONPATH`` starts with the folder this process imported fieldcheck from, so a helper runs
the same code even when fieldcheck is not installed for the interpreter (a source checkout, a
path a script added)."""

from __future__ import annotations

import os
import site
from pathlib import Path

import fieldcheck

ROOT = str(Path(fieldcheck.__file__).resolve().parent.parent)
"""The folder holding the ``fieldcheck`` package this process runs."""


def child_env() -> dict[str, str]:
    """This process's environment with ``ROOT`` first on ``PYTHONPATH``, unless ROOT is a site
    folder (an installed fieldcheck), which must stay behind the standard library."""
    env = dict(os.environ)
    sites = {str(Path(p).resolve()) for p in (*site.getsitepackages(), site.getusersitepackages())}
    if ROOT not in sites:
        rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != ROOT]
        env["PYTHONPATH"] = os.pathsep.join([ROOT, *rest])
    return env

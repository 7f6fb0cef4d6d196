"""Layers only call down, through public names (issue 27 item 8, ARCHITECTURE.md "Layers"): no
module imports another package's private module, and no module compares a system's name outside
that system's package. The sites that remain are listed below as debts of issue 27: a new site
fails, and so does a listed one that went away (the lists only shrink)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).parents[1] / "src" / "fieldcheck"
SYSTEMS = {"json": "jsoneval", "slots": "slots", "numeric": "numeric"}
"""Each system's name and the package that alone may compare it."""

NOT_SYSTEM_NAMES = {
    ("api/_body.py", "subtype == 'json'"),  # a media type
}
"""Sites that look like a system's name and are not one: (file, the expression's source)."""

NAMES_BELONG_HERE = ("core/_registry.py", "store/migrations/")
"""Where a system's name is the subject: the registry (each name's package) and the store's
migrations (stored rows of each system, frozen history that no registry change may alter)."""

# Issue 27 debt: the files that still compare a system's name outside its package, with how
# many times (the System registry of item 1 removes them). Shrink it, never grow it.
ISSUE_27_SYSTEM_NAME_DEBT: dict[str, int] = {}

# Issue 27 debt: the files that still import another package's private module, with how many
# times (add the name to that package's ``__init__`` and import it from there). Shrink it, never
# grow it.
ISSUE_27_PRIVATE_IMPORT_DEBT: dict[str, int] = {}


def _modules() -> list[tuple[str, str, ast.Module]]:
    """(path under src/fieldcheck, its package, its tree) of every module. A package is a
    top-level subpackage of fieldcheck (``_util`` too); a top-level module is its own."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        package = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        out.append((rel.as_posix(), package, ast.parse(path.read_text(encoding="utf-8"))))
    return out


def _names(node: ast.expr) -> list[str]:
    """The string constants of ``node``: itself, or the items of a tuple, list or set."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]


def system_name_sites(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, source) of each comparison with a system's name (``==``, ``!=``, ``in (...)``, a
    ``case``) and each dict literal keyed by one."""
    sites = []
    for node in ast.walk(tree):
        found: list[str] = []
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                found += _names(side)
        elif isinstance(node, ast.MatchValue):
            found += _names(node.value)
        elif isinstance(node, ast.Dict):
            found += [n for k in node.keys if k is not None for n in _names(k)]
        if any(n in SYSTEMS for n in found):
            source = ast.unparse(node)
            sites.append((node.lineno, source if len(source) <= 80 else source[:77] + "..."))
    return sites


def private_imports(tree: ast.Module, package: str) -> list[tuple[int, str]]:
    """(line, module) of each import of another package's private module: ``fieldcheck.X._y``
    (``from`` it or ``import`` it, or ``from fieldcheck.X import _y``), in any block,
    ``TYPE_CHECKING`` ones included."""
    found = []
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names if _private(a.name, package)]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if _private(node.module, package):
                modules = [node.module]
            else:
                named = (f"{node.module}.{a.name}" for a in node.names)
                modules = [m for m in named if _private(m, package)]
        found += [(node.lineno, m) for m in modules]
    return found


def _private(module: str, package: str) -> bool:
    """Whether ``module`` is a private module (``fieldcheck.X._y...``) of a package not
    ``package``."""
    parts = module.split(".")
    return (
        len(parts) >= 3
        and parts[0] == "fieldcheck"
        and parts[1] != package
        and parts[2].startswith("_")
        and not parts[2].startswith("__")
    )


def _counts(sites: dict[str, list[tuple[int, str]]]) -> dict[str, int]:
    return {path: len(found) for path, found in sorted(sites.items()) if found}


def _shrinks_only(found: dict[str, list[tuple[int, str]]], debt: dict[str, int]) -> None:
    counts = _counts(found)
    grown = {p: found[p] for p, n in counts.items() if n > debt.get(p, 0)}
    assert not grown, f"new sites (call down through public names instead): {grown}"
    paid = {p: (n, counts.get(p, 0)) for p, n in debt.items() if counts.get(p, 0) < n}
    assert not paid, f"sites gone (lower these counts in the debt list): {paid}"


def test_no_module_imports_another_packages_private_module() -> None:
    found = {path: private_imports(tree, package) for path, package, tree in _modules()}
    _shrinks_only(found, ISSUE_27_PRIVATE_IMPORT_DEBT)


def test_no_system_name_is_compared_outside_its_package() -> None:
    found = {
        path: [
            (line, source)
            for line, source in system_name_sites(tree)
            if package not in SYSTEMS.values()
            and (path, source) not in NOT_SYSTEM_NAMES
            and not path.startswith(NAMES_BELONG_HERE)
        ]
        for path, package, tree in _modules()
    }
    _shrinks_only(found, ISSUE_27_SYSTEM_NAME_DEBT)


def test_the_checks_see_each_form() -> None:
    """Each form the checks look for, found; the public and in-package forms, not."""
    code = """
from fieldcheck.slots._score import A
import fieldcheck.numeric._score
from fieldcheck.jsoneval import _stream
from fieldcheck.metrics import canonicalize
from fieldcheck.runs._items import B
if TYPE_CHECKING:
    from fieldcheck.store._items import C
def f(system, kind):
    if system == "json" or "numeric" != system or system in ("slots", "other"):
        pass
    match kind:
        case "slots":
            pass
    return {"json": 1, "x": 2}, kind == "jsonl"
"""
    tree = ast.parse(code)
    imports = [m for _, m in private_imports(tree, "runs")]
    assert imports == [
        "fieldcheck.slots._score",
        "fieldcheck.numeric._score",
        "fieldcheck.jsoneval._stream",
        "fieldcheck.store._items",
    ]
    assert sorted(line for line, _ in system_name_sites(tree)) == [10, 10, 10, 13, 15]


def test_the_debt_lists_only_shrink() -> None:
    debt = {"a.py": 2}
    _shrinks_only({"a.py": [(1, "x"), (2, "y")], "b.py": []}, debt)
    with pytest.raises(AssertionError, match="new sites"):
        _shrinks_only({"a.py": [(1, "x"), (2, "y"), (3, "z")]}, debt)
    with pytest.raises(AssertionError, match="new sites"):
        _shrinks_only({"a.py": [(1, "x"), (2, "y")], "b.py": [(1, "x")]}, debt)
    with pytest.raises(AssertionError, match=r"sites gone .*'a.py': \(2, 1\)"):
        _shrinks_only({"a.py": [(1, "x")]}, debt)


LAYERS: dict[str, int] = {
    **dict.fromkeys(("_cli", "api", "web", "_demo", "serve_model", "__main__"), 0),
    **dict.fromkeys(("core", "runs"), 1),
    **dict.fromkeys(SYSTEMS.values(), 2),
    **dict.fromkeys(("matchers", "runner"), 3),
    **dict.fromkeys(("metrics", "store", "reports"), 4),
    **dict.fromkeys(("_util", "_version", "__init__"), 5),
}
"""Each top-level package's layer (ARCHITECTURE.md "Layers, top to bottom"): the shells (and
the synthetic model server, a tool), core and the runs service, the systems, the matchers and
the runner, metrics, store and reports, _util."""


def upward_imports(tree: ast.Module, package: str) -> list[tuple[int, str]]:
    """(line, module) of each import of a package in a layer above ``package``'s, or of
    another system's package by a system."""
    found = []
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            bare = node.module == "fieldcheck"
            modules = [f"fieldcheck.{a.name}" for a in node.names] if bare else [node.module]
        for module in modules:
            parts = module.split(".")
            if parts[0] != "fieldcheck" or len(parts) < 2 or parts[1] == package:
                continue
            other = parts[1]
            both_systems = {package, other} <= set(SYSTEMS.values())
            if LAYERS.get(other, 5) < LAYERS[package] or both_systems:
                found.append((node.lineno, module))
    return found


def test_every_package_has_a_layer_and_imports_only_below_it() -> None:
    packages = {path.split("/")[0].removesuffix(".py") for path, _, _ in _modules()}
    assert packages <= LAYERS.keys(), f"give these packages a layer: {packages - LAYERS.keys()}"
    found = {
        path: upward_imports(tree, package)
        for path, package, tree in _modules()
        if upward_imports(tree, package)
    }
    assert not found, f"imports of a layer above (or of another system): {found}"
    probe = ast.parse("from fieldcheck.core import get\nfrom fieldcheck.numeric import SYSTEM\n")
    assert [m for _, m in upward_imports(probe, "jsoneval")] == [
        "fieldcheck.core",
        "fieldcheck.numeric",
    ]


def test_every_subpackage_the_package_docstring_names_imports() -> None:
    """``help(fieldcheck)`` named ``fieldcheck.datasets``, which does not exist (a trial's finding)."""
    import importlib
    import re

    import fieldcheck

    named = set(re.findall(r"``(fieldcheck\.\w+)``", fieldcheck.__doc__ or ""))
    assert len(named) >= 5
    for module in sorted(named):
        importlib.import_module(module)

"""The layering of docs/architecture.md, checked on the source: the core (``harness/``, except its
CLI package) imports none of the plug-in packages, modules import each other without cycles, no
package directory holds more than 12 modules and no module is much over 500 lines."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIRST_PARTY = ("harness", "dataset_builders", "tasks", "finetune")
PLUGINS = ("dataset_builders", "tasks", "finetune")
SOURCE_TREES = (*FIRST_PARTY, "tests", "bench", "scripts")
MAX_MODULES_PER_PACKAGE = 12
MAX_LINES = 520  # "about 500"


def _modules() -> dict[str, Path]:
    """Dotted name -> file for every first-party module (``pkg/__init__.py`` is ``pkg``)."""
    out = {}
    for top in FIRST_PARTY:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, runtime_only: bool):
    """Every node under ``node``; with ``runtime_only``, skipping the body of ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(node):
        if runtime_only and _is_type_checking(child):
            kept = child.orelse  # only the else branch runs
        else:
            kept = [child]
        for n in kept:
            yield n
            yield from _walk(n, runtime_only)


def _imports(path: Path, name: str, runtime_only: bool = False) -> list[tuple[int, str]]:
    """(line, imported module) of every import statement in the file, at any depth: module level,
    inside functions and (unless ``runtime_only``) under ``if TYPE_CHECKING``. ``from pkg import sub``
    names ``pkg.sub`` when that is a module, else ``pkg``; relative imports are resolved against
    ``name``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in _walk(tree, runtime_only):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.append((node.lineno, sub if sub in MODULES else base))
    return found


def _first_party(target: str) -> str | None:
    """The first-party module an import lands on (the longest known prefix), or None."""
    parts = target.split(".")
    for k in range(len(parts), 0, -1):
        cand = ".".join(parts[:k])
        if cand in MODULES:
            return cand
    return None


def test_the_core_never_imports_the_plugin_packages():
    offenders = []
    for name, path in MODULES.items():
        if not name.startswith("harness") or name.startswith("harness.cli"):
            continue
        for line, target in _imports(path, name):
            if target.split(".")[0] in PLUGINS:
                offenders.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not offenders, "the core imports plug-in packages:\n" + "\n".join(offenders)


def test_the_checker_sees_imports_inside_functions(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import tasks.meep\n"
        "def f():\n    from tasks.upheld import X\n    import finetune.trainer\n"
    )
    assert [t for _, t in _imports(probe, "harness.probe")] == [
        "typing",
        "tasks.meep",
        "tasks.upheld",
        "finetune.trainer",
    ]
    assert "tasks.meep" not in [t for _, t in _imports(probe, "harness.probe", runtime_only=True)]


def test_no_import_cycles_between_modules():
    """Every import that runs (module level or inside a function); annotation-only imports under
    ``if TYPE_CHECKING`` do not run and may point back."""
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        deps = {_first_party(t) for _, t in _imports(path, name, runtime_only=True)}
        graph[name] = {d for d in deps if d is not None and d != name}
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        pytest.fail(f"import cycle: {' -> '.join(e.args[1])}")


def test_packages_stay_small():
    crowded = []
    for top in SOURCE_TREES:
        for folder in [ROOT / top, *(p for p in (ROOT / top).rglob("*") if p.is_dir())]:
            n = len(list(folder.glob("*.py")))
            if n > MAX_MODULES_PER_PACKAGE:
                crowded.append(f"{folder.relative_to(ROOT)}: {n} modules")
    assert not crowded, f"more than {MAX_MODULES_PER_PACKAGE} Python modules in: {crowded}"


def test_modules_stay_small():
    long = []
    for top in SOURCE_TREES:
        for path in (ROOT / top).rglob("*.py"):
            n = len(path.read_text(encoding="utf-8").splitlines())
            if n > MAX_LINES:
                long.append(f"{path.relative_to(ROOT)}: {n} lines")
    assert not long, f"modules over {MAX_LINES} lines: {long}"

"""The layering of docs/architecture.md, checked on the source: the core (``harness/``, except its
CLI package) imports none of the plug-in packages, each plug-in package imports only the core and
the plug-in packages below it (``dataset_builders`` <- ``tasks`` <- ``finetune``), modules import
each other without cycles, and each module is about one idea: it says which in its docstring, is named
for it (no core ``utils`` / ``helpers`` / ``misc`` grab-bags), and no two core modules define a class of the
same name."""

from __future__ import annotations

import ast
import graphlib
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIRST_PARTY = ("harness", "dataset_builders", "tasks", "finetune")
PLUGINS = ("dataset_builders", "tasks", "finetune")
#: The plug-in packages, lowest first: each may import the core and the packages before it, never
#: one after it (docs/architecture.md, "Plug-in order"). The core imports none of them.
PLUGIN_ORDER = ("dataset_builders", "tasks", "finetune")
SOURCE_TREES = (*FIRST_PARTY, "tests", "bench", "scripts")
#: names that say a module holds unrelated things
GRAB_BAG_NAMES = {"utils", "util", "helpers", "helper", "misc", "common_utils", "stuff", "tools"}


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


_TOPS = "|".join(FIRST_PARTY)
_HOOK = re.compile(rf"((?:{_TOPS})(?:\.[A-Za-z_]\w*)*):[A-Za-z_][\w.]*")
_LOADERS = {"import_module", "__import__"}


def _hooks(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every module named in a string that the code loads by name: a
    ``"module:attr"`` hook (``TaskSpec.procedure``, a ``JudgeKind``'s target, ...) and the literal
    argument of ``importlib.import_module`` / ``__import__``. Docstrings are not code."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    docstrings = {
        id(body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and (body := node.body)
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if fname in _LOADERS and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if m := _HOOK.fullmatch(node.value):
                found.append((node.lineno, m.group(1)))
    return found


def _may_import(importer: str, target: str) -> bool:
    """Whether top-level package ``importer`` may depend on top-level package ``target``."""
    if target == importer or target == "harness":
        return True
    if importer == "harness" or target not in PLUGIN_ORDER:
        return False
    return PLUGIN_ORDER.index(target) < PLUGIN_ORDER.index(importer)


def _against_the_order(path: Path, name: str) -> list[str]:
    """Every import (any depth, ``if TYPE_CHECKING`` included: an annotation is a dependency too)
    and load-by-name hook of module ``name`` that points at a package it may not use."""
    top = name.split(".")[0]
    out = []
    for line, target in sorted({*_imports(path, name), *_hooks(path)}):
        dest = target.split(".")[0]
        if dest in FIRST_PARTY and not _may_import(top, dest):
            out.append(
                f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{line} ({top}) -> {target}"
            )
    return out


def test_plugin_packages_import_only_the_packages_below_them():
    offenders = []
    for name, path in MODULES.items():
        if name.split(".")[0] in PLUGINS:
            offenders += _against_the_order(path, name)
    order = " <- ".join(PLUGIN_ORDER)
    assert not offenders, f"imports against the plug-in order ({order}):\n" + "\n".join(offenders)


def test_the_order_checker_catches_planted_violations(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""Docstrings may name tasks.medal:MEDAL_TASK."""\n'
        "import importlib\nfrom typing import TYPE_CHECKING\nfrom harness.tasks import get_task\n"
        "from dataset_builders.helpers import sha256_file\n"
        "if TYPE_CHECKING:\n    from finetune.trainer import Trainer\n"
        "def f():\n    from tasks.medal import MEDAL_TASK\n"
        "    importlib.import_module('tasks.upheld')\n"
        "HOOK = 'finetune.evaluator_judge:KIND'\n"
    )
    found = _against_the_order(probe, "dataset_builders.probe")
    assert [f.split(" -> ")[1] for f in found] == [
        "finetune.trainer",
        "tasks.medal",
        "tasks.upheld",
        "finetune.evaluator_judge",
    ]
    # the same file one level up: tasks may use dataset_builders, not finetune
    assert [f.split(" -> ")[1] for f in _against_the_order(probe, "tasks.probe")] == [
        "finetune.trainer",
        "finetune.evaluator_judge",
    ]
    # at the top, finetune may use both; the core neither
    assert _against_the_order(probe, "finetune.probe") == []
    assert len(_against_the_order(probe, "harness.probe")) == 5


def test_the_order_names_every_plugin_package_and_entry_points_follow_it():
    """The order covers every package pyproject.toml ships besides the core, and every entry point
    this project declares names an object of a plug-in package (the core registers its own
    built-ins; it is never an entry point), so it loads after the packages it builds on."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    shipped = {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert shipped == {"harness", *PLUGIN_ORDER} and set(PLUGINS) == set(PLUGIN_ORDER)
    groups = project["project"]["entry-points"]
    assert {g for g in groups if g.startswith("dialeval_harness.")} == {
        "dialeval_harness.builders",
        "dialeval_harness.tasks",
        "dialeval_harness.judges",
    }
    for group, entries in groups.items():
        for ep_name, value in entries.items():
            module, _, attr = value.partition(":")
            assert module.split(".")[0] in PLUGIN_ORDER, f"{group} {ep_name} = {value!r}: not a plug-in"
            assert attr in _top_level_names(MODULES[module]), f"{group} {ep_name} = {value!r}: no {attr}"


def _top_level_names(path: Path) -> set[str]:
    """The names a module binds at its top level (without importing it)."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for tg in targets for n in ast.walk(tg) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


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


def test_every_module_says_its_one_idea():
    """A module opens with a docstring saying what it is about (``__init__`` may be empty)."""
    silent = [
        str(path.relative_to(ROOT))
        for path in MODULES.values()
        if path.name != "__init__.py" and not ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not silent, f"modules without a docstring saying what they are about: {silent}"


def test_core_modules_are_named_for_their_idea():
    bags = [
        str(p.relative_to(ROOT))
        for name, p in MODULES.items()
        if name.split(".")[0] == "harness" and p.stem.lower() in GRAB_BAG_NAMES
    ]
    assert not bags, f"modules named as grab-bags; name each for what it holds: {bags}"


def test_core_class_names_are_unique():
    """Two core classes of one name (two ``Registry`` classes) mislead a reader and an importer."""
    where: dict[str, list[str]] = {}
    for name, path in MODULES.items():
        if name.split(".")[0] != "harness":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where.setdefault(node.name, []).append(name)
    twice = {k: v for k, v in where.items() if len(v) > 1}
    assert not twice, f"class names defined in more than one core module: {twice}"

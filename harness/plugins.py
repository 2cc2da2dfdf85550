"""Plug-in discovery: the core owns the registries, the packages that plug into them are found
through Python entry points, so the core never imports them.

Each registry names an entry-point group (declared in ``pyproject.toml``)::

    [project.entry-points."dialeval_harness.builders"]     # dataset builders
    builtin = "dataset_builders:register_all"
    [project.entry-points."dialeval_harness.tasks"]        # task families
    builtin = "tasks:register_all"
    [project.entry-points."dialeval_harness.judges"]       # judge kinds (``kind:target`` specs)
    evaluator = "finetune.evaluator_judge:KIND"
    [project.entry-points."dialeval_harness.backends"]     # backends (each is also an LLM judge kind)
    [project.entry-points."dialeval_harness.scorers"]      # scoring methods of LLM judges
    [project.entry-points."dialeval_harness.meta_metrics"] # meta-metrics (judge vs humans)

A third-party package adds its own entry points to the same groups and is found the same way
once installed (``tests/fixtures/plugin_pkg`` is one that adds to all six). Every registry is a
:class:`harness.registry.Registry`: an entry point names an entry (a ``JudgeKind``, a
``BackendKind``, a ``Scorer`` class, a builder class, a ``TaskSpec``, a ``MetaMetric``) registered under the entry
point's name, or a function that registers entries itself. :func:`load` wraps a failing plug-in's
error with the entry point that raised it; each registry loads its group once.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Any

BUILDERS_GROUP = "dialeval_harness.builders"
TASKS_GROUP = "dialeval_harness.tasks"
JUDGES_GROUP = "dialeval_harness.judges"
BACKENDS_GROUP = "dialeval_harness.backends"
SCORERS_GROUP = "dialeval_harness.scorers"
META_METRICS_GROUP = "dialeval_harness.meta_metrics"


class PluginError(ImportError):
    """An installed plug-in could not be loaded."""


def group(name: str) -> list[EntryPoint]:
    """The entry points of group ``name``, sorted by name (duplicates from stale installs dropped)."""
    seen: dict[str, EntryPoint] = {}
    for ep in entry_points(group=name):
        seen.setdefault(ep.name, ep)
    return [seen[k] for k in sorted(seen)]


def load(ep: EntryPoint) -> Any:
    try:
        return ep.load()
    except Exception as e:  # a broken plug-in must say which one it is
        raise PluginError(
            f"plug-in {ep.name!r} of group {ep.group!r} ({ep.value}) failed to load: {type(e).__name__}: {e}"
        ) from e


def load_group(name: str) -> dict[str, object]:
    """Load every entry point of group ``name``: entry-point name -> the loaded object."""
    return {ep.name: load(ep) for ep in group(name)}


def missing_group_hint(name: str) -> str:
    """Why a registry may be empty: the project is not installed, or its metadata is stale."""
    return (
        f"no plug-in is registered in entry-point group {name!r}; install the project "
        "(pip install -e .) so its entry points are recorded, and reinstall after pulling changes "
        "that add plug-ins"
    )

"""The dataset-builder registry, owned by the core.

A builder turns raw evaluation data into a dataset directory (:mod:`harness.data.layout`) whose
records follow the common schema (:mod:`harness.data.schema`). Builders live in the
``dataset_builders`` package (or any installed package) and register here: the package's entry
point in group ``dialeval_harness.builders`` (:mod:`harness.plugins`) is called once, the first
time the registry is queried, and calls :func:`register_builder` for each builder class.

>>> from harness.data.builders import build_dataset, list_builders
>>> list_builders()  # doctest: +SKIP
['common', 'demo', 'import', 'medal', 'upheld', 'xdial-eval']
>>> build_dataset("demo", None, "/tmp/demo").configs  # doctest: +SKIP
{'demo-turn': ..., 'demo-dial': ...}
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from harness import plugins


@runtime_checkable
class DatasetBuilder(Protocol):
    """What the core needs of a builder (``dataset_builders.base.Builder`` implements it)."""

    name: str
    version: str
    license: str

    def build(self, source: str | os.PathLike[str] | None, output_dir: str | os.PathLike[str], **options: Any) -> Any:
        """Write the dataset directory; ``options`` are those of :func:`build_dataset`."""
        ...

    @classmethod
    def paper_comparisons(cls, path: Any, manifest: dict[str, Any]) -> list[tuple[str, Any]]:
        """(title, DataFrame) tables that set a built version's statistics next to its paper's."""
        ...


_REGISTRY: dict[str, type] = {}
_DISCOVERED_INTO: dict[str, type] | None = None  # the registry dict the plug-ins were registered into


def register_builder(cls: type) -> type:
    """Register a builder class under its ``name`` (usable as a class decorator).

    Registering the same class twice is a no-op; another class under a taken name is an error."""
    if not isinstance(cls, type) or not callable(getattr(cls, "build", None)):
        raise TypeError(f"register_builder expects a builder class with a build() method, got {cls!r}")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"{cls.__name__} has no builder name")
    existing = _REGISTRY.get(name)
    if existing is not None and existing is not cls:
        raise ValueError(f"a different builder is already registered as {name!r}: {existing.__qualname__}")
    _REGISTRY[name] = cls
    return cls


def discover() -> None:
    """Call every installed builder plug-in's registrar (idempotent) once per registry dict, so a
    registry swapped out and back (e.g. by a test) is filled again."""
    global _DISCOVERED_INTO
    if _DISCOVERED_INTO is _REGISTRY:
        return
    for register_all in plugins.load_group(plugins.BUILDERS).values():
        register_all()
    _DISCOVERED_INTO = _REGISTRY


def list_builders() -> list[str]:
    """Names of the registered builders, sorted."""
    discover()
    return sorted(_REGISTRY)


def builder_class(name: str) -> type:
    """The builder class registered as ``name``."""
    discover()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or plugins.missing_group_hint(plugins.BUILDERS)
        raise KeyError(f"unknown dataset builder {name!r}; available: {known}") from None


def get_builder(name: str, **kwargs: Any) -> DatasetBuilder:
    """A new instance of the builder registered as ``name`` (``kwargs`` go to its constructor)."""
    return builder_class(name)(**kwargs)


def build_dataset(
    name: str,
    source: str | os.PathLike[str] | None,
    output_dir: str | os.PathLike[str],
    *,
    languages: Iterable[str] | str | None = None,
    show_progress: bool = True,
    skip_invalid: bool = False,
    release: dict[str, Any] | None = None,
    **builder_kwargs: Any,
) -> Any:
    """Build dataset ``name`` from ``source`` (None = the builder's default) into ``output_dir``.

    ``skip_invalid`` turns bad source rows into counted skips listed in the manifest."""
    builder = get_builder(name, **builder_kwargs)
    return builder.build(
        source,
        output_dir,
        languages=languages,
        show_progress=show_progress,
        skip_invalid=skip_invalid,
        release=release,
    )

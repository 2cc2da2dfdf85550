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
from harness.registry import Registry


@runtime_checkable
class DatasetBuilder(Protocol):
    """What the core needs of a builder (``dataset_builders.base.Builder`` implements it)."""

    name: str
    version: str
    license: str

    def build(
        self, source: str | os.PathLike[str] | None, output_dir: str | os.PathLike[str], **options: Any
    ) -> Any:
        """Write the dataset directory; ``options`` are those of :func:`build_dataset`."""
        ...

    def normalize_languages(self, languages: Iterable[str] | str | None) -> tuple[str, ...]:
        """The languages to write of a ``--language`` selection (None: every language it has)."""
        ...

    @classmethod
    def paper_comparisons(cls, path: Any, manifest: dict[str, Any]) -> list[tuple[str, Any]]:
        """(title, DataFrame) tables that set a built version's statistics next to its paper's."""
        ...


def _is_builder(cls: object) -> bool:
    return isinstance(cls, type) and callable(getattr(cls, "build", None))


def _summary(cls: type) -> str:
    return str(getattr(cls, "pretty_name", "") or (cls.__doc__ or "").strip().partition("\n")[0])


#: name -> builder class (:class:`harness.registry.Registry`; entry-point group ``dialeval_harness.builders``)
BUILDERS: Registry[type[DatasetBuilder]] = Registry(
    "dataset builder",
    plugins.BUILDERS_GROUP,
    name_of=lambda cls: getattr(cls, "name", None),
    accepts=_is_builder,
    summary=_summary,
)


def register_builder(cls: type) -> type:
    """Register a builder class under its ``name`` (usable as a class decorator).

    Registering the same class twice is a no-op; another class under a taken name is a
    :class:`~harness.registry.DuplicateError`."""
    if not _is_builder(cls):
        raise TypeError(f"register_builder expects a builder class with a build() method, got {cls!r}")
    if not isinstance(getattr(cls, "name", None), str) or not cls.name:  # type: ignore[attr-defined]  # checked
        raise ValueError(f"{cls.__name__} has no builder name")
    return BUILDERS.register(cls)


def discover() -> None:
    """Call every installed builder plug-in's registrar once (:meth:`Registry.discover`)."""
    BUILDERS.discover()


def list_builders() -> list[str]:
    """Names of the registered builders, sorted."""
    return sorted(BUILDERS.names())


def builder_class(name: str) -> type[DatasetBuilder]:
    """The builder class registered as ``name``."""
    return BUILDERS.get(name)


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
    strict: bool = False,
    release: dict[str, Any] | None = None,
    **builder_kwargs: Any,
) -> Any:
    """Build dataset ``name`` from ``source`` (None = the builder's default) into ``output_dir``.

    ``skip_invalid`` turns bad source rows into counted skips listed in the manifest; ``strict``
    makes the first odd cell (:mod:`harness.data.cells`) an error instead of an accounted one."""
    builder = get_builder(name, **builder_kwargs)
    return builder.build(
        source,
        output_dir,
        languages=languages,
        show_progress=show_progress,
        skip_invalid=skip_invalid,
        **({"strict": True} if strict else {}),
        release=release,
    )

"""Dataset builders: turn raw evaluation data into Parquet dataset directories (with a dataset card
and a build manifest) that ``datasets.load_dataset(str(output_dir), config)`` loads offline.

>>> from dataset_builders import build_dataset, list_builders
>>> list_builders()
['common', 'demo', 'import', 'medal', 'upheld', 'xdial-eval']
>>> result = build_dataset("demo", None, "/tmp/demo")  # doctest: +SKIP
>>> result.configs  # doctest: +SKIP
{'demo-turn': ..., 'demo-dial': ...}

The record schema shared by all builders is documented in :mod:`dataset_builders.base`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from dataset_builders.base import (
    DIALOGUE_FEATURES,
    LANGUAGES,
    TURN_FEATURES,
    Builder,
    BuildResult,
    DataValidationError,
    SourceUnavailableError,
)
from dataset_builders.common import CommonSchemaBuilder
from dataset_builders.demo import DemoBuilder
from dataset_builders.importer import GenericImporter
from dataset_builders.medal import MedalBuilder
from dataset_builders.upheld import UpheldBuilder
from dataset_builders.xdial_eval import XDialEvalBuilder

__all__ = [
    "DIALOGUE_FEATURES",
    "LANGUAGES",
    "TURN_FEATURES",
    "BuildResult",
    "Builder",
    "CommonSchemaBuilder",
    "DataValidationError",
    "DemoBuilder",
    "GenericImporter",
    "MedalBuilder",
    "SourceUnavailableError",
    "UpheldBuilder",
    "XDialEvalBuilder",
    "build_dataset",
    "get_builder",
    "list_builders",
    "register_builder",
]

_REGISTRY: dict[str, type[Builder]] = {}


def register_builder(cls: type[Builder]) -> type[Builder]:
    """Register a :class:`Builder` subclass under its ``name`` (usable as a class decorator).

    Registering the same class twice is a no-op; another class under a taken name is an error.
    """
    if not (isinstance(cls, type) and issubclass(cls, Builder)):
        raise TypeError(f"register_builder expects a Builder subclass, got {cls!r}")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"{cls.__name__} has no builder name")
    existing = _REGISTRY.get(name)
    if existing is not None and existing is not cls:
        raise ValueError(f"a different builder is already registered as {name!r}: {existing.__qualname__}")
    _REGISTRY[name] = cls
    return cls


def list_builders() -> list[str]:
    """Names of the registered builders, sorted."""
    return sorted(_REGISTRY)


def get_builder(name: str, **kwargs: Any) -> Builder:
    """A new instance of the builder registered as ``name`` (``kwargs`` go to its constructor)."""
    try:
        cls = _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown dataset builder {name!r}; available: {', '.join(list_builders())}") from None
    return cls(**kwargs)


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
) -> BuildResult:
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


register_builder(XDialEvalBuilder)
register_builder(DemoBuilder)
register_builder(UpheldBuilder)
register_builder(CommonSchemaBuilder)  # files already in the common schema: --source DIR
register_builder(MedalBuilder)
register_builder(GenericImporter)  # needs mapping=...: harness datasets build import --mapping NAME

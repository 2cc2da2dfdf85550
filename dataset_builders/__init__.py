"""Dataset builders: turn raw evaluation data into Parquet dataset directories (with a dataset card
and a build manifest) that ``datasets.load_dataset(str(output_dir), config)`` loads offline.

The builders plug into the core's registry (:mod:`harness.data.builders`): the entry point
``dialeval_harness.builders: builtin = dataset_builders:register_all`` registers every builder of
this package the first time the registry is queried.

>>> from harness.data.builders import build_dataset, list_builders
>>> list_builders()  # doctest: +SKIP
['common', 'demo', 'import', 'medal', 'upheld', 'xdial-eval']
>>> build_dataset("demo", None, "/tmp/demo").configs  # doctest: +SKIP
{'demo-turn': ..., 'demo-dial': ...}

The record schema shared by all builders is :mod:`harness.data.schema`; the builder base class
is :class:`dataset_builders.base.Builder`.
"""

from __future__ import annotations

from dataset_builders.base import Builder
from dataset_builders.common import CommonSchemaBuilder
from dataset_builders.demo import DemoBuilder
from dataset_builders.importer.generic import GenericImporter
from dataset_builders.medal import MedalBuilder
from dataset_builders.records import BuildResult
from dataset_builders.upheld.builder import UpheldBuilder
from dataset_builders.xdial_eval import XDialEvalBuilder
from harness.data.builders import register_builder

__all__ = [
    "BuildResult",
    "Builder",
    "CommonSchemaBuilder",
    "DemoBuilder",
    "GenericImporter",
    "MedalBuilder",
    "UpheldBuilder",
    "XDialEvalBuilder",
    "register_all",
]

BUILDER_CLASSES: tuple[type[Builder], ...] = (
    XDialEvalBuilder,
    DemoBuilder,
    UpheldBuilder,
    CommonSchemaBuilder,  # files already in the common schema: --source DIR
    MedalBuilder,
    GenericImporter,  # needs mapping=...: harness datasets build import --mapping NAME
)


def register_all() -> None:
    """Register this package's builders with the core registry (idempotent)."""
    for cls in BUILDER_CLASSES:
        register_builder(cls)

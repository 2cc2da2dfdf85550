"""What a build reads and writes: the input files of a build (:class:`SourceFile`), the validated
records of one config (:class:`ConfigData`) and the build's outcome (:class:`BuildResult`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datasets import Features

from dataset_builders.helpers import LANGUAGES
from harness.data.schema import FEATURES_BY_LEVEL


@dataclass
class BuildResult:
    """What :meth:`Builder.build` produced."""

    output_dir: Path
    configs: dict[str, int]  # config name -> rows written
    fingerprint: str
    warnings: list[str] = field(default_factory=list)
    manifest: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceFile:
    """One input file of a build; ``origin`` is where it came from (a path or a URL)."""

    config: str
    level: str
    path: Path
    origin: str
    #: For a config read from several files (e.g. one per annotator): (path, origin) of each;
    #: ``path`` is then their directory. Every part is hashed into the manifest.
    parts: tuple[tuple[Path, str], ...] = ()

    def files(self) -> tuple[tuple[Path, str], ...]:
        return self.parts or ((self.path, self.origin),)


@dataclass
class ConfigData:
    """The validated records of one config, ready to be written."""

    name: str
    level: str
    records: list[dict[str, Any]]
    expected_instances: int | None = None
    dimension: str | None = None
    title: str | None = None  # human-readable name, e.g. "FED-Turn"
    source: SourceFile | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # goes into the manifest as is
    num_bytes: int = 0  # Arrow size, set when written
    #: Columns of a config that is not (only) the common schema: a level's common features plus
    #: extra columns, or, for a level outside ``turn``/``dialogue`` (e.g. ``table``), a table of its
    #: own that the builder validated itself. None = the level's common features.
    features: Features | None = None
    column_docs: dict[str, str] = field(default_factory=dict)  # docs of the extra columns

    @property
    def rows(self) -> int:
        return len(self.records)

    @property
    def instances(self) -> int:
        return len({r.get("item_id", r.get("id")) for r in self.records})

    @property
    def arrow_features(self) -> Features:
        return self.features if self.features is not None else FEATURES_BY_LEVEL[self.level]

    @property
    def languages(self) -> list[str]:
        present = {r["language"] for r in self.records}
        return [lang for lang in LANGUAGES if lang in present] + sorted(present - set(LANGUAGES))

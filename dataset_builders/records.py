"""What a build reads and writes: the input files of a build (:class:`SourceFile`), the validated
records of one config (:class:`ConfigData`) and the build's outcome (:class:`BuildResult`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
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
class ConfigSummary:
    """What the card and the manifest need of a config's records, gathered chunk by chunk as they
    are written (so a streamed config is never held in memory)."""

    rows: int = 0
    item_ids: set[Any] = field(default_factory=set)
    per_language: Counter[str] = field(default_factory=Counter)
    systems: Counter[str] = field(default_factory=Counter)
    ratings: dict[Any, float] = field(default_factory=dict)  # first rating of each item
    utterances: int = 0  # context (turn level) or turns (dialogue level), summed over rows
    labelled: list[dict[str, Any]] = field(
        default_factory=list
    )  # id/language/system/labels of rows with labels
    first_rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # first 2 rows per language

    def add(self, records: Iterable[dict[str, Any]], level: str) -> None:
        key = "context" if level == "turn" else "turns" if level == "dialogue" else None
        for r in records:
            self.rows += 1
            self.item_ids.add(r.get("item_id", r.get("id")))
            lang = r["language"]
            self.per_language[lang] += 1
            if r.get("system"):
                self.systems[r["system"]] += 1
            if r.get("rating") is not None:
                self.ratings.setdefault(r["item_id"], r["rating"])
            if key is not None and key in r:
                self.utterances += len(r[key])
            if r.get("labels"):
                self.labelled.append(
                    {"id": r["id"], "language": lang, "system": r.get("system"), "labels": r["labels"]}
                )
            first = self.first_rows.setdefault(lang, [])
            if len(first) < 2:
                first.append(r)

    @property
    def languages(self) -> list[str]:
        present = set(self.per_language)
        return [lang for lang in LANGUAGES if lang in present] + sorted(present - set(LANGUAGES))


@dataclass
class ConfigData:
    """The validated records of one config, ready to be written.

    A builder either gives ``records`` (a list) or, for a config too large to hold, ``chunks``: a
    callable returning an iterator of record lists, which the build validates and writes one chunk
    at a time (``records`` stays empty; the iterator may append to the build's warnings and update
    ``extra`` as it goes, before the manifest is written). Either way the build fills ``summary`` as
    the rows are written; the counts below come from it from then on."""

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
    chunks: Callable[[], Iterator[list[dict[str, Any]]]] | None = field(default=None, repr=False)
    summary: ConfigSummary | None = field(default=None, repr=False)

    def iter_chunks(self) -> Iterator[list[dict[str, Any]]]:
        if self.chunks is not None:
            yield from self.chunks()
        elif self.records:
            yield self.records

    @property
    def rows(self) -> int:
        return self.summary.rows if self.summary is not None else len(self.records)

    @property
    def instances(self) -> int:
        if self.summary is not None:
            return len(self.summary.item_ids)
        return len({r.get("item_id", r.get("id")) for r in self.records})

    @property
    def arrow_features(self) -> Features:
        return self.features if self.features is not None else FEATURES_BY_LEVEL[self.level]

    @property
    def languages(self) -> list[str]:
        if self.summary is not None:
            return self.summary.languages
        present = {r["language"] for r in self.records}
        return [lang for lang in LANGUAGES if lang in present] + sorted(present - set(LANGUAGES))

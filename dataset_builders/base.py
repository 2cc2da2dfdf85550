"""The builder base class: resolve sources, read and validate configs, then write Parquet + card +
manifest into a temporary directory and swap it into place atomically.

A builder turns raw source files (CSV, JSONL, ...) into a *dataset directory* that
``datasets.load_dataset(str(output_dir), config_name)`` loads without any loading script::

    output_dir/
        README.md                         dataset card; YAML front matter declares the configs
        build_manifest.json               provenance: inputs + sha256, counts, warnings, fingerprint
        <config>/test-00000-of-00001.parquet

Every config has a single split, ``test`` (these are evaluation sets).

Record schema
-------------
The common schema (turn- and dialogue-level records, labels per annotator, aggregates, the
dimension table) lives in :mod:`harness.data.schema`; every config is validated against it
on write. Builders pass ``skip_invalid=True`` to turn a bad source row into a counted skip listed
in the manifest instead of an error (:meth:`Builder.invalid`); nothing is dropped silently.

Odd cells (a label in another scale's wording, an unreadable label, a row with no dialogue, a
repeated header row, a blank row) follow one policy in every builder (:mod:`harness.data.cells`):
they are handled and recorded through :attr:`Builder.cells` (listed in the manifest under
``odd_cells``, counted in the card); ``strict=True`` makes the first of them an error instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
from abc import ABC, abstractmethod
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dataset_builders.card import render_card
from dataset_builders.helpers import normalize_languages, progress_bar, sha256_file
from dataset_builders.records import BuildResult, ConfigData, ConfigSummary, SourceFile
from harness import interrupt
from harness.data.cells import CellLog
from harness.data.layout import CARD_NAME, MANIFEST_NAME, data_file
from harness.data.registry import check_writable
from harness.data.schema import (
    FEATURES_BY_LEVEL,
    DataValidationError,
    Dimension,
    SourceUnavailableError,
    validate_records,
)
from harness.provenance import utc_now

# -- constants -----------------------------------------------------------------------------------

DEFAULT_DIMENSION: dict[str, str] = {"turn": "relevance", "dialogue": "coherence"}


_CONFIG_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


# -- the builder base class ----------------------------------------------------------------------


class EmptyBuildError(ValueError):
    """A build that would write no row at all; the message says why every row is missing."""


class Builder(ABC):
    """Base class of dataset builders.

    Subclasses set the class attributes and implement :meth:`resolve_sources` (find / fetch the
    input files) and :meth:`read_config` (parse and validate one input file into records).
    :meth:`build` does the rest: hashing, writing Parquet + card + manifest into a temporary
    directory next to ``output_dir``, then swapping it into place, so a failed build leaves a
    previous ``output_dir`` untouched.
    """

    name: str
    version: str  # semver of the builder (bump when the output changes)
    description: str = ""
    license: str = "unknown"
    citation: str = ""
    homepage: str = ""
    pretty_name: str = ""
    tags: tuple[str, ...] = ("dialogue-evaluation",)
    #: The dimension table: every label and headline dimension must be one of these.
    dimensions: tuple[Dimension, ...] = ()
    #: Set by :meth:`build`: turn bad source rows into counted skips instead of errors.
    skip_invalid: bool = False
    #: Set by :meth:`build`: the odd cells met so far (``strict``: the first one is an error).
    cells: CellLog = CellLog()

    def invalid(self, err: DataValidationError) -> None:
        """Report a bad source row: raise ``err``, or, with ``skip_invalid``, record the skip (it is
        counted and listed in the manifest). The caller then leaves the row out."""
        if not self.skip_invalid:
            raise err
        self._skipped.append(
            {"file": Path(err.file).name, "row": err.row, "field": err.column, "problem": err.problem}
        )

    # -- to implement ----------------------------------------------------------------------------
    @abstractmethod
    def resolve_sources(self, source: str | os.PathLike[str] | None, warnings: list[str]) -> list[SourceFile]:
        """Return the input files to build from (append a message to ``warnings`` for each set
        that is expected but absent). Raise :class:`SourceUnavailableError` if there is none."""

    @abstractmethod
    def read_config(self, src: SourceFile, languages: tuple[str, ...], warnings: list[str]) -> ConfigData:
        """Parse and validate one input file; raise :class:`DataValidationError` on bad data."""

    # -- card hooks (optional) -------------------------------------------------------------------
    def card_sections(self, configs: list[ConfigData], languages: tuple[str, ...]) -> list[str]:
        """Extra Markdown sections of the card, inserted before the provenance section."""
        return []

    def license_note(self) -> str:
        return ""

    @classmethod
    def paper_comparisons(cls, path: Path, manifest: dict[str, Any]) -> list[tuple[str, Any]]:
        """(title, DataFrame) tables setting a built version's statistics next to the numbers its
        source paper reports, shown by ``harness datasets show`` (none by default)."""
        return []

    def build_options(self) -> dict[str, Any]:
        """Builder options that change the output (recorded in the manifest and fingerprint)."""
        return {}

    def normalize_languages(self, languages: Iterable[str] | str | None) -> tuple[str, ...]:
        """The languages to write; builders of non-xDial languages override this."""
        return normalize_languages(languages)

    def empty_build_reason(self, languages: tuple[str, ...]) -> str:
        """Why a build read no row: the skipped rows by problem (with a first example each) or,
        when nothing was skipped, that the sources hold no record (builders add their filters)."""
        skipped = getattr(self, "_skipped", [])
        if not skipped:
            what = f" in the language(s) {', '.join(languages)}" if languages else ""
            return f"{self.name}: the source files hold no record{what}"
        by_problem: dict[str, list[dict[str, Any]]] = {}
        for s in skipped:
            by_problem.setdefault(str(s["problem"]), []).append(s)
        top = sorted(by_problem.items(), key=lambda kv: -len(kv[1]))[:5]
        lines = [
            f"  {len(v)} x {p} (first: {v[0]['file']}, row {v[0]['row']}, {v[0]['field']!r})" for p, v in top
        ]
        more = f"\n  ... and {len(by_problem) - 5} other problem(s)" if len(by_problem) > 5 else ""
        return (
            f"{self.name}: every source row was skipped ({len(skipped)} skip(s) with --skip-invalid), so "
            "nothing would be written; fix these and build again:\n" + "\n".join(lines) + more
        )

    def dimension_map(self) -> dict[str, Dimension] | None:
        """Dimension name -> :class:`Dimension` (None = no dimension table to check against)."""
        return {d.name: d for d in self.dimensions} if self.dimensions else None

    # -- the build -------------------------------------------------------------------------------
    def build(
        self,
        source: str | os.PathLike[str] | None,
        output_dir: str | os.PathLike[str],
        *,
        languages: Iterable[str] | str | None = None,
        show_progress: bool = True,
        skip_invalid: bool = False,
        strict: bool = False,
        release: dict[str, Any] | None = None,
    ) -> BuildResult:
        """Build the dataset from ``source`` (None = the builder's default source) into
        ``output_dir``; ``languages`` restricts which languages are written (ISO codes).
        ``skip_invalid`` skips bad source rows (counted, listed in the manifest) instead of failing.
        Odd cells are handled by the policy of :mod:`harness.data.cells` and listed in the manifest;
        ``strict`` makes the first one an error instead (it cannot be combined with ``skip_invalid``).
        ``release`` (``{name, version, registered_at}``) is set by the registry and recorded."""
        if strict and skip_invalid:
            raise ValueError(
                "strict and skip_invalid contradict each other: --strict fails on the first odd cell, "
                "--skip-invalid leaves bad rows out; give one of them"
            )
        langs = self.normalize_languages(languages)
        self.skip_invalid = skip_invalid
        self.cells = CellLog(strict=strict)
        self._skipped: list[dict[str, Any]] = []
        output_dir = Path(output_dir).expanduser().resolve()
        _check_replaceable(output_dir)
        if release is None:  # only the registry (which passes the release) writes into a registry
            check_writable(output_dir)
        warnings: list[str] = []

        sources = self.resolve_sources(source, warnings)
        if not sources:
            raise SourceUnavailableError(f"{self.name}: no input file found in {source}")
        names = [s.config for s in sources]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"{self.name}: more than one input file for config(s) {dupes}")
        for s in sources:
            if not _CONFIG_NAME_RE.match(s.config):
                raise ValueError(f"{self.name}: invalid config name {s.config!r}")

        inputs = [
            {
                "config": s.config,
                "level": s.level,
                "file": path.name if not s.parts else f"{s.path.name}/{path.name}",
                "source": origin,
                "sha256": sha256_file(path),
                "size": path.stat().st_size,
            }
            for s in sources
            for path, origin in s.files()
        ]
        options = {"languages": list(langs), "skip_invalid": skip_invalid, **self.build_options()}
        fingerprint = hashlib.sha256(
            json.dumps(
                {
                    "builder": self.name,
                    "version": self.version,
                    "inputs": sorted((i["config"], i["file"], i["sha256"]) for i in inputs),
                    "options": options,
                },
                sort_keys=True,
            ).encode("utf-8")
        ).hexdigest()

        output_dir.parent.mkdir(parents=True, exist_ok=True)
        sweep_stale_builds(output_dir)
        # written beside its final place, then swapped in: a stopped build leaves nothing behind
        tmp = interrupt.track(output_dir.parent / interrupt.temp_name(f".{output_dir.name}.tmp-"))
        try:
            tmp.mkdir()
            configs: list[ConfigData] = []
            with progress_bar(len(sources), f"building {self.name}", enabled=show_progress) as bar:
                for src in sources:
                    bar.describe(src.path.name)
                    cfg = self.read_config(src, langs, warnings)
                    cfg.source = cfg.source or src
                    self._write_config(cfg, tmp / data_file(cfg.name))
                    configs.append(cfg)
                    bar.advance(src.path.name)

            if not any(c.rows for c in configs):
                raise EmptyBuildError(self.empty_build_reason(langs))
            for c in [c for c in configs if not c.rows]:  # load_dataset cannot read a 0-row config
                (tmp / data_file(c.name)).unlink(missing_ok=True)
                with contextlib.suppress(OSError):
                    (tmp / data_file(c.name)).parent.rmdir()
                warnings.append(f"{c.name}: no row to write; the config is left out of the dataset")
            configs = [c for c in configs if c.rows]
            config_entries: dict[str, dict[str, Any]] = {}
            for cfg in configs:
                expected_rows = (
                    cfg.expected_instances * len(langs) if cfg.expected_instances is not None else None
                )
                if cfg.expected_instances is not None and cfg.instances != cfg.expected_instances:
                    warnings.append(
                        f"{cfg.name}: {cfg.instances} instances in "
                        f"{cfg.source.path.name if cfg.source else cfg.name}, "
                        f"but the reference count is {cfg.expected_instances}"
                    )
                elif expected_rows is not None and cfg.rows != expected_rows:
                    warnings.append(f"{cfg.name}: {cfg.rows} rows written, expected {expected_rows}")
                config_entries[cfg.name] = {
                    "level": cfg.level,
                    "data_file": data_file(cfg.name),
                    "rows": cfg.rows,
                    "instances": cfg.instances,
                    "expected_instances": cfg.expected_instances,
                    "expected_rows": expected_rows,
                    "languages": cfg.languages,
                    **cfg.extra,
                }

            manifest = {
                **({"release": release} if release else {}),
                "builder": {"name": self.name, "version": self.version},
                "created_at": utc_now(),
                "fingerprint": fingerprint,
                "options": options,
                "inputs": inputs,
                "configs": config_entries,
                "dimensions": [d.to_dict() for d in self.dimensions],
                "skipped": {"count": len(self._skipped), "rows": list(self._skipped)},
                "odd_cells": self.cells.to_manifest(),
                "warnings": list(warnings),
            }
            (tmp / MANIFEST_NAME).write_text(
                json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", "utf-8"
            )
            (tmp / CARD_NAME).write_text(render_card(self, configs, langs, manifest), "utf-8")
            _swap_into_place(tmp, output_dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        finally:
            interrupt.untrack(tmp)

        return BuildResult(
            output_dir=output_dir,
            configs={c.name: c.rows for c in configs},
            fingerprint=fingerprint,
            warnings=list(warnings),
            manifest=manifest,
        )

    def _write_config(self, cfg: ConfigData, path: Path) -> None:
        """Validate and write a config's records chunk by chunk (one Parquet row group each; a
        list of records is one chunk), filling ``cfg.summary`` and ``cfg.num_bytes``."""
        dims, file = self.dimension_map(), f"{self.name}/{data_file(cfg.name)}"
        schema = cfg.arrow_features.arrow_schema
        summary = ConfigSummary()
        seen: dict[str, int] = {}  # id -> record number, across chunks (duplicate ids)
        path.parent.mkdir(parents=True, exist_ok=True)
        with pq.ParquetWriter(path, schema, compression="zstd") as writer:
            wrote = False
            for chunk in cfg.iter_chunks():
                checked = _validated(cfg, chunk, dims, file, seen, summary.rows + 1)
                table = pa.Table.from_pylist(checked, schema=schema)
                writer.write_table(table)
                wrote = True
                cfg.num_bytes += table.nbytes
                summary.add(checked, cfg.level)
                if cfg.chunks is None:
                    cfg.records = checked
            if not wrote:
                writer.write_table(schema.empty_table())
        cfg.summary = summary


# -- module-private helpers ----------------------------------------------------------------------


def _validated(
    cfg: ConfigData,
    records: list[dict[str, Any]],
    dims: dict[str, Dimension] | None,
    file: str,
    seen: dict[str, int],
    start: int,
) -> list[dict[str, Any]]:
    """Common-schema validation of a chunk of a config's records; extra columns (``cfg.features``)
    are kept as they are, and a config outside the two levels is the builder's own table (validated
    by it)."""
    if cfg.level not in FEATURES_BY_LEVEL:
        if cfg.features is None:
            raise ValueError(f"config {cfg.name!r}: level {cfg.level!r} needs explicit features")
        return records
    if cfg.features is None:
        return validate_records(records, cfg.level, dims, file=file, seen=seen, start=start)
    common = FEATURES_BY_LEVEL[cfg.level]
    checked = validate_records(
        [{k: v for k, v in r.items() if k in common} for r in records],
        cfg.level,
        dims,
        file=file,
        seen=seen,
        start=start,
    )
    return [{**r, **c} for r, c in zip(records, checked, strict=True)]


def _check_replaceable(output_dir: Path) -> None:
    """Refuse to replace a directory that is not a dataset built by a builder (or empty)."""
    if not output_dir.exists():
        return
    if not output_dir.is_dir():
        raise FileExistsError(f"output path {output_dir} exists and is not a directory")
    if any(output_dir.iterdir()) and not (output_dir / MANIFEST_NAME).is_file():
        raise FileExistsError(
            f"output directory {output_dir} is not empty and has no {MANIFEST_NAME}; "
            "refusing to replace it (choose another --output or remove it)"
        )


def sweep_stale_builds(output_dir: Path) -> list[Path]:
    """Remove what a killed build of ``output_dir`` left beside it (``kill -9``, a power cut): its
    temporary folder, and the previous build it had moved aside when the new one is in place. A
    build that still runs keeps its folders (:func:`harness.interrupt.sweep`)."""
    removed = interrupt.sweep(output_dir.parent, f".{output_dir.name}.tmp-*")
    if output_dir.is_dir():
        removed += interrupt.sweep(output_dir.parent, f".{output_dir.name}.old-*")
    return removed


def _swap_into_place(tmp: Path, output_dir: Path) -> None:
    """Replace ``output_dir`` by ``tmp``: rename the old one aside, rename the new one in, then
    delete the old one. If the second rename fails, the old one is put back."""
    if not output_dir.exists():
        os.replace(tmp, output_dir)
        return
    old = output_dir.parent / interrupt.temp_name(f".{output_dir.name}.old-")
    os.replace(output_dir, old)
    try:
        os.replace(tmp, output_dir)
    except BaseException:
        os.replace(old, output_dir)
        raise
    shutil.rmtree(old, ignore_errors=True)

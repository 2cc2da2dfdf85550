"""Shared machinery of the dataset builders: record schema, validation errors, Parquet + card +
manifest writers, atomic output and progress reporting.

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
dimension table) lives in :mod:`dataset_builders.schema`; every config is validated against it
on write. Builders pass ``skip_invalid=True`` to turn a bad source row into a counted skip listed
in the manifest instead of an error (:meth:`Builder.invalid`); nothing is dropped silently.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import math
import os
import re
import shutil
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Features

from dataset_builders.schema import (  # noqa: F401  (re-exported)
    DIALOGUE_FEATURES,
    FEATURES_BY_LEVEL,
    LEVELS,
    ROLES,
    TURN_FEATURES,
    Dimension,
    SchemaError,
    validate_records,
)
from harness.languages import LANGUAGES as LANGUAGE_LITERALS
from harness.languages import XDIAL_LANGUAGES

# -- constants -----------------------------------------------------------------------------------

#: Languages of the record schema, ISO 639-1 code -> English name (xDial-Eval column prefix).
#: Order is the canonical output order (the order of the xDial-Eval paper).
LANGUAGE_NAMES: dict[str, str] = {code: LANGUAGE_LITERALS[code].name for code in XDIAL_LANGUAGES}
LANGUAGES: tuple[str, ...] = tuple(LANGUAGE_NAMES)
DEFAULT_DIMENSION: dict[str, str] = {"turn": "relevance", "dialogue": "coherence"}
SPLIT = "test"
MANIFEST_NAME = "build_manifest.json"
CARD_NAME = "README.md"


# -- errors --------------------------------------------------------------------------------------


class DataValidationError(ValueError):
    """A source record failed validation. The message always names the file, the row and the column.

    ``row`` is a 1-based data-row number (the header is not counted; for JSONL sources it is the
    line number) or ``"header"`` when a column is missing from the header. ``row_label`` and
    ``column_label`` only change the wording ("row"/"line", "column"/"field").
    """

    def __init__(
        self,
        file: str | os.PathLike[str],
        row: int | str,
        column: str,
        problem: str,
        *,
        row_label: str = "row",
        column_label: str = "column",
    ) -> None:
        self.file = str(file)
        self.row = row
        self.column = column
        self.problem = problem
        if row == "header":
            where = "header row (a required column is missing)" if row_label == "row" else "header"
        elif row_label == "row":
            where = f"row {row} (data rows are 1-based, header excluded)"
        else:
            where = f"{row_label} {row}"
        super().__init__(f"{self.file}, {where}, {column_label} {column!r}: {problem}")

    def __reduce__(self):  # keep picklable despite the keyword-only arguments
        return (_rebuild_validation_error, (self.file, self.row, self.column, self.problem, self.args[0]))


def _rebuild_validation_error(file, row, column, problem, message):
    err = DataValidationError.__new__(DataValidationError)
    ValueError.__init__(err, message)
    err.file, err.row, err.column, err.problem = file, row, column, problem
    return err


class SourceUnavailableError(FileNotFoundError):
    """The source data could not be found or fetched (e.g. no network for the default source).

    A :class:`FileNotFoundError` so that callers handling missing inputs handle this too.
    """


# -- results -------------------------------------------------------------------------------------


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


# -- helpers for subclasses ----------------------------------------------------------------------


def normalize_languages(languages: Iterable[str] | str | None) -> tuple[str, ...]:
    """ISO codes (or English names, e.g. ``"english"``) -> canonical tuple of ISO codes.

    ``None`` means every language. Comma-separated strings are accepted.
    """
    if languages is None:
        return LANGUAGES
    if isinstance(languages, str):
        languages = [languages]
    by_name = {name: code for code, name in LANGUAGE_NAMES.items()}
    wanted: set[str] = set()
    for raw in languages:
        for part in str(raw).split(","):
            key = part.strip().lower()
            if not key:
                continue
            code = key if key in LANGUAGE_NAMES else by_name.get(key)
            if code is None:
                raise ValueError(f"unknown language {part.strip()!r}; known: {', '.join(LANGUAGES)}")
            wanted.add(code)
    if not wanted:
        raise ValueError("languages= selects no language")
    return tuple(lang for lang in LANGUAGES if lang in wanted)


def turn_level_roles(n_context: int) -> list[str]:
    """Roles of ``n_context`` context utterances when the response is the chatbot's.

    The response is ``assistant``; going backwards from it, speakers alternate, so the last
    context utterance is ``user``, the one before it ``assistant``, and so on.
    """
    return ["user" if (n_context - i) % 2 == 1 else "assistant" for i in range(n_context)]


def dialogue_level_roles(n_turns: int) -> list[str]:
    """Roles of a dialogue whose speakers alternate starting with the human (``user``)."""
    return ["user" if i % 2 == 0 else "assistant" for i in range(n_turns)]


def messages(texts: Sequence[str], roles: Sequence[str]) -> list[dict[str, str]]:
    return [{"role": r, "text": t} for r, t in zip(roles, texts, strict=True)]


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def check_rating(value: Any) -> float | None:
    """Return the rating as a finite float, or None if it is not one (bools are rejected)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        value = value.strip()
        if not value:
            return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def size_category(n: int) -> str:
    """Hugging Face Hub ``size_categories`` bucket for ``n`` rows."""
    buckets = [
        (10**3, "n<1K"),
        (10**4, "1K<n<10K"),
        (10**5, "10K<n<100K"),
        (10**6, "100K<n<1M"),
        (10**7, "1M<n<10M"),
        (10**8, "10M<n<100M"),
        (10**9, "100M<n<1B"),
    ]
    for limit, label in buckets:
        if n < limit:
            return label
    return "n>1B"


def data_file(config: str) -> str:
    """Path of a config's Parquet file, relative to the output directory."""
    return f"{config}/{SPLIT}-00000-of-00001.parquet"


def write_parquet(records: Sequence[dict[str, Any]], features: Features, path: Path) -> int:
    """Write records with an explicit schema (the datasets Features are stored in its metadata).

    Returns the in-memory (Arrow) size of the table in bytes.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(list(records), schema=features.arrow_schema)
    pq.write_table(table, path, compression="zstd")
    return table.nbytes


@contextlib.contextmanager
def progress_bar(total: int, description: str, enabled: bool = True) -> Iterator[Any]:
    """A rich progress bar (on stderr) with an ``advance(label)`` method; a no-op when disabled."""

    class _Null:
        def advance(self, label: str = "") -> None:
            pass

        def describe(self, label: str) -> None:
            pass

    if not enabled:
        yield _Null()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[label]}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=False,
    )

    class _Bar:
        def __init__(self) -> None:
            self.task = progress.add_task(description, total=total, label="")

        def describe(self, label: str) -> None:
            progress.update(self.task, label=label)

        def advance(self, label: str = "") -> None:
            progress.update(self.task, advance=1, label=label)

    with progress:
        yield _Bar()


def utc_now() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


_CONFIG_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


# -- the builder base class ----------------------------------------------------------------------


class Builder(ABC):
    """Base class of dataset builders.

    Subclasses set the class attributes and implement :meth:`resolve_sources` (find / fetch the
    input files) and :meth:`read_config` (parse and validate one input file into records).
    :meth:`build` does the rest: hashing, writing Parquet + card + manifest into a temporary
    directory next to ``output_dir``, then swapping it into place, so a failed build leaves a
    previous ``output_dir`` untouched.
    """

    name: ClassVar[str]
    version: ClassVar[str]  # semver of the builder (bump when the output changes)
    description: ClassVar[str] = ""
    license: ClassVar[str] = "unknown"
    citation: ClassVar[str] = ""
    homepage: ClassVar[str] = ""
    pretty_name: ClassVar[str] = ""
    tags: ClassVar[tuple[str, ...]] = ("dialogue-evaluation",)
    #: The dimension table: every label and headline dimension must be one of these.
    dimensions: ClassVar[tuple[Dimension, ...]] = ()
    #: Set by :meth:`build`: turn bad source rows into counted skips instead of errors.
    skip_invalid: bool = False

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

    def build_options(self) -> dict[str, Any]:
        """Builder options that change the output (recorded in the manifest and fingerprint)."""
        return {}

    def normalize_languages(self, languages: Iterable[str] | str | None) -> tuple[str, ...]:
        """The languages to write; builders of non-xDial languages override this."""
        return normalize_languages(languages)

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
        release: dict[str, Any] | None = None,
    ) -> BuildResult:
        """Build the dataset from ``source`` (None = the builder's default source) into
        ``output_dir``; ``languages`` restricts which languages are written (ISO codes).
        ``skip_invalid`` skips bad source rows (counted, listed in the manifest) instead of failing.
        ``release`` (``{name, version, registered_at}``) is set by the registry and recorded."""
        langs = self.normalize_languages(languages)
        self.skip_invalid = skip_invalid
        self._skipped: list[dict[str, Any]] = []
        output_dir = Path(output_dir).expanduser().resolve()
        _check_replaceable(output_dir)
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
        tmp = output_dir.parent / f".{output_dir.name}.tmp-{uuid.uuid4().hex[:12]}"
        tmp.mkdir()
        try:
            configs: list[ConfigData] = []
            with progress_bar(len(sources), f"building {self.name}", enabled=show_progress) as bar:
                for src in sources:
                    bar.describe(src.path.name)
                    cfg = self.read_config(src, langs, warnings)
                    cfg.source = cfg.source or src
                    cfg.records = _validated(cfg, self.dimension_map(), f"{self.name}/{data_file(cfg.name)}")
                    cfg.num_bytes = write_parquet(cfg.records, cfg.arrow_features, tmp / data_file(cfg.name))
                    configs.append(cfg)
                    bar.advance(src.path.name)

            config_entries: dict[str, dict[str, Any]] = {}
            for cfg in configs:
                expected_rows = (
                    cfg.expected_instances * len(langs) if cfg.expected_instances is not None else None
                )
                if cfg.expected_instances is not None and cfg.instances != cfg.expected_instances:
                    warnings.append(
                        f"{cfg.name}: {cfg.instances} instances in {cfg.source.path.name}, "
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
                "warnings": list(warnings),
            }
            (tmp / MANIFEST_NAME).write_text(
                json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", "utf-8"
            )
            from dataset_builders.card import render_card  # card.py imports this module

            (tmp / CARD_NAME).write_text(render_card(self, configs, langs, manifest), "utf-8")
            _swap_into_place(tmp, output_dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

        return BuildResult(
            output_dir=output_dir,
            configs={c.name: c.rows for c in configs},
            fingerprint=fingerprint,
            warnings=list(warnings),
            manifest=manifest,
        )


# -- module-private helpers ----------------------------------------------------------------------


def _validated(cfg: ConfigData, dims: dict[str, Dimension] | None, file: str) -> list[dict[str, Any]]:
    """Common-schema validation of a config's records; extra columns (``cfg.features``) are kept as
    they are, and a config outside the two levels is the builder's own table (validated by it)."""
    if cfg.level not in FEATURES_BY_LEVEL:
        if cfg.features is None:
            raise ValueError(f"config {cfg.name!r}: level {cfg.level!r} needs explicit features")
        return cfg.records
    if cfg.features is None:
        return validate_records(cfg.records, cfg.level, dims, file=file)
    common = FEATURES_BY_LEVEL[cfg.level]
    checked = validate_records(
        [{k: v for k, v in r.items() if k in common} for r in cfg.records], cfg.level, dims, file=file
    )
    return [{**r, **c} for r, c in zip(cfg.records, checked, strict=True)]


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


def _swap_into_place(tmp: Path, output_dir: Path) -> None:
    """Replace ``output_dir`` by ``tmp``: rename the old one aside, rename the new one in, then
    delete the old one. If the second rename fails, the old one is put back."""
    if not output_dir.exists():
        os.replace(tmp, output_dir)
        return
    old = output_dir.parent / f".{output_dir.name}.old-{uuid.uuid4().hex[:12]}"
    os.replace(output_dir, old)
    try:
        os.replace(tmp, output_dir)
    except BaseException:
        os.replace(old, output_dir)
        raise
    shutil.rmtree(old, ignore_errors=True)

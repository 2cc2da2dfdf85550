"""Build a dataset from files that are ALREADY in the common schema (:mod:`harness.data.schema`).

Source: a directory (or one file) of ``<config>.jsonl`` / ``<config>.json`` (an array of objects) /
``<config>.parquet`` files; the config name is the file stem, and every row is one common-schema
record (turn or dialogue level, per its ``level`` field; all rows of a file share one level). Or
``hub:org/name[@revision]`` (or ``hub:PATH`` of a built dataset directory): loaded with
:func:`datasets.load_dataset`, each config (and split, where a config has several) -> a config.

An optional ``dataset.yaml`` next to the files gives the card metadata (``name``, ``pretty_name``,
``license``, ``citation``, ``homepage``, ``description``, ``tags``), the allowed ``languages`` and
the dimension table (``dimensions``: ``{name, scale, min, max, definition, source, labels}`` each)
that labels and headline ``dimension`` are checked against. Without it nothing is checked, and the
``aggregate`` column (sum / sum of maxima) takes the largest label seen (at least 1) as the maximum.

Missing ``aggregates`` are computed from ``labels`` (:func:`dataset_builders.aggregate.aggregates_for`);
a missing ``rating`` is the mean of the labels of the record's headline ``dimension``; a missing
``dataset`` is the config name. A bad record is a :class:`DataValidationError` naming the source
file, the 1-based row (JSONL: line; JSON: record = array index + 1; Parquet: row) and the field;
with ``skip_invalid`` it becomes a counted skip in the manifest.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from dataset_builders.aggregate import aggregates_for
from dataset_builders.base import Builder
from dataset_builders.records import ConfigData, SourceFile
from harness.data.schema import (
    _LANG_RE,
    FEATURES_BY_LEVEL,
    LEVELS,
    DataValidationError,
    Dimension,
    SchemaError,
    SourceUnavailableError,
    complete,
)
from harness.data.schema import validate_record as _validate_record

FORMATS = {".jsonl": "jsonl", ".json": "json", ".parquet": "parquet"}
METADATA_FILE = "dataset.yaml"
_ROW_LABEL = {"jsonl": "line", "json": "record", "parquet": "row"}
_METADATA_KEYS = ("pretty_name", "license", "citation", "homepage", "description")


# -- reading source files ------------------------------------------------------------------------


class SourceTable:
    """One source file: ``rows`` are (1-based row number, record dict or None, (field, problem) or
    None); ``error`` is a file-level problem (unreadable file); ``level`` the level of its records."""

    def __init__(self, path: Path) -> None:
        self.path, self.kind = path, FORMATS[path.suffix.lower()]
        self.row_label = _ROW_LABEL[self.kind]
        self.rows: list[tuple[int, dict[str, Any] | None, tuple[str, str] | None]] = []
        self.error: DataValidationError | None = None
        self.level, self.level_row = "turn", 0  # placeholder until a row names a valid level

    def err(self, row: int | str, field: str, problem: str) -> DataValidationError:
        return DataValidationError(
            self.path, row, field, problem, row_label=self.row_label, column_label="field"
        )

    def read(self) -> SourceTable:
        try:
            self._read()
        except DataValidationError as e:
            self.error = e
        first = next(((n, o["level"]) for n, o, _ in self.rows if o and o.get("level") in LEVELS), None)
        if first:
            self.level_row, self.level = first
        return self

    def _read(self) -> None:
        if self.kind == "parquet":
            import pyarrow.parquet as pq

            try:
                rows = pq.read_table(self.path).to_pylist()
            except Exception as e:  # not a Parquet file, truncated ...
                raise self.err("header", "<parquet>", f"unreadable Parquet file: {e}") from None
            self.rows = [(i, r, None) for i, r in enumerate(rows, start=1)]
            return
        data = self.path.read_bytes().removeprefix(b"\xef\xbb\xbf")
        if self.kind == "jsonl":
            items = [(n, line) for n, line in enumerate(data.split(b"\n"), start=1) if line.strip()]
        else:
            try:
                array = json.loads(data)
            except ValueError as e:
                raise self.err("header", "<json>", _json_problem(e)) from None
            if not isinstance(array, list):
                raise self.err("header", "<json>", "expected a JSON array of records at the top level")
            items = list(enumerate(array, start=1))
        for n, item in items:
            try:
                obj = json.loads(item) if isinstance(item, bytes) else item
            except ValueError as e:
                self.rows.append((n, None, ("<json>", _json_problem(e))))
                continue
            kind = type(obj).__name__
            bad = (
                None
                if isinstance(obj, dict)
                else ("<json>", f"expected a record (a JSON object), got {kind}")
            )
            self.rows.append((n, None if bad else obj, bad))


def _json_problem(e: ValueError) -> str:
    if isinstance(e, UnicodeDecodeError):
        return f"invalid UTF-8 bytes at byte {e.start} ({e.reason}); the file must be UTF-8"
    if isinstance(e, json.JSONDecodeError):
        return f"invalid JSON: {e.msg} (line {e.lineno}, column {e.colno})"
    return f"invalid JSON: {e}"


# -- dataset.yaml --------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DimensionSpec(_Strict):
    name: str
    scale: Literal["binary", "likert", "continuous"]
    min: float | None = None
    max: float | None = None
    definition: str = ""
    source: str = ""
    labels: dict[float, str] = {}

    def to_dimension(self) -> Dimension:
        lo, hi = self.min, self.max
        if self.scale == "binary":
            lo, hi = (0.0 if lo is None else lo), (1.0 if hi is None else hi)
        if lo is None or hi is None:
            raise ValueError(f"dimension {self.name!r}: a {self.scale} scale needs 'min' and 'max'")
        return Dimension(self.name, self.definition, self.scale, lo, hi, dict(self.labels), self.source)


class DatasetMetadata(_Strict):
    name: str | None = None
    pretty_name: str | None = None
    license: str | None = None
    citation: str | None = None
    homepage: str | None = None
    description: str | None = None
    tags: list[str] | None = None
    languages: list[str] | None = None
    dimensions: list[DimensionSpec] = []

    @classmethod
    def load(cls, path: Path) -> tuple[DatasetMetadata, tuple[Dimension, ...]]:
        """Parse and check ``dataset.yaml``; a problem is a ValueError naming the file and the key."""
        try:
            meta = cls.model_validate(yaml.safe_load(path.read_text("utf-8")) or {})
            dims = tuple(d.to_dimension() for d in meta.dimensions)
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "<top level>"
            raise ValueError(f"{path}: key {where!r}: {err['msg']}") from None
        except (yaml.YAMLError, ValueError) as e:
            raise ValueError(f"{path}: {e}") from None
        names = [d.name for d in dims]
        if dupes := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"{path}: dimension(s) declared twice: {dupes}")
        return meta, dims


# -- the builder ---------------------------------------------------------------------------------


class CommonSchemaBuilder(Builder):
    """Builds a dataset from common-schema JSONL / JSON / Parquet files (one file per config).

    ``cache_dir`` is passed to :func:`datasets.load_dataset` for ``hub:`` sources.
    """

    name = "common"
    version = "1.0.0"
    pretty_name = "Common-schema dataset"
    description = "A dialogue-evaluation dataset supplied in the dialeval-harness common schema."
    tags: tuple[str, ...] = ("dialogue-evaluation", "human-annotations")
    #: source used when none is given (None: --source is required)
    default_source: str | None = None
    #: headline dimension of records that omit ``dimension`` (None: the field is required)
    default_dimension: str | None = None
    #: language codes a record may have (None: any ISO 639 code)
    allowed_languages: tuple[str, ...] | None = None
    #: appended to the error when a ``hub:`` source cannot be loaded
    hub_hint: str = ""

    def __init__(self, *, cache_dir: str | os.PathLike[str] | None = None) -> None:
        self._cache_dir = cache_dir
        self._reset()

    def _reset(self) -> None:
        """Back to the class defaults (a previous build's dataset.yaml must not leak into this one)."""
        cls = type(self)
        for key in (*_METADATA_KEYS, "tags", "dimensions", "allowed_languages"):
            setattr(self, key, getattr(cls, key))
        self.dataset_name: str | None = None
        self._metadata_sha: str | None = None
        self._tables: dict[str, SourceTable] = {}

    def build_options(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self._metadata_sha:
            out.update(dataset_name=self.dataset_name, dataset_yaml_sha256=self._metadata_sha)
        return out

    def normalize_languages(self, languages: Any) -> tuple[str, ...]:
        """ISO 639 codes or language names (comma-separated or repeated); None / empty = all."""
        from harness.languages import language

        raw = [languages] if isinstance(languages, str) else list(languages or [])
        out: list[str] = []
        for part in (p.strip() for r in raw for p in str(r).split(",")):
            if not part:
                continue
            try:
                code = part if _LANG_RE.match(part) else language(part).code
            except KeyError as e:
                raise ValueError(str(e).strip("\"'")) from None
            out.append(code)
        return tuple(dict.fromkeys(out))

    # -- sources ---------------------------------------------------------------------------------
    def resolve_sources(self, source: str | os.PathLike[str] | None, warnings: list[str]) -> list[SourceFile]:
        self._reset()
        source = source if source is not None else self.default_source
        if source is None:
            raise SourceUnavailableError(
                f"{self.name}: --source is required (a directory of <config>.jsonl / .json / .parquet "
                "common-schema files, one such file, or hub:org/name[@revision])"
            )
        text = str(source)
        if text.startswith("hub:"):
            files = [(p, f"{text}/{p.name}") for p in self._fetch_hub(text[4:])]
        else:
            root = Path(source).expanduser()
            if not root.exists():
                raise SourceUnavailableError(f"{self.name}: source {root} does not exist")
            if root.is_file() and root.suffix.lower() not in FORMATS:
                raise ValueError(f"{self.name}: {root}: not a .jsonl / .json / .parquet file")
            paths = [root] if root.is_file() else sorted(root.iterdir())
            keep = [p for p in paths if p.is_file() and p.suffix.lower() in FORMATS and p.name[0] != "."]
            files = [(p, str(p.resolve())) for p in keep]
            meta = (root.parent if root.is_file() else root) / METADATA_FILE
            if meta.is_file():
                self._apply_metadata(*DatasetMetadata.load(meta), meta, warnings)
                self._metadata_sha = hashlib.sha256(meta.read_bytes()).hexdigest()
        out = []
        for path, origin in files:
            t = SourceTable(path).read()
            if t.error is None and not t.rows:
                warnings.append(f"{self.name}: {path.name} holds no record; config {path.stem!r} not built")
                continue
            self._tables[path.stem] = t
            out.append(SourceFile(path.stem, t.level, path, origin))
        if not out:
            raise SourceUnavailableError(
                f"{self.name}: no <config>.jsonl / .json / .parquet file with records in {source}"
            )
        return out

    def _apply_metadata(
        self, meta: DatasetMetadata, dims: tuple[Dimension, ...], path: Path, warnings: list[str]
    ) -> None:
        for key in _METADATA_KEYS:
            if (value := getattr(meta, key)) is not None:
                setattr(self, key, value)
        if meta.name:
            self.dataset_name = meta.name
            self.pretty_name = meta.pretty_name or meta.name
        if meta.tags is not None:
            self.tags = tuple(meta.tags)
        if meta.languages is not None:
            bad = [lang for lang in meta.languages if not _LANG_RE.match(lang)]
            if bad:
                raise ValueError(f"{path}: key 'languages': {bad} are not ISO 639 codes")
            self.allowed_languages = tuple(meta.languages)
        self.dimensions = dims

    def _fetch_hub(self, ref: str) -> list[Path]:
        """``org/name[@revision]`` (or a local dataset directory) -> one Parquet file per config/split."""
        import datasets
        import pyarrow.parquet as pq

        from harness.cache import default_home

        repo, _, revision = ref.partition("@")
        try:
            names = datasets.get_dataset_config_names(repo, revision=revision or None)
            loaded = {
                c: datasets.load_dataset(repo, c, revision=revision or None, cache_dir=self._cache_dir)
                for c in names
            }
        except Exception as e:  # offline, unknown or gated repo, not loadable ...
            msg = f"{self.name}: could not load hub:{ref}: {type(e).__name__}: {e}"
            raise SourceUnavailableError(msg + self.hub_hint) from e
        out = default_home() / "imports" / "common-hub" / re.sub(r"[^\w.-]+", "_", ref).strip("_")[-100:]
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        paths = []
        for config, dd in loaded.items():
            splits = {"train": dd} if isinstance(dd, datasets.Dataset) else dict(dd)
            for split, ds in splits.items():
                name = config if len(splits) == 1 else f"{config}-{split}"
                name = split if (len(names) == 1 and config == "default") else name
                pq.write_table(ds.with_format("arrow")[:], path := out / f"{name}.parquet")
                paths.append(path)
        return paths

    # -- reading ---------------------------------------------------------------------------------
    def read_config(self, src: SourceFile, languages: tuple[str, ...], warnings: list[str]) -> ConfigData:
        t = self._tables[src.config]
        if t.error is not None:
            self.invalid(t.error)  # with skip_invalid the whole file is skipped
        valid: list[dict[str, Any]] = []
        first: dict[str, int] = {}
        computed: Counter[str] = Counter()
        for rowno, obj, bad in t.rows:
            try:
                if bad is not None or obj is None:  # a row has its record or its problem
                    raise t.err(rowno, *(bad or ("<record>", "no record")))
                rec = self._record(t, rowno, obj, src.config)
                if rec["id"] in first:
                    problem = f"duplicate id {rec['id']!r} (first on {t.row_label} {first[rec['id']]})"
                    raise t.err(rowno, "id", problem)
            except DataValidationError as err:
                self.invalid(err)  # raises, or records the skip; the row is left out
                continue
            first[rec["id"]] = rowno
            valid.append(rec)
        scales = self.dimensions or _inferred_scales(valid)
        records = [r for r in valid if not languages or r["language"] in languages]
        for rec in records:
            if not rec["aggregates"]:
                rec["aggregates"] = aggregates_for(rec["labels"], scales)
                computed["aggregates"] += bool(rec["aggregates"])
            if rec["rating"] is None:
                head = [x["value"] for x in rec["labels"] if x["dimension"] == rec["dimension"]]
                head = [v for v in head if v is not None]
                rec["rating"] = sum(head) / len(head) if head else None
                computed["rating"] += rec["rating"] is not None
        if not self.dimensions and computed["aggregates"]:
            maxima = ", ".join(f"{d.name} ≤ {d.max:g}" for d in scales)
            warnings.append(
                f"{src.config}: no {METADATA_FILE} dimension table: labels were not checked, and the computed "
                f"`aggregate` takes the largest label seen as each dimension's maximum ({maxima})"
            )
        if not records:
            warnings.append(f"{src.config}: no record was read (all rows skipped or filtered out)")
        if unrated := sum(r["rating"] is None for r in records):
            warnings.append(f"{src.config}: {unrated} record(s) have no rating (no label of their dimension)")
        heads = Counter(r["dimension"] for r in records)
        extra: dict[str, Any] = {
            "file": src.path.name,
            "format": t.kind,
            "headline": heads.most_common(1)[0][0] if heads else self.default_dimension,
            "headlines": dict(heads),
            "label_dimensions": dict(Counter(x["dimension"] for r in records for x in r["labels"])),
            "annotators": sorted({x["annotator"] for r in records for x in r["labels"]}),
            "computed": dict(computed),
        }
        return ConfigData(src.config, t.level, records, None, extra["headline"], None, src, extra)

    def _record(self, t: SourceTable, rowno: int, obj: dict[str, Any], config: str) -> dict[str, Any]:
        level = obj.get("level")
        if level not in LEVELS:
            what = "missing" if level is None else f"{level!r} is not a level"
            raise t.err(rowno, "level", f"{what}; every record is 'turn' or 'dialogue' level")
        if level != t.level:
            raise t.err(
                rowno,
                "level",
                f"{level!r} record in a file of {t.level}-level records ({t.row_label} {t.level_row} is "
                f"{t.level}); all rows of a file must share one level: split it into one file per level",
            )
        features = FEATURES_BY_LEVEL[level]
        rec = {k: v for k, v in obj.items() if v is not None or k in features}  # nulls of other levels
        if rec.get("dataset") is None:
            rec["dataset"] = config
        if self.default_dimension and rec.get("dimension") is None:
            rec["dimension"] = self.default_dimension
        for key in ("labels", "aggregates"):
            if rec.get(key) is None:
                rec[key] = []
        rec = complete(rec, level)
        try:
            _validate_record(rec, level, self.dimension_map(), file=str(t.path), row=rowno)
        except SchemaError as e:
            problem = {"Field required": "required field is missing"}.get(e.problem, e.problem)
            if problem == "Extra inputs are not permitted":
                problem = f"not a field of {level}-level common-schema records"
            raise t.err(rowno, e.column, problem) from None
        lang = rec["language"]
        if self.allowed_languages is not None and lang not in self.allowed_languages:
            allowed = ", ".join(self.allowed_languages)
            raise t.err(rowno, "language", f"{lang!r} is not a language of this dataset ({allowed})")
        rec["labels"] = [
            {**x, "value": None if x["value"] is None else float(x["value"])} for x in rec["labels"]
        ]
        rec["rating"] = None if rec["rating"] is None else float(rec["rating"])
        return rec

    # -- card ------------------------------------------------------------------------------------
    def card_sections(self, configs: list[ConfigData], languages: tuple[str, ...]) -> list[str]:
        out = [
            "## Configs and dimensions",
            "",
            "| config | file | level | rows | headline | labelled dimensions (labels) | annotators |",
            "|---|---|---|---:|---|---|---:|",
        ]
        for c in configs:
            x = c.extra
            dims = ", ".join(f"`{d}` ({n})" for d, n in x["label_dimensions"].items()) or "—"
            out.append(
                f"| `{c.name}` | {x['file']} | {c.level} | {c.rows} | `{x['headline']}` | {dims} | "
                f"{len(x['annotators'])} |"
            )
        note = (
            "Labels are checked against the dimension table above"
            + (f" (declared in `{METADATA_FILE}`)." if self._metadata_sha else ".")
            if self.dimensions
            else f"No dimension table (no `{METADATA_FILE}`): labels were not checked against scales."
        )
        computed = {k: sum(c.extra["computed"].get(k, 0) for c in configs) for k in ("aggregates", "rating")}
        note += (
            f" Computed by the builder where the source left them out: aggregates of {computed['aggregates']} "
            f"and ratings of {computed['rating']} record(s)."
        )
        return [*out, "", note, ""]


def _inferred_scales(records: list[dict[str, Any]]) -> tuple[Dimension, ...]:
    """Without a dimension table: one continuous scale per labelled dimension, 0 (or the lowest
    label) .. the largest label seen."""
    seen: dict[str, list[float]] = {}
    for lab in (lab for r in records for lab in r["labels"]):
        seen.setdefault(lab["dimension"], []).extend([] if lab["value"] is None else [lab["value"]])
    lims = {name: (min([0.0, *v]), max([1.0, *v])) for name, v in seen.items()}
    return tuple(Dimension(n, "(inferred scale)", "continuous", lo, hi) for n, (lo, hi) in lims.items())

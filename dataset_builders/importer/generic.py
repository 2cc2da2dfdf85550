"""A generic importer for dialogue-evaluation benchmarks whose files users bring (ComperDial, DSTC11
track 4, FED, MEDAL, in-house data): CSV / TSV / JSONL / JSON (an array of objects) / Parquet files,
or a Hugging Face dataset (``hub:org/name[@revision]``, loaded with :func:`datasets.load_dataset`),
plus a small YAML *mapping* from the source columns into the common schema (:mod:`.schema`).

>>> GenericImporter("comperdial").build("path/to/ComperDial", "out")  # doctest: +SKIP

The mapping format is documented in ``dataset_builders/importer/mappings/README.md``, next to the shipped
mappings (``comperdial``, ``dstc11-track4``). A bad source row is reported through
:meth:`Builder.invalid` naming the SOURCE file, the 1-based data row (JSONL: line; JSON: record)
and the source column; with ``skip_invalid=True`` it becomes a counted skip in the manifest.
Odd cells (labels, fragment, blank and repeated header rows) follow :mod:`harness.data.cells`.
"""

from __future__ import annotations

import csv
import fnmatch
import hashlib
import io
import json
import math
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from dataset_builders.aggregate import aggregates_for
from dataset_builders.base import Builder
from dataset_builders.importer.hub import fetch_hub
from dataset_builders.importer.mapping import (  # noqa: F401  (re-exported)
    _LANG_RE,
    DEFAULT_SPEAKERS,
    FORMAT_BY_SUFFIX,
    MAPPINGS_DIR,
    ConfigSpec,
    FieldSpec,
    LabelSpec,
    LongLabelSpec,
    MappingError,
    MappingSpec,
    TextSpec,
    _listify,
)
from dataset_builders.importer.messages import parse_messages
from dataset_builders.importer.selection import empty_selection, language_code, qualify_ids, selected
from dataset_builders.importer.utterances import (
    ID_SUFFIX_KEY,
    METADATA_KEY,
    annotation_records,
    build_rows,
    file_vars,
    utterance_features,
)
from dataset_builders.records import ConfigData, SourceFile
from harness.data.cells import CellKind, fragment, is_blank, is_repeated_header, read_label, sniff_delimiter
from harness.data.schema import DataValidationError, SourceUnavailableError, dimension_table

IMPORTER_VERSION = "1.1.0"  # 1.1: utterance layouts, language-qualified ids, metadata column
_BAD = re.compile("[\udc80-\udcff]")  # undecodable bytes, as decoded by the "surrogateescape" handler


# -- reading source files ------------------------------------------------------------------------


class _Table:
    """One source file: ``rows`` are (row number, flattened dict); ``bad`` maps a row number to a
    (column, problem) found while reading it (undecodable bytes, a wrong field count ...)."""

    def __init__(self, path: Path, kind: str) -> None:
        self.path = path
        self.columns: list[str] = []
        self.row_label = {"csv": "row", "tsv": "row", "parquet": "row", "jsonl": "line"}.get(kind, "record")
        self.column_label = "column" if self.row_label == "row" else "field"
        self.rows: list[tuple[int, dict[str, Any]]] = []
        self.bad: dict[int, tuple[str, str]] = {}
        self.odd_rows: list[tuple[int, CellKind, str]] = []

    def error(self, row: int | str, column: str, problem: str) -> DataValidationError:
        labels = {"row_label": self.row_label, "column_label": self.column_label}
        return DataValidationError(self.path, row, column, problem, **labels)


def _flatten(obj: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested objects become dotted keys (``annotations.Overall``); lists are kept as they are."""
    out: dict[str, Any] = {}
    for k, v in obj.items():
        out.update(_flatten(v, f"{prefix}{k}.") if isinstance(v, dict) and v else {f"{prefix}{k}": v})
    return out


def read_table(path: Path, kind: str, encoding: str) -> _Table:
    """Read a CSV / TSV / JSONL / JSON (array of objects) / Parquet file. Text is decoded strictly:
    undecodable bytes mark their row as bad, naming the column and the byte offset in the file."""
    t = _Table(path, kind)
    if kind == "parquet":
        import pyarrow.parquet as pq

        t.rows = [(i, _flatten(r)) for i, r in enumerate(pq.read_table(path).to_pylist(), start=1)]
        t.columns = list(dict.fromkeys(k for _, r in t.rows for k in r))
        return t
    data = path.read_bytes()
    utf8 = encoding.lower().replace("_", "-") in ("utf-8", "utf8")
    bom = 3 if utf8 and data.startswith(b"\xef\xbb\xbf") else 0
    text = data[bom:].decode(encoding, "surrogateescape")
    marks, seen = [m.start() for m in _BAD.finditer(text)], 0

    def check(rowno: int, fields: dict[str, Any], raw: str) -> None:
        nonlocal seen
        if n_bad := len(_BAD.findall(raw)):  # bad bytes in this row
            col = next((k for k, v in fields.items() if _BAD.search(f"{k}{v}")), "<bytes>")
            off = bom + len(text[: marks[seen]].encode(encoding, "surrogateescape"))
            byte = text[marks[seen]].encode(encoding, "surrogateescape")
            why = f"invalid {encoding} bytes at byte offset {off} ({byte!r}); the file mixes encodings?"
            t.bad.setdefault(rowno, (col, why + " (set 'encoding:' in the mapping)"))
            seen += n_bad

    if kind in ("csv", "tsv"):
        csv.field_size_limit(2**31 - 1)  # long dialogues exceed the 128 KiB default
        sep = "\t" if kind == "tsv" else sniff_delimiter(text.split("\n", 1)[0])
        records = list(csv.reader(io.StringIO(text, newline=""), delimiter=sep))
        if not records:
            raise t.error("header", "<header>", "empty file (no header)")
        t.columns = [c.strip() for c in records[0]]
        check(0, dict.fromkeys(t.columns, ""), "".join(records[0]))
        if 0 in t.bad:
            raise t.error("header", *t.bad[0])
        for i, rec in enumerate(records[1:], start=1):
            if is_blank(rec) or is_repeated_header(rec, records[0]):
                t.odd_rows.append((i, "blank_row" if is_blank(rec) else "repeated_header", sep.join(rec)))
            elif any(f.strip() for f in rec):
                t.rows.append((i, row := dict(zip(t.columns, rec, strict=False))))
                check(i, row, "".join(rec))
                if (n := len(rec)) != len(t.columns):
                    col = t.columns[n] if n < len(t.columns) else f"<field {len(t.columns) + 1}>"
                    t.bad.setdefault(i, (col, f"row has {n} fields, the header has {len(t.columns)}"))
        return t
    if kind == "jsonl":
        items = [(n, None, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    else:
        try:
            array = json.loads(text)
        except json.JSONDecodeError as e:
            where = f"line {e.lineno}, column {e.colno}"
            raise t.error("header", "<json>", f"invalid JSON: {e.msg} ({where})") from None
        if not isinstance(array, list):
            raise t.error("header", "<json>", "expected a JSON array of objects at the top level")
        items = [(i, obj, json.dumps(obj, ensure_ascii=False)) for i, obj in enumerate(array, start=1)]
    for n, obj, raw in items:
        if obj is None:
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as e:
                obj, t.bad[n] = {}, ("<json>", f"invalid JSON: {e.msg} at column {e.colno}")
        if not isinstance(obj, dict):
            obj, t.bad[n] = {}, ("<json>", f"expected a JSON object, got {type(obj).__name__}")
        t.rows.append((n, row := _flatten(obj)))
        check(n, row, raw)
    t.columns = list(dict.fromkeys(k for _, r in t.rows for k in r))
    return t


# -- the builder ---------------------------------------------------------------------------------


class GenericImporter(Builder):
    """Imports a benchmark from user-supplied files through a YAML column mapping.

    ``mapping`` is a YAML path, a dict, or the name of a shipped mapping (``comperdial``,
    ``dstc11-track4``); the instance takes its dataset name, card metadata and dimension table from
    it. ``cache_dir`` is passed to :func:`datasets.load_dataset` for ``hub:`` sources.
    """

    name = "import"
    version = IMPORTER_VERSION

    def __init__(self, mapping: str | os.PathLike[str] | dict[str, Any], *, cache_dir: Any = None) -> None:
        self.spec, self.mapping_origin = MappingSpec.load(mapping)
        s = self.spec
        self.name, self.version, self.pretty_name = s.name, s.version, s.pretty_name or s.name
        self.license, self.citation, self.homepage = s.license, s.citation, s.homepage
        self.description, self.tags = s.description, tuple(s.tags)
        self.dimensions = tuple(d.to_dimension() for d in s.dimensions)
        self._dims = {d.name: d for d in self.dimensions}
        self._configs = {c.name: c for c in s.configs}
        self._files: dict[str, list[tuple[Path, str]]] = {}
        self._cache_dir = cache_dir
        self._root, self._duplicates, self._present = Path("."), 0, Counter[str]()

    # -- sources ---------------------------------------------------------------------------------
    def resolve_sources(self, source: str | os.PathLike[str] | None, warnings: list[str]) -> list[SourceFile]:
        if source is None:
            raise SourceUnavailableError(f"{self.name}: --source is required (a directory, a file, hub:ID)")
        hub = str(source) if str(source).startswith("hub:") else None
        root = fetch_hub(self.name, hub[4:], self._cache_dir) if hub else Path(source).expanduser()
        if not root.exists():
            raise SourceUnavailableError(f"{self.name}: source {root} does not exist")
        self._root = root
        self._present.clear()
        self._files = {}
        for cfg in self.spec.configs:
            if root.is_file():
                names = [Path(p).name for p in cfg.files]
                hit = len(self._configs) == 1 or any(fnmatch.fnmatch(root.name, n) for n in names)
                paths = [root] if hit else []
            else:
                paths = sorted({p for pat in cfg.files for p in root.glob(pat) if p.is_file()})
            if paths:
                self._files[cfg.name] = [(p, f"{hub}/{p.name}" if hub else str(p.resolve())) for p in paths]
            else:
                warnings.append(f"{self.name}: config {cfg.name!r}: no file matches {cfg.files}; not built")
        if not self._files:
            wanted = "; ".join(f"{c.name}: {c.files}" for c in self.spec.configs)
            raise SourceUnavailableError(f"{self.name}: no source file in {source} for any config ({wanted})")
        return [
            SourceFile(n, self._configs[n].level, fs[0][0], fs[0][1])
            if len(fs) == 1
            else SourceFile(n, self._configs[n].level, fs[0][0].parent, str(root), parts=tuple(fs))
            for n, fs in self._files.items()
        ]

    def build_options(self) -> dict[str, Any]:
        spec = json.dumps(self.spec.model_dump(mode="json"), sort_keys=True).encode("utf-8")
        sha = hashlib.sha256(spec).hexdigest()
        return {
            "importer": IMPORTER_VERSION,
            "mapping": self.spec.name,
            "mapping_sha256": sha,
        }

    def normalize_languages(self, languages: Any) -> tuple[str, ...]:
        """Any ISO 639 code (or a language name the harness knows); None / empty = every language."""
        from harness.languages import language

        parts = [p.strip() for raw in _listify(languages or []) for p in str(raw).split(",") if p.strip()]
        return tuple(dict.fromkeys(p if _LANG_RE.match(p) else language(p).code for p in parts))

    def _check_header(self, t: _Table, cfg: ConfigSpec) -> dict[int, list[tuple[str, str]]]:
        """Mapped columns missing from the file are a header error; returns, per wide label spec,
        its (column, annotator) pairs."""
        wide: dict[int, list[tuple[str, str]]] = {}
        for i, lab in enumerate(cfg.labels):
            wide[i] = [(lab.column, lab.annotator or lab.column)] if lab.column else []
            for pat in lab.columns or []:
                rx = re.compile(fnmatch.translate(pat).replace(".*", "(.*)", 1))
                for col in t.columns:
                    if m := rx.match(col):
                        suffix = (m.groups() and m[1]) or col
                        ann = suffix if lab.annotator_from == "column_suffix" else col
                        wide[i].append((col, f"{lab.annotator or ''}{ann}"))
            if not wide[i]:
                raise t.error("header", (lab.columns or [""])[0], f"no column matches {lab.columns}")
        for col in cfg.columns():
            if col not in t.columns and not any(c.startswith(f"{col}.") for c in t.columns):
                shown = ", ".join(t.columns[:30]) + (" ..." if len(t.columns) > 30 else "")
                raise t.error("header", col, f"missing column {col!r} required by the mapping ({shown})")
        return wide

    # -- parsing ---------------------------------------------------------------------------------
    def read_config(self, src: SourceFile, languages: tuple[str, ...], warnings: list[str]) -> ConfigData:
        cfg = self._configs[src.config]
        records: dict[tuple[str, str], dict[str, Any]] = {}
        first: dict[Any, str] = {}  # (id, language) / (id, annotator, dimension) -> "row N of FILE"
        for path, _ in self._files[src.config]:
            kind = cfg.format or FORMAT_BY_SUFFIX.get(path.suffix.lower(), "?")
            try:
                if kind == "?":
                    raise DataValidationError(path, "header", "<format>", "unknown file type; set 'format:'")
                t = read_table(path, kind, cfg.encoding or self.spec.encoding)
                if cfg.utterances is not None:
                    t = self._utterance_table(cfg, t, warnings)
                wide = self._check_header(t, cfg)
            except DataValidationError as err:
                self.invalid(err)  # a file-level problem: with skip_invalid the whole file is skipped
                continue
            for rowno, kind, raw in t.odd_rows:
                self.cells.record(path.name, rowno, "<row>", raw, kind)
            for rowno, row in t.rows:
                if rowno not in t.bad and (frag := fragment({k: _text(v) for k, v in row.items()})):
                    self.cells.record(path.name, rowno, *frag, "row_left_out")
                    continue
                try:
                    if rowno in t.bad:
                        raise t.error(rowno, *t.bad[rowno])
                    self._read_row(cfg, t, rowno, row, wide, records, first)
                except DataValidationError as err:
                    self.invalid(err)  # raises, or records the skip; the row is left out
        if self._duplicates:
            warnings.append(
                f"{cfg.name}: {self._duplicates} identical record(s) in more than one file, kept once"
            )
            self._duplicates = 0
        every = list(records.values())
        if qualify_ids(every):
            warnings.append(f"{cfg.name}: ids are shared across languages; record ids are <id>-<language>")
        out = [r for r in every if selected(r["language"], languages)]
        self._present.update(r["language"] for r in every)
        if every and not out:
            warnings.append(empty_selection(cfg.name, languages, Counter(r["language"] for r in every)))
        for rec in out:
            rec["aggregates"] = self._aggregates(rec["labels"])
            head = [x["value"] for x in rec["labels"] if x["dimension"] == cfg.headline]
            rec["rating"] = sum(head) / len(head) if head else None
        if not out:
            warnings.append(f"{cfg.name}: no record was read (all rows skipped or filtered out)")
        if unrated := sum(r["rating"] is None for r in out):
            warnings.append(f"{cfg.name}: {unrated} record(s) have no {cfg.headline!r} label (null rating)")
        if (exp := cfg.expected_instances) is not None and (got := len({r["item_id"] for r in out})) != exp:
            warnings.append(f"{cfg.name}: {got} instances (item ids) read, the mapping expects {exp}")
        # expected_instances stays out of ConfigData: base.build assumes one row per item and language
        extra = {"title": cfg.title, "headline": cfg.headline, "expected_instances": exp}
        data = ConfigData(cfg.name, cfg.level, out, None, cfg.headline, cfg.title, src, extra)
        if cfg.utterances is not None:
            data.features, data.column_docs = utterance_features(cfg.level)
        return data

    def _utterance_table(self, cfg: ConfigSpec, t: _Table, warnings: list[str]) -> _Table:
        """An utterance file (one row per utterance) as one row per dialogue and language."""
        fvars = file_vars(cfg, t.path)
        joined = None
        if cfg.annotations is not None:
            root = self._root if self._root.is_dir() else t.path.parent
            enc = cfg.encoding or self.spec.encoding
            joined = annotation_records(
                cfg.annotations, root, fvars, t.path, lambda p, k: read_table(p, k, enc)
            )
        out = _Table(t.path, "csv")
        out.rows, out.columns = build_rows(cfg, t, fvars, joined, warnings)
        return out

    def _read_row(
        self, cfg: ConfigSpec, t: _Table, rowno: int, row: dict, wide: dict, records: dict, first: dict
    ) -> None:
        where, ll = f"{t.row_label} {rowno} of {t.path.name}", cfg.long_labels
        base_id = self._field(cfg.id, t, rowno, row, "id", required=True)
        rid = base_id + str(row.get(ID_SUFFIX_KEY) or "")
        raw_lang = cfg.language or self._field(
            FieldSpec(column=cfg.language_column), t, rowno, row, "language"
        )
        if (lang := language_code(raw_lang)) is None:
            raise t.error(rowno, cfg.language_column or "language", f"{raw_lang!r} is not an ISO 639 code")
        labels = self._long_label(cfg, ll, t, rowno, row) if ll else []
        if ll and (rid, lang) in records:  # another label of a known item
            for lab in labels:
                if (key := (rid, lang, lab["annotator"], lab["dimension"])) in first:
                    raise t.error(
                        rowno, ll.annotator_column, f"duplicate label {key} (first on {first[key]})"
                    )
                first[key] = where
            records[(rid, lang)]["labels"] += labels
            return
        rec: dict[str, Any] = {
            "id": rid,
            "item_id": base_id,
            "dataset": cfg.name,
            "language": lang,
            "level": cfg.level,
        }
        for name in ("item_id", "dialogue_id", "system", "scene", "persona"):
            if (spec := getattr(cfg, name)) is not None:
                rec[name] = self._field(spec, t, rowno, row, name, required=name == "item_id") or None
        if cfg.level == "turn":
            rec["context"] = parse_messages(cfg.context, t, rowno, row, "turn") if cfg.context else []
            if cfg.response is None:  # a turn-level config has one (ConfigSpec's check)
                raise MappingError(f"{cfg.name}: a turn-level config needs 'response'")
            rec["response"] = self._field(cfg.response, t, rowno, row, "response", required=True)
            if cfg.reference is not None:
                rec["reference"] = self._field(cfg.reference, t, rowno, row, "reference") or None
        else:
            if cfg.turns is None:  # a dialogue-level config has them (ConfigSpec's check)
                raise MappingError(f"{cfg.name}: a dialogue-level config needs 'turns'")
            rec["turns"] = parse_messages(cfg.turns, t, rowno, row, "dialogue")
        for i, wide_spec in enumerate(cfg.labels):
            labels += self._wide_labels(wide_spec, wide[i], cfg, t, rowno, row)
        if METADATA_KEY in row:
            rec["metadata"] = json.dumps(row[METADATA_KEY], ensure_ascii=False, sort_keys=True)
        rec["dimension"], rec["labels"] = cfg.headline, labels
        if (rkey := (rid, lang)) in records:
            if cfg.utterances is not None and records[rkey] == rec:  # an original in two language pairs
                self._duplicates += 1
                return
            raise t.error(rowno, cfg.id.column or "id", f"duplicate id {rid!r} (first on {first[rkey]})")
        first.update({(rid, lang, x["annotator"], x["dimension"]): where for x in labels if ll})
        first[rkey], records[rkey] = where, rec

    def _field(
        self, spec: FieldSpec, t: _Table, rowno: int, row: dict, name: str, required: bool = False
    ) -> str:
        col = spec.column or name
        if spec.value is not None:
            val = spec.value
        elif spec.template is not None:
            extra = {"__row__": str(rowno), "__file__": t.path.stem}
            val = re.sub(r"\{([^{}]+)\}", lambda m: extra.get(m[1]) or _text(row.get(m[1])), spec.template)
        else:
            val = _text(row.get(spec.column) if spec.column in row else _nested(row, spec.column or ""))
        if spec.pattern is not None and val:
            if (m := re.search(spec.pattern, val)) is None:
                raise t.error(rowno, col, f"{val!r} does not match the pattern {spec.pattern!r} of {name!r}")
            val = (m[1] if m.groups() else m[0]).strip()
        if (required or name == "language") and not val:
            raise t.error(rowno, col, f"empty {name}")
        return val

    def _wide_labels(
        self, lab: LabelSpec, cols: list, cfg: ConfigSpec, t: _Table, rowno: int, row: dict
    ) -> list:
        out: list[dict[str, Any]] = []
        for col, ann in cols:
            raw = row.get(col)
            if isinstance(raw, str) and raw.strip()[:1] == "[" and raw.strip()[-1:] == "]":
                try:
                    raw = json.loads(raw)  # a JSON list in a CSV cell: one value per annotator
                except json.JSONDecodeError:
                    pass
            prefix = lab.annotator or "annotator"
            named = (
                [(f"{prefix}{i}", v) for i, v in enumerate(raw, 1)] if isinstance(raw, list) else [(ann, raw)]
            )
            for name, v in named:
                value, text = self._value(v, lab.value_map, cfg, lab.dimension, t, rowno, col)
                if value is not None:
                    out.append({"annotator": name, "dimension": lab.dimension, "value": value, "raw": text})
        if lab.required and not out:
            empty = ", ".join(c for c, _ in cols)
            raise t.error(
                rowno, cols[0][0], f"missing label for dimension {lab.dimension!r} (empty: {empty})"
            )
        return out

    def _long_label(
        self, cfg: ConfigSpec, ll: LongLabelSpec, t: _Table, rowno: int, row: dict
    ) -> list[dict[str, Any]]:
        if not (ann := _text(row.get(ll.annotator_column))):
            raise t.error(rowno, ll.annotator_column, "missing annotator (empty cell)")
        dim = ll.dimension
        if ll.dimension_column is not None:
            aspect = _text(row.get(ll.dimension_column))
            if (dim := ll.dimension_map.get(aspect, aspect)) is None:  # mapped to null: ignored
                return []
            if dim not in self._dims:
                raise t.error(
                    rowno, ll.dimension_column, f"unknown dimension {aspect!r}; map it in 'dimension_map'"
                )
        if dim is None:  # without a dimension column, LongLabelSpec requires 'dimension'
            raise MappingError(f"{cfg.name}: long_labels need 'dimension' or 'dimension_column'")
        value, text = self._value(row.get(ll.value_column), ll.value_map, cfg, dim, t, rowno, ll.value_column)
        if value is None and text:  # unreadable: accounted for by _value, the label is missing
            return []
        if value is None:
            raise t.error(rowno, ll.value_column, f"missing label value (annotator {ann!r})")
        return [{"annotator": ann, "dimension": dim, "value": value, "raw": text}]

    def _value(
        self, raw: Any, vmap: Any, cfg: ConfigSpec, dim: str, t: _Table, rowno: int, col: str
    ) -> tuple:
        """A label cell -> (value, raw text); (None, None) when empty; else value_map, else read_label."""
        text = (str(raw).lower() if isinstance(raw, bool) else _text(raw)).strip()
        if not text:
            return None, None
        table = {k.strip().casefold(): v for k, v in {**cfg.value_map, **(vmap or {})}.items()}
        if text.casefold() in table:
            value = float(table[text.casefold()])
            if problem := self._dims[dim].problem(value):
                raise t.error(rowno, col, f"value_map gives {value:g} for {text!r}: {problem}")
            return value, text
        got = read_label(text, self._dims[dim])  # a JSON true/false is "true"/"false": unreadable
        if got.kind is not None:
            hint = f"; value_map knows {sorted(table)}" if table else "; add a 'value_map' for it"
            self.cells.record(t.path.name, rowno, col, text, got.kind, got.problem + hint)
        return got.value, text

    def _aggregates(self, labels: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return aggregates_for(labels, self.dimensions)

    def empty_build_reason(self, languages: tuple[str, ...]) -> str:
        if languages and self._present and not any(selected(lang, languages) for lang in self._present):
            return empty_selection(self.name, languages, self._present)
        return super().empty_build_reason(languages)

    # -- card ------------------------------------------------------------------------------------
    def license_note(self) -> str:
        return (
            f"As declared by the `{self.spec.name}` mapping; the data keeps its original license and terms."
        )

    def card_sections(self, configs: list[ConfigData], languages: tuple[str, ...]) -> list[str]:
        origin = Path(self.mapping_origin).name
        out = [
            "## Import",
            "",
            f"Imported with the mapping `{self.spec.name}` v{self.spec.version} ({origin}).",
        ]
        if self.spec.source_layout:
            out += ["", "Source layout: " + " ".join(self.spec.source_layout.split())]
        out += ["", "### Dimensions", "", dimension_table(self.dimensions), ""]
        for c in configs:
            cfg = self._configs[c.name]
            cols = [f"`{lab.column or ', '.join(lab.columns or [])}` → {lab.dimension}" for lab in cfg.labels]
            cols += (
                [f"long format (annotator `{cfg.long_labels.annotator_column}`)"] if cfg.long_labels else []
            )
            out.append(f"- `{c.name}`: headline `{cfg.headline}`; labels: {'; '.join(cols)}")
        return [*out, ""]


def _nested(row: dict[str, Any], column: str) -> list[str] | None:
    """A JSON object flattened into ``column.KEY`` fields, as ``KEY: value`` lines (a dict-shaped
    persona ``{A: [...], B: [...]}`` -> ``A: ...`` / ``B: ...``); None when there is none."""
    keys = [k for k in row if k.startswith(f"{column}.")]
    lines = [f"{k[len(column) + 1 :]}: {s}" for k in keys for s in _text(row[k]).split("\n") if s]
    return lines or None


def _text(v: Any) -> str:
    """A cell as stripped text ('' for null / NaN); lists are joined with newlines."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, list):
        return "\n".join(s for x in v if (s := _text(x)))
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v).strip()

"""Resolve the dataset a task runs on, and load its items with ``datasets.load_dataset``.

Three ways in:

* ``dataset=`` a registered version ``name@X.Y.Z`` (``harness datasets ls``), a built dataset
  directory (Parquet + README.md card) or a Hub repo id, loaded with
  ``load_dataset(path_or_id, config, revision=...)``;
* ``source=`` raw files for the task's builder: built once into
  ``$DIALEVAL_HOME/datasets/<builder>/<source-fingerprint>/`` (atomic) and reused;
* neither: the builder's default source (the embedded demo data, or the public files of the
  benchmark, downloaded once).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

from harness.cache import default_home
from harness.data.layout import CARD_NAME, MANIFEST_NAME, SPLIT, card_configs
from harness.jsontypes import JSONObject

log = logging.getLogger(__name__)


@dataclass
class DatasetHandle:
    builder: str
    location: str  # local directory or Hub repo id
    revision: str | None
    fingerprint: str | None
    source: str | None
    configs: list[str]
    warnings: list[str] = field(default_factory=list)
    #: the build manifest's ``odd_cells`` entry (:mod:`harness.data.cells`); empty when unknown
    odd_cells: JSONObject = field(default_factory=dict)
    #: What built the dataset, from its manifest: builder name and version, and for an imported
    #: dataset the importer version and its mapping (name, sha256); None when it has no manifest.
    built_by: JSONObject | None = None

    @property
    def is_local(self) -> bool:
        return Path(self.location).is_dir()

    def describe(self) -> JSONObject:
        return {
            "builder": self.builder,
            "location": self.location,
            "revision": self.revision,
            "fingerprint": self.fingerprint,
            "source": self.source,
            "configs": list(self.configs),
            "warnings": list(self.warnings),
            **({"built_by": self.built_by} if self.built_by else {}),
        }


def built_by(manifest: Mapping[str, object], task_builder: str) -> tuple[str, JSONObject]:
    """The builder name a dataset directory was built with (its manifest's, not the task's) and
    its provenance: builder version, and the importer and mapping of an imported dataset."""
    b = manifest.get("builder") or {}
    name = str(b.get("name") or task_builder) if isinstance(b, dict) else str(b)
    out: JSONObject = {"builder": name, "version": b.get("version") if isinstance(b, dict) else None}
    opts = manifest.get("options") or {}
    if isinstance(opts, Mapping) and ("importer" in opts or "mapping" in opts):
        out.update(
            importer=f"import@{opts.get('importer')}",
            mapping=opts.get("mapping"),
            mapping_sha256=opts.get("mapping_sha256"),
        )
    if name != task_builder:
        out["task_builder"] = task_builder
    return name, out


def _dir_fingerprint(path: Path) -> str:
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        h.update(str(f.relative_to(path) if path.is_dir() else f.name).encode() + b"\x00")
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def prepare_dataset(
    builder: str,
    *,
    source: str | Path | None = None,
    dataset: str | None = None,
    revision: str | None = None,
    show_progress: bool = True,
    strict: bool = False,
) -> DatasetHandle:
    """Locate (or build) the dataset a task runs on. A build from ``source`` handles odd source
    cells by the policy of :mod:`harness.data.cells`; with ``strict`` the first one is an error (a
    build cached earlier that holds odd cells is rebuilt strictly, so it fails the same way)."""
    if dataset is not None:
        p = Path(dataset)
        if not _is_dir(p) and _is_registry_ref(dataset):
            from harness.data.registry import DatasetRegistry

            registered = DatasetRegistry().resolve(dataset)  # verified: a modified version is refused
            p = registered.path
            revision = revision or registered.ref
        if _is_dir(p):
            from harness.data.registry import verify_if_registered

            verify_if_registered(p)  # a registered version given by its path is checked too
            manifest = p / MANIFEST_NAME
            built = json.loads(manifest.read_text()) if manifest.is_file() else None
            fp = built["fingerprint"] if built else _parquet_fingerprint(p)
            where = str(p.resolve())
            odd = dict((built or {}).get("odd_cells") or {})
            handle = DatasetHandle(builder, where, revision, fp, where, card_configs(p), odd_cells=odd)
            if built:
                handle.builder, handle.built_by = built_by(built, builder)
            return handle
        from datasets import get_dataset_config_names

        try:
            configs = get_dataset_config_names(dataset, revision=revision)
        except Exception as e:  # noqa: BLE001 - offline, unknown repo, bad id: one message, the way out
            raise FileNotFoundError(
                f"--dataset {dataset!r} is not a directory, not a registered version (NAME@X.Y.Z) and could not be "
                f"read from the Hub ({type(e).__name__}: {' '.join(str(e).split())[:300]})"
            ) from None
        return DatasetHandle(builder, dataset, revision, None, f"hub:{dataset}", list(configs))

    from harness.data.builders import get_builder

    b = get_builder(builder)
    if source is not None:
        src = Path(source).expanduser().resolve()
        if not src.exists():
            raise FileNotFoundError(f"dataset source {src} does not exist")
        key = hashlib.sha256(f"{b.name}\x00{b.version}\x00{_dir_fingerprint(src)}".encode()).hexdigest()[:16]
        source_desc = str(src)
    else:
        key = f"default-{b.version}"
        source_desc = None
    out = default_home() / "datasets" / b.name / key
    built = (out / MANIFEST_NAME).is_file()
    if built and strict:
        odd = json.loads((out / MANIFEST_NAME).read_text()).get("odd_cells")
        built = odd is not None and not odd.get("count")
    if not built:
        from harness.data.builders import build_dataset

        log.info("building dataset %s from %s into %s", b.name, source_desc or "its default source", out)
        build_dataset(b.name, source_desc, out, show_progress=show_progress, strict=strict)
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    return DatasetHandle(
        builder=b.name,
        location=str(out),
        revision=f"{b.name}@{b.version}",
        fingerprint=manifest.get("fingerprint"),
        source=source_desc or _manifest_source(manifest),
        configs=card_configs(out),
        warnings=list(manifest.get("warnings", [])),
        odd_cells=dict(manifest.get("odd_cells") or {}),
    )


def _is_dir(p: Path) -> bool:
    try:
        return p.is_dir()
    except (OSError, ValueError):  # a name the OS refuses (too long, NUL byte)
        return False


def _is_registry_ref(dataset: str) -> bool:
    """``name@X.Y.Z``, ``name@latest`` or a bare ``name``: a Hub id has a ``/`` (``namespace/name``),
    so anything else is looked up in the registry — and an unregistered one is an error saying how
    to build it, not a Hub lookup."""
    return "/" not in dataset and "\\" not in dataset


def _manifest_source(manifest: Mapping[str, object]) -> str | None:
    inputs = manifest.get("inputs") or manifest.get("sources") or []
    if isinstance(inputs, list) and inputs:
        first = inputs[0]
        if isinstance(first, dict):
            return str(first.get("url") or first.get("source") or first.get("path"))
    return None


def _parquet_fingerprint(p: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p.rglob("*.parquet")):
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def load_items(
    handle: DatasetHandle, config: str, *, languages: list[str] | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    """Rows of one config as dicts, filtered to ``languages``; ``limit`` = first N items per language."""
    return [row for batch in iter_items(handle, config, languages=languages, limit=limit) for row in batch]


#: rows converted to Python at a time by :func:`iter_items`
READ_BATCH = 1024


def iter_items(
    handle: DatasetHandle,
    config: str,
    *,
    languages: list[str] | None = None,
    limit: int | None = None,
    columns: list[str] | None = None,
    batch_size: int | None = None,
) -> Iterator[list[dict[str, Any]]]:
    """The rows of :func:`load_items`, in the same order, as lists of at most ``batch_size`` dicts:
    a local dataset's Parquet files are read record batch by record batch (memory holds one batch,
    whatever the size of the config); a Hub dataset goes through ``load_dataset``. ``columns``
    restricts the columns read (e.g. ``["language", "level"]`` to count rows); ``batch_size``
    defaults to :data:`READ_BATCH`."""
    keep = set(languages) if languages else None
    seen: dict[str, int] = {}
    for table in _arrow_batches(handle, config, columns, batch_size or READ_BATCH):
        if keep is not None:
            table = table.filter(pc.is_in(table["language"], value_set=pa.array(sorted(keep), pa.string())))
        if limit is not None:
            langs = table["language"].to_pylist()
            mask = []
            for lang in langs:
                n = seen.get(lang, 0)
                mask.append(n < limit)
                seen[lang] = n + 1
            table = table.filter(pa.array(mask, pa.bool_()))
        if table.num_rows:
            yield table.to_pylist()


@functools.lru_cache(maxsize=16)
def _card_configs(card: Path, mtime_ns: int) -> list[dict[str, Any]]:
    text = card.read_text(encoding="utf-8")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # a card's features make the YAML long
    meta = (yaml.load(text.split("---", 2)[1], Loader=loader) or {}) if text.startswith("---") else {}
    return list(meta.get("configs") or [])


def _config_files(location: Path, config: str) -> list[Path] | None:
    """The Parquet files of ``config``'s test split as the card declares them (None when the card
    says something this reader does not handle: then ``load_dataset`` reads the config)."""
    card = location / CARD_NAME
    entries = _card_configs(card, card.stat().st_mtime_ns)
    entry = next((c for c in entries if isinstance(c, dict) and c.get("config_name") == config), None)
    if entry is None:
        return None
    spec = entry.get("data_files")
    if isinstance(spec, list) and all(isinstance(d, dict) for d in spec):
        spec = [d.get("path") for d in spec if d.get("split") == SPLIT]
    patterns = [spec] if isinstance(spec, str) else spec
    if not patterns or not all(isinstance(p, str) for p in patterns):
        return None
    files = [f for p in patterns for f in sorted(location.glob(p))]
    if not files or any(f.suffix != ".parquet" for f in files):
        return None
    return files


def _arrow_batches(
    handle: DatasetHandle, config: str, columns: list[str] | None, batch_size: int
) -> Iterator[pa.Table]:
    location = Path(handle.location)
    files = _config_files(location, config) if handle.is_local else None
    if files is not None:
        for f in files:
            pf = pq.ParquetFile(f)
            names = set(pf.schema_arrow.names)
            cols = None if columns is None else [c for c in columns if c in names]
            for batch in pf.iter_batches(batch_size=batch_size, columns=cols):
                yield pa.Table.from_batches([batch])
        return
    from datasets import load_dataset

    ds = load_dataset(
        handle.location, config, split=SPLIT, revision=None if handle.is_local else handle.revision
    )
    if columns is not None:
        ds = ds.select_columns([c for c in columns if c in ds.column_names])
    yield from ds.with_format("arrow").iter(batch_size=batch_size)

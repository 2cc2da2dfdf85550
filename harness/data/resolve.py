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

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.cache import default_home
from harness.data.layout import MANIFEST_NAME, card_configs

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

    @property
    def is_local(self) -> bool:
        return Path(self.location).is_dir()

    def describe(self) -> dict[str, Any]:
        return {
            "builder": self.builder,
            "location": self.location,
            "revision": self.revision,
            "fingerprint": self.fingerprint,
            "source": self.source,
            "configs": self.configs,
            "warnings": self.warnings,
        }


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
) -> DatasetHandle:
    if dataset is not None:
        p = Path(dataset)
        if not _is_dir(p) and _is_registry_ref(dataset):
            from harness.data.registry import Registry

            registered = Registry().resolve(dataset)  # verified: a modified version is refused
            p = registered.path
            revision = revision or registered.ref
        if _is_dir(p):
            from harness.data.registry import verify_if_registered

            verify_if_registered(p)  # a registered version given by its path is checked too
            manifest = p / MANIFEST_NAME
            fp = (
                json.loads(manifest.read_text())["fingerprint"]
                if manifest.is_file()
                else _parquet_fingerprint(p)
            )
            return DatasetHandle(builder, str(p.resolve()), revision, fp, str(p.resolve()), card_configs(p))
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
    if not (out / MANIFEST_NAME).is_file():
        from harness.data.builders import build_dataset

        log.info("building dataset %s from %s into %s", b.name, source_desc or "its default source", out)
        build_dataset(b.name, source_desc, out, show_progress=show_progress)
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    return DatasetHandle(
        builder=b.name,
        location=str(out),
        revision=f"{b.name}@{b.version}",
        fingerprint=manifest.get("fingerprint"),
        source=source_desc or _manifest_source(manifest),
        configs=card_configs(out),
        warnings=list(manifest.get("warnings", [])),
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


def _manifest_source(manifest: dict[str, Any]) -> str | None:
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
    from datasets import load_dataset

    ds = load_dataset(
        handle.location, config, split="test", revision=None if handle.is_local else handle.revision
    )
    rows = ds.to_list()
    if languages:
        keep = set(languages)
        rows = [r for r in rows if r["language"] in keep]
    if limit is not None:
        seen: dict[str, int] = {}
        kept = []
        for r in rows:
            n = seen.get(r["language"], 0)
            if n < limit:
                kept.append(r)
                seen[r["language"]] = n + 1
        rows = kept
    return rows

"""Training data as versioned datasets in the harness's dataset registry.

:func:`register_training_data` writes examples (:class:`~finetune.data.selfsup.Example` or
:class:`~finetune.data.distill.InstructionExample`) as an immutable registry version with the
dataset-builder machinery (:class:`dataset_builders.base.Builder`): one Parquet file per config
(``train``, optionally ``test``), a README dataset card and ``build_manifest.json`` (inputs with
sha256, row counts, fingerprint, the registry release, plus ``training_data``: the example type,
per-config counts, the caller's source manifest — source reports, pair/label settings — and the
train/test split)::

    <registry>/<name>/<X.Y.Z>/README.md
                             build_manifest.json
                             train/test-00000-of-00001.parquet
                             test/test-00000-of-00001.parquet      (when given)

Each config is a table of its own (level ``table``; columns :data:`EXAMPLE_FEATURES` or
:data:`INSTRUCTION_FEATURES`), loadable with ``datasets.load_dataset(str(version_dir), "train",
split="test")`` (every config of a built dataset has the single split ``test``).
:func:`load_training_data` reads a config back into example objects.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datasets import Features

from dataset_builders.base import Builder
from dataset_builders.helpers import normalize_languages as _xdial_order
from dataset_builders.records import ConfigData, SourceFile
from finetune.data.distill import InstructionExample
from finetune.data.rows import (
    EXAMPLE_DOCS,
    EXAMPLE_FEATURES,
    INSTRUCTION_DOCS,
    INSTRUCTION_FEATURES,
    TrainingDataError,
    _config_summary,
    _example_type,
    _json,
    _licenses,
    _rows,
)
from finetune.data.selfsup import Example
from finetune.data.supervised import DialogueSplit

BUILDER_NAME = "finetune-data"
BUILDER_VERSION = "1.0.0"
TRAINING_KEY = "training_data"
CONFIGS: tuple[str, ...] = ("train", "test")

_TYPES: dict[str, tuple[type, Features, dict[str, str]]] = {
    "example": (Example, EXAMPLE_FEATURES, EXAMPLE_DOCS),
    "instruction": (InstructionExample, INSTRUCTION_FEATURES, INSTRUCTION_DOCS),
}


@dataclass(frozen=True)
class RegisteredDataset:
    name: str
    version: str
    path: Path
    configs: dict[str, int]  # config -> rows
    fingerprint: str

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def manifest(self) -> dict[str, Any]:
        return json.loads((self.path / "build_manifest.json").read_text(encoding="utf-8"))


# -- the builder -----------------------------------------------------------------------------------


class _TrainingDataBuilder(Builder):
    """Writes in-memory example tables (one per config) with the base builder machinery."""

    name = BUILDER_NAME
    version = BUILDER_VERSION
    tags = ("dialogue-evaluation", "fine-tuning", "training-data")

    def __init__(
        self,
        tables: dict[str, list[dict[str, Any]]],
        summaries: dict[str, dict[str, Any]],
        etype: str,
        *,
        pretty_name: str,
        description: str,
        license: str,
        source_manifest: Mapping[str, Any],
        split: Mapping[str, Any] | None,
    ) -> None:
        self.tables, self.summaries, self.etype = tables, summaries, etype
        self.pretty_name, self.description, self.license = pretty_name, description, license
        self.source_manifest, self.split = source_manifest, split

    def resolve_sources(self, source: str | os.PathLike[str] | None, warnings: list[str]) -> list[SourceFile]:
        if source is None:  # register_training_data always passes it
            raise TrainingDataError("training data is built from the directory of its serialised tables")
        base = Path(source)  # the directory of the serialised tables (hashed into the manifest)
        return [
            SourceFile(
                config=c, level="table", path=base / f"{c}.jsonl", origin=f"finetune.data ({c} examples)"
            )
            for c in self.tables
        ]

    def read_config(self, src: SourceFile, languages: tuple[str, ...], warnings: list[str]) -> ConfigData:
        _, features, docs = _TYPES[self.etype]
        return ConfigData(
            name=src.config,
            level="table",
            records=self.tables[src.config],
            features=features,
            column_docs=docs,
            extra=self.summaries[src.config],
        )

    def normalize_languages(self, languages: Any) -> tuple[str, ...]:
        present = {r["language"] for rows in self.tables.values() for r in rows}
        known = [lang for lang in _xdial_order(None) if lang in present]
        return tuple(known + sorted(present - set(known)))

    def build_options(self) -> dict[str, Any]:
        return {
            "example_type": self.etype,
            "source_manifest_sha256": hashlib.sha256(_json(self.source_manifest).encode()).hexdigest(),
            "split_sha256": hashlib.sha256(_json(self.split).encode()).hexdigest() if self.split else None,
        }

    def card_sections(self, configs: list[ConfigData], languages: tuple[str, ...]) -> list[str]:
        out = ["## Training data", ""]
        for c in configs:
            s = self.summaries[c.name]
            parts = [f"{c.rows} examples", f"{s['dialogues']} dialogues"]
            if "kinds" in s:
                parts.append("kinds: " + ", ".join(f"{k} {v}" for k, v in s["kinds"].items()))
                parts.append(f"labels: {s['label_type']}")
                if "labels" in s:
                    parts.append(", ".join(f"{k}: {v}" for k, v in s["labels"].items()))
            out.append(f"- `{c.name}`: " + "; ".join(parts))
        out.append("")
        if self.split:
            d = self.split.get("dialogues", {})
            out += [
                f"Train/test split by dialogue (seed {self.split.get('seed')}, test fraction "
                f"{self.split.get('test_fraction')}): {d.get('train')} / {d.get('test')} dialogues, no "
                "dialogue on both sides; the dialogue ids of each side are in `build_manifest.json`.",
                "",
            ]
        text = _json(self.source_manifest)
        out += [
            "### Sources",
            "",
            "Source manifest as given by the caller (full in `build_manifest.json`):",
            "",
        ]
        out += ["```json", text if len(text) <= 4000 else text[:3999] + "…", "```", ""]
        return out


def register_training_data(
    examples: Sequence[Any] | DialogueSplit,
    name: str,
    version: str,
    *,
    test: Sequence[Any] | None = None,
    registry_root: str | os.PathLike[str] | None = None,
    description: str,
    source_manifest: Mapping[str, Any],
    split: Mapping[str, Any] | None = None,
    license: str | None = None,
    pretty_name: str | None = None,
    exist_ok: bool = False,
) -> RegisteredDataset:
    """Register ``examples`` (config ``train``) and ``test`` (config ``test``, optional) as
    ``name@version`` in the registry at ``registry_root`` (default: the harness registry).

    ``examples`` may be a :class:`~finetune.data.supervised.DialogueSplit`: its train and test sides
    and its split record are used. ``source_manifest`` (JSON-serialisable; dataclass reports are
    converted) is stored in the manifest under ``training_data.sources``; ``split`` (e.g.
    ``DialogueSplit.manifest``) under ``training_data.split``. ``license``: default = the single
    license named in ``source_manifest`` (e.g. Topical-Chat's ``cdla-sharing-1.0`` from its load
    report), else ``unknown``. Versions are immutable: an existing version is an error, unless
    ``exist_ok`` and it holds exactly this data (same data fingerprint): then it is returned as is,
    so rerunning a training recipe reuses its registered data."""
    from harness.data.registry import DatasetRegistry

    if isinstance(examples, DialogueSplit):
        if test is not None:
            raise TrainingDataError("pass either a DialogueSplit or examples + test, not both")
        whole = examples
        examples, test, split = whole.train, whole.test, split or whole.manifest
    if not description or not description.strip():
        raise TrainingDataError("a description is required (it heads the dataset card)")
    if not isinstance(source_manifest, Mapping):
        raise TrainingDataError("source_manifest must be a mapping")
    _json(source_manifest)  # fail early when it is not serialisable
    parts: dict[str, Sequence[Any]] = {"train": list(examples)}
    if test is not None:
        parts["test"] = list(test)
    for config, items in parts.items():
        if not items:
            raise TrainingDataError(f"config {config!r} has no examples")
    etypes = {c: _example_type(items, c) for c, items in parts.items()}
    if len(set(etypes.values())) != 1:
        raise TrainingDataError(f"train and test hold different example types: {etypes}")
    etype = etypes["train"]
    if "test" in parts:
        shared = {x.source_id for x in parts["train"]} & {x.source_id for x in parts["test"]}
        if shared:
            raise TrainingDataError(
                f"{len(shared)} dialogue(s) are in both train and test (e.g. {sorted(shared)[:3]}); "
                "split with split_by_dialogue"
            )
    tables = {c: _rows(items, c, etype) for c, items in parts.items()}
    summaries = {c: _config_summary(items, etype) for c, items in parts.items()}
    if license is None:
        found = _licenses(json.loads(_json(source_manifest)))
        license = found.pop() if len(found) == 1 else ("other" if found else "unknown")
    builder = _TrainingDataBuilder(
        tables,
        summaries,
        etype,
        pretty_name=pretty_name or name,
        description=description,
        license=license,
        source_manifest=source_manifest,
        split=split,
    )

    with tempfile.TemporaryDirectory(prefix="finetune-data-") as tmp:
        for config, rows in tables.items():
            with (Path(tmp) / f"{config}.jsonl").open("w", encoding="utf-8") as f:
                for row in rows:
                    f.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
        result: dict[str, Any] = {}

        def write(staging: Path, release: dict[str, Any]) -> None:
            res = builder.build(tmp, staging, release=release, show_progress=False)
            manifest_path = staging / "build_manifest.json"
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
            manifest[TRAINING_KEY] = {
                "example_type": etype,
                "configs": summaries,
                "license": license,
                "sources": json.loads(_json(source_manifest)),
                "split": json.loads(_json(split)) if split else None,
            }
            manifest_path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", "utf-8")
            result["configs"], result["fingerprint"] = res.configs, res.fingerprint

        registry = DatasetRegistry(registry_root)
        if exist_ok and version in registry.versions(name):
            existing = registry.resolve(f"{name}@{version}")
            with tempfile.TemporaryDirectory(prefix="finetune-data-check-") as scratch:
                DatasetRegistry(scratch).register(name, version, write)  # fingerprint of this data
            recorded = json.loads((existing.path / "build_manifest.json").read_text("utf-8"))
            if recorded.get("fingerprint") != result["fingerprint"]:
                raise TrainingDataError(
                    f"{name}@{version} is already registered with different data (fingerprint "
                    f"{str(recorded.get('fingerprint'))[:16]} ≠ {str(result['fingerprint'])[:16]}); "
                    "versions are immutable: publish a new version"
                )
            return RegisteredDataset(
                existing.name,
                existing.version,
                existing.path,
                recorded.get("configs") or result["configs"],
                result["fingerprint"],
            )
        rv = registry.register(name, version, write)
    return RegisteredDataset(rv.name, rv.version, rv.path, result["configs"], result["fingerprint"])


# -- reading back ----------------------------------------------------------------------------------


def _resolve_dir(source: str | os.PathLike[str], registry_root: str | os.PathLike[str] | None) -> Path:
    path = Path(source).expanduser()
    if path.is_dir():
        return path
    from harness.data.registry import DatasetRegistry

    return DatasetRegistry(registry_root).resolve(os.fspath(source)).path


def load_training_data(
    version_dir: str | os.PathLike[str],
    config: str = "train",
    *,
    registry_root: str | os.PathLike[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> list[Any]:
    """The examples of ``config`` of a training-data version (a directory, or ``name@X.Y.Z`` /
    ``name`` in the registry), read with ``datasets.load_dataset``: :class:`Example` objects (binary
    labels come back as ints) or :class:`InstructionExample` objects."""
    import datasets

    directory = _resolve_dir(version_dir, registry_root)
    manifest = json.loads((directory / "build_manifest.json").read_text(encoding="utf-8"))
    info = manifest.get(TRAINING_KEY)
    if not info:
        raise TrainingDataError(
            f"{directory} is not a training-data version (no {TRAINING_KEY!r} in the manifest)"
        )
    if config not in info["configs"]:
        raise TrainingDataError(f"{directory}: no config {config!r}; configs: {', '.join(info['configs'])}")
    ds = datasets.load_dataset(
        str(directory), config, split="test", cache_dir=os.fspath(cache_dir) if cache_dir else None
    )
    if info["example_type"] == "instruction":
        return [
            InstructionExample(
                **{k: r[k] for k in INSTRUCTION_FEATURES if k not in ("level", "meta")},
                meta=json.loads(r["meta"] or "{}"),
            )
            for r in ds
        ]
    binary = info["configs"][config].get("label_type") == "binary"
    out: list[Example] = []
    for r in ds:
        if r["level"] == "turn":
            roles = [m["role"] for m in r["context"]] + [r["response_role"]]
            context, turns = [m["text"] for m in r["context"]], None
        else:
            roles = [m["role"] for m in r["turns"]]
            context, turns = [], [m["text"] for m in r["turns"]]
        out.append(
            Example(
                id=r["id"],
                language=r["language"],
                level=r["level"],
                context=context,
                response=r["response"],
                turns=turns,
                label=int(r["label"]) if binary else r["label"],
                kind=r["kind"],
                source_id=r["source_id"],
                roles=None if all(x is None for x in roles) else roles,
                reference=r["reference"],
                meta=json.loads(r["meta"] or "{}"),
            )
        )
    return out

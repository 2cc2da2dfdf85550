"""Dialogues from built datasets: a dataset directory (``DIR[:CONFIG]``) or a registry reference
(``NAME[@X.Y.Z][:CONFIG]``) — the turns of dialogue-level records, or (``contexts:``) the contexts
of turn-level records."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from finetune.data.sources.base import CONTEXTS_PREFIX, ROLES, LoadReport, Raw
from harness.data.schema import DataValidationError


def dataset_dialogues(
    text: str,
    report: LoadReport,
    registry: str | os.PathLike[str] | None,
    cache_dir: str | os.PathLike[str] | None,
    contexts: bool = False,
) -> Iterator[Raw]:
    import datasets

    directory, config, release = resolve_dataset(text, registry)
    manifest_path = directory / "build_manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.is_file() else {}
    configs: dict[str, Any] = manifest.get("configs") or {}
    want = "turn" if contexts else "dialogue"
    if config is None:
        level_configs = [c for c, e in configs.items() if e.get("level") == want]
        if len(level_configs) != 1:
            raise ValueError(
                f"{directory}: name the config (DIR:CONFIG); {want}-level configs: "
                f"{', '.join(level_configs) or 'none'} (all: {', '.join(configs) or 'unknown'})"
            )
        config = level_configs[0]
    level = (configs.get(config) or {}).get("level")
    if configs and config not in configs:
        raise ValueError(f"{directory}: no config {config!r}; configs: {', '.join(configs)}")
    if level not in (None, want):
        hint = (
            f"; for the contexts of turn-level records use '{CONTEXTS_PREFIX}{text}'"
            if level == "turn"
            else ""
        )
        raise ValueError(
            f"{directory}:{config} is {level}-level; load_dialogues reads "
            f"{'the contexts of turn-level records' if contexts else 'dialogue-level records (turns)'}{hint}"
        )
    report.files.append(
        {
            "path": str(directory),
            "config": config,
            "fingerprint": manifest.get("fingerprint"),
            "release": manifest.get("release") or release,
        }
    )
    ds = datasets.load_dataset(
        str(directory), config, split="test", cache_dir=os.fspath(cache_dir) if cache_dir else None
    )
    field_name = "context" if contexts else "turns"
    if field_name not in ds.column_names:
        raise ValueError(f"{directory}:{config} has no {field_name!r} column (not {want}-level records)")
    file = f"{directory}/{config}"
    origin = f"{release['name']}@{release['version']}:{config}" if release else f"{directory}:{config}"
    seen_contexts: set[tuple[str, tuple[str, ...]]] = set()
    for row in ds:
        did = row.get("id")
        if not isinstance(did, str) or not did:
            raise DataValidationError(
                file, report.read + 1, "id", f"missing record id (got {did!r})", column_label="field"
            )
        turns = row.get(field_name) or []
        if field_name == "context":  # one dialogue per distinct context of a language
            key = (str(row.get("language")), tuple(str(t.get("text")) for t in turns))
            if key in seen_contexts:
                report.duplicate_contexts += 1
                continue
            seen_contexts.add(key)
            did = f"{did}#context"
        utterances = []
        for i, t in enumerate(turns):
            role = t.get("role")
            if role not in ROLES:
                raise DataValidationError(
                    file,
                    repr(did),
                    f"{field_name}.{i}.role",
                    f"unknown role {role!r}",
                    row_label="dialogue",
                    column_label="field",
                )
            utterances.append((t.get("text"), role))
        yield did, row.get("language"), utterances, origin, file


def resolve_dataset(
    text: str, registry: str | os.PathLike[str] | None
) -> tuple[Path, str | None, dict[str, Any] | None]:
    """``DIR`` / ``DIR:CONFIG`` / ``NAME[@X.Y.Z][:CONFIG]`` -> (directory, config, release)."""
    from harness.data.registry import DatasetRegistry, DatasetRegistryError

    path = Path(text).expanduser()
    if path.is_dir():
        return path, None, None
    base, sep, config = text.rpartition(":")
    if sep and base and Path(base).expanduser().is_dir():
        return Path(base).expanduser(), config or None, None
    ref, config_or_none = (base, config or None) if sep and base else (text, None)
    try:
        rv = DatasetRegistry(registry).resolve(ref)
    except DatasetRegistryError as e:
        raise FileNotFoundError(
            f"{text!r} is neither 'topical-chat:<path>', a JSONL file, a dataset directory (DIR[:CONFIG]) "
            f"nor a registered dataset (NAME[@X.Y.Z][:CONFIG]): {e}"
        ) from None
    return rv.path, config_or_none, {"name": rv.name, "version": rv.version}

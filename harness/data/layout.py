"""The on-disk layout of a built dataset directory, shared by builders, the registry, the Hub
publisher and the data loader::

    <dir>/README.md                              dataset card; YAML front matter declares the configs
          build_manifest.json                    provenance: builder, inputs + sha256, counts, warnings
          <config>/test-00000-of-00001.parquet   one Parquet file per config (single split ``test``)

``datasets.load_dataset(str(dir), config, split="test")`` loads any such directory offline.
"""

from __future__ import annotations

from pathlib import Path

import yaml

SPLIT = "test"
MANIFEST_NAME = "build_manifest.json"
CARD_NAME = "README.md"


def data_file(config: str) -> str:
    """Path of a config's Parquet file, relative to the dataset directory."""
    return f"{config}/{SPLIT}-00000-of-00001.parquet"


def card_configs(dataset_dir: str | Path) -> list[str]:
    """Config names declared in a dataset directory's README.md YAML."""
    readme = Path(dataset_dir) / CARD_NAME
    if not readme.is_file():
        raise FileNotFoundError(
            f"{dataset_dir} has no {CARD_NAME} dataset card, so it is not a built dataset"
        )
    text = readme.read_text(encoding="utf-8")
    if not text.startswith("---"):
        raise ValueError(f"{readme}: no YAML front matter")
    meta = yaml.safe_load(text.split("---", 2)[1]) or {}
    return [c["config_name"] for c in meta.get("configs", [])]

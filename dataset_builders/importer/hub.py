"""``hub:`` sources of the generic importer: a Hugging Face dataset (or a local dataset directory)
written as one Parquet file per split, which the mapping's ``files`` globs then match."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from harness.data.schema import SourceUnavailableError


def fetch_hub(builder: str, ref: str, cache_dir: Any = None) -> Path:
    """``org/name[@revision]`` (or a local dataset directory) -> one Parquet file per split."""
    import datasets

    from harness.cache import default_home

    repo, _, revision = ref.partition("@")
    try:
        loaded = datasets.load_dataset(repo, revision=revision or None, cache_dir=cache_dir)
    except Exception as e:  # offline, unknown or gated repo ...
        raise SourceUnavailableError(f"{builder}: could not load hub:{ref}: {type(e).__name__}: {e}") from e
    if isinstance(loaded, datasets.Dataset):
        loaded = datasets.DatasetDict({"train": loaded})
    out = default_home() / "imports" / "hub" / re.sub(r"[^\w.-]+", "_", ref).strip("_")[-100:]
    out.mkdir(parents=True, exist_ok=True)
    for split, ds in loaded.items():
        ds.to_parquet(str(out / f"{split}.parquet"))
    return out

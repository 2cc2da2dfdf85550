"""The executor a command runs under, for the length of a ``with`` block.

``local``: nothing changes. ``ray``: the block is attached to a Ray cluster, every backend a judge
or pipeline creates (:func:`harness.backends.base.create_backend`) becomes a
:class:`~harness.executors.remote.PoolBackend` over ``--workers`` actors, and :meth:`ExecutorScope.adopt`
moves the encoders of ``embed:`` judges onto actors too. The driver keeps the judge, the prompts,
the verdict parsing and the request cache.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from harness.backends.base import Backend, backend_factory
from harness.encoders.base import Encoder
from harness.executors.config import ExecutorConfig
from harness.executors.pool import WorkerPool
from harness.executors.remote import PoolBackend, PoolEncoder
from harness.executors.session import ray_session
from harness.judges.base import Judge
from harness.spec import JudgeSpec


class ExecutorScope:
    def __init__(self, config: ExecutorConfig, *, seed: int | None = None, cluster: dict[str, Any] | None = None) -> None:
        self.config = config
        self.seed = seed
        self.cluster = cluster
        self.pools: list[WorkerPool] = []
        #: a rich ``Progress`` the pools add their bar to (set by the caller while it shows one)
        self.progress: Any = None

    @property
    def distributed(self) -> bool:
        return self.config.distributed

    def items_per_call(self, batch_size: int) -> int:
        return self.config.items_per_call(batch_size)

    def _pool(self, role: str, spec: JudgeSpec) -> WorkerPool:
        pool = WorkerPool(role, spec, self.config, seed=self.seed, progress=lambda: self.progress)
        self.pools.append(pool)
        return pool

    def make_backend(self, spec: JudgeSpec) -> Backend:
        """The backend factory installed while the scope is active (ray only)."""
        return PoolBackend(self._pool("backend", spec))

    def adopt(self, judge: Judge) -> Judge:
        """Move the encoder of every ``embed:`` judge in ``judge`` (members of ``mean:``, ``panel:``,
        ``bylang:`` included) onto a pool. A no-op for ``--executor local``."""
        if not self.distributed:
            return judge
        for j in _judges(judge):
            enc = getattr(j, "encoder", None)
            if j.spec.kind == "embed" and isinstance(enc, Encoder) and not isinstance(enc, PoolEncoder):
                j.encoder = PoolEncoder(self._pool("encoder", j.spec))  # type: ignore[attr-defined]
                enc.close()  # the driver's copy never loaded weights (encoders load on first use)
        return judge

    def describe(self) -> dict[str, Any]:
        """Provenance for results: the executor, the cluster, and every pool's per-worker stats."""
        out = self.config.to_dict()
        if self.distributed:
            out["cluster"] = self.cluster
            out["pools"] = [p.describe() for p in self.pools]
        return out

    def close(self) -> None:
        for p in self.pools:
            p.close()


def _judges(judge: Judge, seen: set[int] | None = None) -> Iterator[Judge]:
    """``judge`` and every judge held in its attributes (members of composite judges)."""
    seen = seen if seen is not None else set()
    if id(judge) in seen:
        return
    seen.add(id(judge))
    yield judge
    for value in vars(judge).values():
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list | tuple) else [value]
        for child in children:
            if isinstance(child, Judge):
                yield from _judges(child, seen)


@contextmanager
def executor_scope(config: ExecutorConfig | None = None, *, seed: int | None = None) -> Iterator[ExecutorScope]:
    """Run the block under ``config``'s executor (see the module docstring); pools are closed at the end."""
    config = config or ExecutorConfig()
    if not config.distributed:
        yield ExecutorScope(config, seed=seed)
        return
    with ExitStack() as stack:
        cluster = stack.enter_context(ray_session())
        scope = ExecutorScope(config, seed=seed, cluster=cluster)
        stack.callback(scope.close)
        stack.enter_context(backend_factory(scope.make_backend))
        yield scope

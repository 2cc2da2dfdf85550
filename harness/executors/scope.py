"""The executor a command runs under, for the length of a ``with`` block.

``local``: nothing changes. ``ray``: the block is attached to a Ray cluster, every backend a judge
or pipeline creates (:func:`harness.backends.base.create_backend`) becomes a
:class:`~harness.executors.remote.PoolBackend` on a pool of ``--workers`` actors, and
:meth:`ExecutorScope.adopt` gathers a judge's models on one pool: the encoders of its ``embed:``
judges and the backends of its LLM judges (members of ``mean:``, ``panel:``, ``bylang:``
included) become members of a single pool per resource shape, so a composite judge needs
``--workers`` × one worker's resources, like a single judge. The driver keeps the judge, the
prompts, the verdict parsing and the request cache.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING

from harness.backends.base import Backend, backend_factory
from harness.cache import CachedBackend
from harness.encoders.base import Encoder
from harness.executors.capacity import shortfall
from harness.executors.config import ExecutorConfig, ExecutorError
from harness.executors.pool import WorkerPool
from harness.executors.remote import PoolBackend, PoolEncoder
from harness.executors.session import ray_session
from harness.jsontypes import JSONObject
from harness.judges.base import Judge
from harness.spec import JudgeSpec

if TYPE_CHECKING:
    from rich.progress import Progress


class ExecutorScope:
    def __init__(
        self, config: ExecutorConfig, *, seed: int | None = None, cluster: JSONObject | None = None
    ) -> None:
        self.config = config
        self.seed = seed
        self.cluster = cluster
        self.pools: list[WorkerPool] = []
        #: a rich ``Progress`` the pools add their bar to (set by the caller while it shows one)
        self.progress: Progress | None = None

    @property
    def distributed(self) -> bool:
        return self.config.distributed

    def items_per_call(self, batch_size: int) -> int:
        return self.config.items_per_call(batch_size)

    def _new_pool(self, resources: dict[str, float]) -> WorkerPool:
        pool = WorkerPool(
            resources,
            self.config,
            seed=self.seed,
            progress=lambda: self.progress,
            before_start=self.check_capacity,
        )
        self.pools.append(pool)
        return pool

    def make_backend(self, spec: JudgeSpec) -> Backend:
        """The backend factory installed while the scope is active (ray only). The pool starts on
        first use, or when :meth:`adopt` gathers the backends of a judge."""
        pool = self._new_pool(self.config.resources(spec))
        return PoolBackend(pool, pool.add("backend", spec))

    def adopt(self, judge: Judge) -> Judge:
        """Put every model of ``judge`` — the backend of each LLM judge, the encoder of each
        ``embed:`` judge, members of composite judges included — on one pool per resource shape
        (usually one pool: each worker holds all of them, as the local process would), check that
        the pools fit the cluster before any actor starts, and start them. A no-op for
        ``--executor local``."""
        if not self.distributed:
            return judge
        groups: dict[tuple[float, float], WorkerPool] = {}

        def home(resources: dict[str, float], pool: WorkerPool | None = None) -> WorkerPool:
            shape = (resources["num_cpus"], resources["num_gpus"])
            if shape not in groups:
                groups[shape] = pool if pool is not None else self._new_pool(resources)
            return groups[shape]

        for j in _judges(judge):
            backend = getattr(j, "backend", None)
            cached = getattr(j, "cached", None)
            if (
                isinstance(backend, PoolBackend)
                and isinstance(cached, CachedBackend)
                and cached.backend is backend
            ):
                backend.member.cache_path = (
                    os.path.abspath(cached.cache.path) if cached.cache.enabled else None
                )
            if isinstance(backend, PoolBackend) and not backend.pool.started:
                target = home(backend.pool.resources, backend.pool)
                if target is not backend.pool:
                    source = backend.pool
                    target.take(backend.member, source)
                    backend.pool = target
                    if not source.members:
                        self.pools.remove(source)
            enc = getattr(j, "encoder", None)
            if j.spec.kind == "embed" and isinstance(enc, Encoder) and not isinstance(enc, PoolEncoder):
                target = home(self.config.resources(j.spec))
                # an embed: judge (checked above) has an encoder; Judge does not declare it
                j.encoder = PoolEncoder(target, target.add("encoder", j.spec))  # type: ignore[attr-defined]
                enc.close()  # the driver's copy never loaded weights (encoders load on first use)
        pools = [p for p in groups.values() if not p.started]
        self.check_capacity(*pools)
        for p in pools:
            p.start()
        return judge

    def check_capacity(self, *starting: WorkerPool) -> None:
        """Raise :class:`ExecutorError` with the arithmetic when ``starting`` pools, with the pools
        this scope already runs, need more CPUs or GPUs than the cluster has."""
        todo = [p for p in starting if not p.started]
        if not todo:
            return
        held = [p.need() for p in self.pools if p.started and not p.closed and p not in todo]
        total = todo[0].ray.cluster_resources()
        message = shortfall([p.need() for p in todo], held, total)
        if message:
            raise ExecutorError(message)

    def describe(self) -> JSONObject:
        """Provenance for results: the executor, the cluster, and every pool's per-worker stats."""
        out = self.config.to_dict()
        if self.distributed:
            out["cluster"] = self.cluster
            out["pools"] = [p.describe() for p in self.pools if p.members]
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
        children = (
            value.values()
            if isinstance(value, dict)
            else value
            if isinstance(value, list | tuple)
            else [value]
        )
        for child in children:
            if isinstance(child, Judge):
                yield from _judges(child, seen)


@contextmanager
def executor_scope(
    config: ExecutorConfig | None = None, *, seed: int | None = None
) -> Iterator[ExecutorScope]:
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

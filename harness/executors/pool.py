"""A pool of Ray actors (:class:`~harness.executors.worker.ModelWorker`) that runs lists of
requests in shards. Each actor holds every *member* of the pool: one backend or encoder, or all
those of one judge (the routes of ``bylang:``, the members of ``mean:`` / ``panel:``), which the
judge uses one at a time.

* The pool starts lazily (:meth:`WorkerPool.start`, or its first call): until then members can be
  added or moved to another pool, and the caller checks the resources of every pool about to start
  before any actor exists (:mod:`harness.executors.capacity`). Actors that cannot be *placed* (the
  resources are held by others) are an error after ``schedule_timeout_s``, not a wait as long as a
  70B model's loading.
* Shards are contiguous runs of ``shard_size`` requests, taken from one queue by whichever worker
  is free; results come back in the callers' order.
* Each result is handed to ``emit`` on the calling thread as soon as it arrives (the cache writes
  it through there), so a killed driver loses only requests still in flight: workers on this
  machine watch the driver and the pool's *stop pipe*, and when the driver dies or closes the pipe
  they write the responses still on their way into the cache themselves and exit
  (:mod:`harness.executors.worker`). An interrupted call (Ctrl-C, SIGTERM, an error in ``emit``)
  closes the stop pipe, kills the actors, and hands ``emit`` every result that had reached this
  process; the next call starts fresh actors.
* A worker that dies (``ray.kill``, a crash, a lost node) is replaced by a fresh actor on the same
  slot and the *unfinished* part of its shard is retried; a shard whose backend raises is retried
  (exponential back-off, tenacity) up to ``max_retries`` times. A shard that still fails is
  reported after every other shard has finished, as :class:`ShardFailedError`: never a short result.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from harness.executors.capacity import PoolNeed
from harness.executors.config import ExecutorConfig, ExecutorError, ShardFailedError
from harness.executors.session import import_ray
from harness.executors.shards import (
    Member,
    SetupInfo,
    Shard,
    StopPipe,
    WorkerStats,
    error_text,
    forwarded_env,
)
from harness.executors.worker import ModelWorker, process_identity
from harness.jsontypes import JSONObject
from harness.provenance import redact
from harness.spec import JudgeSpec

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

log = logging.getLogger(__name__)
_keys = itertools.count()
R = TypeVar("R")


class RemoteMethod(Protocol):
    """A method of a Ray actor handle: ``.remote(...)`` sends the call, returning its reference."""

    def remote(self, *args: object, **kwargs: object) -> object: ...


class WorkerActor(Protocol):
    """What the pool calls directly on a :class:`~harness.executors.worker.ModelWorker` actor handle
    (``generate`` / ``encode`` are reached by name)."""

    @property
    def ping(self) -> RemoteMethod: ...
    @property
    def setup(self) -> RemoteMethod: ...
    @property
    def release(self) -> RemoteMethod: ...
    @property
    def close(self) -> RemoteMethod: ...


@dataclass(frozen=True)
class _Call(Generic[R]):
    """One :meth:`WorkerPool.run`: ``method`` of ``member`` over ``items``, results of type ``kind``."""

    member: Member
    method: str
    items: list[object]
    kind: type[R]
    kwargs: Mapping[str, str]


@dataclass(frozen=True)
class _Result:
    """A slot's message: the result of item ``index``."""

    slot: int
    index: int
    value: object


@dataclass(frozen=True)
class _ShardDone:
    shard: Shard


@dataclass(frozen=True)
class _ShardFailed:
    shard: Shard
    why: str


_Message = _Result | _ShardDone | _ShardFailed


class _Retry(Exception):
    """An attempt failed in a way another attempt may fix (worker died, backend raised)."""


class _SlotDead(Exception):
    """A slot could not get a working actor again."""


class _Cancelled(Exception):
    """The call was interrupted: the slot's thread stops without replacing its (killed) actor."""


class WorkerPool:
    """``config.workers`` actors with ``resources`` each (``{"num_cpus": 1, "num_gpus": 0}``)."""

    def __init__(
        self,
        resources: dict[str, float],
        config: ExecutorConfig,
        *,
        seed: int | None = None,
        progress: Callable[[], Progress | None] | None = None,
        before_start: Callable[[WorkerPool], None] | None = None,
    ) -> None:
        self.ray = import_ray()
        self.config, self.seed, self.resources = config, seed, dict(resources)
        self.members: list[Member] = []
        self._progress = progress
        self._before_start = before_start
        self._bar: TaskID | None = None
        remote = self.ray.remote(ModelWorker)
        self._actor_cls = remote.options(
            num_cpus=self.resources["num_cpus"], num_gpus=self.resources["num_gpus"], max_restarts=0
        )
        self.stats = [WorkerStats(slot) for slot in range(config.workers)]
        self.actors: list[WorkerActor | None] = [None] * config.workers
        self.started = False
        self.closed = False
        self._stop = StopPipe()
        self._lock = threading.Lock()  # the shard queue
        self._run_lock = threading.RLock()  # one call (or start) at a time

    @property
    def label(self) -> str:
        return " + ".join(m.label for m in self.members if not m.released) or "(empty pool)"

    def need(self) -> PoolNeed:
        per = {"CPU": self.resources["num_cpus"], "GPU": self.resources["num_gpus"]}
        return PoolNeed(self.config.workers, per, self.label)

    # -- members -----------------------------------------------------------------------------------
    def add(self, role: str, spec: JudgeSpec, label: str | None = None) -> Member:
        """A new member (``role`` ``backend`` / ``encoder``); loaded on every live actor now if the
        pool already runs, else when it starts."""
        with self._run_lock:
            if self.closed:
                raise ExecutorError(f"the Ray pool for {self.label} is closed")
            member = Member(f"m{next(_keys)}", role, spec, redact(label or spec.raw))
            self.members.append(member)
            if self.started:
                live = [(slot, a) for slot, a in enumerate(self.actors) if a is not None]
                calls = [(slot, self._setup_call(a, member)) for slot, a in live]
                for slot, call in calls:
                    self._adopt(slot, member, self._get_setup(call))
            return member

    def take(self, member: Member, source: WorkerPool) -> None:
        """Move ``member`` here from ``source``; neither pool may have started."""
        if self.started or source.started:
            raise ExecutorError("members move between Ray pools only before their actors start")
        source.members.remove(member)
        self.members.append(member)

    def info(self, member: Member) -> SetupInfo:
        """What worker 0 reported for ``member`` (identity, prefixes, engine); starts the pool."""
        self.start()
        return member.info

    def release(self, member: Member) -> None:
        """The member's user is done with it; the pool closes with its last member."""
        member.released = True
        if all(m.released for m in self.members):
            self.close()
            return
        for actor in self.actors:
            if actor is not None:
                actor.release.remote(member.key)

    # -- actors ------------------------------------------------------------------------------------
    def start(self) -> None:
        """Check the resources (``before_start``), start the actors and load every member on them."""
        with self._run_lock:
            if self.started:
                return
            if self.closed:
                raise ExecutorError(f"the Ray pool for {self.label} is closed")
            if self._before_start is not None:
                self._before_start(self)
            actors = [self._actor_cls.remote() for _ in range(self.config.workers)]
            try:
                self._await_placement(actors)
                calls = [[self._setup_call(a, m) for m in self.members] for a in actors]
                flat = [c for row in calls for c in row]
                ready, pending = self.ray.wait(
                    flat, num_returns=len(flat), timeout=self.config.startup_timeout_s
                )
                if pending:
                    raise ExecutorError(
                        f"the Ray workers of {self.label} did not finish loading within "
                        f"{self.config.startup_timeout_s:.0f}s ({len(ready)} of {len(flat)} member setups done)"
                    )
                for slot, (actor, row) in enumerate(zip(actors, calls, strict=True)):
                    self.actors[slot] = actor
                    for member, call in zip(self.members, row, strict=True):
                        self._adopt(slot, member, self._get_setup(call))
            except BaseException:
                for a in actors:
                    self.ray.kill(a, no_restart=True)
                self.actors = [None] * self.config.workers
                raise
            self.started = True

    def _await_placement(self, actors: Sequence[WorkerActor]) -> None:
        """Wait until every actor's process runs (placed on a node, nothing loaded yet) and watches
        this driver and its stop pipe."""
        with self._stop.opening() as stop:
            pings = [a.ping.remote(process_identity(), stop) for a in actors]
            ready, pending = self.ray.wait(
                pings, num_returns=len(pings), timeout=self.config.schedule_timeout_s
            )
            if pending:
                free = {k: v for k, v in self.ray.available_resources().items() if k in ("CPU", "GPU")}
                total = {k: v for k, v in self.ray.cluster_resources().items() if k in ("CPU", "GPU")}
                raise ExecutorError(
                    f"only {len(ready)} of {len(actors)} Ray workers of {self.label} could be placed within "
                    f"{self.config.schedule_timeout_s:.0f}s: each needs {self.need().per_worker}, the cluster has "
                    f"{total} of which {free} are free (other jobs or pools hold the rest): lower --workers, "
                    "free the cluster or add nodes"
                )
            for p in pings:
                self._get_setup(p)

    def _setup_call(self, actor: WorkerActor, member: Member) -> object:
        threads = max(1, int(self.resources["num_cpus"])) if self.resources["num_cpus"] >= 1 else 1
        return actor.setup.remote(
            member.key,
            member.role,
            member.spec,
            cwd=os.getcwd(),
            env=forwarded_env(member.spec),
            seed=self.seed,
            threads=threads,
            cache=member.cache_path,
        )

    def _adopt(self, slot: int, member: Member, info: SetupInfo) -> None:
        st = self.stats[slot]
        if st.pid != info.get("pid"):
            st.node_ip, st.hostname, st.pid = info.get("node_ip"), info.get("hostname"), info.get("pid")
            st.gpu_ids = list(info.get("gpu_ids") or [])
            st.watches_driver = bool(info.get("watches_driver"))
            st.setup_s = 0.0
            if st.pid is not None:
                st.pids.append(st.pid)
        st.setup_s += float(info.get("setup_s", 0.0))
        if not member.info:
            member.info = info
        elif info.get("identity") != member.info.get("identity"):
            raise ExecutorError(
                f"worker {slot} on {info.get('node_ip')} loaded a different model for {member.label} than worker 0 "
                f"({info.get('identity')} vs {member.info.get('identity')}): every node needs the same files"
            )

    def _get_setup(self, call: object) -> SetupInfo:
        try:
            return self.ray.get(call)
        except self.ray.exceptions.RayTaskError as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, Exception):  # the backend's own error (bad option, missing file...)
                raise cause from None
            raise ExecutorError(f"a Ray worker could not load {self.label}: {error_text(e)}") from None
        except self.ray.exceptions.RayError as e:
            raise ExecutorError(f"a Ray worker could not load {self.label}: {error_text(e)}") from None

    def _replace(self, slot: int) -> None:
        self._kill(slot)
        actor = self._actor_cls.remote()
        try:
            self._await_placement([actor])
            calls = [(m, self._setup_call(actor, m)) for m in self.members if not m.released]
            infos = [(m, self._get_setup(c)) for m, c in calls]
        except Exception as e:
            self.ray.kill(actor, no_restart=True)
            raise _SlotDead(f"worker {slot} could not be replaced: {error_text(e)}") from e
        self.actors[slot] = actor
        self.stats[slot].replacements += 1
        for m, info in infos:
            self._adopt(slot, m, info)
        log.warning(
            "Ray worker %d replaced (now pid %s on %s)", slot, self.stats[slot].pid, self.stats[slot].node_ip
        )

    def _kill(self, slot: int) -> None:
        actor, self.actors[slot] = self.actors[slot], None
        if actor is not None:
            try:
                self.ray.kill(actor, no_restart=True)
            except Exception:
                pass

    # -- running -----------------------------------------------------------------------------------
    def run(
        self,
        member: Member,
        method: str,
        items: Sequence[object],
        kind: type[R],
        emit: Callable[[int, R], None] | None = None,
        **kwargs: str,
    ) -> list[R]:
        """``method`` (``generate`` / ``encode``) of ``member`` over ``items`` in shards; one result
        per item (each a ``kind``: ``Response``, ``numpy.ndarray``), in order."""
        with self._run_lock:
            if self.closed:
                raise ExecutorError(f"the Ray pool for {self.label} is closed")
            items = list(items)
            if not items:
                return []
            self.start()
            for slot in range(len(self.actors)):  # slots an interrupted call left empty
                if self.actors[slot] is None:
                    try:
                        self._replace(slot)
                    except _SlotDead as e:
                        log.warning("%s", e)
            return self._run(_Call(member, method, items, kind, kwargs), emit)

    def _run(self, call: _Call[R], emit: Callable[[int, R], None] | None) -> list[R]:
        member, n = call.member, len(call.items)
        # exactly shard_size per shard (the last one shorter): with the runner's shard_size =
        # --batch-size, every worker sees the very batches a local run sends, so batch-dependent
        # numerics (padding, kernel choice) give the same bits
        size = self.config.shard_size
        shards = deque(Shard(k, list(range(s, min(s + size, n)))) for k, s in enumerate(range(0, n, size)))
        n_shards = len(shards)
        results: dict[int, R] = {}
        msgs: queue.Queue[_Message] = queue.Queue()
        cancel = threading.Event()
        threads = [
            threading.Thread(
                target=self._drive,
                args=(slot, shards, msgs, cancel, call),
                daemon=True,
                name=f"ray-pool-{slot}",
            )
            for slot in range(self.config.workers)
            if self.actors[slot] is not None
        ]
        if not threads:
            raise ExecutorError(f"every Ray worker of {self.label} is gone")
        self._bar_start(n)
        failed: list[tuple[Shard, str]] = []
        finished = 0

        def take(msg: _Result) -> None:
            i, value = msg.index, msg.value
            if not isinstance(value, call.kind):
                raise ExecutorError(
                    f"a Ray worker of {self.label} answered {call.method} with a {type(value).__name__}, "
                    f"not a {call.kind.__name__}"
                )
            if i not in results:
                results[i] = value
                member.requests += 1
                if emit is not None:
                    emit(i, value)
                self._bar_advance(msg.slot)

        try:
            for t in threads:
                t.start()
            while finished < n_shards:
                try:
                    msg = msgs.get(timeout=0.5)
                except queue.Empty:
                    if not any(t.is_alive() for t in threads):  # every slot died with shards left
                        with self._lock:
                            left = list(shards)
                            shards.clear()
                        failed += [(sh, "no live Ray worker left to run it") for sh in left]
                        finished += len(left)
                    continue
                if isinstance(msg, _Result):
                    take(msg)
                elif isinstance(msg, _ShardDone):
                    finished += 1
                else:
                    failed.append((msg.shard, msg.why))
                    finished += 1
        except BaseException:
            # interrupted (Ctrl-C, SIGTERM, an error in emit): the workers on this machine save
            # what they finished and exit; the others are killed; what reached us is written through
            cancel.set()
            self._stop.close()
            if any(st.watches_driver for st in self.stats):
                for t in threads:
                    t.join(timeout=3.0)
            for slot in range(len(self.actors)):
                self._kill(slot)
            for t in threads:
                t.join(timeout=2.0)
            try:
                while True:
                    msg = msgs.get_nowait()
                    if isinstance(msg, _Result):
                        take(msg)
            except (queue.Empty, Exception):
                pass
            raise
        finally:
            cancel.set()
            for t in threads:
                t.join(timeout=5.0)
        if failed:
            n_failed = sum(len(sh.todo) for sh, _ in failed)
            first, why = failed[0]
            raise ShardFailedError(
                f"{len(failed)} of {n_shards} shard(s) of {member.label} failed on the Ray workers after "
                f"{1 + self.config.max_retries} attempt(s) each ({n_failed} of {n} requests unfinished); shard "
                f"{first.number} (requests {first.indices[0]}–{first.indices[-1]} of this batch): {why}",
                failed=n_failed,
                total=n,
            )
        return [results[i] for i in range(n)]  # every shard finished: every index has its result

    def _drive(
        self,
        slot: int,
        shards: deque[Shard],
        msgs: queue.Queue[_Message],
        cancel: threading.Event,
        call: _Call[R],
    ) -> None:
        """One worker slot's loop: take the next shard, run it with retries, report."""
        while not cancel.is_set():
            with self._lock:
                if not shards:
                    return
                shard = shards.popleft()
            retrying = Retrying(
                stop=stop_after_attempt(1 + self.config.max_retries),
                wait=wait_exponential(multiplier=0.25, max=8),
                retry=retry_if_exception_type(_Retry),
                reraise=True,
            )
            try:
                for attempt in retrying:
                    with attempt:
                        self._attempt(slot, shard, msgs, cancel, call)
            except _Cancelled:
                return
            except _SlotDead as e:
                msgs.put(
                    _ShardFailed(shard, f"{shard.attempts[-1] if shard.attempts else ''}; {e}".strip("; "))
                )
                return
            except _Retry:
                msgs.put(_ShardFailed(shard, shard.attempts[-1]))
                continue
            except Exception as e:  # a bug in the pool itself: report, never hang
                msgs.put(_ShardFailed(shard, error_text(e)))
                continue
            msgs.put(_ShardDone(shard))

    def _attempt(
        self, slot: int, shard: Shard, msgs: queue.Queue[_Message], cancel: threading.Event, call: _Call[R]
    ) -> None:
        member, method, items, kwargs = call.member, call.method, call.items, call.kwargs
        todo = shard.todo
        if not todo:
            return
        st = self.stats[slot]
        actor = self.actors[slot]
        if actor is None or cancel.is_set():
            raise _Cancelled()
        if shard.attempts:  # an earlier attempt failed: this one is a retry
            st.retries += 1
        t0 = time.perf_counter()
        try:
            gen = getattr(actor, method).remote(member.key, [items[i] for i in todo], **kwargs)
            for ref in gen:
                value = self.ray.get(ref)
                if isinstance(value, dict):
                    st.load_seconds = max(st.load_seconds, float(value["stats"].get("load_seconds", 0.0)))
                    continue
                for j, v in value:
                    shard.received.add(todo[j])
                    msgs.put(_Result(slot, todo[j], v))
                    st.requests += 1
            st.shards += 1
        except self.ray.exceptions.RayTaskError as e:  # the backend raised: retry on the same worker
            if cancel.is_set():
                raise _Cancelled() from e
            shard.attempts.append(f"worker {slot} (pid {st.pid}): {error_text(e)}")
            log.warning(
                "shard %d of %s failed on worker %d: %s", shard.number, member.label, slot, error_text(e)
            )
            raise _Retry(error_text(e)) from e
        except self.ray.exceptions.RayError as e:  # the worker died / its node was lost: replace it
            if cancel.is_set():  # killed by an interrupted call: nothing to replace
                raise _Cancelled() from e
            shard.attempts.append(f"worker {slot} (pid {st.pid}) died: {error_text(e)}")
            log.warning(
                "Ray worker %d died running shard %d of %s; replacing it", slot, shard.number, member.label
            )
            self._replace(slot)
            raise _Retry(error_text(e)) from e
        finally:
            st.seconds += time.perf_counter() - t0

    # -- progress ------------------------------------------------------------------------------------
    def _bar_start(self, n: int) -> None:
        progress = self._progress() if self._progress is not None else None
        if progress is None:
            self._bar = None
            return
        self._bar_progress = progress
        if self._bar is None or self._bar not in {t.id for t in progress.tasks}:
            self._bar = progress.add_task(f"ray × {self.config.workers}", total=n, rate="")
        else:
            task = next(t for t in progress.tasks if t.id == self._bar)
            progress.update(self._bar, total=(task.total or 0) + n)

    def _bar_advance(self, slot: int) -> None:
        if self._bar is not None:
            counts = " ".join(f"w{s.slot}:{s.requests}" for s in self.stats)
            self._bar_progress.update(self._bar, advance=1, rate=counts)

    # -- provenance / shutdown -------------------------------------------------------------------------
    @property
    def retries(self) -> int:
        return sum(s.retries for s in self.stats)

    @property
    def load_seconds(self) -> float:
        """Weights loading, booked once: the workers load in parallel, so the slowest one's."""
        return max((s.load_seconds for s in self.stats), default=0.0)

    def describe(self) -> JSONObject:
        roles = {m.role for m in self.members}
        return {
            "role": roles.pop() if len(roles) == 1 else "mixed",
            "spec": self.label,
            "members": [m.to_dict() for m in self.members],
            "resources_per_worker": self.resources,
            "workers": [s.to_dict() for s in self.stats],
        }

    def close(self) -> None:
        with self._run_lock:
            if self.closed:
                return
            self.closed = True
            for slot, actor in enumerate(self.actors):
                if actor is None:
                    continue
                try:
                    self.ray.get(actor.close.remote(), timeout=30)
                except Exception:
                    pass
                self._kill(slot)
            self._stop.close()

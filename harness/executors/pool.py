"""A pool of Ray actors (:class:`~harness.executors.worker.ModelWorker`), one backend or encoder
each, that runs a list of requests in shards.

* Shards are contiguous runs of ``shard_size`` requests, taken from one queue by whichever worker
  is free; results come back in the callers' order.
* Each result is handed to ``emit`` on the calling thread as soon as it arrives (the cache writes
  it through there), so a killed driver loses only requests still in flight.
* A worker that dies (``ray.kill``, a crash, a lost node) is replaced by a fresh actor on the same
  slot and the *unfinished* part of its shard is retried; a shard whose backend raises is retried
  (exponential back-off, tenacity) up to ``max_retries`` times. A shard that still fails is
  reported after every other shard has finished, as :class:`ShardFailedError`: never a short result.
"""

from __future__ import annotations

import logging
import os
import queue
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from harness.executors.config import ExecutorConfig, ExecutorError, ShardFailedError
from harness.executors.session import import_ray
from harness.executors.worker import ModelWorker
from harness.provenance import redact
from harness.spec import JudgeSpec

log = logging.getLogger(__name__)

# Environment a worker process needs to load models as the driver would (Ray workers on other
# nodes do not inherit the driver's environment). CUDA_VISIBLE_DEVICES is Ray's to set.
_ENV_PREFIXES = ("HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TOKENIZERS_", "DIALEVAL_", "VLLM_", "SENTENCE_TRANSFORMERS_")


@dataclass
class WorkerStats:
    slot: int
    node_ip: str | None = None
    hostname: str | None = None
    pid: int | None = None
    gpu_ids: list[str] = field(default_factory=list)
    requests: int = 0
    shards: int = 0
    seconds: float = 0.0
    retries: int = 0
    replacements: int = 0
    setup_s: float = 0.0
    load_seconds: float = 0.0
    pids: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "worker": self.slot,
            "node_ip": self.node_ip,
            "hostname": self.hostname,
            "pid": self.pid,
            "gpu_ids": self.gpu_ids,
            "requests": self.requests,
            "shards": self.shards,
            "seconds": round(self.seconds, 3),
            "retries": self.retries,
            "replaced": self.replacements,
            "setup_s": round(self.setup_s, 3),
            "load_seconds": round(self.load_seconds, 3),
            **({"previous_pids": self.pids[:-1]} if len(self.pids) > 1 else {}),
        }


@dataclass
class _Shard:
    number: int
    indices: list[int]
    received: set[int] = field(default_factory=set)
    attempts: list[str] = field(default_factory=list)  # what each failed attempt raised

    @property
    def todo(self) -> list[int]:
        return [i for i in self.indices if i not in self.received]


class _Retry(Exception):
    """An attempt failed in a way another attempt may fix (worker died, backend raised)."""


class _SlotDead(Exception):
    """A slot could not get a working actor again."""


def forwarded_env(spec: JudgeSpec) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES)}
    if spec.kind == "openai":  # the key lives in the variable the spec names
        name = str(spec.options.get("api_key_env", "OPENAI_API_KEY"))
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def error_text(e: BaseException) -> str:
    """The user-facing line of an exception that crossed Ray (its cause, not Ray's traceback)."""
    cause = getattr(e, "cause", None)
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__}: {cause}"
    text = str(e).strip()
    lines = [ln for ln in text.splitlines() if re.match(r"^\s*[A-Za-z_][\w.]*(Error|Exception)\b.*:", ln)]
    return (lines[-1].strip() if lines else text.splitlines()[0] if text else type(e).__name__)[:500]


class WorkerPool:
    """``config.workers`` actors holding the backend/encoder ``spec`` names (``role``)."""

    def __init__(
        self,
        role: str,
        spec: JudgeSpec,
        config: ExecutorConfig,
        *,
        seed: int | None = None,
        progress: Callable[[], Any] | None = None,
        label: str | None = None,
    ) -> None:
        self.ray = import_ray()
        self.role, self.spec, self.config, self.seed = role, spec, config, seed
        self.label = redact(label or spec.raw)
        self._progress = progress
        self._bar: Any = None
        self.resources = config.resources(spec)
        self._check_capacity()
        remote = self.ray.remote(ModelWorker)
        self._actor_cls = remote.options(
            num_cpus=self.resources["num_cpus"], num_gpus=self.resources["num_gpus"], max_restarts=0
        )
        self.stats = [WorkerStats(slot) for slot in range(config.workers)]
        self.actors: list[Any] = [None] * config.workers
        self.info: dict[str, Any] = {}
        self.closed = False
        self._lock = threading.Lock()
        self._start_all()

    # -- actors ------------------------------------------------------------------------------------
    def _check_capacity(self) -> None:
        total = self.ray.cluster_resources()
        for key, res in (("CPU", "num_cpus"), ("GPU", "num_gpus")):
            need = self.resources[res] * self.config.workers
            have = float(total.get(key, 0.0))
            if need > have + 1e-9:
                flag = "--gpus-per-worker" if key == "GPU" else "num_cpus="
                raise ExecutorError(
                    f"{self.config.workers} workers × {self.resources[res]:g} {key} need {need:g} {key}s, but the Ray "
                    f"cluster has {have:g}: lower --workers or {flag}, or add nodes (ray start --address …)"
                )

    def _setup_call(self, actor: Any) -> Any:
        threads = max(1, int(self.resources["num_cpus"])) if self.resources["num_cpus"] >= 1 else 1
        return actor.setup.remote(
            self.role, self.spec, cwd=os.getcwd(), env=forwarded_env(self.spec), seed=self.seed, threads=threads
        )

    def _adopt(self, slot: int, info: dict[str, Any]) -> None:
        st = self.stats[slot]
        st.node_ip, st.hostname, st.pid = info.get("node_ip"), info.get("hostname"), info.get("pid")
        st.gpu_ids, st.setup_s = list(info.get("gpu_ids") or []), float(info.get("setup_s", 0.0))
        if st.pid is not None:
            st.pids.append(st.pid)
        if not self.info:
            self.info = info
        elif info.get("identity") != self.info.get("identity"):
            raise ExecutorError(
                f"worker {slot} on {info.get('node_ip')} loaded a different model than worker 0 "
                f"({info.get('identity')} vs {self.info.get('identity')}): every node needs the same files"
            )

    def _start_all(self) -> None:
        actors = [self._actor_cls.remote() for _ in range(self.config.workers)]
        calls = [self._setup_call(a) for a in actors]
        ready, pending = self.ray.wait(calls, num_returns=len(calls), timeout=self.config.startup_timeout_s)
        try:
            if pending:
                raise ExecutorError(
                    f"only {len(ready)} of {self.config.workers} Ray workers started within "
                    f"{self.config.startup_timeout_s:.0f}s (resources per worker {self.resources}, cluster "
                    f"{self.ray.available_resources()} free): lower --workers or add nodes"
                )
            for slot, (actor, call) in enumerate(zip(actors, calls, strict=True)):
                self.actors[slot] = actor
                self._adopt(slot, self._get_setup(call))
        except BaseException:
            for a in actors:
                self.ray.kill(a, no_restart=True)
            raise

    def _get_setup(self, call: Any) -> dict[str, Any]:
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
        old = self.actors[slot]
        if old is not None:
            try:
                self.ray.kill(old, no_restart=True)
            except Exception:
                pass
        actor = self._actor_cls.remote()
        try:
            info = self._get_setup(self._setup_call(actor))
        except Exception as e:
            self.actors[slot] = None
            raise _SlotDead(f"worker {slot} could not be replaced: {error_text(e)}") from e
        self.actors[slot] = actor
        self.stats[slot].replacements += 1
        self._adopt(slot, info)
        log.warning("Ray worker %d replaced (now pid %s on %s)", slot, info.get("pid"), info.get("node_ip"))

    # -- running -----------------------------------------------------------------------------------
    def run(
        self, method: str, items: Sequence[Any], emit: Callable[[int, Any], None] | None = None, **kwargs: Any
    ) -> list[Any]:
        """``method`` (``generate`` / ``encode``) over ``items`` in shards; one result per item, in order."""
        if self.closed:
            raise ExecutorError(f"the Ray pool for {self.label} is closed")
        items = list(items)
        n = len(items)
        if not n:
            return []
        # exactly shard_size per shard (the last one shorter): with the runner's shard_size =
        # --batch-size, every worker sees the very batches a local run sends, so batch-dependent
        # numerics (padding, kernel choice) give the same bits
        size = self.config.shard_size
        shards = deque(_Shard(k, list(range(s, min(s + size, n)))) for k, s in enumerate(range(0, n, size)))
        n_shards = len(shards)
        results: list[Any] = [None] * n
        have = [False] * n
        msgs: queue.Queue[tuple[Any, ...]] = queue.Queue()
        cancel = threading.Event()
        threads = [
            threading.Thread(
                target=self._drive, args=(slot, shards, msgs, cancel, method, items, kwargs), daemon=True,
                name=f"ray-pool-{slot}",
            )
            for slot in range(self.config.workers)
            if self.actors[slot] is not None
        ]  # fmt: skip
        if not threads:
            raise ExecutorError(f"every Ray worker of {self.label} is gone")
        self._bar_start(n)
        failed: list[tuple[_Shard, str]] = []
        finished = 0
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
                        for sh in left:
                            failed.append((sh, "no live Ray worker left to run it"))
                        finished += len(left)
                    continue
                kind = msg[0]
                if kind == "result":
                    _, slot, i, value = msg
                    if not have[i]:
                        have[i], results[i] = True, value
                        if emit is not None:
                            emit(i, value)
                        self._bar_advance(slot)
                elif kind == "done":
                    finished += 1
                elif kind == "failed":
                    failed.append((msg[1], msg[2]))
                    finished += 1
        finally:
            cancel.set()
            for t in threads:
                t.join(timeout=5.0)
        if failed:
            n_failed = sum(len(sh.todo) for sh, _ in failed)
            first, why = failed[0]
            raise ShardFailedError(
                f"{len(failed)} of {n_shards} shard(s) of {self.label} failed on the Ray workers after "
                f"{1 + self.config.max_retries} attempt(s) each ({n_failed} of {n} requests unfinished); shard "
                f"{first.number} (requests {first.indices[0]}–{first.indices[-1]} of this batch): {why}",
                failed=n_failed,
                total=n,
            )
        assert all(have)
        return results

    def _drive(self, slot, shards, msgs, cancel, method, items, kwargs) -> None:
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
                        self._attempt(slot, shard, msgs, method, items, kwargs)
            except _SlotDead as e:
                msgs.put(("failed", shard, f"{shard.attempts[-1] if shard.attempts else ''}; {e}".strip("; ")))
                return
            except _Retry:
                msgs.put(("failed", shard, shard.attempts[-1]))
                continue
            except Exception as e:  # a bug in the pool itself: report, never hang
                msgs.put(("failed", shard, error_text(e)))
                continue
            msgs.put(("done", shard))

    def _attempt(self, slot, shard: _Shard, msgs, method, items, kwargs) -> None:
        todo = shard.todo
        if not todo:
            return
        st = self.stats[slot]
        actor = self.actors[slot]
        if shard.attempts:  # an earlier attempt failed: this one is a retry
            st.retries += 1
        t0 = time.perf_counter()
        try:
            gen = getattr(actor, method).remote([items[i] for i in todo], **kwargs)
            for ref in gen:
                value = self.ray.get(ref)
                if isinstance(value, dict):
                    st.load_seconds = max(st.load_seconds, float(value["stats"].get("load_seconds", 0.0)))
                    continue
                for j, v in value:
                    shard.received.add(todo[j])
                    msgs.put(("result", slot, todo[j], v))
                    st.requests += 1
            st.shards += 1
        except self.ray.exceptions.RayTaskError as e:  # the backend raised: retry on the same worker
            shard.attempts.append(f"worker {slot} (pid {st.pid}): {error_text(e)}")
            log.warning("shard %d of %s failed on worker %d: %s", shard.number, self.label, slot, error_text(e))
            raise _Retry(error_text(e)) from e
        except self.ray.exceptions.RayError as e:  # the worker died / its node was lost: replace it
            shard.attempts.append(f"worker {slot} (pid {st.pid}) died: {error_text(e)}")
            log.warning("Ray worker %d died running shard %d of %s; replacing it", slot, shard.number, self.label)
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

    def describe(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "spec": self.label,
            "resources_per_worker": self.resources,
            "workers": [s.to_dict() for s in self.stats],
        }

    def close(self) -> None:
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
            try:
                self.ray.kill(actor, no_restart=True)
            except Exception:
                pass
            self.actors[slot] = None

"""The Ray actor of a pool: one or more *members* — backends (hf / vllm / openai / replay) or text
encoders (the ``embed:`` judge's) — created in the actor's process and answering shards of requests.

The members of one judge (the routes of ``bylang:``, the members of ``mean:`` / ``panel:``) share
the pool's actors: each actor holds every member, as the driver process does with
``--executor local``, and the judge uses one member at a time (docs/scaling.md).

It is a plain class; :mod:`harness.executors.pool` wraps it with ``ray.remote`` (Ray stays an
optional import). Results stream back as they finish: :meth:`ModelWorker.generate` runs the
backend in a helper thread and yields ``[(index, response), ...]`` lists as the backend reports
them, then a ``{"stats": ...}`` dict, so the driver writes each response through its cache as it
arrives and, when a worker dies mid-shard, retries only what did not come back.

**A finished response is never lost with its driver.** A worker on the driver's machine (always
for the local cluster a run starts) holds a pidfd of the driver process and the read end of the
pool's *stop pipe* (a FIFO the driver holds open, and closes to stop its workers on Ctrl-C or
SIGTERM). When either fires — at once, from a thread, and before each finished response is
reported, i.e. before the backend can start another request — the worker writes the responses of
its last two shards into the driver's request cache itself (the ones still on their way to the
driver; rewriting those the driver already stored is harmless) and exits. So a stopped driver
repeats only the calls that were in flight, as with ``--executor local``. (On other nodes Ray
itself stops the actors of a dead driver; responses on their way are lost with it.)
"""

from __future__ import annotations

import json
import os
import queue
import random
import select
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypedDict

import numpy as np

from harness.backends.base import Backend, BackendStats, BackendStatsRecord
from harness.encoders.base import Encoder
from harness.executors.shards import SetupInfo
from harness.jsontypes import JSONObject
from harness.spec import JudgeSpec
from harness.types import Request, Response

#: exit status of a worker whose driver died or stopped it (nothing it computes could be delivered)
DRIVER_GONE_EXIT = 75


class ProcessIdentity(TypedDict):
    """A process, findable by another process on the same machine (see :func:`process_identity`)."""

    pid: int
    start: int | None
    boot_id: str | None


class StatsMessage(TypedDict):
    """A worker call's last message: the member's backend statistics."""

    stats: BackendStatsRecord


def process_identity(pid: int | None = None) -> ProcessIdentity:
    """``pid``, its start time (clock ticks since boot) and the machine's boot id: enough for a
    process on the same machine to find this exact process (not a later one reusing the pid)."""
    pid = os.getpid() if pid is None else pid
    return {"pid": pid, "start": _start_ticks(pid), "boot_id": _boot_id()}


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _start_ticks(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])  # field 22 (starttime), after "pid (comm)"


class DriverWatch:
    """Runs ``on_stop`` and exits this process as soon as the driver process ``driver`` (a
    :func:`process_identity`) is gone or closes the stop pipe at ``stop_path``. Inactive when the
    driver is on another machine or the platform has no pidfd."""

    def __init__(self, driver: ProcessIdentity | None, stop_path: str | None = None) -> None:
        self.fds: list[int] = []
        self.on_stop: Callable[[], None] | None = None
        self.disarmed = False
        self._lock = threading.Lock()
        if not driver or driver.get("boot_id") is None or driver.get("boot_id") != _boot_id():
            return
        pid = int(driver["pid"])
        if _start_ticks(pid) != driver.get("start") or not hasattr(os, "pidfd_open"):
            return  # another pid namespace (a container), or the driver is already gone
        try:
            self.fds.append(os.pidfd_open(pid))
        except OSError:
            return
        if stop_path:
            try:
                self.fds.append(os.open(stop_path, os.O_RDONLY | os.O_NONBLOCK))
            except OSError:  # not this machine's file system after all: the pidfd alone
                pass
        if _start_ticks(pid) != driver.get("start"):  # the pid was reused between the two reads
            self.stop()
        threading.Thread(target=self._wait, name="driver-watch", daemon=True).start()

    @property
    def active(self) -> bool:
        return bool(self.fds)

    def _wait(self) -> None:
        select.select(self.fds, [], [])  # the pidfd: the driver exited; the pipe: closed (or written)
        if not self.disarmed:
            self.stop()

    def disarm(self) -> None:
        """The driver is closing this worker on purpose (it is about to kill it): nothing to save."""
        self.disarmed = True

    def check(self) -> None:
        """Stop now if the driver has died or closed the stop pipe."""
        if self.fds and not self.disarmed and select.select(self.fds, [], [], 0)[0]:
            self.stop()

    def stop(self) -> None:
        with self._lock:  # the first caller saves the responses; any other waits here, then exits
            try:
                if self.on_stop is not None:
                    self.on_stop()
            finally:
                os._exit(DRIVER_GONE_EXIT)


class ModelWorker:
    def __init__(self) -> None:
        self.objs: dict[str, Backend | Encoder] = {}
        self.watch: DriverWatch | None = None
        #: per member: the driver's request cache (None: no cache, or not reachable from here), the
        #: identity its keys use, and the (request, response) pairs of the last two shards
        self.caches: dict[str, str | None] = {}
        self.identities: dict[str, JSONObject] = {}
        self.recent: dict[str, deque[list[tuple[Request, Response]]]] = {}

    def ping(self, driver: ProcessIdentity | None = None, stop_path: str | None = None) -> int:
        """Answered once the actor's process runs (scheduling done, no model loaded yet); starts
        watching ``driver`` and its stop pipe (see the module docstring)."""
        if self.watch is None:
            self.watch = DriverWatch(driver, stop_path)
            self.watch.on_stop = self.save_recent
        return os.getpid()

    def save_recent(self) -> None:
        """Write the responses of each member's last two shards into the driver's request cache,
        keyed as the driver keys them (:class:`harness.cache.CachedBackend`)."""
        from harness.cache import CachedBackend, RequestCache

        for key, shards in self.recent.items():
            path = self.caches.get(key)
            if not path:
                continue
            ident = self.identities[key]
            rows = [
                (
                    RequestCache.make_key(ident, req.payload()),
                    CachedBackend.NAMESPACE,
                    json.dumps(resp.to_dict(), ensure_ascii=False).encode(),
                )
                for shard in list(shards)
                for req, resp in list(shard)
            ]
            if rows:
                cache = RequestCache(path)
                try:
                    cache.put_many(rows)
                finally:
                    cache.close()

    def setup(
        self,
        key: str,
        role: str,
        spec: JudgeSpec,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        seed: int | None = None,
        threads: int | None = None,
        cache: str | None = None,
    ) -> SetupInfo:
        """Create member ``key``: the backend (``role="backend"``) or encoder (``role="encoder"``)
        ``spec`` names; returns where this worker runs and what it holds (identity, capabilities).
        ``cache``: the driver's request cache file, where a stopped driver's last responses go."""
        t0 = time.perf_counter()
        os.environ.update(env or {})
        if cwd and os.path.isdir(cwd):  # relative paths in specs mean what they mean on the driver
            os.chdir(cwd)
        encoder_info: SetupInfo = {}
        obj: Backend | Encoder
        if role == "backend":
            from harness.backends.base import create_local_backend

            obj = create_local_backend(spec)
        elif role == "encoder":
            from harness.encoders import encoder_from_options

            obj = encoder = encoder_from_options(spec.target, spec.revision, spec.options)
            encoder_info = {"prefixes": dict(encoder.prefixes), "engine": encoder.engine}
        else:
            raise ValueError(f"unknown worker role {role!r}")
        self.objs[key] = obj
        torch = sys.modules.get("torch")
        if torch is not None and threads:
            torch.set_num_threads(int(threads))
        if seed is not None:
            random.seed(seed)
            if "numpy" in sys.modules:
                sys.modules["numpy"].random.seed(seed % 2**32)
            if torch is not None:
                torch.manual_seed(seed)
        info = self._where()
        identity = obj.identity()
        info["identity"], info["setup_s"] = identity, time.perf_counter() - t0
        self.identities[key] = identity
        self.caches[key] = cache if (cache and self.watch is not None and self.watch.active) else None
        if role == "encoder":
            info.update(encoder_info)
        return info

    def _where(self) -> SetupInfo:
        info: SetupInfo = {"hostname": socket.gethostname(), "pid": os.getpid()}
        info["watches_driver"] = bool(self.watch and self.watch.active)
        ray = sys.modules.get("ray")
        if ray is not None and ray.is_initialized():  # in a Ray worker (never start Ray outside one)
            info["node_ip"] = ray.util.get_node_ip_address()
            info["gpu_ids"] = [str(g) for g in ray.get_gpu_ids()]
        else:
            info["node_ip"], info["gpu_ids"] = None, []
        return info

    def _stats(self, key: str) -> BackendStatsRecord:
        obj = self.objs[key]
        stats = getattr(obj, "stats", None)
        out = stats.to_dict() if isinstance(stats, BackendStats) else BackendStatsRecord()
        out["load_seconds"] = float(out.get("load_seconds", getattr(obj, "load_seconds", 0.0)) or 0.0)
        return out

    def _check_driver(self) -> None:
        if self.watch is not None:
            self.watch.check()

    def generate(
        self, key: str, requests: Sequence[Request]
    ) -> Iterator[list[tuple[int, Response]] | StatsMessage]:
        """Stream ``[(i, Response), ...]`` as member ``key`` reports them, then ``{"stats": ...}``."""
        out: queue.Queue[tuple[int, Response] | None] = queue.Queue()  # None: the backend is done
        errors: list[BaseException] = []
        backend = self.objs[key]
        if not isinstance(backend, Backend):
            raise TypeError(f"member {key} is an encoder: it encodes, it does not generate")
        requests = list(requests)
        finished: list[tuple[Request, Response]] = []
        self.recent.setdefault(key, deque(maxlen=2)).append(finished)

        def report(i: int, resp: Response) -> None:
            finished.append((requests[i], resp))
            self._check_driver()  # before the backend may start another request
            out.put((i, resp))

        def work() -> None:
            try:
                backend.generate(requests, on_result=report)
            except BaseException as e:  # re-raised in the actor's thread below
                errors.append(e)
            finally:
                out.put(None)

        t = threading.Thread(target=work, name="worker-generate", daemon=True)
        t.start()
        done = False
        while not done:
            batch: list[tuple[int, Response]] = []
            item = out.get()
            while True:  # everything else already finished goes in the same message
                if item is None:
                    done = True
                    break
                batch.append(item)
                try:
                    item = out.get_nowait()
                except queue.Empty:
                    break
            if batch:
                yield batch
        t.join()
        if errors:
            raise errors[0]
        yield {"stats": self._stats(key)}

    def encode(
        self, key: str, texts: Sequence[str], role: str = "query"
    ) -> Iterator[list[tuple[int, np.ndarray]] | StatsMessage]:
        """Unit vectors of ``texts`` as one ``[(i, vector), ...]`` message, then ``{"stats": ...}``."""
        encoder = self.objs[key]
        if not isinstance(encoder, Encoder):
            raise TypeError(f"member {key} is a backend: it generates, it does not encode")
        emb = encoder.encode(list(texts), role=role)
        self._check_driver()
        yield list(enumerate(emb))
        yield {"stats": self._stats(key)}

    def release(self, key: str) -> None:
        self.recent.pop(key, None)  # the driver has all of them
        obj = self.objs.pop(key, None)
        if obj is not None:
            obj.close()

    def close(self) -> None:
        if self.watch is not None:
            self.watch.disarm()
        for key in list(self.objs):
            self.release(key)

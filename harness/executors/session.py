"""The Ray connection: imported lazily (Ray is an optional extra), attached to the cluster at
``RAY_ADDRESS`` when it is set (``ray start --head`` on one node, ``ray start --address …`` on the
others), otherwise a local cluster started for this process and shut down after it.

Every process of a local cluster is gone when the command ends, however it ends: ``ray.shutdown()``
on a normal end, Ctrl-C and SIGTERM (the ``harness`` command takes SIGTERM back from ``ray.init``:
a run stops as on Ctrl-C, :mod:`harness.interrupt`), and a reaper
(:mod:`harness.executors.watchdog`) started before the cluster that kills whatever is left the
moment the driver's pipe closes — also when the driver is killed with SIGKILL.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from harness import interrupt
from harness.executors import watchdog
from harness.executors.config import RAY_EXTRA_HINT, RayNotInstalledError
from harness.jsontypes import JSON, JSONObject

log = logging.getLogger(__name__)
_lock = threading.Lock()
#: environment variable marking the processes of a local cluster started by this process
MARK = "DIALEVAL_RAY_CLUSTER"


class ClusterReaper:
    """The watchdog process of one local cluster (see :mod:`harness.executors.watchdog`)."""

    def __init__(self) -> None:
        self.token = uuid.uuid4().hex
        self.proc = subprocess.Popen(
            [sys.executable, watchdog.__file__, MARK, self.token, str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )

    @contextmanager
    def marking(self) -> Iterator[None]:
        """Processes started in the block (the cluster's) carry the marker; this one keeps none."""
        old = os.environ.get(MARK)
        os.environ[MARK] = self.token
        try:
            yield
        finally:
            if old is None:
                os.environ.pop(MARK, None)
            else:
                os.environ[MARK] = old

    def stop(self, timeout_s: float = 20.0) -> None:
        """Close the pipe: the watchdog kills what is left of the cluster; wait for it."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:  # pragma: no cover - it gives up after 15 s itself
            self.proc.kill()


def import_ray() -> ModuleType:
    """``import ray``, or a clear error naming the extra."""
    try:
        import ray
    except ImportError as e:
        raise RayNotInstalledError(
            f"--executor ray needs Ray, which is not installed: {RAY_EXTRA_HINT}"
        ) from e
    return ray


@contextmanager
def ray_session() -> Iterator[JSONObject]:
    """Connect to Ray for the ``with`` block. A session that finds Ray already initialised (a test's
    cluster, an outer session) reuses it and leaves it running; one that starts it shuts it down."""
    ray = import_ray()
    reaper: ClusterReaper | None = None
    with _lock:
        started = False
        if not ray.is_initialized():
            address = os.environ.get("RAY_ADDRESS") or None
            kwargs: dict[str, str | int | bool] = {"logging_level": logging.WARNING, "log_to_driver": True}
            if address is None:
                # address="local": a fresh cluster on this machine, never some other `ray start` instance
                kwargs.update(address="local", include_dashboard=False)
                reaper = ClusterReaper()
                try:
                    with reaper.marking():
                        ray.init(**kwargs)
                except BaseException:
                    reaper.stop()
                    raise
            else:
                kwargs["address"] = address
                ray.init(**kwargs)
            started = True
            interrupt.reclaim()  # ray.init took SIGTERM: a stop stays the harness's (harness.interrupt)
    try:
        yield describe_cluster(ray, started)
    finally:
        if started:
            try:
                ray.shutdown()
            finally:
                if reaper is not None:
                    reaper.stop()


def describe_cluster(ray: ModuleType, started: bool) -> JSONObject:
    """Ray version, how this process attached, and the cluster's nodes and resources (provenance)."""
    resources: JSONObject
    nodes: list[JSON]
    try:
        resources = {k: v for k, v in ray.cluster_resources().items() if k in ("CPU", "GPU", "memory")}
        nodes = [
            {
                "node_ip": n.get("NodeManagerAddress"),
                "resources": {k: v for k, v in n.get("Resources", {}).items() if k in ("CPU", "GPU")},
            }
            for n in ray.nodes()
            if n.get("Alive")
        ]
    except Exception as e:  # pragma: no cover - a cluster that cannot answer is reported, not fatal here
        resources, nodes = {"error": str(e)}, []
    return {
        "ray_version": ray.__version__,
        "address": os.environ.get("RAY_ADDRESS")
        or ("local (started for this run)" if started else "already connected"),
        "resources": resources,
        "nodes": nodes,
    }

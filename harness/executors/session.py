"""The Ray connection: imported lazily (Ray is an optional extra), attached to the cluster at
``RAY_ADDRESS`` when it is set (``ray start --head`` on one node, ``ray start --address …`` on the
others), otherwise a local cluster started for this process and shut down after it."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from harness.executors.config import RAY_EXTRA_HINT, RayNotInstalledError

log = logging.getLogger(__name__)
_lock = threading.Lock()


def import_ray() -> Any:
    """``import ray``, or a clear error naming the extra."""
    try:
        import ray
    except ImportError as e:
        raise RayNotInstalledError(f"--executor ray needs Ray, which is not installed: {RAY_EXTRA_HINT}") from e
    return ray


@contextmanager
def ray_session() -> Iterator[dict[str, Any]]:
    """Connect to Ray for the ``with`` block. A session that finds Ray already initialised (a test's
    cluster, an outer session) reuses it and leaves it running; one that starts it shuts it down."""
    ray = import_ray()
    with _lock:
        started = False
        if not ray.is_initialized():
            address = os.environ.get("RAY_ADDRESS") or None
            kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": True}
            if address is None:
                # address="local": a fresh cluster on this machine, never some other `ray start` instance
                kwargs.update(address="local", include_dashboard=False)
            else:
                kwargs["address"] = address
            ray.init(**kwargs)
            started = True
    try:
        yield describe_cluster(ray, started)
    finally:
        if started:
            ray.shutdown()


def describe_cluster(ray: Any, started: bool) -> dict[str, Any]:
    """Ray version, how this process attached, and the cluster's nodes and resources (provenance)."""
    try:
        resources = {k: v for k, v in ray.cluster_resources().items() if k in ("CPU", "GPU", "memory")}
        nodes = [
            {"node_ip": n.get("NodeManagerAddress"), "resources": {k: v for k, v in n.get("Resources", {}).items()
                                                                 if k in ("CPU", "GPU")}}
            for n in ray.nodes()
            if n.get("Alive")
        ]  # fmt: skip
    except Exception as e:  # pragma: no cover - a cluster that cannot answer is reported, not fatal here
        resources, nodes = {"error": str(e)}, []
    return {
        "ray_version": ray.__version__,
        "address": os.environ.get("RAY_ADDRESS") or ("local (started for this run)" if started else "already connected"),
        "resources": resources,
        "nodes": nodes,
    }

"""The bookkeeping of a :class:`~harness.executors.pool.WorkerPool`: its members, the shards of a
call, per-worker statistics (provenance), what crosses to the workers (environment, errors), and
the stop pipe its workers watch."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypedDict

from harness.jsontypes import JSONObject
from harness.spec import JudgeSpec

# Environment a worker process needs to load models as the driver would (Ray workers on other
# nodes do not inherit the driver's environment). CUDA_VISIBLE_DEVICES is Ray's to set.
_ENV_PREFIXES = (
    "HF_",
    "HUGGINGFACE_",
    "TRANSFORMERS_",
    "TOKENIZERS_",
    "DIALEVAL_",
    "VLLM_",
    "SENTENCE_TRANSFORMERS_",
)


class SetupInfo(TypedDict, total=False):
    """A worker's answer to setting up a member: where it runs and what it holds."""

    hostname: str
    pid: int
    node_ip: str | None
    gpu_ids: list[str]
    #: the worker watches the driver process and its stop pipe (same machine)
    watches_driver: bool
    #: the member's identity (the backend's or encoder's)
    identity: JSONObject
    setup_s: float
    #: an encoder's prefixes and engine
    prefixes: dict[str, str]
    engine: str


@dataclass
class Member:
    """A backend or encoder held by every actor of a pool, under ``key``."""

    key: str
    role: str  # "backend" | "encoder"
    spec: JudgeSpec
    label: str
    info: SetupInfo = field(default_factory=SetupInfo)  # worker 0's setup answer: identity, prefixes...
    #: the request cache the driver writes this backend's responses to (workers on the driver's
    #: machine save their last responses there when the driver stops)
    cache_path: str | None = None
    requests: int = 0
    released: bool = False

    def to_dict(self) -> JSONObject:
        return {"role": self.role, "spec": self.label, "requests": self.requests}


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
    watches_driver: bool = False
    pids: list[int] = field(default_factory=list)

    def to_dict(self) -> JSONObject:
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
            "watches_driver": self.watches_driver,
            **({"previous_pids": self.pids[:-1]} if len(self.pids) > 1 else {}),
        }


@dataclass
class Shard:
    number: int
    indices: list[int]
    received: set[int] = field(default_factory=set)
    attempts: list[str] = field(default_factory=list)  # what each failed attempt raised

    @property
    def todo(self) -> list[int]:
        return [i for i in self.indices if i not in self.received]


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


class StopPipe:
    """FIFOs the driver holds open; the pool's workers on this machine watch their read ends
    (:class:`harness.executors.worker.DriverWatch`). Closing them — or the driver's death, which
    closes them too — makes the workers save their last responses and exit."""

    def __init__(self) -> None:
        self._fds: list[int] = []

    @contextmanager
    def opening(self) -> Iterator[str | None]:
        """A new FIFO for the workers being placed to open (None without FIFOs); its path is removed
        at the end of the block, so nothing is left on disk whatever happens to the driver later."""
        if not hasattr(os, "mkfifo"):
            yield None
            return
        folder = tempfile.mkdtemp(prefix="dialeval-ray-")
        try:
            path = os.path.join(folder, "stop")
            os.mkfifo(path, 0o600)
            self._fds.append(os.open(path, os.O_RDWR | os.O_NONBLOCK))
            yield path
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def close(self) -> None:
        while self._fds:
            os.close(self._fds.pop())

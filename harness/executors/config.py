"""How requests are executed: ``local`` (one backend in this process) or ``ray`` (a pool of Ray
actors, each holding one backend instance), and how many workers with which resources."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.jsontypes import JSON, JSONObject
from harness.spec import JudgeSpec
from harness.types import BackendError

EXECUTORS = ("local", "ray")
RAY_EXTRA_HINT = "pip install 'dialeval-harness[ray]' (or pip install ray)"


class ExecutorError(BackendError):
    """The executor could not start or keep its workers (no Ray, too few resources, setup failed)."""


class RayNotInstalledError(ExecutorError, ImportError):
    """``--executor ray`` without the ``ray`` extra installed."""


class ShardFailedError(BackendError):
    """A shard of requests failed on every attempt (after worker replacement and retries)."""

    def __init__(self, message: str, *, failed: int, total: int) -> None:
        super().__init__(message)
        self.failed = failed
        self.total = total


@dataclass(frozen=True)
class ExecutorConfig:
    """``--executor``, ``--workers``, ``--gpus-per-worker`` and the pool's internals.

    ``shard_size``: requests per shard sent to one worker (the runner sets it to ``--batch-size``, so
    each worker sees exactly the batches a local run sends). ``max_retries``: attempts per shard
    after the first (a dead worker is replaced first). ``cpus_per_worker`` / ``gpus_per_worker`` are
    the Ray resources of each actor; a judge spec's ``num_cpus=`` / ``num_gpus=`` overrides them.
    ``schedule_timeout_s``: how long actors may wait to be placed on a node (their resources held by
    other jobs) before that is an error; ``startup_timeout_s``: how long loading the models may take.
    """

    kind: str = "local"
    workers: int = 1
    gpus_per_worker: float = 0.0
    cpus_per_worker: float = 1.0
    shard_size: int = 32
    max_retries: int = 2
    startup_timeout_s: float = 900.0
    schedule_timeout_s: float = 120.0

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise ValueError(f"--executor must be one of {', '.join(EXECUTORS)}, got {self.kind!r}")
        if self.workers < 1:
            raise ValueError(f"--workers must be >= 1, got {self.workers}")
        if self.gpus_per_worker < 0 or self.cpus_per_worker < 0:
            raise ValueError("--gpus-per-worker (and num_cpus) must be >= 0")
        if self.kind == "local" and (self.workers != 1 or self.gpus_per_worker):
            raise ValueError("--workers and --gpus-per-worker size a Ray pool: add --executor ray")
        if self.shard_size < 1 or self.max_retries < 0:
            raise ValueError("shard_size must be >= 1 and max_retries >= 0")

    @property
    def distributed(self) -> bool:
        return self.kind == "ray"

    def items_per_call(self, batch_size: int) -> int:
        """Items a caller should hand the judge at once so every worker gets one ``batch_size`` shard."""
        return batch_size * self.workers if self.distributed else batch_size

    def resources(self, spec: JudgeSpec | None = None) -> dict[str, float]:
        """Ray resources of one worker for ``spec``: its ``num_cpus=`` / ``num_gpus=`` options win."""
        opts: Mapping[str, JSON] = spec.options if spec is not None else {}
        try:
            cpus = float(_number(opts.get("num_cpus", self.cpus_per_worker)))
            gpus = float(_number(opts.get("num_gpus", self.gpus_per_worker)))
        except (TypeError, ValueError) as e:
            raise ValueError(
                f"judge spec {spec.raw if spec else ''!r}: num_cpus / num_gpus must be numbers"
            ) from e
        if cpus < 0 or gpus < 0:
            raise ValueError("num_cpus / num_gpus must be >= 0")
        if spec is not None and spec.kind == "vllm":
            tp = int(_number(opts.get("tensor_parallel_size", 1)))
            if gpus and gpus < tp:
                raise ValueError(
                    f"vllm tensor_parallel_size={tp} needs {tp} GPUs per worker (one engine per worker): "
                    f"pass --gpus-per-worker {tp} (or num_gpus={tp} in the judge spec), got {gpus:g}"
                )
        return {"num_cpus": cpus, "num_gpus": gpus}

    def to_dict(self) -> JSONObject:
        d: JSONObject = {"kind": self.kind}
        if self.distributed:
            d.update(
                workers=self.workers,
                gpus_per_worker=self.gpus_per_worker,
                cpus_per_worker=self.cpus_per_worker,
                shard_size=self.shard_size,
                max_retries=self.max_retries,
            )
        return d


def _number(value: JSON) -> int | float | str:
    """A spec option that should be a number: as given (``float()`` / ``int()`` read it), or a
    ``TypeError`` for a list, mapping or null."""
    if not isinstance(value, int | float | str):
        raise TypeError(f"expected a number, got {value!r}")
    return value

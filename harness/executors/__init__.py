"""Executors: where a command's model requests run.

``local`` runs one backend in this process. ``ray`` shards the requests over a pool of Ray actors,
each holding the judge's backends (hf / vllm / openai / replay) and ``embed:`` encoders — all the
members of a composite judge on the same actors — while the driver keeps the judge and the
write-through request cache (docs/scaling.md)::

    with executor_scope(ExecutorConfig("ray", workers=2), seed=0) as scope:
        judge = scope.adopt(load_judge(spec, cache))   # its models gathered on one pool, checked, started
        ...
        results["executor"] = scope.describe()           # per-worker requests, seconds, retries, node/pid

Ray is an optional extra (``pip install 'dialeval-harness[ray]'``), imported only by ``ray`` scopes.
"""

from harness.executors.config import (
    EXECUTORS,
    ExecutorConfig,
    ExecutorError,
    RayNotInstalledError,
    ShardFailedError,
)
from harness.executors.scope import ExecutorScope, executor_scope

__all__ = [
    "EXECUTORS",
    "ExecutorConfig",
    "ExecutorError",
    "ExecutorScope",
    "RayNotInstalledError",
    "ShardFailedError",
    "executor_scope",
]

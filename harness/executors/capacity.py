"""Does a set of worker pools fit the Ray cluster? Checked before any actor of them starts, so a
shortfall is an immediate error with the arithmetic, never actors waiting for resources that
cannot come::

    >>> need = [PoolNeed(2, {"CPU": 1.0}, "embed:a"), PoolNeed(2, {"CPU": 1.0}, "embed:b")]
    >>> shortfall(need, [], {"CPU": 2.0})  # doctest: +ELLIPSIS
    'the Ray workers need 2 pools × 2 workers × 1 CPU = 4 CPUs, but the Ray cluster has 2 CPUs: lower --workers to 1, ...'
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

#: Ray resource name -> the flag / spec option that sets it per worker
_FLAGS = {"CPU": "num_cpus= in the judge spec", "GPU": "--gpus-per-worker (or num_gpus= in the judge spec)"}


@dataclass(frozen=True)
class PoolNeed:
    """One pool: ``workers`` actors, each with ``per_worker`` resources (``{"CPU": 1, "GPU": 0}``)."""

    workers: int
    per_worker: dict[str, float]
    label: str = ""

    def total(self, resource: str) -> float:
        return self.workers * self.per_worker.get(resource, 0.0)


def _n(x: float) -> str:
    return f"{x:g}"


def _unit(resource: str, amount: float) -> str:
    return resource if amount == 1 else f"{resource}s"


def shortfall(starting: list[PoolNeed], held: list[PoolNeed], total: dict[str, float]) -> str | None:
    """The error message when ``starting`` pools (plus the ``held`` ones already running for this
    command) need more CPUs or GPUs than the cluster's ``total``; None when they fit."""
    for resource in ("CPU", "GPU"):
        need = sum(p.total(resource) for p in starting)
        if need <= 0:
            continue
        have = float(total.get(resource, 0.0))
        busy = sum(p.total(resource) for p in held)
        if need + busy <= have + 1e-9:
            continue
        terms = Counter(
            (p.workers, p.per_worker.get(resource, 0.0)) for p in starting if p.total(resource) > 0
        )
        parts = [
            (f"{k} pools × " if k > 1 else "")
            + f"{w} worker{'s' if w != 1 else ''} × {_n(a)} {_unit(resource, a)}"
            for (w, a), k in terms.items()
        ]
        if len(starting) == 1 and len(parts) == 1:
            parts = ["1 pool × " + parts[0]]
        arithmetic = " + ".join(parts) + f" = {_n(need)} {_unit(resource, need)}"
        if busy:
            arithmetic += f" (+ {_n(busy)} held by this command's other pools)"
        per_round = sum(p.per_worker.get(resource, 0.0) for p in starting)  # one more worker in each pool
        workers = max(p.workers for p in starting)
        fit = math.floor((have - busy) / per_round + 1e-9) if per_round else workers
        if 1 <= fit < workers:
            fix = f"lower --workers to {fit}, or {_FLAGS[resource]}"
        else:
            fix = f"lower {_FLAGS[resource]}"
        return (
            f"the Ray workers need {arithmetic}, but the Ray cluster has {_n(have)} {_unit(resource, have)}: "
            f"{fix}, or add nodes (ray start --address …)"
        )
    return None

"""The order in which :func:`finetune.trainer.train` visits the training examples (see the trainer's
"Data order"): a per-epoch permutation that depends only on ``(seed, epoch)``, optionally grouped
by length, and its cut into each process's micro-batches (even batches across processes).
"""

from __future__ import annotations

from collections.abc import Sequence

GROUP_MEGABATCHES = 50  # batches per length-sorted run (group_by_length)


def epoch_permutation(
    n: int,
    seed: int,
    epoch: int,
    shuffle: bool = True,
    lengths: Sequence[int] | None = None,
    batch: int | None = None,
) -> list[int]:
    """The order in which epoch ``epoch`` visits ``n`` examples (depends only on seed and epoch).

    With ``lengths`` and ``batch`` (global micro-batch size) the order is length-grouped: runs of
    ``GROUP_MEGABATCHES × batch`` examples sorted by length (longest first), cut into batches of
    ``batch``, the full batches shuffled and a short last batch kept last."""
    if not shuffle:
        return list(range(n))
    import numpy as np

    rng = np.random.default_rng([seed, epoch])
    perm = rng.permutation(n).tolist()
    if lengths is None or batch is None:
        return perm
    if len(lengths) != n:
        raise ValueError(f"lengths has {len(lengths)} entries for {n} examples")
    run = GROUP_MEGABATCHES * batch
    ordered = [i for s in range(0, n, run) for i in sorted(perm[s : s + run], key=lambda j: (-lengths[j], j))]
    batches = [ordered[s : s + batch] for s in range(0, n, batch)]
    tail = [batches.pop()] if len(batches[-1]) < batch else []
    return [i for b in rng.permutation(len(batches)).tolist() for i in batches[b]] + [
        i for b in tail for i in b
    ]


def shard_batches(
    order: list[int], batch_size: int, num_processes: int, rank: int
) -> list[tuple[list[int], int]]:
    """Cut one epoch's order into this process's micro-batches: ``(indices, new_samples)`` where
    ``new_samples`` is the number of distinct examples of the *global* micro-batch (all processes)."""
    n, glob = len(order), batch_size * num_processes
    out = []
    for start in range(0, n, glob):
        chunk = order[start : start + glob]
        real = len(chunk)
        if num_processes > 1 and real < glob:  # even batches: fill up from the start of the order
            chunk = chunk + [order[i % n] for i in range(glob - real)]
        mine = chunk[rank * batch_size : (rank + 1) * batch_size]
        out.append((mine, real))
    return out

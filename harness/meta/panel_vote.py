"""How a panel of judges votes: the vote rule over the members' (normalised) scores, and what a
composite judge exposes for the panel meta-metrics (:meth:`harness.judges.base.Judge.panel_view`:
members, vote, quorum, ranges), so :mod:`harness.meta` never asks for a judge's class."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MAJORITY_TOLERANCE = 1e-9


def vote(values: Sequence[float], how: str) -> tuple[float, str | None]:
    """(panel value, fallback used or None) of the voting members' (normalised) scores."""
    arr = np.asarray(values, dtype=float)
    if how == "mean":
        return float(arr.mean()), None
    if how == "median":
        return float(np.median(arr)), None
    counts = Counter(np.round(arr / MAJORITY_TOLERANCE).astype(np.int64).tolist())
    key, top = counts.most_common(1)[0]
    if top * 2 > arr.size:
        return float(arr[np.round(arr / MAJORITY_TOLERANCE).astype(np.int64) == key][0]), None
    return float(np.median(arr)), "median"


@dataclass(frozen=True)
class PanelView:
    """What a composite judge exposes for the panel statistics (``Judge.panel_view``)."""

    members: tuple[str, ...]
    vote: str
    quorum: int
    #: each member's score range on the task (None: unknown)
    ranges: tuple[tuple[float, float] | None, ...] | None = None

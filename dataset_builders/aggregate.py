"""Per-dimension aggregates of multi-annotator labels (shared by the builders).

For each dimension: ``n`` labels (missing ones excluded), ``mean``, ``aggregate`` = the sum of the
labels divided by the sum of the per-label maxima (UPHELD App. E.1, so 0..1 for scales that start
at 0; a 1–5 scale gives ``sum / (5 n)`` exactly as the paper defines it), ``majority`` = the winning
label (unique mode, :func:`harness.meta.agreement.winning_label`) and ``agreement`` = the bucket of
UPHELD App. J (full / majority / plurality / none / single, :func:`harness.meta.agreement.agreement_bucket`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from harness.data.schema import Dimension
from harness.meta.agreement import agreement_bucket, winning_label


def aggregates_for(labels: Iterable[dict[str, Any]], dimensions: Sequence[Dimension]) -> list[dict[str, Any]]:
    """One aggregate per dimension (in table order) that has at least one label entry."""
    by_dim: dict[str, list[float]] = {}
    present: set[str] = set()
    for lab in labels:
        present.add(lab["dimension"])
        if lab["value"] is not None:
            by_dim.setdefault(lab["dimension"], []).append(float(lab["value"]))
    out = []
    for dim in dimensions:
        if dim.name not in present:
            continue
        values = by_dim.get(dim.name, [])
        n = len(values)
        out.append(
            {
                "dimension": dim.name,
                "n": n,
                "mean": sum(values) / n if n else None,
                "aggregate": sum(values) / (dim.max * n) if n else None,
                "majority": winning_label(values) if n else None,
                "agreement": agreement_bucket(values) if n else None,
            }
        )
    return out


def mean_of(aggregates: Iterable[dict[str, Any]], dimension: str) -> float | None:
    return next((a["mean"] for a in aggregates if a["dimension"] == dimension), None)

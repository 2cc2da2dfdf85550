"""Accuracy against the winning human label per annotator-agreement level (UPHELD App. J, Table 10).

Each row is one item: a list of human label values and a metric prediction already on the label
scale (map continuous scores with :func:`harness.meta.scale_correlation.discretize`; the paper does not say how
it did this). Accuracy = mean(prediction == winning label). Levels, in Table 10's order:

* ``all`` - every item with a winning label (full, majority and plurality items);
* ``plurality`` / ``majority`` / ``full`` - the items of that :func:`harness.meta.agreement.agreement_bucket`
  (exclusive buckets), or with ``nested=True`` every item at *least* that level (plurality ⊇ majority ⊇
  full, App. J's definitions read literally: a perfect item also has a majority and a lead).

``delta_pct`` is the relative change on the previous level, ``(acc - prev) / prev * 100``. Items of
bucket ``none`` (tied top count) and ``single`` (< 2 labels) have no level and are only counted; so
are items whose prediction is missing (NaN/None).

Note: Table 10's ``all`` column lies below every agreement level (e.g. 0.59 vs 0.84/0.79/0.90), so
the paper's ``all`` cannot be the union of the three levels; it must include the tied items against
some label the paper does not name. Ours is the documented union above.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from harness.meta.agreement import agreement_bucket, winning_label

LEVELS: tuple[str, ...] = ("all", "plurality", "majority", "full")
_RANK = {"plurality": 1, "majority": 2, "full": 3}


def _labels(value: object) -> list[float | None]:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ValueError(f"expected a list of label values per item, got {value!r}")
    return list(value)


def _missing(v: object) -> bool:
    return v is None or (isinstance(v, float | np.floating) and math.isnan(v))


def bucket_accuracy(
    frame: pd.DataFrame,
    prediction_col: str,
    labels_col: str = "labels",
    *,
    nested: bool = False,
) -> pd.DataFrame:
    """Table-10 accuracy of one metric: columns ``bucket, n, accuracy, delta_pct`` (rows all, plurality,
    majority, full).

    ``.attrs`` holds ``n_items``, ``n_none``, ``n_single`` and ``n_missing_prediction`` (items
    excluded). ``accuracy`` is NaN for an empty level, ``delta_pct`` NaN for ``all`` and where the
    previous accuracy is NaN or 0.
    """
    for col in (prediction_col, labels_col):
        if col not in frame.columns:
            raise ValueError(f"frame lacks column {col!r}; it has {list(frame.columns)}")
    if frame.empty:
        raise ValueError("no items given (empty frame)")
    hits: dict[str, list[bool]] = {lvl: [] for lvl in LEVELS}
    counts = {"none": 0, "single": 0, "missing_prediction": 0}
    for pred, labs in zip(frame[prediction_col].tolist(), frame[labels_col].tolist(), strict=True):
        values = _labels(labs)
        bucket = agreement_bucket(values)
        if bucket in ("none", "single"):
            counts[bucket] += 1
            continue
        if _missing(pred):
            counts["missing_prediction"] += 1
            continue
        hit = bool(pred == winning_label(values))
        hits["all"].append(hit)
        for lvl, rank in _RANK.items():
            if lvl == bucket or (nested and _RANK[bucket] >= rank):
                hits[lvl].append(hit)
    rows: list[dict[str, object]] = []
    prev = math.nan
    for lvl in LEVELS:
        acc = float(np.mean(hits[lvl])) if hits[lvl] else math.nan
        delta = (acc - prev) / prev * 100 if lvl != "all" and prev and not math.isnan(prev) else math.nan
        rows.append({"bucket": lvl, "n": len(hits[lvl]), "accuracy": acc, "delta_pct": delta})
        prev = acc
    out = pd.DataFrame(rows, columns=["bucket", "n", "accuracy", "delta_pct"])
    out.attrs.update({"n_items": len(frame), "nested": nested, **{f"n_{k}": v for k, v in counts.items()}})
    return out


def bucket_table(
    frame: pd.DataFrame,
    predictions: Mapping[str, str] | Sequence[str],
    labels_col: str = "labels",
    *,
    nested: bool = False,
) -> pd.DataFrame:
    """Table 10 for several metrics: one row per metric (``predictions`` maps name -> column).

    Columns: ``metric, all, plurality, plurality_delta_pct, majority, majority_delta_pct, full,
    full_delta_pct`` and the counts ``n_all, n_plurality, n_majority, n_full``.
    """
    preds = dict(predictions) if isinstance(predictions, Mapping) else {c: c for c in predictions}
    if not preds:
        raise ValueError("no prediction columns given")
    rows: list[dict[str, object]] = []
    for name, col in preds.items():
        acc = bucket_accuracy(frame, col, labels_col, nested=nested).set_index("bucket")
        row: dict[str, object] = {"metric": name}
        for lvl in LEVELS:
            row[lvl] = acc.at[lvl, "accuracy"]
            if lvl != "all":
                row[f"{lvl}_delta_pct"] = acc.at[lvl, "delta_pct"]
        row.update({f"n_{lvl}": int(acc.at[lvl, "n"]) for lvl in LEVELS})
        rows.append(row)
    return pd.DataFrame(rows)

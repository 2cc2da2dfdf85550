"""Issue-detection results of a run (tasks with ``issue_labels``, e.g. MEDAL): the per-sample
label columns, their parse failures, and the pooled correlations; the meta-metrics
``issue_detection`` and ``pooled_correlation`` (:mod:`harness.meta.builtin`) put them in ``results.json``.

Per language and pooled over languages ("all", MEDAL's "Combined"), every issue dimension gets
F1+/F1−, precision, recall, accuracy, predicted-positive counts (averaged over the annotation
sets), the human ceiling and McNemar's test (:func:`harness.meta.classification.issue_detection`);
"all" also gets the overall score's Pearson/Spearman on the pooled items (``*_pooled``; the plain
``pearson``/``spearman`` of "all" are the average over languages, as for every task).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from harness.meta.correlation import CorrelationEntry, _replicates, correlation, percentile_ci
from harness.meta.soft_labels import label_records


class PooledCorrelationEntry(CorrelationEntry):
    """:func:`pooled_correlations`: a correlation over every language's items pooled."""

    parse_failures: int


def human_labels_json(item: Mapping[str, object]) -> str | None:
    """Every human label of an item as JSON ``{dimension: {annotator: value}}`` (record order)."""
    out: dict[str, dict[str, object]] = {}
    for lab in label_records(item.get("labels")):
        dim = lab.get("dimension")
        if dim is None:
            continue
        out.setdefault(str(dim), {})[str(lab.get("annotator"))] = lab.get("value")
    return json.dumps(out, ensure_ascii=False) if out else None


def label_parse_failures(samples: pd.DataFrame, dimensions: Sequence[str]) -> dict[str, int]:
    """Per dimension: judged items whose label is missing (whole verdict or that field failed)."""
    counts = dict.fromkeys(dimensions, 0)
    for cell in samples["judge_labels"] if "judge_labels" in samples else []:
        labels = json.loads(cell) if isinstance(cell, str) else None
        for d in dimensions:
            if not labels or labels.get(d) is None:
                counts[d] += 1
    return counts


def pooled_correlations(
    samples: pd.DataFrame, methods: Sequence[str], n_bootstrap: int, confidence: float, seed: int
) -> dict[str, PooledCorrelationEntry]:
    """Correlation of score and human rating over all languages pooled, with a bootstrap CI."""
    df = samples.copy()
    df["score"] = pd.to_numeric(df["score"], errors="coerce")
    valid = df[df["score"].notna() & df["human"].notna()].sort_values(["language", "item_id"])
    x = valid["score"].to_numpy(np.float64)
    y = valid["human"].to_numpy(np.float64)
    out: dict[str, PooledCorrelationEntry] = {}
    idx = None
    if n_bootstrap > 0 and len(valid) >= 3:
        idx = np.random.default_rng(seed).integers(0, len(valid), size=(n_bootstrap, len(valid)))
    for m in methods:
        est = correlation(x, y, m)
        if idx is not None and m in ("pearson", "spearman", "kendall"):
            est.ci = percentile_ci(_replicates(x, y, idx, m), confidence)
        out[f"{m}_pooled"] = {**est.to_dict(), "parse_failures": int(len(df) - len(valid))}
    return out

"""The correlation protocols of ``harness reproduce upheld`` (:mod:`tasks.upheld.reproduce`): the
three label dimensions and their scales, the protocols of App. B (which human target, which
correlation, which systems are left out), the join of human targets with item features and the
per-feature correlation (mean ± std over held-out folds, plus the full-set value with a bootstrap
CI).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from harness.meta.scale_correlation import app_b_correlation, cv_fold_correlations, human_targets
from tasks.upheld import paper

if TYPE_CHECKING:
    from tasks.upheld.reproduce import ReproduceConfig

DIMENSIONS = {
    "content": ("likert", (1.0, 2.0, 3.0, 4.0, 5.0)),
    "style": ("likert", (1.0, 2.0, 3.0)),
    "reasonableness": ("binary", (0.0, 1.0)),
}
FEATURE_RANGE = {"llm_judge_likert_1_5": (1.0, 5.0), "llm_judge_likert_1_5_explain": (1.0, 5.0)}


@dataclass(frozen=True)
class Protocol:
    name: str
    target: str  # "rows" (each annotator's label) | "mean" (per item)
    method: str  # "auto" (App. B: Cramér's V / point-biserial) | "pearson"
    exclude_systems: tuple[str, ...]
    description: str


PROTOCOLS = {
    "app-b": Protocol(
        "app-b",
        "rows",
        "auto",
        paper.BASELINE_SYSTEMS,
        "App. B as written: one row per annotator label; Likert content/style are categorical -> Cramér's V "
        "with the metric binned onto the label scale (equal-width bins over the metric's range); binary "
        "reasonableness -> point-biserial; the two calibration baselines (gpt4_rephrase, random) excluded",
    ),
    "pearson-rows": Protocol(
        "pearson-rows", "rows", "pearson", (), "Pearson; one row per annotator label; all systems"
    ),
    "pearson-mean": Protocol(
        "pearson-mean",
        "mean",
        "pearson",
        (),
        "Pearson against the per-item mean label (App. E.1's aggregate is a linear rescaling of it, same r); "
        "all systems",
    ),
}


def scale_for(dimension: str, protocol: Protocol) -> str:
    """Label scale of the human target: per-item means of Likert/binary labels are continuous."""
    return DIMENSIONS[dimension][0] if protocol.target == "rows" else "continuous"


def feature_range(feature: str) -> tuple[float, float]:
    return FEATURE_RANGE.get(feature, (0.0, 1.0))


def joined(
    features: pd.DataFrame, records: list[dict[str, Any]], dimension: str, protocol: Protocol
) -> pd.DataFrame:
    """Human targets of ``dimension`` (protocol's target) joined with the item features."""
    target = human_targets(records, dimension, protocol.target)
    cols = [c for c in features.columns if c not in ("item_id", "dataset", "system")]
    out = target.merge(features[cols], on="id", how="left", validate="many_to_one")
    if protocol.exclude_systems:
        out = out[~out["system"].isin(protocol.exclude_systems)].reset_index(drop=True)
    out.attrs.update(target.attrs)
    return out


def correlate(
    frame: pd.DataFrame, feature: str, dimension: str, protocol: Protocol, cfg: ReproduceConfig
) -> dict[str, Any]:
    levels = DIMENSIONS[dimension][1]
    scale = scale_for(dimension, protocol)
    lo, hi = feature_range(feature)
    kw: dict[str, Any] = dict(scale=scale, method=protocol.method, levels=levels, lo=lo, hi=hi)
    n_valid = int(frame[feature].notna().sum())
    if n_valid < 3 * cfg.n_splits:
        why = f"{n_valid} item(s) with a {feature} value (the rest missing or parse failures)"
        return {"mean": None, "std": None, "folds": [], "full": None, "skipped": why}
    folds = cv_fold_correlations(
        frame,
        feature,
        "human",
        n_splits=cfg.n_splits,
        seed=cfg.seed,
        group_col="id" if cfg.group_cv else None,
        **kw,
    )
    full = app_b_correlation(
        frame[feature].to_numpy(), frame["human"].to_numpy(), n_bootstrap=cfg.n_bootstrap, seed=cfg.seed, **kw
    ).to_dict()
    return {
        "mean": folds["mean"],
        "std": folds["std"],
        "folds": [f["value"] for f in folds["folds"]],
        "full": full,
    }

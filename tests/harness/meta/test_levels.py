"""Aggregation-level correlations (ComperDial Tables 4–5): per (system, dialogue) and per system means
of the judge's scores (parse failures skipped) and of the human ratings, then correlated."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from harness.meta.levels import aggregate, level_correlations, level_frame


def _samples():
    rng = np.random.default_rng(0)
    rows = []
    for s in range(6):
        for d in range(4):
            for _t in range(3):
                h = 1 + s * 0.6 + rng.normal(0, 0.5)
                rows.append(
                    {
                        "dataset": "x",
                        "language": "en",
                        "system": f"s{s}",
                        "dialogue_id": f"d{d}",
                        "score": h + rng.normal(0, 0.7),
                        "human": h,
                    }
                )
    df = pd.DataFrame(rows)
    df.loc[0, "score"] = np.nan  # a parse failure: skipped in the judge's mean, the human mean keeps the turn
    return df


def test_level_frames_and_correlations_by_hand():
    df = _samples()
    sys_frame = level_frame(df, "system")
    g = df.groupby("system")
    assert sys_frame["score"].tolist() == pytest.approx(g["score"].mean().tolist())
    assert sys_frame["human"].tolist() == pytest.approx(g["human"].mean().tolist())
    res = level_correlations(df, ("dialogue", "system"), ("pearson", "kendall"), n_bootstrap=50)
    want = stats.kendalltau(g["score"].mean(), g["human"].mean()).statistic
    assert (
        res["en"]["system/kendall"]["value"] == pytest.approx(want) and res["en"]["system/kendall"]["n"] == 6
    )
    dg = df.groupby(["system", "dialogue_id"])
    want = stats.pearsonr(dg["score"].mean(), dg["human"].mean()).statistic
    assert (
        res["all"]["dialogue/pearson"]["value"] == pytest.approx(want)
        and res["en"]["dialogue/pearson"]["n"] == 24
    )
    assert res["en"]["dialogue/pearson"]["ci"] is not None
    assert level_correlations(df.assign(system=None), ("system",), ("pearson",)) == {}


def test_aggregate_means_over_datasets_then_languages():
    per = {
        ("a", "en"): {"k": {"value": 0.2, "ci": [0, 1], "n": 3, "parse_failures": 1}},
        ("b", "en"): {"k": {"value": 0.4, "ci": [0, 1], "n": 5, "parse_failures": 0}},
        ("a", "zh"): {"k": {"value": 0.9, "ci": [0.5, 1], "n": 3, "parse_failures": 0}},
    }
    out = aggregate(per)
    assert (
        out["en"]["k"]["value"] == pytest.approx(0.3)
        and out["en"]["k"]["ci"] is None
        and out["en"]["k"]["n"] == 8
    )
    assert out["zh"]["k"]["ci"] == [0.5, 1]
    assert out["all"]["k"]["value"] == pytest.approx(0.6) and out["all"]["k"]["parse_failures"] == 1

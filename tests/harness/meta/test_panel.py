"""Panel statistics: Krippendorff's α among judges against a hand computation of the interval α
formula, error correlations against an independent residual computation, the effective number of
judges (design effect), re-voting and the leave-one-judge-out deltas."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest

from harness.meta.correlation import meta_evaluate
from harness.meta.panel import (
    effective_judges,
    error_correlations,
    judge_alpha,
    member_scores,
    panel_report,
    revote,
)


def _alpha_interval_by_hand(matrix: np.ndarray) -> float:
    """Krippendorff's interval α = 1 - D_o / D_e from the pairable values (units = columns)."""
    units = [col[~np.isnan(col)] for col in matrix.T]
    units = [u for u in units if u.size >= 2]
    values = np.concatenate(units)
    n = values.size
    d_o = sum(sum((a - b) ** 2 for a, b in itertools.permutations(u, 2)) / (u.size - 1) for u in units) / n
    d_e = sum((a - b) ** 2 for a, b in itertools.permutations(values, 2)) / (n * (n - 1))
    return 1 - d_o / d_e


def test_alpha_against_the_formula():
    # values on the 0.05 grid already (0 and 1 present): the binning leaves them as they are
    m = pd.DataFrame(
        {
            "j1": [0.1, 0.5, 0.9, 0.3, np.nan],
            "j2": [0.2, 0.4, 0.8, 0.35, 0.6],
            "j3": [0.0, 0.6, 1.0, np.nan, 0.5],
        }
    )
    want = _alpha_interval_by_hand(m.to_numpy().T)
    assert judge_alpha(m)["value"] == pytest.approx(want)
    ranks = m.rank(pct=True)
    scaled = (ranks - np.nanmin(ranks)) / (np.nanmax(ranks) - np.nanmin(ranks))
    binned = (scaled * 20).round() / 20
    assert judge_alpha(m, ranks=True)["value"] == pytest.approx(_alpha_interval_by_hand(binned.to_numpy().T))


def test_alpha_of_continuous_scores_stays_close_to_the_exact_formula():
    rng = np.random.default_rng(0)
    truth = rng.uniform(0, 1, 300)
    m = pd.DataFrame({f"j{k}": np.clip(truth + rng.normal(0, 0.15, 300), 0, 1) for k in range(3)})
    exact = _alpha_interval_by_hand(m.to_numpy()[:60].T)  # the pairwise formula is O(n^2): 60 items
    assert judge_alpha(m.iloc[:60])["value"] == pytest.approx(exact, abs=0.01)
    big = pd.DataFrame({f"j{k}": rng.uniform(0, 1, 5000) for k in range(4)})  # 20,000 distinct values
    assert abs(judge_alpha(big)["value"]) < 0.05


def test_effective_judges():
    assert effective_judges(6, 0.42) == pytest.approx(6 / 3.1)  # inspect_ai #4955: about 1.9 of 6
    assert effective_judges(4, 0.0) == 4 and effective_judges(4, 1.0) == 1
    assert effective_judges(3, -0.6) is None and effective_judges(3, None) is None


def _frame(n=60, seed=0):
    rng = np.random.default_rng(seed)
    human = rng.uniform(1, 5, n)
    shared = rng.normal(0, 1, n)  # an error j1 and j2 share
    cols = {
        "j1": human + shared + rng.normal(0, 0.5, n),
        "j2": human + shared + rng.normal(0, 0.5, n),
        "j3": human + rng.normal(0, 1.2, n),
    }
    return pd.DataFrame(cols), pd.Series(human)


def test_error_correlations_against_independent_residuals():
    m, human = _frame()
    m.loc[3, "j3"] = np.nan  # a member failure: that item is out of j3's pairs only
    got = error_correlations(m, human)
    resid = {}
    for c in m.columns:
        ok = m[c].notna()
        slope, icpt = np.polyfit(human[ok], m.loc[ok, c], 1)
        resid[c] = (m[c] - (icpt + slope * human)).where(ok)
    for a, b in itertools.combinations(m.columns, 2):
        both = resid[a].notna() & resid[b].notna()
        assert got["pairs"][f"{a} | {b}"] == pytest.approx(np.corrcoef(resid[a][both], resid[b][both])[0, 1])
    assert got["pairs"]["j1 | j2"] > 0.5 > abs(got["pairs"]["j1 | j3"])
    assert got["mean"] == pytest.approx(np.mean(list(got["pairs"].values())))
    assert got["effective_judges"] == pytest.approx(3 / (1 + 2 * got["mean"]))


def _samples(m: pd.DataFrame, human: pd.Series, how="mean"):
    names = list(m.columns)
    norm = (m - 0.0) / 6.0  # members on a fixed [0, 6] range
    extras, scores = [], []
    for i in range(len(m)):
        members = [
            {
                "spec": n,
                "status": "ok" if not np.isnan(m.iloc[i][n]) else "parse_error",
                "score": None if np.isnan(m.iloc[i][n]) else float(m.iloc[i][n]),
                "normalised": None if np.isnan(norm.iloc[i][n]) else float(norm.iloc[i][n]),
            }
            for n in names
        ]
        extras.append(json.dumps({"members": members}))
        vals = norm.iloc[i].dropna()
        scores.append(float(vals.mean()) if len(vals) >= 2 else np.nan)
    return pd.DataFrame(
        {
            "dataset": "d",
            "language": "en",
            "id": [f"i{k}" for k in range(len(m))],
            "item_id": [f"i{k}" for k in range(len(m))],
            "score": scores,
            "human": human,
            "extra": extras,
        }
    )


def test_revote_and_leave_one_judge_out():
    m, human = _frame(n=50, seed=2)
    m.loc[0, "j1"] = np.nan
    s = _samples(m, human)
    norm = member_scores(s, list(m.columns))
    assert np.isnan(norm.loc[0, "j1"]) and member_scores(s, ["j2"], "score").loc[1, "j2"] == pytest.approx(
        m.loc[1, "j2"]
    )
    again = revote(norm, "mean", 2)
    assert np.allclose(again.to_numpy(), s["score"].to_numpy(), equal_nan=True)
    rep = panel_report(s, list(m.columns), "mean", 2, ("spearman",), n_bootstrap=0)
    assert rep["members"]["j1"]["failures"] == 1 and rep["panel"]["failures"] == 0
    without_j3 = revote(norm[["j1", "j2"]], "mean", 2)
    want = meta_evaluate(s.assign(score=without_j3), ("spearman",), 0).to_dict()["all"]["spearman"]["value"]
    full = rep["panel"]["results"]["all"]["spearman"]["value"]
    assert rep["leave_one_out"]["j3"]["delta_spearman"] == pytest.approx(full - want)
    assert rep["leave_one_out"]["j3"]["mean_error_correlation"] == pytest.approx(
        rep["error_correlation"]["pairs"]["j1 | j2"]
    )
    # dropping the independent judge leaves two judges that err together: fewer effective judges per judge
    assert rep["leave_one_out"]["j3"]["effective_judges"] < rep["error_correlation"]["effective_judges"]
    assert "alt_test" not in rep

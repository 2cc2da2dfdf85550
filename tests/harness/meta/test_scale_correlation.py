import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.stats.contingency import association, crosstab
from sklearn.model_selection import KFold

from harness.meta.scale_correlation import (
    AppBEstimate,
    app_b_correlation,
    bootstrap_ci,
    cramers_v,
    cv_fold_correlations,
    discretize,
    discretize_quantile,
    human_targets,
    item_level,
    kendall,
    pearson,
    point_biserial,
    spearman,
    system_level,
)

TOL = 1e-9


@pytest.fixture
def xy():
    rng = np.random.default_rng(11)
    x = rng.normal(size=80)
    return x, 0.5 * x + rng.normal(size=80)


@pytest.fixture
def categorical():
    rng = np.random.default_rng(5)
    a = rng.integers(1, 6, size=200)
    b = np.where(rng.random(200) < 0.4, a, rng.integers(1, 4, size=200))
    return a, b


# --------------------------------------------------------------------------- coefficients vs scipy
@pytest.mark.parametrize(
    "ours, ref", [(pearson, stats.pearsonr), (spearman, stats.spearmanr), (kendall, stats.kendalltau)]
)
def test_rank_and_linear_correlations_equal_scipy(xy, ours, ref):
    est, r = ours(*xy), ref(*xy)
    assert abs(est.value - r.statistic) < TOL
    assert abs(est.p_value - r.pvalue) < TOL
    assert est.n == 80


def test_point_biserial_equals_scipy(xy):
    x, y = xy
    binary = (x > 0).astype(int)
    est, r = point_biserial(binary, y), stats.pointbiserialr(binary, y)
    assert abs(est.value - r.statistic) < TOL and abs(est.p_value - r.pvalue) < TOL
    # booleans and 1/2 coding give the same coefficient
    assert abs(point_biserial(x > 0, y).value - r.statistic) < TOL
    assert abs(point_biserial(binary + 1, y).value - r.statistic) < TOL


def test_point_biserial_rejects_non_binary(xy):
    with pytest.raises(ValueError, match="binary"):
        point_biserial([0, 1, 2, 1], [0.1, 0.2, 0.3, 0.4])


def test_cramers_v_equals_scipy_and_hand_formula(categorical):
    a, b = categorical
    table = crosstab(a, b).count
    chi2 = stats.chi2_contingency(table, correction=False)
    est = cramers_v(a, b)
    assert abs(est.value - association(table, method="cramer", correction=False)) < TOL
    hand = math.sqrt(chi2.statistic / (len(a) * (min(table.shape) - 1)))
    assert abs(est.value - hand) < TOL
    assert abs(est.p_value - chi2.pvalue) < TOL
    assert est.n == 200
    # symmetric, and categories may be strings
    assert abs(cramers_v(b, a).value - est.value) < TOL
    assert abs(cramers_v(a.astype(str), b).value - est.value) < TOL
    # non-square table (5 x 3): min(r, c) - 1 = 2, where Cramér's V differs from Tschuprow's T
    c3 = np.minimum(b, 3)
    t53 = crosstab(a, c3).count
    assert t53.shape == (5, 3)
    hand = math.sqrt(stats.chi2_contingency(t53, correction=False).statistic / (len(a) * 2))
    assert abs(cramers_v(a, c3).value - hand) < TOL
    assert abs(cramers_v(a, c3).value - association(t53, method="tschuprow")) > 1e-3


def test_cramers_v_bias_corrected_equals_bergsma(categorical):
    a, b = categorical
    table = crosstab(a, b).count
    n, (r, c) = len(a), table.shape
    phi2 = stats.chi2_contingency(table, correction=False).statistic / n
    phi2c = max(0.0, phi2 - (r - 1) * (c - 1) / (n - 1))
    rc, cc = r - (r - 1) ** 2 / (n - 1), c - (c - 1) ** 2 / (n - 1)
    expected = math.sqrt(phi2c / min(rc - 1, cc - 1))
    est = cramers_v(a, b, bias_correction=True)
    assert abs(est.value - expected) < TOL
    assert est.value < cramers_v(a, b).value


def test_cramers_v_single_category_is_nan():
    assert math.isnan(cramers_v([1, 1, 1, 1], [1, 2, 1, 2]).value)


def test_perfect_association_is_one():
    a = [1, 2, 3, 1, 2, 3, 1, 2, 3]
    assert abs(cramers_v(a, ["x", "y", "z"] * 3).value - 1.0) < TOL


@pytest.mark.parametrize("fn", [pearson, spearman, kendall, point_biserial, cramers_v])
def test_bad_input_errors(fn):
    with pytest.raises(ValueError, match="empty"):
        fn([], [])
    with pytest.raises(ValueError, match="length"):
        fn([0, 1, 0, 1], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="NaN"):
        fn([0, 1, 0, 1], [0.1, np.nan, 0.3, 0.4])


# --------------------------------------------------------------------------- discretisation
def test_discretize_edges_and_nan():
    levels = [1, 2, 3, 4, 5]
    out = discretize([0.0, 0.19999, 0.2, 0.5, 0.99, 1.0, -3.0, 7.0, np.nan], levels)
    assert out[:8].tolist() == [1, 1, 2, 3, 5, 5, 1, 5]
    assert np.isnan(out[8])
    # a score already on a 1..5 scale maps onto itself with lo=1, hi=5
    assert discretize([1, 2, 3, 4, 5], levels, lo=1, hi=5).tolist() == levels
    # string levels
    s = discretize([0.1, 0.9, np.nan], ["bad", "good"])
    assert s[0] == "bad" and s[1] == "good" and pd.isna(s[2])
    with pytest.raises(ValueError):
        discretize([0.5], [])
    with pytest.raises(ValueError):
        discretize([0.5], [1, 2], lo=1, hi=1)


def test_discretize_quantile():
    out = discretize_quantile([0.1, 0.2, 0.3, 0.4, np.nan, 0.5, 0.6], ["lo", "mid", "hi"])
    assert out[0] == "lo" and out[-1] == "hi" and pd.isna(out[4])
    assert (pd.Series(out).value_counts() == 2).all()
    with pytest.raises(ValueError, match="quantile"):
        discretize_quantile([1, 1, 1, 1, 2], [1, 2, 3])


# --------------------------------------------------------------------------- App. B
def test_app_b_auto_methods(xy, categorical):
    x, y = xy
    cont = app_b_correlation(x, y, "continuous")
    assert isinstance(cont, AppBEstimate) and cont.method == "pearson"
    assert abs(cont.value - stats.pearsonr(x, y).statistic) < TOL

    binary = (y > 0).astype(float)
    pb = app_b_correlation(x, binary, "binary")
    assert pb.method == "point_biserial"
    assert abs(pb.value - stats.pointbiserialr(binary, x).statistic) < TOL

    rng = np.random.default_rng(3)
    scores = rng.random(150)
    labels = np.clip(np.floor(scores * 5) + 1 + rng.integers(-1, 2, 150), 1, 5)
    lik = app_b_correlation(scores, labels, "likert", levels=[1, 2, 3, 4, 5])
    assert lik.method == "cramers_v"
    binned = np.clip(np.floor(scores * 5), 0, 4) + 1
    table = crosstab(binned, labels).count
    assert abs(lik.value - association(table, method="cramer", correction=False)) < TOL
    assert lik.value > 0.3


def test_app_b_explicit_methods_and_binary_metric(xy):
    x, y = xy
    for m, ref in [("spearman", stats.spearmanr), ("kendall", stats.kendalltau)]:
        assert abs(app_b_correlation(x, y, "continuous", method=m).value - ref(x, y).statistic) < TOL
    # yes/no metric against Likert labels: the binary side is the scores
    labels = np.clip(np.round(y + 3), 1, 5)
    yes = (x > 0).astype(float)
    est = app_b_correlation(yes, labels, "likert", method="point_biserial")
    assert abs(est.value - stats.pointbiserialr(yes, labels).statistic) < TOL
    with pytest.raises(ValueError, match="binary"):
        app_b_correlation(x, y, "continuous", method="point_biserial")
    with pytest.raises(ValueError, match="unknown method"):
        app_b_correlation(x, y, "continuous", method="cosine")
    with pytest.raises(ValueError, match="unknown scale"):
        app_b_correlation(x, y, "ordinal")


def test_app_b_nan_pairs_excluded_and_counted(xy):
    x, y = xy
    xs, ys = x.copy(), y.astype(object)
    xs[[0, 5]] = np.nan
    ys[9] = None
    est = app_b_correlation(xs, ys, "continuous")
    keep = np.ones(80, bool)
    keep[[0, 5, 9]] = False
    assert est.n == 77 and est.n_missing == 3
    assert abs(est.value - stats.pearsonr(x[keep], y[keep]).statistic) < TOL
    d = est.to_dict()
    assert d["n_missing"] == 3 and d["ci"] is None
    none = app_b_correlation([np.nan, 1.0], [1.0, np.nan], "continuous").to_dict()
    assert none["value"] is None and none["n_missing"] == 2 and "no complete" in none["note"]
    with pytest.raises(ValueError, match="length"):
        app_b_correlation([1.0, 2.0], [1.0], "continuous")


# --------------------------------------------------------------------------- bootstrap
def test_bootstrap_ci_deterministic_and_contains_estimate(xy):
    x, y = xy
    ci1 = bootstrap_ci(pearson, x, y, n_bootstrap=500, seed=4)
    ci2 = bootstrap_ci(pearson, x, y, n_bootstrap=500, seed=4)
    ci3 = bootstrap_ci(pearson, x, y, n_bootstrap=500, seed=5)
    assert ci1 == ci2 and ci1 != ci3
    r = stats.pearsonr(x, y).statistic
    assert ci1[0] < r < ci1[1]
    # the vectorised path equals the generic loop on the same resamples
    loop = bootstrap_ci(lambda a, b: stats.pearsonr(a, b).statistic, x, y, n_bootstrap=500, seed=4)
    assert abs(loop[0] - ci1[0]) < TOL and abs(loop[1] - ci1[1]) < TOL
    # hand percentile bootstrap
    idx = np.random.default_rng(4).integers(0, 80, size=(500, 80))
    reps = [stats.pearsonr(x[i], y[i]).statistic for i in idx]
    lo, hi = np.percentile(reps, [2.5, 97.5])
    assert abs(ci1[0] - lo) < TOL and abs(ci1[1] - hi) < TOL


def test_app_b_fills_ci(categorical):
    a, b = categorical
    est = app_b_correlation(a, b, "likert", binning="none", n_bootstrap=200, seed=1)
    assert est.ci is not None and est.ci[0] <= est.value <= est.ci[1]
    again = app_b_correlation(a, b, "likert", binning="none", n_bootstrap=200, seed=1)
    assert again.ci == est.ci


# --------------------------------------------------------------------------- human targets
def _label(ann, value, dim="content"):
    return {"annotator": ann, "dimension": dim, "value": value, "raw": None if value is None else str(value)}


@pytest.fixture
def records():
    return [
        {
            "id": "r1",
            "item_id": "i1",
            "dataset": "upheld",
            "system": "s1",
            "labels": [_label("a", 5.0), _label("b", 3.0), _label("c", 3.0), _label("a", 1.0, "style")],
            "aggregates": [{"dimension": "content", "n": 3, "aggregate": 11 / 15, "majority": 3.0}],
        },
        {
            "id": "r2",
            "item_id": "i2",
            "dataset": "upheld",
            "system": "s2",
            "labels": [_label("a", 4.0), _label("b", 2.0), _label("c", None)],
            "aggregates": [{"dimension": "content", "n": 2, "aggregate": 6 / 10, "majority": None}],
        },
    ]


def test_human_targets_rows(records):
    rows = human_targets(records, "content", "rows")
    assert list(rows.columns) == ["id", "item_id", "dataset", "system", "annotator", "human"]
    assert rows["human"].tolist() == [5.0, 3.0, 3.0, 4.0, 2.0]
    assert rows.attrs["n_missing"] == 1


def test_human_targets_mean_aggregate_majority(records):
    mean = human_targets(records, "content", "mean")
    assert mean["human"].tolist() == pytest.approx([11 / 3, 3.0])
    assert mean["labels"].tolist() == [[5.0, 3.0, 3.0], [4.0, 2.0]]
    assert mean.attrs["n_missing"] == 1
    agg = human_targets(pd.DataFrame(records), "content", "aggregate")
    assert agg["human"].tolist() == pytest.approx([11 / 15, 0.6])
    maj = human_targets(records, "content", "majority")
    assert maj["id"].tolist() == ["r1"] and maj["human"].tolist() == [3.0]
    assert maj.attrs["n_tied"] == 1 and maj.attrs["n_dropped"] == 1
    style = human_targets(records[:1], "style", "mean")
    assert style["human"].tolist() == [1.0]


def test_human_targets_errors(records):
    with pytest.raises(ValueError, match="'r2'.*style"):
        human_targets(records, "style", "mean")
    with pytest.raises(ValueError, match="unknown target"):
        human_targets(records, "content", "median")
    with pytest.raises(ValueError, match="empty"):
        human_targets([], "content")
    no_agg = [{**records[0], "aggregates": []}]
    with pytest.raises(ValueError, match="'r1'.*aggregates"):
        human_targets(no_agg, "content", "aggregate")


# --------------------------------------------------------------------------- item / system level
@pytest.fixture
def scored():
    rng = np.random.default_rng(21)
    rows = []
    for s in range(8):
        quality = rng.normal()
        for _ in range(int(rng.integers(10, 30))):
            human = quality + rng.normal(scale=0.7)
            rows.append({"system": f"sys{s}", "human": human, "score": human + rng.normal(scale=0.8)})
    df = pd.DataFrame(rows)
    df.loc[[3, 40], "score"] = np.nan
    df.loc[7, "system"] = None
    return df


def test_system_level_equals_scipy_on_system_means(scored):
    out = system_level(scored, "score", n_bootstrap=300, seed=2)
    ok = scored.dropna(subset=["score", "human", "system"])
    means = ok.groupby("system")[["score", "human"]].mean()
    for m, ref in [("pearson", stats.pearsonr), ("spearman", stats.spearmanr), ("kendall", stats.kendalltau)]:
        r = ref(means["score"], means["human"])
        assert abs(out[m]["value"] - r.statistic) < TOL
        assert abs(out[m]["p_value"] - r.pvalue) < TOL
        assert out[m]["n"] == 8 and out[m]["n_missing"] == 2 and out[m]["n_missing_system"] == 1
        assert out[m]["ci"] is not None
    assert out == system_level(scored, "score", n_bootstrap=300, seed=2)


def test_system_level_ci_contains_estimate(scored):
    out = system_level(scored, "score", methods=("pearson",), n_bootstrap=500, seed=0)
    lo, hi = out["pearson"]["ci"]
    assert lo <= out["pearson"]["value"] <= hi
    with pytest.raises(ValueError, match="lacks column"):
        system_level(scored, "nope")
    with pytest.raises(ValueError, match="empty"):
        system_level(scored.iloc[:0], "score")


def test_item_level_dict(scored):
    out = item_level(scored, "score", n_bootstrap=200, seed=1)
    ok = scored.dropna(subset=["score"])
    assert set(out) == {"pearson"}
    assert abs(out["pearson"]["value"] - stats.pearsonr(ok.score, ok.human).statistic) < TOL
    assert out["pearson"]["n_missing"] == 2 and out["pearson"]["n"] == len(ok)
    lo, hi = out["pearson"]["ci"]
    assert lo <= out["pearson"]["value"] <= hi
    both = item_level(scored, "score", method=["spearman", "kendall"], n_bootstrap=0)
    assert set(both) == {"spearman", "kendall"} and both["kendall"]["ci"] is None


def test_cv_fold_correlations_match_kfold(scored):
    res = cv_fold_correlations(scored, "score", n_splits=5, seed=3)
    assert len(res["folds"]) == 5 and res["n_folds"] == 5
    expected = []
    for _, test in KFold(5, shuffle=True, random_state=3).split(np.arange(len(scored))):
        sub = scored.iloc[test].dropna(subset=["score"])
        expected.append(stats.pearsonr(sub.score, sub.human).statistic)
    assert np.allclose([f["value"] for f in res["folds"]], expected, atol=TOL)
    assert abs(res["mean"] - np.mean(expected)) < TOL and abs(res["std"] - np.std(expected)) < TOL
    assert sum(f["n_missing"] for f in res["folds"]) == 2
    grouped = cv_fold_correlations(scored.dropna(subset=["system"]), "score", group_col="system", n_splits=4)
    assert len(grouped["folds"]) == 4

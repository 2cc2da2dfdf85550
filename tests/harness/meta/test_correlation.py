import numpy as np
import pandas as pd
import pytest
from scipy import stats

from harness.meta.correlation import correlation, meta_evaluate


@pytest.fixture
def frame():
    rng = np.random.default_rng(7)
    rows = []
    for ds, n in [("a", 60), ("b", 45)]:
        human = rng.normal(size=n)
        for lang, noise in [("en", 0.5), ("zh", 1.0), ("de", 2.0)]:
            score = human + rng.normal(scale=noise, size=n)
            rows += [
                {"dataset": ds, "language": lang, "item_id": f"{ds}-{i:03d}", "score": s, "human": h}
                for i, (s, h) in enumerate(zip(score, human, strict=True))
            ]
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    "method, fn", [("pearson", stats.pearsonr), ("spearman", stats.spearmanr), ("kendall", stats.kendalltau)]
)
def test_correlation_equals_scipy(method, fn):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=50), rng.normal(size=50)
    y = 0.3 * x + y
    ours = correlation(x, y, method)
    ref = fn(x, y)
    assert ours.value == pytest.approx(ref.statistic, abs=1e-12)
    assert ours.p_value == pytest.approx(ref.pvalue, abs=1e-12)


def test_degenerate_inputs_are_nan_not_errors():
    assert np.isnan(correlation([1, 2], [3, 4]).value)
    assert np.isnan(correlation([1, 1, 1, 1], [1, 2, 3, 4]).value)


def test_meta_evaluation_matches_scipy_and_paper_formulas(frame):
    meta = meta_evaluate(frame, ("pearson", "spearman"), n_bootstrap=500, seed=1).to_dict()
    for lang in ("en", "zh", "de"):
        per = meta[lang]["pearson"]["per_dataset"]
        for ds in ("a", "b"):
            sub = frame[(frame.dataset == ds) & (frame.language == lang)]
            assert per[ds]["value"] == pytest.approx(
                stats.pearsonr(sub.score, sub.human).statistic, abs=1e-12
            )
            assert per[ds]["p_value"] == pytest.approx(stats.pearsonr(sub.score, sub.human).pvalue, abs=1e-12)
            sp = meta[lang]["spearman"]["per_dataset"][ds]["value"]
            assert sp == pytest.approx(stats.spearmanr(sub.score, sub.human).statistic, abs=1e-12)
        # per-language average over datasets (xDial-Eval §4)
        assert meta[lang]["pearson"]["value"] == pytest.approx(
            np.mean([per["a"]["value"], per["b"]["value"]])
        )
        assert meta[lang]["pearson"]["n"] == 105 and meta[lang]["pearson"]["n_datasets"] == 2
        lo, hi = meta[lang]["pearson"]["ci"]
        assert lo < meta[lang]["pearson"]["value"] < hi
    overall = np.mean([meta[lang]["pearson"]["value"] for lang in ("en", "zh", "de")])
    assert meta["all"]["pearson"]["value"] == pytest.approx(overall)
    assert meta["all"]["pearson"]["n_languages"] == 3
    # less noise -> higher correlation, as generated
    assert meta["en"]["pearson"]["value"] > meta["zh"]["pearson"]["value"] > meta["de"]["pearson"]["value"]


def test_bootstrap_ci_agrees_with_scipy_bootstrap(frame):
    sub = frame[(frame.dataset == "a") & (frame.language == "zh")]
    meta = meta_evaluate(sub, ("pearson",), n_bootstrap=4000, seed=3).to_dict()
    ours = meta["zh"]["pearson"]["per_dataset"]["a"]["ci"]
    ref = stats.bootstrap(
        (sub.score.to_numpy(), sub.human.to_numpy()),
        lambda x, y, axis=-1: stats.pearsonr(x, y, axis=axis).statistic,
        paired=True,
        vectorized=True,
        n_resamples=4000,
        method="percentile",
        rng=np.random.default_rng(5),
    ).confidence_interval
    assert ours[0] == pytest.approx(ref.low, abs=0.03)
    assert ours[1] == pytest.approx(ref.high, abs=0.03)


def test_bootstrap_is_deterministic_under_seed(frame):
    a = meta_evaluate(frame, n_bootstrap=200, seed=9).to_dict()
    b = meta_evaluate(frame, n_bootstrap=200, seed=9).to_dict()
    c = meta_evaluate(frame, n_bootstrap=200, seed=10).to_dict()
    assert a["en"]["pearson"]["ci"] == b["en"]["pearson"]["ci"]
    assert a["en"]["pearson"]["ci"] != c["en"]["pearson"]["ci"]


def test_parse_failures_are_excluded_and_counted(frame):
    f = frame.copy()
    mask = (f.dataset == "a") & (f.language == "en") & (f.item_id.isin(["a-000", "a-001", "a-002"]))
    f.loc[mask, "score"] = np.nan
    meta = meta_evaluate(f, ("pearson",), n_bootstrap=0).to_dict()
    entry = meta["en"]["pearson"]["per_dataset"]["a"]
    assert entry["n"] == 57 and entry["parse_failures"] == 3 and entry["n_total"] == 60
    sub = f[(f.dataset == "a") & (f.language == "en")].dropna()
    assert entry["value"] == pytest.approx(stats.pearsonr(sub.score, sub.human).statistic)
    assert meta["en"]["pearson"]["parse_failures"] == 3
    assert meta["all"]["pearson"]["parse_failures"] == 3


def test_missing_human_rating_is_an_error(frame):
    f = frame.copy()
    f.loc[0, "human"] = np.nan
    with pytest.raises(ValueError, match="no human rating"):
        meta_evaluate(f)


def test_bootstrap_drawn_in_blocks_equals_one_draw(monkeypatch):
    """The resamples are drawn a block of rows at a time (bounded memory at any n): the replicates
    equal those of the whole resample matrix drawn at once, for every method and block size."""
    import harness.meta.correlation as corr

    rng = np.random.default_rng(3)
    x, y = rng.normal(size=57), rng.normal(size=57)
    whole = np.random.default_rng([0, 7]).integers(0, 57, size=(101, 57))
    for chunk in (57, 57 * 10, 57 * 101, 1):
        monkeypatch.setattr(corr, "BOOTSTRAP_CHUNK", chunk)
        got = corr.bootstrap_replicates(x, y, np.random.default_rng([0, 7]), 101, corr.METHODS)
        for m in corr.METHODS:
            np.testing.assert_allclose(got[m], corr._replicates(x, y, whole, m), rtol=1e-12, atol=1e-12)

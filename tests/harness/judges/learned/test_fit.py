import json
import logging

import numpy as np
import pandas as pd
import pytest
import sklearn
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import Pipeline
from sklearn.svm import SVC, SVR

from harness.judges.learned.fit import (
    MODEL_KINDS,
    CVResult,
    cross_validate,
    make_estimator,
    prepare_features,
    resolve_task_type,
)
from harness.judges.learned.model import fit_ensemble, load_ensemble, transfer

FEATURES = ["f1", "f2", "f3"]


def synthetic(n=200, seed=0, noise=0.3):
    """y = 2*f1 - f2 + noise; f3 is irrelevant; 'binary' thresholds y; items have 4 rows each."""
    rng = np.random.default_rng(seed)
    f1, f2, f3 = rng.normal(size=(3, n))
    y = 2 * f1 - f2 + rng.normal(scale=noise, size=n)
    return pd.DataFrame(
        {
            "f1": f1,
            "f2": f2,
            "f3": f3,
            "y": y,
            "binary": (y > 0).astype(int),
            "item": [f"it{i // 4:03d}" for i in range(n)],
        }
    )


@pytest.fixture
def frame():
    return synthetic()


def test_resolve_task_type_follows_the_paper():
    assert resolve_task_type("linear_regression", [0, 1, 1], "binary") == "regression"
    assert resolve_task_type("svm", [0, 1, 1], "binary") == "classification"
    assert resolve_task_type("random_forest", [0, 1], "binary") == "classification"
    assert resolve_task_type("svm", [1, 3, 5], "likert") == "regression"
    assert resolve_task_type("random_forest", [0.1, 0.7], "continuous") == "regression"
    with pytest.raises(ValueError, match="3 distinct values"):
        resolve_task_type("svm", [0, 1, 2], "binary")
    with pytest.raises(ValueError, match="label_scale"):
        resolve_task_type("svm", [0, 1], "ordinal")


def test_make_estimator_defaults_and_scaling():
    lr = make_estimator("linear_regression", "regression", 0)
    assert isinstance(lr, Pipeline) and isinstance(lr.steps[-1][1], LinearRegression)
    assert isinstance(make_estimator("svm", "regression", 0).steps[-1][1], SVR)
    assert isinstance(make_estimator("svm", "classification", 0).steps[-1][1], SVC)
    rf = make_estimator("random_forest", "regression", 7)
    assert rf.random_state == 7 and rf.n_estimators == 100
    with pytest.raises(ValueError, match="unknown ensemble kind"):
        make_estimator("xgboost", "regression", 0)


def test_linear_regression_recovers_linear_signal(frame):
    res = cross_validate(frame, FEATURES, "y", "linear_regression", label_scale="continuous")
    assert isinstance(res, CVResult)
    assert res.mean > 0.9 and len(res.fold_values) == 5
    assert res.std == pytest.approx(np.std(res.fold_values, ddof=0))
    assert res.correlation == "pearson" and res.task_type == "regression"


@pytest.mark.parametrize("kind", MODEL_KINDS)
@pytest.mark.parametrize("target, scale", [("y", "continuous"), ("binary", "binary")])
def test_every_kind_runs_on_regression_and_binary_labels(frame, kind, target, scale):
    res = cross_validate(frame, FEATURES, target, kind, label_scale=scale)
    assert res.task_type == resolve_task_type(kind, frame[target], scale)
    assert all(np.isfinite(res.fold_values))
    assert res.mean > 0.6  # strong signal: each kind must find it (point-biserial for binary)


def test_cv_is_deterministic_under_a_seed(frame):
    a = cross_validate(frame, FEATURES, "y", "random_forest", seed=3)
    b = cross_validate(frame, FEATURES, "y", "random_forest", seed=3)
    c = cross_validate(frame, FEATURES, "y", "random_forest", seed=4)
    assert a.fold_values == b.fold_values
    assert a.fold_values != c.fold_values
    # a deterministic model isolates the split: another seed must give other folds
    lr = [cross_validate(frame, FEATURES, "y", "linear_regression", seed=s).fold_values for s in (3, 3, 4)]
    assert lr[0] == lr[1] and lr[0] != lr[2]


def test_each_fold_holds_out_twenty_percent(frame):
    res = cross_validate(frame, FEATURES, "y", "linear_regression")
    assert res.fold_sizes == [40] * 5 and res.n_splits == 5


def test_grouped_cv_keeps_groups_together(frame, monkeypatch):
    import harness.judges.learned.fit as ens

    seen = []
    real = ens.continuous_scores

    def spy(estimator, X):
        seen.append(X.copy())
        return real(estimator, X)

    monkeypatch.setattr(ens, "continuous_scores", spy)
    res = cross_validate(frame, FEATURES, "y", "linear_regression", groups_col="item", seed=1)
    assert res.grouped_by == "item" and sum(res.fold_sizes) == len(frame)
    # Recover each held-out row's item from its (unique) f1 value.
    item_of = dict(zip(frame["f1"], frame["item"], strict=True))
    fold_items = [{item_of[v] for v in X[:, 0]} for X in seen]
    assert len(fold_items) == 5
    for i in range(5):
        for j in range(i + 1, 5):
            assert not fold_items[i] & fold_items[j]
    # every item's four rows are in the same held-out fold
    for X in seen:
        items = [item_of[v] for v in X[:, 0]]
        assert all(items.count(it) == 4 for it in set(items))


def test_nan_features_are_excluded_and_counted_not_imputed(frame):
    frame.loc[[0, 1, 2], "f2"] = np.nan
    frame.loc[5, "f3"] = np.inf
    frame.loc[7, "y"] = np.nan
    prep = prepare_features(frame, FEATURES, "y")
    assert prep.n_excluded == 5 and prep.n_rows == len(frame) - 5
    assert prep.n_missing_feature == 4 and prep.n_missing_target == 1
    assert prep.missing_by_feature == {"f1": 0, "f2": 3, "f3": 1}
    assert not prep.mask[[0, 1, 2, 5, 7]].any() and prep.mask.sum() == prep.n_rows
    assert np.isfinite(prep.X).all()
    res = cross_validate(frame, FEATURES, "y", "linear_regression")
    assert res.n_excluded == 5 and res.n_rows == len(frame) - 5

    model = fit_ensemble(frame, FEATURES, "y", "linear_regression", label_scale="continuous")
    assert model.training["n_excluded"] == 5
    pred = model.predict(frame)
    assert np.isnan(pred[[0, 1, 2, 5]]).all()  # NaN, never a prediction from imputed zeros
    assert np.isfinite(pred[7])  # a missing label does not stop prediction
    assert np.isfinite(np.delete(pred, [0, 1, 2, 5])).all()


def test_prepare_features_names_missing_columns(frame):
    with pytest.raises(ValueError, match=r"missing feature columns: \['f4'\]"):
        prepare_features(frame, ["f1", "f4"], "y")


def test_save_load_round_trip(frame, tmp_path):
    model = fit_ensemble(
        frame,
        FEATURES,
        "binary",
        "random_forest",
        label_scale="binary",
        seed=5,
        target={"dimension": "content", "protocol": "mean"},
        training={"dataset": "upheld", "revision": "abc123", "fingerprint": "f00", "configs": ["main"]},
        feature_info={"f1": "rouge1"},
    )
    assert model.task_type == "classification"
    out = model.save(tmp_path / "ens")
    meta = json.loads((out / "ensemble.json").read_text())
    assert meta["features"] == FEATURES
    assert meta["sklearn_version"] == sklearn.__version__
    assert meta["target"]["dimension"] == "content" and meta["target"]["label_scale"] == "binary"
    assert meta["training"]["dataset"] == "upheld" and meta["training"]["n_rows"] == len(frame)
    assert meta["feature_info"] == {"f1": "rouge1"}
    assert len(meta["model"]["sha256"]) == 64 and "version" in meta["harness"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp dirs left

    loaded = load_ensemble(out)
    other = synthetic(seed=9)
    np.testing.assert_allclose(loaded.predict(other), model.predict(other), rtol=0, atol=1e-12)
    scores = loaded.predict_scores(other)
    np.testing.assert_allclose(scores, model.predict_scores(other), rtol=0, atol=1e-12)
    assert ((scores >= 0) & (scores <= 1)).all() and len(np.unique(scores)) > 2  # probabilities
    assert set(np.unique(loaded.predict(other))) <= {0.0, 1.0}
    assert loaded.describe() == model.describe()


def test_tampered_model_fails_checksum(frame, tmp_path):
    out = fit_ensemble(frame, FEATURES, "y", "linear_regression", label_scale="continuous").save(
        tmp_path / "e"
    )
    with open(out / "model.joblib", "ab") as f:
        f.write(b"\0")
    with pytest.raises(
        ValueError, match="model.joblib does not match the checksum recorded in ensemble.json"
    ):
        load_ensemble(out)


def test_load_missing_files_names_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "nope")):
        load_ensemble(tmp_path / "nope")


def test_load_warns_on_sklearn_version_mismatch(frame, tmp_path, caplog):
    out = fit_ensemble(frame, FEATURES, "y", "svm", label_scale="continuous").save(tmp_path / "e")
    meta = json.loads((out / "ensemble.json").read_text())
    meta["sklearn_version"] = "0.0.1"
    (out / "ensemble.json").write_text(json.dumps(meta))
    with caplog.at_level(logging.WARNING, logger="harness.judges.learned.fit"):
        load_ensemble(out)
    assert "0.0.1" in caplog.text


def test_save_refuses_non_empty_directory(frame, tmp_path):
    model = fit_ensemble(frame, FEATURES, "y", "linear_regression", label_scale="continuous")
    target = tmp_path / "e"
    target.mkdir()
    (target / "keep.txt").write_text("precious")
    with pytest.raises(FileExistsError, match="not empty"):
        model.save(target)
    assert (target / "keep.txt").read_text() == "precious"
    model.save(target, overwrite=True)
    assert not (target / "keep.txt").exists() and (target / "model.joblib").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    model.save(empty)  # an existing empty directory is fine
    assert (empty / "ensemble.json").exists()


def test_predict_names_missing_feature(frame):
    model = fit_ensemble(frame, FEATURES, "y", "linear_regression", label_scale="continuous")
    with pytest.raises(ValueError, match="f2"):
        model.predict(frame.drop(columns=["f2"]))


def test_transfer_reports_correlation_on_another_set(frame):
    model = fit_ensemble(frame, FEATURES, "y", "svm", label_scale="continuous")
    other = synthetic(n=120, seed=11, noise=0.5)
    other.loc[[0, 1], "f1"] = np.nan
    res = transfer(model, other, "y")
    expected = np.corrcoef(model.predict_scores(other)[2:], other["y"].to_numpy()[2:])[0, 1]
    assert res["value"] == pytest.approx(expected)
    assert res["value"] > 0.9 and res["n"] == 118 and res["n_excluded"] == 2
    spearman = transfer(model, other, "y", score_fn="spearman")
    assert spearman["correlation"] == "spearman" and spearman["value"] > 0.9
    custom = transfer(model, other, "y", score_fn=lambda t, p: float(np.mean(np.abs(t - p))))
    assert custom["value"] < 1.0

"""Learned ensemble metrics: scikit-learn models over individual metric scores (UPHELD §B.3.1, App. I).

The paper trains linear regression, an SVM and a random forest "with standard hyper-parameters"
on the individual automatic metric scores (one column per metric) to predict the human label,
reports 5-fold cross-validation (each fold scores a 20 % held-out part) as mean ± std of the
correlation, and for transfer trains on UPHELD main only and applies the model *unchanged* to
the LLM Arena / Topical-Chat verification sets (Tables 7–9).

Model choices (documented because the paper leaves them implicit):

* Hyper-parameters are scikit-learn's defaults; random forests get ``random_state=seed``.
* ``linear_regression`` is always a least-squares *regressor* (the paper calls it linear
  regression), also for binary labels. ``make_estimator`` still offers
  ``LogisticRegression(max_iter=1000)`` for callers who ask for classification explicitly.
* ``svm`` is ``SVC`` for binary labels and ``SVR`` otherwise; ``random_forest`` is a
  classifier for binary labels and a regressor otherwise (:func:`resolve_task_type`).
* Linear models and SVMs sit in ``Pipeline(StandardScaler(), est)``: RBF SVMs are sensitive to
  feature scale (ROUGE in [0, 1] next to a 1–5 Likert judge), and scaling does not change
  ordinary least-squares predictions, so it is harmless there. Forests are scale invariant.
* Classifiers are scored on a continuous score, not hard labels: ``predict_proba[:, 1]`` where
  available, else ``decision_function`` (``SVC``'s ``probability`` option is deprecated in
  scikit-learn 1.9, and its Platt scaling is itself a random inner CV). Pearson between a
  binary label and a continuous score is the point-biserial correlation the paper reports.

Missing values are never imputed: a row with a NaN/inf feature or a NaN target is excluded and
counted. Fitting, saving, loading and transfer of one ensemble are in
:mod:`harness.judges.learned.model`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Protocol

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import GroupKFold, KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, SVR

from harness.jsontypes import JSONObject
from harness.meta.correlation import METHODS, correlation

logger = logging.getLogger(__name__)

MODEL_KINDS = ("linear_regression", "svm", "random_forest")
TASK_TYPES = ("regression", "classification")
LABEL_SCALES = ("binary", "likert", "continuous")

ScoreFn = Callable[[np.ndarray, np.ndarray], float]


class Estimator(Protocol):
    """A scikit-learn estimator (or pipeline) as the ensembles use it."""

    def fit(self, X: np.ndarray, y: np.ndarray) -> object: ...

    def predict(self, X: np.ndarray) -> np.ndarray: ...


# --------------------------------------------------------------------------- estimators


def make_estimator(kind: str, task_type: str, seed: int = 0) -> Estimator:
    """An unfitted scikit-learn estimator with default hyper-parameters (see module docstring)."""
    if kind not in MODEL_KINDS:
        raise ValueError(f"unknown ensemble kind {kind!r}; expected one of {MODEL_KINDS}")
    if task_type not in TASK_TYPES:
        raise ValueError(f"unknown task_type {task_type!r}; expected one of {TASK_TYPES}")
    classify = task_type == "classification"
    if kind == "linear_regression":
        est = LogisticRegression(max_iter=1000) if classify else LinearRegression()
        return make_pipeline(StandardScaler(), est)
    if kind == "svm":
        return make_pipeline(StandardScaler(), SVC() if classify else SVR())
    return RandomForestClassifier(random_state=seed) if classify else RandomForestRegressor(random_state=seed)


def resolve_task_type(kind: str, y: Sequence[float] | np.ndarray | None, label_scale: str) -> str:
    """Regression or classification for ``kind`` on labels of ``label_scale``.

    Linear regression is always a regressor (as in the paper); SVM and random forest classify
    binary labels and regress everything else. Binary labels are checked to have ≤ 2 values.
    """
    if kind not in MODEL_KINDS:
        raise ValueError(f"unknown ensemble kind {kind!r}; expected one of {MODEL_KINDS}")
    if label_scale not in LABEL_SCALES:
        raise ValueError(f"unknown label_scale {label_scale!r}; expected one of {LABEL_SCALES}")
    if label_scale == "binary" and y is not None:
        values = pd.unique(pd.Series(np.asarray(y, dtype=np.float64)).dropna())
        if len(values) > 2:
            raise ValueError(f"label_scale='binary' but the target has {len(values)} distinct values")
    if kind == "linear_regression" or label_scale != "binary":
        return "regression"
    return "classification"


def _task_type(kind: str, y: np.ndarray, label_scale: str, task_type: str) -> str:
    if task_type == "auto":
        return resolve_task_type(kind, y, label_scale)
    resolve_task_type(kind, None, label_scale)  # validates kind and label_scale
    if task_type not in TASK_TYPES:
        raise ValueError(f"unknown task_type {task_type!r}; expected 'auto' or one of {TASK_TYPES}")
    return task_type


def continuous_scores(estimator: Estimator, X: np.ndarray) -> np.ndarray:
    """Regressor predictions; for a binary classifier the score of its larger class
    (``predict_proba[:, 1]``, else ``decision_function``); multi-class: predicted labels."""
    classes = getattr(estimator, "classes_", None)
    if classes is not None and len(classes) == 2:
        if hasattr(estimator, "predict_proba"):
            return np.asarray(estimator.predict_proba(X)[:, 1], dtype=np.float64)
        if hasattr(estimator, "decision_function"):
            return np.asarray(estimator.decision_function(X), dtype=np.float64)
    return np.asarray(estimator.predict(X), dtype=np.float64)


# --------------------------------------------------------------------------- features


@dataclass
class PreparedFeatures:
    """Feature matrix and target for the usable rows of a frame.

    ``mask`` is a boolean array over the frame's rows (True = used); excluded rows are counted
    by cause (a row with both a missing feature and a missing target counts under features).
    """

    X: np.ndarray
    y: np.ndarray | None
    mask: np.ndarray
    n_rows: int
    n_excluded: int
    n_missing_feature: int
    n_missing_target: int
    missing_by_feature: dict[str, int] = field(default_factory=dict)

    def counts(self) -> JSONObject:
        keys = ("n_rows", "n_excluded", "n_missing_feature", "n_missing_target", "missing_by_feature")
        return {k: getattr(self, k) for k in keys}


def _numeric(frame: pd.DataFrame, col: str) -> np.ndarray:
    try:
        return pd.to_numeric(frame[col], errors="raise").to_numpy(dtype=np.float64, na_value=np.nan)
    except (ValueError, TypeError) as e:
        raise ValueError(f"column {col!r} is not numeric: {e}") from e


def prepare_features(
    frame: pd.DataFrame, features: Sequence[str], target_col: str | None = None
) -> PreparedFeatures:
    """Select ``features`` (in order) and ``target_col``; exclude and count incomplete rows.

    A non-finite feature value (NaN, ±inf) or a NaN target excludes the row — nothing is
    imputed. Raises ``ValueError`` naming any missing feature (or target) column.
    """
    features = list(features)
    if not features:
        raise ValueError("no feature columns given")
    dupes = sorted({f for f in features if features.count(f) > 1})
    if dupes:
        raise ValueError(f"duplicate feature columns: {dupes}")
    missing = [f for f in features if f not in frame.columns]
    if missing:
        raise ValueError(f"missing feature columns: {missing}")
    if target_col is not None and target_col not in frame.columns:
        raise ValueError(f"missing target column: {target_col!r}")

    n = len(frame)
    X = np.empty((n, len(features)), dtype=np.float64)
    for j, col in enumerate(features):
        X[:, j] = _numeric(frame, col)
    bad_feature = ~np.isfinite(X)
    feature_ok = ~bad_feature.any(axis=1)
    missing_by_feature = {col: int(bad_feature[:, j].sum()) for j, col in enumerate(features)}

    y = None
    target_ok = np.ones(n, dtype=bool)
    if target_col is not None:
        y = _numeric(frame, target_col)
        target_ok = ~np.isnan(y)
    mask = feature_ok & target_ok
    return PreparedFeatures(
        X=X[mask],
        y=None if y is None else y[mask],
        mask=mask,
        n_rows=int(mask.sum()),
        n_excluded=int(n - mask.sum()),
        n_missing_feature=int((~feature_ok).sum()),
        n_missing_target=int((feature_ok & ~target_ok).sum()),
        missing_by_feature=missing_by_feature,
    )


# --------------------------------------------------------------------------- scoring


def _resolve_score_fn(score_fn: ScoreFn | str | None) -> tuple[ScoreFn, str]:
    """A callable ``(y_true, y_pred) -> float`` and its name; strings pick a harness.meta.correlation method."""
    if score_fn is None:
        score_fn = "pearson"
    if isinstance(score_fn, str):
        method = score_fn
        if method not in METHODS:
            raise ValueError(f"unknown correlation {method!r}; expected one of {METHODS} or a callable")

        def fn(y_true: np.ndarray, y_pred: np.ndarray) -> float:
            return correlation(y_pred, y_true, method).value

        return fn, method
    return score_fn, getattr(score_fn, "__name__", repr(score_fn))


# --------------------------------------------------------------------------- cross-validation


@dataclass
class CVResult:
    kind: str
    task_type: str
    fold_values: list[float]
    mean: float
    std: float  # population std (ddof=0) over folds; NaN folds propagate, nothing is dropped
    n_rows: int
    n_excluded: int
    n_splits: int
    seed: int
    correlation: str
    fold_sizes: list[int] = field(default_factory=list)  # held-out rows per fold
    grouped_by: str | None = None
    label_scale: str | None = None

    def to_dict(self) -> JSONObject:
        d: JSONObject = asdict(self)
        d.update(mean=_nan_to_none(self.mean), std=_nan_to_none(self.std))
        d["fold_values"] = [_nan_to_none(v) for v in self.fold_values]
        return d


def _nan_to_none(x: float) -> float | None:
    return None if x is None or math.isnan(float(x)) else float(x)


def cross_validate(
    frame: pd.DataFrame,
    features: Sequence[str],
    target_col: str,
    kind: str,
    *,
    label_scale: str = "likert",
    task_type: str = "auto",
    n_splits: int = 5,
    seed: int = 0,
    score_fn: ScoreFn | str | None = None,
    groups_col: str | None = None,
) -> CVResult:
    """K-fold CV of one ensemble: each fold fits on the rest and scores its held-out part.

    ``KFold(shuffle=True, random_state=seed)``; with ``groups_col`` a shuffled ``GroupKFold``
    keeps every row of a group (e.g. an item rated by several annotators) in one fold. The fold
    score is ``score_fn(y_true, y_pred)`` (default: Pearson; a string picks pearson / spearman /
    kendall) on continuous scores (see :func:`continuous_scores`). Deterministic under ``seed``.
    """
    prep = prepare_features(frame, features, target_col)
    X, y = prep.X, prep.y
    assert y is not None
    resolved = _task_type(kind, y, label_scale, task_type)
    fn, name = _resolve_score_fn(score_fn)
    if n_splits < 2:
        raise ValueError(f"n_splits must be at least 2, got {n_splits}")

    if groups_col is not None:
        if groups_col not in frame.columns:
            raise ValueError(f"missing groups column: {groups_col!r}")
        groups = frame[groups_col].to_numpy()[prep.mask]
        if pd.isna(groups).any():
            raise ValueError(f"groups column {groups_col!r} has missing values")
        groups = pd.factorize(groups, sort=True)[0]  # ids of any type → comparable ints
        n_groups = len(np.unique(groups))
        if n_splits > n_groups:
            raise ValueError(f"n_splits={n_splits} exceeds the {n_groups} groups in {groups_col!r}")
        splits = GroupKFold(n_splits=n_splits, shuffle=True, random_state=seed).split(X, y, groups)
    else:
        if n_splits > len(y):
            raise ValueError(f"n_splits={n_splits} exceeds the {len(y)} usable rows")
        splits = KFold(n_splits=n_splits, shuffle=True, random_state=seed).split(X, y)

    values: list[float] = []
    sizes: list[int] = []
    for fold, (train, test) in enumerate(splits):
        if resolved == "classification" and len(np.unique(y[train])) < 2:
            raise ValueError(f"fold {fold}: the training part has a single class; cannot fit a classifier")
        est = make_estimator(kind, resolved, seed)
        est.fit(X[train], y[train])
        values.append(float(fn(y[test], continuous_scores(est, X[test]))))
        sizes.append(len(test))

    arr = np.asarray(values, dtype=np.float64)
    return CVResult(
        kind=kind,
        task_type=resolved,
        fold_values=values,
        mean=float(arr.mean()),
        std=float(arr.std(ddof=0)),
        n_rows=prep.n_rows,
        n_excluded=prep.n_excluded,
        n_splits=n_splits,
        seed=seed,
        correlation=name,
        fold_sizes=sizes,
        grouped_by=groups_col,
        label_scale=label_scale,
    )


# --------------------------------------------------------------------------- fitted ensembles

"""A fitted learned ensemble (UPHELD App. I): fit on every usable row, save as ``model.joblib`` plus
an ``ensemble.json`` with the features, target, training data provenance, versions and the model
file's sha256, load (checksum verified) and transfer unchanged to another dataset.

joblib files are pickles — loading one runs code, so only load ensembles you trust.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import platform
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import NotRequired, TypedDict

import joblib
import numpy as np
import pandas as pd
import sklearn

from harness.jsontypes import JSON, JSONObject
from harness.judges.learned.fit import (
    Estimator,
    ScoreFn,
    _resolve_score_fn,
    _task_type,
    continuous_scores,
    make_estimator,
    prepare_features,
)
from harness.meta.correlation import correlation
from harness.provenance import harness_info, library_versions

logger = logging.getLogger(__name__)

MODEL_FILE = "model.joblib"
META_FILE = "ensemble.json"
FORMAT_VERSION = 1
_META_KEYS: tuple[str, ...] = ("kind", "task_type", "features", "target", "training", "feature_info")
_META_KEYS += ("sklearn_version", "created_at", "harness")


def _json_default(obj: object) -> JSON:
    if isinstance(obj, np.generic | np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"ensemble metadata value of type {type(obj).__name__} is not JSON serializable: {obj!r}")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class TransferResult(TypedDict):
    """An ensemble applied to another set: the correlation of its scores with the labels."""

    correlation: str
    n: int
    n_excluded: int
    value: float
    #: for a named correlation
    p_value: NotRequired[float | None]


@dataclass
class FittedEnsemble:
    estimator: Estimator
    kind: str
    task_type: str
    features: list[str]
    target: JSONObject = field(default_factory=dict)  # dimension, label_scale, protocol ("rows"/"mean")
    training: JSONObject = field(default_factory=dict)  # dataset, revision, fingerprint, config, n_rows…
    feature_info: JSONObject = field(default_factory=dict)  # how features were computed (encoders…)
    sklearn_version: str = sklearn.__version__
    created_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    harness: JSONObject = field(default_factory=harness_info)

    def _scores(self, frame: pd.DataFrame, continuous: bool) -> np.ndarray:
        prep = prepare_features(frame, self.features)
        out = np.full(len(frame), np.nan, dtype=np.float64)
        if prep.n_rows:
            if continuous:
                out[prep.mask] = continuous_scores(self.estimator, prep.X)
            else:
                out[prep.mask] = np.asarray(self.estimator.predict(prep.X), dtype=np.float64)
        return out

    def predict(self, frame: pd.DataFrame) -> np.ndarray:
        """The estimator's predictions (class labels for classifiers) as floats, one per row.

        Rows with a missing feature get NaN (never 0). Raises ``ValueError`` naming missing columns.
        """
        return self._scores(frame, continuous=False)

    def predict_scores(self, frame: pd.DataFrame) -> np.ndarray:
        """Continuous scores, one per row: predictions for regressors, the positive-class
        probability (or decision value) for binary classifiers; NaN where a feature is missing."""
        return self._scores(frame, continuous=True)

    def describe(self) -> JSONObject:
        """All metadata (no estimator object), as recorded in ``ensemble.json``."""
        meta = {k: copy.deepcopy(getattr(self, k)) for k in _META_KEYS}
        return {"format_version": FORMAT_VERSION, **meta, "estimator": repr(self.estimator)}

    def save(self, directory: str | Path, *, overwrite: bool = False) -> Path:
        """Write ``model.joblib`` + ``ensemble.json`` into ``directory`` atomically.

        Files are written to a temporary sibling directory that is then renamed into place. An
        existing non-empty ``directory`` is refused unless ``overwrite=True``.
        """
        directory = Path(directory)
        if directory.exists():
            if not directory.is_dir():
                raise FileExistsError(f"{directory} exists and is not a directory")
            if any(directory.iterdir()) and not overwrite:
                raise FileExistsError(
                    f"{directory} exists and is not empty; pass overwrite=True to replace it"
                )
        directory.parent.mkdir(parents=True, exist_ok=True)
        meta = self.describe()
        meta["environment"] = _light_environment()
        json.dumps(meta, default=_json_default)  # fail on bad metadata before writing anything

        tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.tmp-", dir=directory.parent))
        try:
            model_path = tmp / MODEL_FILE
            joblib.dump(self.estimator, model_path)
            meta["model"] = {
                "file": MODEL_FILE,
                "sha256": _sha256(model_path),
                "bytes": model_path.stat().st_size,
            }
            (tmp / META_FILE).write_text(
                json.dumps(meta, indent=2, sort_keys=True, default=_json_default) + "\n", encoding="utf-8"
            )
            if not directory.exists():
                tmp.rename(directory)
                return directory
            # Move the old directory aside, swap the new one in, restore the old one on failure.
            old = Path(tempfile.mkdtemp(prefix=f".{directory.name}.old-", dir=directory.parent))
            directory.rename(old / "old")
            try:
                tmp.rename(directory)
            except BaseException:
                (old / "old").rename(directory)
                raise
            shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return directory


def _light_environment() -> JSONObject:
    """Python/platform/library versions, without importing torch for device info."""
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "libraries": dict(library_versions()),
    }


def fit_ensemble(
    frame: pd.DataFrame,
    features: Sequence[str],
    target_col: str,
    kind: str,
    *,
    label_scale: str,
    task_type: str = "auto",
    seed: int = 0,
    target: JSONObject | None = None,
    training: JSONObject | None = None,
    feature_info: JSONObject | None = None,
) -> FittedEnsemble:
    """Fit one ensemble on every usable row of ``frame`` (e.g. UPHELD main, for transfer).

    ``target``/``training``/``feature_info`` are recorded as given, completed with the label
    scale, target column, seed and the row counts actually used.
    """
    prep = prepare_features(frame, features, target_col)
    assert prep.y is not None
    resolved = _task_type(kind, prep.y, label_scale, task_type)
    if prep.n_rows == 0:
        raise ValueError("no usable rows to fit on (every row has a missing feature or target)")
    if resolved == "classification" and len(np.unique(prep.y)) < 2:
        raise ValueError("the target has a single class; cannot fit a classifier")
    est = make_estimator(kind, resolved, seed)
    est.fit(prep.X, prep.y)
    target_meta: JSONObject = {"column": target_col, "label_scale": label_scale, **(target or {})}
    training_meta: JSONObject = {**(training or {}), "seed": seed, **prep.counts()}
    return FittedEnsemble(
        estimator=est,
        kind=kind,
        task_type=resolved,
        features=list(features),
        target=target_meta,
        training=training_meta,
        feature_info=dict(feature_info or {}),
    )


def load_ensemble(directory: str | Path) -> FittedEnsemble:
    """Load a saved ensemble after checking ``model.joblib`` against its recorded sha256.

    joblib files are pickles: loading runs code, so only load ensembles you trust. Logs a
    warning when the scikit-learn version differs from the one the ensemble was saved with.
    """
    directory = Path(directory)
    meta_path, model_path = directory / META_FILE, directory / MODEL_FILE
    missing = [p.name for p in (meta_path, model_path) if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"no saved ensemble in {directory}: missing {', '.join(missing)}")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    recorded = (meta.get("model") or {}).get("sha256")
    if not recorded or _sha256(model_path) != recorded:
        raise ValueError(f"{directory}: model.joblib does not match the checksum recorded in ensemble.json")
    saved_version = meta.get("sklearn_version")
    if saved_version != sklearn.__version__:
        logger.warning(
            "ensemble in %s was saved with scikit-learn %s but %s is installed; predictions may differ",
            directory,
            saved_version,
            sklearn.__version__,
        )
    estimator = joblib.load(model_path)
    meta.update({k: meta.get(k) or {} for k in ("target", "training", "feature_info", "harness")})
    features = meta["features"] = list(meta["features"])
    n_in = getattr(estimator, "n_features_in_", None)
    if n_in is not None and n_in != len(features):
        raise ValueError(
            f"{directory}: the model expects {n_in} features but ensemble.json lists {len(features)}"
        )
    return FittedEnsemble(estimator=estimator, **{k: meta.get(k) for k in _META_KEYS})


def transfer(
    ensemble: FittedEnsemble,
    frame: pd.DataFrame,
    target_col: str,
    score_fn: ScoreFn | str | None = None,
) -> TransferResult:
    """Apply a fitted ensemble unchanged to another set and correlate its scores with the labels.

    Returns ``{value, n, n_excluded, correlation}`` (plus ``p_value`` for a named correlation);
    rows with a missing feature or label are excluded and counted.
    """
    prep = prepare_features(frame, ensemble.features, target_col)
    assert prep.y is not None
    fn, name = _resolve_score_fn(score_fn)
    scores = continuous_scores(ensemble.estimator, prep.X) if prep.n_rows else np.empty(0)
    if score_fn is None or isinstance(score_fn, str):
        est = correlation(scores, prep.y, name)
        return TransferResult(
            correlation=name, n=prep.n_rows, n_excluded=prep.n_excluded, value=est.value, p_value=est.p_value
        )
    value = float(fn(prep.y, scores)) if prep.n_rows else math.nan
    return TransferResult(correlation=name, n=prep.n_rows, n_excluded=prep.n_excluded, value=value)

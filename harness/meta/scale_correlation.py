"""Metric-vs-human correlations for UPHELD App. B.2 and ComperDial-style system-level scores.

UPHELD App. B.2: Pearson for numeric values, Cramér's V for categorical ones, point-biserial for
binary ones, as "5-fold cross-validation results on a 20 % held-out set" (:func:`cv_fold_correlations`).
:func:`app_b_correlation` makes that choice (``method="auto"``) from ``scale``, the *human label* scale
(``Dimension.scale``); an explicit ``method`` overrides it, e.g. ``"point_biserial"`` for a yes/no
metric against Likert labels (the binary side is found automatically).

Cramér's V (and UPHELD App. J bucket accuracy, :mod:`harness.meta.buckets`) needs the continuous metric
score on the label scale. The paper does not say how it mapped scores onto labels; our documented
choice is :func:`discretize`: ``k`` equal-width bins over ``[lo, hi]`` (default ``[0, 1]``), bin ``i``
-> ``levels[i]``. For a score already on a 1..5 scale use ``lo=1, hi=5`` (integers map to themselves).
:func:`discretize_quantile` is the equal-frequency alternative.

System level (ComperDial fn. 9): a system's score is the average of its turn-level scores, human and
metric alike; the correlation is over systems (``n`` = number of systems).

Point estimates and p-values come from scipy; confidence intervals are percentile bootstraps over
paired resamples (:func:`bootstrap_ci`), using :func:`harness.meta.correlation.percentile_ci`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict, Unpack

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats
from scipy.stats.contingency import association, crosstab
from sklearn.model_selection import KFold

from harness.meta.agreement import winning_label
from harness.meta.correlation import (
    CorrelationEntry,
    CorrelationEstimate,
    _clean,
    _replicates,
    correlation,
    percentile_ci,
)
from harness.meta.soft_labels import as_float, label_records

SCALES: tuple[str, ...] = ("binary", "likert", "continuous")
APP_B_METHODS: tuple[str, ...] = ("pearson", "spearman", "kendall", "point_biserial", "cramers_v")
TARGETS: tuple[str, ...] = ("rows", "mean", "aggregate", "majority")
BINNINGS: tuple[str, ...] = ("width", "quantile", "none")
_AUTO = {"binary": "point_biserial", "likert": "cramers_v", "continuous": "pearson"}


class AppBEntry(CorrelationEntry):
    """:meth:`AppBEstimate.to_dict`: the correlation, the pairs left out and the coefficient used."""

    n_missing: int
    method: str


class FoldEntry(AppBEntry):
    """One held-out fold of :func:`cv_fold_correlations`."""

    fold: int


class CvFolds(TypedDict):
    """:func:`cv_fold_correlations`: each fold's correlation and their mean and spread."""

    folds: list[FoldEntry]
    mean: float | None
    std: float | None
    n_folds: int


class SystemCorrelation(CorrelationEntry):
    """One method of :func:`system_level`: the correlation over systems and the rows left out."""

    n_missing: int
    n_missing_system: int
    n_items: int


class AppBOptions(TypedDict, total=False):
    """Options of :func:`app_b_correlation` that :func:`item_level` passes on."""

    lo: float
    hi: float
    binning: str
    bias_correction: bool
    confidence: float


class FoldOptions(AppBOptions, total=False):
    """Options of :func:`app_b_correlation` that :func:`cv_fold_correlations` passes on."""

    n_bootstrap: int


# --------------------------------------------------------------------------- input checks
def _missing(a: np.ndarray) -> np.ndarray:
    return np.asarray(pd.isna(a), dtype=bool)


def _pair(
    x: npt.ArrayLike, y: npt.ArrayLike, *, numeric: bool = True, allow_nan: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Arrays of x and y; ValueError on empty input, different lengths, or (unless allowed) NaN."""
    xa = np.asarray(x, dtype=np.float64 if numeric else None)
    ya = np.asarray(y, dtype=np.float64 if numeric else None)
    if xa.ndim != 1 or ya.ndim != 1:
        raise ValueError(f"expected 1-d inputs, got shapes {xa.shape} and {ya.shape}")
    if xa.size != ya.size:
        raise ValueError(f"inputs differ in length: {xa.size} vs {ya.size}")
    if xa.size == 0:
        raise ValueError("no data (empty input)")
    if not allow_nan and (_missing(xa).any() or _missing(ya).any()):
        raise ValueError("inputs contain NaN/None; drop them first or use app_b_correlation()")
    return xa, ya


# --------------------------------------------------------------------------- coefficients
def pearson(x: npt.ArrayLike, y: npt.ArrayLike) -> CorrelationEstimate:
    """Pearson's r and p-value (scipy ``pearsonr``); NaN for n < 3 or constant input."""
    return correlation(*_pair(x, y), "pearson")


def spearman(x: npt.ArrayLike, y: npt.ArrayLike) -> CorrelationEstimate:
    """Spearman's rho and p-value (scipy ``spearmanr``)."""
    return correlation(*_pair(x, y), "spearman")


def kendall(x: npt.ArrayLike, y: npt.ArrayLike) -> CorrelationEstimate:
    """Kendall's tau-b and p-value (scipy ``kendalltau``)."""
    return correlation(*_pair(x, y), "kendall")


def point_biserial(binary: npt.ArrayLike, scores: npt.ArrayLike) -> CorrelationEstimate:
    """Point-biserial r (scipy ``pointbiserialr``) of a two-valued variable with numeric scores.

    ValueError when ``binary`` holds more than 2 distinct values; NaN when it (or ``scores``) is
    constant or n < 3.
    """
    b, s = _pair(binary, scores)
    distinct = np.unique(b)
    if distinct.size > 2:
        raise ValueError(
            f"point_biserial needs a binary first argument, got {distinct.size} distinct values "
            f"{distinct[:5].tolist()}{'...' if distinct.size > 5 else ''}"
        )
    n = int(b.size)
    if n < 3 or distinct.size < 2 or np.all(s == s[0]):
        why = "the binary side" if distinct.size < 2 else "the scores"
        why = f"{n} pair(s), needs 3" if n < 3 else f"{why} are constant"
        return CorrelationEstimate(math.nan, math.nan, n, note=f"undefined: {why}")
    # 0/1 coding; the sign follows the larger value being "1" (pointbiserialr is Pearson on it).
    res = stats.pointbiserialr((b == distinct[-1]).astype(np.float64), s)
    return CorrelationEstimate(float(res.statistic), float(res.pvalue), n)


def cramers_v(a: npt.ArrayLike, b: npt.ArrayLike, *, bias_correction: bool = False) -> CorrelationEstimate:
    """Cramér's V of two categorical arrays, with the chi-square test's p-value (no Yates correction).

    The table is ``scipy.stats.contingency.crosstab`` over the observed categories. Plain V is
    ``association(table, method="cramer", correction=False)`` = sqrt(chi2 / (n (min(r, c) - 1)));
    ``bias_correction=True`` gives Bergsma's (2013) corrected V. NaN when either side has a single
    category.
    """
    xa, ya = _pair(a, b, numeric=False)
    n = int(xa.size)
    table = crosstab(xa, ya).count
    r, c = table.shape
    if r < 2 or c < 2:
        return CorrelationEstimate(math.nan, math.nan, n, note="undefined: a side has a single category")
    chi2 = stats.chi2_contingency(table, correction=False)
    if not bias_correction:
        value = float(association(table, method="cramer", correction=False))
    else:
        value = _bergsma(float(chi2.statistic), n, r, c)
    note = "undefined: too few pairs for the bias correction" if math.isnan(value) else None
    return CorrelationEstimate(value, float(chi2.pvalue), n, note=note)


def _bergsma(chi2: float, n: int, r: int, c: int) -> float:
    if n < 2:
        return math.nan
    phi2 = max(0.0, chi2 / n - (r - 1) * (c - 1) / (n - 1))
    r_corr = r - (r - 1) ** 2 / (n - 1)
    c_corr = c - (c - 1) ** 2 / (n - 1)
    denom = min(r_corr - 1, c_corr - 1)
    return math.sqrt(phi2 / denom) if denom > 0 else math.nan


# --------------------------------------------------------------------------- discretisation
def discretize(
    scores: npt.ArrayLike, levels: Sequence[object], *, lo: float = 0.0, hi: float = 1.0
) -> np.ndarray:
    """Map scores onto ``levels`` by ``k = len(levels)`` equal-width bins over ``[lo, hi]``.

    Bin ``i = floor((s - lo) / (hi - lo) * k)``, clipped to ``[0, k - 1]`` (so ``lo`` -> first level,
    ``hi`` -> last level, out-of-range scores go to the end bins); NaN stays NaN. Returns a float
    array when every level is numeric, else an object array.
    """
    lv = _level_array(levels)
    if not hi > lo:
        raise ValueError(f"need lo < hi, got lo={lo}, hi={hi}")
    s = np.asarray(scores, dtype=np.float64)
    nan = np.isnan(s)
    idx = np.clip(np.floor((np.where(nan, lo, s) - lo) / (hi - lo) * lv.size), 0, lv.size - 1)
    out = lv[idx.astype(int)]
    out[nan] = np.nan
    return out


def discretize_quantile(scores: Sequence[float] | np.ndarray, levels: Sequence[object]) -> np.ndarray:
    """Equal-frequency alternative to :func:`discretize` (``pd.qcut`` into ``len(levels)`` bins).

    NaN stays NaN. ValueError when ties make bin edges coincide (use :func:`discretize` then).
    """
    lv = _level_array(levels)
    try:
        codes = pd.qcut(np.asarray(scores, dtype=np.float64), q=lv.size, labels=False)
    except ValueError as exc:
        raise ValueError(f"cannot cut scores into {lv.size} quantile bins: {exc}") from exc
    nan = np.isnan(codes)
    out = lv[np.where(nan, 0, codes).astype(int)]
    out[nan] = np.nan
    return out


def _level_array(levels: Sequence[object]) -> np.ndarray:
    """Levels as a float array when all are numeric, else an object array (both can hold NaN)."""
    levels = list(levels)
    if not levels:
        raise ValueError("levels must not be empty")
    numeric = all(isinstance(v, int | float | np.integer | np.floating) for v in levels)
    return np.asarray(levels, dtype=np.float64 if numeric else object)


# --------------------------------------------------------------------------- bootstrap
_VECTORISED: dict[Callable[[npt.ArrayLike, npt.ArrayLike], CorrelationEstimate], str] = {
    pearson: "pearson",
    spearman: "spearman",
    kendall: "kendall",
}


def bootstrap_ci(
    fn: Callable[[np.ndarray, np.ndarray], CorrelationEstimate | float],
    x: npt.ArrayLike,
    y: npt.ArrayLike,
    *,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Percentile CI of ``fn(x, y)`` over ``n_bootstrap`` paired resamples (``default_rng(seed)``).

    ``fn`` returns a float or a :class:`CorrelationEstimate`. Degenerate resamples (NaN) are dropped;
    None when fewer than half of them (or < 10) are usable.
    """
    xa, ya = _pair(x, y, numeric=False, allow_nan=True)
    if n_bootstrap <= 0:
        raise ValueError(f"n_bootstrap must be positive, got {n_bootstrap}")
    idx = np.random.default_rng(seed).integers(0, xa.size, size=(n_bootstrap, xa.size))
    if fn in _VECTORISED:
        reps = _replicates(xa.astype(np.float64), ya.astype(np.float64), idx, _VECTORISED[fn])
    else:
        reps = np.array([_value(fn(xa[i], ya[i])) for i in idx], dtype=np.float64)
    return percentile_ci(reps, confidence)


def _value(r: CorrelationEstimate | float) -> float:
    return float(r.value) if isinstance(r, CorrelationEstimate) else float(r)


# --------------------------------------------------------------------------- App. B
@dataclass
class AppBEstimate:
    """One App. B correlation: ``n`` pairs used, ``n_missing`` pairs excluded (NaN on either side)."""

    value: float
    p_value: float
    n: int
    n_missing: int
    method: str
    ci: tuple[float, float] | None = None
    note: str | None = None  # why the value is undefined

    def to_dict(self) -> AppBEntry:
        ci = [_clean(self.ci[0]), _clean(self.ci[1])] if self.ci else None
        out: AppBEntry = {
            "value": _clean(self.value),
            "p_value": _clean(self.p_value),
            "ci": ci,
            "n": self.n,
            "n_missing": self.n_missing,
            "method": self.method,
        }
        if self.note:
            out["note"] = self.note
        return out


def resolve_method(scale: str, method: str = "auto") -> str:
    """The coefficient App. B uses for a label ``scale`` (``method="auto"``), or ``method`` itself."""
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; expected one of {SCALES}")
    if method == "auto":
        return _AUTO[scale]
    if method not in APP_B_METHODS:
        raise ValueError(f"unknown method {method!r}; expected 'auto' or one of {APP_B_METHODS}")
    return method


def app_b_correlation(
    scores: npt.ArrayLike,
    labels: npt.ArrayLike,
    scale: str,
    *,
    method: str = "auto",
    levels: Sequence[object] | None = None,
    lo: float = 0.0,
    hi: float = 1.0,
    binning: str = "width",
    bias_correction: bool = False,
    n_bootstrap: int = 0,
    confidence: float = 0.95,
    seed: int = 0,
) -> AppBEstimate:
    """Correlate metric ``scores`` with human ``labels`` as UPHELD App. B.2 prescribes.

    ``method="auto"``: binary labels -> point-biserial, likert (categorical) -> Cramér's V of the
    scores mapped onto ``levels`` vs the labels, continuous -> Pearson. Explicit methods: see
    :data:`APP_B_METHODS`. For Cramér's V, ``binning`` is ``"width"`` (:func:`discretize` over
    ``[lo, hi]``), ``"quantile"`` (:func:`discretize_quantile`) or ``"none"`` (scores already
    categorical); ``levels`` defaults to the sorted distinct labels. For point-biserial the binary
    side is the labels when they have <= 2 values, else the scores. Pairs with NaN/None on either side
    are excluded and counted in ``n_missing``. ``n_bootstrap > 0`` fills ``ci``.
    """
    m = resolve_method(scale, method)
    if binning not in BINNINGS:
        raise ValueError(f"unknown binning {binning!r}; expected one of {BINNINGS}")
    s, y = _pair(scores, labels, numeric=False, allow_nan=True)
    keep = ~(_missing(s) | _missing(y))
    n_missing = int((~keep).sum())
    if not keep.any():
        note = f"undefined: no complete (score, label) pair, all {s.size} pairs have a missing value"
        return AppBEstimate(math.nan, math.nan, 0, n_missing, m, None, note)
    s, y = s[keep], y[keep]
    fn: Callable[[np.ndarray, np.ndarray], CorrelationEstimate]
    if m == "cramers_v":
        lv = list(levels) if levels is not None else sorted(pd.unique(y).tolist())
        if binning == "width":
            s = discretize(s.astype(np.float64), lv, lo=lo, hi=hi)
        elif binning == "quantile":
            s = discretize_quantile(s.astype(np.float64), lv)

        def fn(a: np.ndarray, b: np.ndarray) -> CorrelationEstimate:
            return cramers_v(a, b, bias_correction=bias_correction)

    elif m == "point_biserial":
        s, y = s.astype(np.float64), y.astype(np.float64)
        binary_labels = np.unique(y).size <= 2
        if not binary_labels and np.unique(s).size > 2:
            raise ValueError("point_biserial needs binary labels or binary scores; both have > 2 values")

        def fn(a: np.ndarray, b: np.ndarray) -> CorrelationEstimate:
            return point_biserial(b, a) if binary_labels else point_biserial(a, b)

    else:
        s, y = s.astype(np.float64), y.astype(np.float64)
        fn = {"pearson": pearson, "spearman": spearman, "kendall": kendall}[m]
    est = fn(s, y)
    ci = None
    if n_bootstrap > 0:
        ci = bootstrap_ci(fn, s, y, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed)
    return AppBEstimate(est.value, est.p_value, est.n, n_missing, m, ci, est.note)


# --------------------------------------------------------------------------- human side
def _as_list(x: object) -> list[Mapping[str, object]]:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return []
    return label_records(list(x) if isinstance(x, np.ndarray) else x)


def _is_missing(v: object) -> bool:
    return v is None or (isinstance(v, float | np.floating) and math.isnan(v))


def human_targets(
    records: pd.DataFrame | Sequence[Mapping[str, object]],
    dimension: str,
    target: str = "mean",
    *,
    keep: Sequence[str] = (),
) -> pd.DataFrame:
    """The human side of a correlation, from common-schema records, for one ``dimension``.

    ``target``: ``"rows"`` -> one row per (record, non-missing label) with columns ``id, item_id,
    dataset, system, annotator, human``; ``"mean"`` -> one row per record, ``human`` = mean of its
    labels; ``"aggregate"`` -> UPHELD App. E.1 sum / sum of maxima, read from the record's
    ``aggregates`` entry for the dimension; ``"majority"`` -> the winning label (unique mode). The
    per-record targets also carry ``labels`` (the record's non-missing values, e.g. for
    :func:`harness.meta.buckets.bucket_accuracy`). ``keep`` names extra record fields to copy.

    Labels with value None/NaN are dropped and counted in ``.attrs["n_missing"]``; records left
    without a value are dropped (``.attrs["n_dropped"]``), tied majorities among them
    (``.attrs["n_tied"]``). ValueError naming the record id when a record has no label for the
    dimension (or, for ``"aggregate"``, no aggregates entry).
    """
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; expected one of {TARGETS}")
    recs = records.to_dict("records") if isinstance(records, pd.DataFrame) else list(records)
    if not recs:
        raise ValueError("no records given (empty input)")
    base = ["id", "item_id", "dataset", "system", *keep]
    rows: list[dict[str, object]] = []
    n_missing = n_dropped = n_tied = 0
    for rec in recs:
        rid = rec.get("id")
        labs = [lab for lab in _as_list(rec.get("labels")) if lab.get("dimension") == dimension]
        if not labs:
            raise ValueError(f"record {rid!r} has no labels for dimension {dimension!r}")
        ok = [lab for lab in labs if not _is_missing(lab.get("value"))]
        n_missing += len(labs) - len(ok)
        head = {c: rec.get(c) for c in base}
        values = [as_float(lab["value"], "a label value") for lab in ok]
        if target == "rows":
            rows += [
                {**head, "annotator": lab.get("annotator"), "human": as_float(lab["value"], "a label value")}
                for lab in ok
            ]
            continue
        if target == "mean":
            human = float(np.mean(values)) if values else None
        elif target == "aggregate":
            agg = next((a for a in _as_list(rec.get("aggregates")) if a.get("dimension") == dimension), None)
            if agg is None:
                raise ValueError(f"record {rid!r} has no aggregates entry for dimension {dimension!r}")
            aggregate = agg.get("aggregate")
            human = None if _is_missing(aggregate) else as_float(aggregate, "an aggregate")
        else:
            human = winning_label(values)
            n_tied += int(human is None and len(values) > 0)
        if human is None:
            n_dropped += 1
            continue
        rows.append({**head, "human": human, "labels": values})
    cols = [*base, "annotator", "human"] if target == "rows" else [*base, "human", "labels"]
    out = pd.DataFrame(rows, columns=cols)
    out.attrs.update(target=target, dimension=dimension, n_records=len(recs), n_missing=n_missing)
    out.attrs.update(n_dropped=n_dropped, n_tied=n_tied)
    return out


# --------------------------------------------------------------------------- item / system level
def _need(frame: pd.DataFrame, cols: Sequence[str]) -> None:
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        raise ValueError(f"frame lacks column(s) {missing}; it has {list(frame.columns)}")
    if frame.empty:
        raise ValueError("no data (empty frame)")


def item_level(
    frame: pd.DataFrame,
    score_col: str,
    human_col: str = "human",
    scale: str = "continuous",
    method: str | Sequence[str] = "auto",
    levels: Sequence[object] | None = None,
    n_bootstrap: int = 1000,
    seed: int = 0,
    **options: Unpack[AppBOptions],
) -> dict[str, dict[str, object]]:
    """Item-level :func:`app_b_correlation` of ``frame[score_col]`` vs ``frame[human_col]``.

    ``method`` is one name or several; ``options`` go to :func:`app_b_correlation` (``lo``, ``hi``,
    ``binning``, ``bias_correction``, ``confidence``). Returns ``{method: {value, p_value, ci, n,
    n_missing, method}}`` keyed by the resolved method name.
    """
    _need(frame, [score_col, human_col])
    methods = [method] if isinstance(method, str) else list(method)
    x, y = frame[score_col].to_numpy(), frame[human_col].to_numpy()
    ests = [
        app_b_correlation(x, y, scale, method=m, levels=levels, n_bootstrap=n_bootstrap, seed=seed, **options)
        for m in methods
    ]
    return {e.method: dict(e.to_dict()) for e in ests}


def system_level(
    frame: pd.DataFrame,
    score_col: str,
    human_col: str = "human",
    system_col: str = "system",
    methods: Sequence[str] = ("pearson", "spearman", "kendall"),
    n_bootstrap: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, SystemCorrelation]:
    """System-level correlations (ComperDial fn. 9): per-system means of metric and human, then r/rho/tau.

    Rows with a missing score or human value are excluded (``n_missing``) before averaging, so both
    means use the same items; rows without a system id are excluded too (``n_missing_system``). ``n``
    is the number of systems, ``n_items`` the rows averaged (pass one row per item, e.g. target
    ``"mean"``: with ``"rows"`` an item weighs once per label). The CI resamples items within each
    system (stratified bootstrap, ``default_rng(seed)``) and recomputes the system means; all methods
    share the replicates.
    """
    _need(frame, [score_col, human_col, system_col])
    bad = [m for m in methods if m not in ("pearson", "spearman", "kendall")]
    if bad:
        raise ValueError(f"unknown system-level method(s) {bad}; expected pearson/spearman/kendall")
    score = pd.to_numeric(frame[score_col], errors="coerce").to_numpy(np.float64)
    human = pd.to_numeric(frame[human_col], errors="coerce").to_numpy(np.float64)
    no_system = frame[system_col].isna().to_numpy()
    complete = ~(np.isnan(score) | np.isnan(human))
    keep = complete & ~no_system
    if not keep.any():
        raise ValueError("no row has a system id, a score and a human value")
    systems = frame[system_col].to_numpy()[keep]
    score, human = score[keep], human[keep]
    order = sorted(pd.unique(systems).tolist(), key=str)
    groups = [np.flatnonzero(systems == s) for s in order]
    sx = np.array([score[g].mean() for g in groups])
    sy = np.array([human[g].mean() for g in groups])
    reps_x = reps_y = None
    if n_bootstrap > 0 and len(order) >= 3:
        rng = np.random.default_rng(seed)
        reps_x = np.empty((n_bootstrap, len(order)))
        reps_y = np.empty((n_bootstrap, len(order)))
        for j, g in enumerate(groups):
            idx = g[rng.integers(0, g.size, size=(n_bootstrap, g.size))]
            reps_x[:, j] = score[idx].mean(axis=1)
            reps_y[:, j] = human[idx].mean(axis=1)
    out: dict[str, SystemCorrelation] = {}
    for m in methods:
        est = correlation(sx, sy, m)
        if reps_x is not None and reps_y is not None:
            # _replicates takes flat arrays + index rows; the identity index yields the replicate rows.
            ident = np.arange(reps_x.size).reshape(reps_x.shape)
            est.ci = percentile_ci(_replicates(reps_x.ravel(), reps_y.ravel(), ident, m), confidence)
        out[m] = {
            **est.to_dict(),
            "n_missing": int((~complete & ~no_system).sum()),
            "n_missing_system": int(no_system.sum()),
            "n_items": int(keep.sum()),
        }
    return out


def cv_fold_correlations(
    frame: pd.DataFrame,
    score_col: str,
    human_col: str = "human",
    scale: str = "continuous",
    method: str = "auto",
    levels: Sequence[object] | None = None,
    n_splits: int = 5,
    seed: int = 0,
    group_col: str | None = None,
    **options: Unpack[FoldOptions],
) -> CvFolds:
    """UPHELD App. B.2 "5-fold cross-validation results on a 20 % held-out set" for one metric.

    ``KFold(n_splits, shuffle=True, random_state=seed)`` over the rows (or, with ``group_col``, over
    the distinct groups so e.g. all annotator rows of one item fall in one fold); the correlation
    (:func:`app_b_correlation`, ``options`` passed on) on each held-out fold. Returns ``{"folds":
    [...], "mean", "std" (ddof=0), "n_folds"}`` with mean/std over the folds whose value is defined.
    """
    _need(frame, [score_col, human_col, *([group_col] if group_col else [])])
    kf = KFold(n_splits=n_splits, shuffle=True, random_state=seed)
    if group_col is None:
        splits = [test for _, test in kf.split(np.arange(len(frame)))]
    else:
        codes, uniq = pd.factorize(frame[group_col], use_na_sentinel=False)
        splits = [np.flatnonzero(np.isin(codes, t)) for _, t in kf.split(np.arange(len(uniq)))]
    scores, labels = frame[score_col].to_numpy(), frame[human_col].to_numpy()
    folds: list[FoldEntry] = []
    for i, test in enumerate(splits):
        est = app_b_correlation(scores[test], labels[test], scale, method=method, levels=levels, **options)
        folds.append({"fold": i, **est.to_dict()})
    vals = np.array([f["value"] for f in folds if f["value"] is not None], dtype=np.float64)
    mean, std = (float(np.mean(vals)), float(np.std(vals))) if vals.size else (None, None)
    return {"folds": folds, "mean": mean, "std": std, "n_folds": int(vals.size)}

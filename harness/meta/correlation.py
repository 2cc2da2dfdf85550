"""Meta-evaluation statistics: judge scores vs human ratings.

Point estimates and p-values come from scipy (``pearsonr``, ``spearmanr``, ``kendalltau``).
Confidence intervals are percentile bootstraps. Because xDial-Eval's languages are translations
of the same items, a dataset's resamples draw the *same item indices* in every language (a
paired design), and the per-language average over datasets (xDial-Eval §4:
``1/|Ω| Σ_i ρ^{i,l}``) and the overall average over languages (``1/|L| Σ_l …``) get their
intervals from the same replicates, so the three levels are consistent.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats

METHODS = ("pearson", "spearman", "kendall")


class CorrelationEntry(TypedDict):
    """A correlation as ``results.json`` writes it (:meth:`CorrelationEstimate.to_dict`): an
    undefined value, p-value or CI bound is None; ``note`` says why, or what was left out."""

    value: float | None
    p_value: float | None
    ci: list[float | None] | None
    n: int
    note: NotRequired[str]


class DatasetCorrelation(CorrelationEntry):
    """One dataset × language of :func:`meta_evaluate`: the correlation over the parsed items."""

    parse_failures: int
    n_total: int


class LanguageCorrelation(TypedDict):
    """A language's correlation: the mean over its datasets (each under ``per_dataset``)."""

    value: float | None
    ci: list[float] | None
    n: int
    n_datasets: int
    parse_failures: int
    per_dataset: dict[str, DatasetCorrelation]
    note: NotRequired[str]


class OverallCorrelation(TypedDict):
    """The ``all`` entry: the mean over the languages."""

    value: float | None
    ci: list[float] | None
    n: int
    n_languages: int
    parse_failures: int
    note: NotRequired[str]


#: :meth:`MetaEvaluation.to_dict`: language (and ``all``) -> method -> entry
CorrelationTable = dict[str, dict[str, LanguageCorrelation] | dict[str, OverallCorrelation]]


@dataclass
class CorrelationEstimate:
    value: float
    p_value: float
    n: int
    ci: tuple[float, float] | None = None
    note: str | None = None  # why the value is undefined (NaN -> None in to_dict), or what was left out

    def to_dict(self) -> CorrelationEntry:
        out: CorrelationEntry = {
            "value": _clean(self.value),
            "p_value": _clean(self.p_value),
            "ci": [_clean(self.ci[0]), _clean(self.ci[1])] if self.ci else None,
            "n": self.n,
        }
        if self.note:
            out["note"] = self.note
        return out


def _clean(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def correlation(x: npt.ArrayLike, y: npt.ArrayLike, method: str = "pearson") -> CorrelationEstimate:
    """scipy's correlation and p-value over the complete (x, y) pairs; for degenerate data (fewer
    than 3 complete pairs, a constant side) a NaN value (None in :meth:`~CorrelationEstimate.to_dict`)
    with a ``note`` saying why, never an exception."""
    xa = np.asarray(x, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64)
    if xa.shape != ya.shape:
        raise ValueError(f"x and y differ in length: {xa.shape} vs {ya.shape}")
    if method not in METHODS:
        raise ValueError(f"unknown correlation method {method!r}; expected one of {METHODS}")
    keep = np.isfinite(xa) & np.isfinite(ya)
    dropped = int(xa.size - keep.sum())
    xa, ya = xa[keep], ya[keep]
    n = int(xa.size)
    left_out = f"; {dropped} pair(s) with a missing value left out" if dropped else ""
    if n < 3:
        return CorrelationEstimate(
            math.nan, math.nan, n, note=f"undefined: {n} complete pair(s), needs 3{left_out}"
        )
    if np.all(xa == xa[0]) or np.all(ya == ya[0]):
        side = "x" if np.all(xa == xa[0]) else "y"
        return CorrelationEstimate(math.nan, math.nan, n, note=f"undefined: {side} is constant{left_out}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "pearson":
            r = stats.pearsonr(xa, ya)
        elif method == "spearman":
            r = stats.spearmanr(xa, ya)
        elif method == "kendall":
            r = stats.kendalltau(xa, ya)
        else:
            raise ValueError(f"unknown correlation method {method!r}; expected one of {METHODS}")
    value = float(r.statistic)
    note = "undefined: scipy returned NaN" if math.isnan(value) else (left_out[2:] or None)
    return CorrelationEstimate(value, float(r.pvalue), n, note=note)


def _replicates(x: np.ndarray, y: np.ndarray, idx: np.ndarray, method: str) -> np.ndarray:
    """Correlation of each bootstrap resample (rows of ``idx``)."""
    xb, yb = x[idx], y[idx]
    if method == "spearman":
        xb = stats.rankdata(xb, axis=-1)
        yb = stats.rankdata(yb, axis=-1)
    elif method == "kendall":
        return np.array([correlation(a, b, "kendall").value for a, b in zip(xb, yb, strict=True)])
    elif method != "pearson":
        raise ValueError(f"unknown correlation method {method!r}")
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore")
        return np.asarray(stats.pearsonr(xb, yb, axis=-1).statistic, dtype=np.float64)


#: resampled elements (resamples × items) drawn at a time: bounds a bootstrap's memory at any n
BOOTSTRAP_CHUNK = 1 << 20


def bootstrap_replicates(
    x: np.ndarray, y: np.ndarray, rng: np.random.Generator, n_bootstrap: int, methods: Sequence[str]
) -> dict[str, np.ndarray]:
    """Each method's correlation on ``n_bootstrap`` resamples of the pairs: the resample matrix
    ``rng.integers(0, n, size=(n_bootstrap, n))`` is drawn a block of rows at a time (the generator
    yields the same numbers as one draw of the whole matrix), so memory stays at
    :data:`BOOTSTRAP_CHUNK` elements whatever ``n``; every method sees the same resamples."""
    n = len(x)
    rows = max(1, BOOTSTRAP_CHUNK // max(n, 1))
    out = {m: np.empty(n_bootstrap, dtype=np.float64) for m in methods}
    for start in range(0, n_bootstrap, rows):
        idx = rng.integers(0, n, size=(min(rows, n_bootstrap - start), n))
        for m in methods:
            out[m][start : start + len(idx)] = _replicates(x, y, idx, m)
    return out


def percentile_ci(replicates: np.ndarray, confidence: float = 0.95) -> tuple[float, float] | None:
    reps = replicates[~np.isnan(replicates)]
    if reps.size < max(10, replicates.size // 2):
        return None
    alpha = (1 - confidence) / 2
    lo, hi = np.percentile(reps, [100 * alpha, 100 * (1 - alpha)])
    return float(lo), float(hi)


def _dataset_rng(seed: int, dataset: str) -> np.random.Generator:
    # Stable across processes (no PYTHONHASHSEED dependence).
    h = int.from_bytes(hashlib.sha256(dataset.encode()).digest()[:8], "big")
    return np.random.default_rng([seed, h])


@dataclass
class MetaEvaluation:
    """Nested result: language → metric → summary, with per-dataset breakdowns."""

    by_language: dict[str, dict[str, LanguageCorrelation]] = field(default_factory=dict)
    overall: dict[str, OverallCorrelation] = field(default_factory=dict)

    def to_dict(self) -> CorrelationTable:
        out: CorrelationTable = {**self.by_language}
        out["all"] = self.overall
        return out


def meta_evaluate(
    samples: pd.DataFrame,
    methods: Sequence[str] = ("pearson", "spearman"),
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    language_order: Sequence[str] | None = None,
) -> MetaEvaluation:
    """Correlate ``score`` with ``human`` per dataset × language, then average.

    ``samples`` needs columns ``dataset``, ``language``, ``item_id``, ``score`` (NaN/None for a
    parse failure) and ``human``. Parse failures are excluded from the correlations and counted.
    """
    required = {"dataset", "language", "item_id", "score", "human"}
    missing = required - set(samples.columns)
    if missing:
        raise ValueError(f"samples are missing column(s) {sorted(missing)}")
    df = samples.copy()
    df["score"] = pd.to_numeric(df["score"], errors="coerce")
    df["human"] = pd.to_numeric(df["human"], errors="coerce")
    if df["human"].isna().any():
        bad = df.loc[df["human"].isna(), "item_id"].head(5).tolist()
        raise ValueError(f"{int(df['human'].isna().sum())} sample(s) have no human rating, e.g. {bad}")

    present = set(df["language"].unique())
    order = [lang for lang in (language_order or []) if lang in present]
    languages = order + sorted(present - set(order))
    datasets = sorted(df["dataset"].unique())
    # replicate arrays: (dataset, language, method) -> (B,)
    reps: dict[tuple[str, str, str], np.ndarray] = {}
    per_ds: dict[tuple[str, str, str], DatasetCorrelation] = {}
    for ds in datasets:
        for lang in languages:
            sub = df[(df["dataset"] == ds) & (df["language"] == lang)].sort_values("item_id")
            if sub.empty:
                continue
            valid = sub[sub["score"].notna()]
            failures = int(len(sub) - len(valid))
            x = valid["score"].to_numpy(np.float64)
            y = valid["human"].to_numpy(np.float64)
            boot = None
            if n_bootstrap > 0 and len(valid) >= 3:
                # Same generator per dataset => the same item resamples in every language.
                boot = bootstrap_replicates(x, y, _dataset_rng(seed, ds), n_bootstrap, methods)
            for m in methods:
                est = correlation(x, y, m)
                if boot is not None:
                    r = boot[m]
                    reps[(ds, lang, m)] = r
                    est.ci = percentile_ci(r, confidence)
                per_ds[(ds, lang, m)] = {
                    **est.to_dict(),
                    "parse_failures": failures,
                    "n_total": int(len(sub)),
                }

    out = MetaEvaluation()
    lang_reps: dict[tuple[str, str], np.ndarray] = {}
    for lang in languages:
        out.by_language[lang] = {}
        for m in methods:
            entries = {ds: per_ds[(ds, lang, m)] for ds in datasets if (ds, lang, m) in per_ds}
            values = [e["value"] for e in entries.values() if e["value"] is not None]
            value = float(np.mean(values)) if values else None
            ci = None
            rs = [reps[(ds, lang, m)] for ds in entries if (ds, lang, m) in reps]
            if rs and len(rs) == len(entries):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    avg = np.nanmean(np.vstack(rs), axis=0)
                lang_reps[(lang, m)] = avg
                ci = percentile_ci(avg, confidence)
            out.by_language[lang][m] = {
                "value": value,
                "ci": list(ci) if ci else None,
                "n": int(sum(e["n"] for e in entries.values())),
                "n_datasets": len(values),
                "parse_failures": int(sum(e["parse_failures"] for e in entries.values())),
                "per_dataset": entries,
            }
            if value is None:
                out.by_language[lang][m]["note"] = "undefined in every dataset (see per_dataset notes)"
    for m in methods:
        vals = [v for lang in languages if (v := out.by_language[lang][m]["value"]) is not None]
        ci = None
        rs = [lang_reps[(lang, m)] for lang in languages if (lang, m) in lang_reps]
        if rs and len(rs) == len(languages):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ci = percentile_ci(np.nanmean(np.vstack(rs), axis=0), confidence)
        out.overall[m] = {
            "value": float(np.mean(vals)) if vals else None,
            "ci": list(ci) if ci else None,
            "n": int(sum(out.by_language[lang][m]["n"] for lang in languages)),
            "n_languages": len(vals),
            "parse_failures": int(sum(out.by_language[lang][m]["parse_failures"] for lang in languages)),
        }
        if not vals:
            out.overall[m]["note"] = "undefined in every language (see the per-language notes)"
    return out

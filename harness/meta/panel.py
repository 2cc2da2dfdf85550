"""Statistics of a judge panel (``panel:`` judges, :mod:`harness.judges.panel`) from a run's samples.

For each task, on the members' scores kept in ``samples.parquet`` (``extra["members"]``):

* per member and for the panel: the task's meta-metrics (:func:`harness.meta.correlation.meta_evaluate`:
  per dataset × language, with bootstrap CIs) and the member's failures;
* agreement among the judges: Krippendorff's α (``krippendorff`` via
  :func:`harness.meta.agreement.krippendorff_alpha`, judges as coders, items as units) at interval
  level on the members' [0, 1]-normalised scores (``alpha``: do they give the same values?) and on
  each member's percentile ranks (``alpha_rank``: do they order the items alike?), both binned to a
  0.05 grid (:func:`judge_alpha`);
* the judges' *error* correlation: each member's error is the part of its score the human rating
  does not explain linearly (the residual of an OLS fit of the member's score on the human rating,
  :func:`scipy.stats.linregress`), so the pairwise Pearson correlation of two members' errors is
  their partial correlation given the human rating (for binary 0/1 judges and labels this is the
  correlation of their mistakes). ``mean_error_correlation`` = ρ̄, the mean over member pairs;
* the effective number of independent judges (design effect): ``k / (1 + (k - 1) ρ̄)`` — six judges
  with ρ̄ = 0.42 are worth 1.9 (inspect_ai issue #4955); ρ̄ < 0 gives more than ``k`` and ρ̄ <= -1/(k-1)
  leaves it undefined (None);
* leave-one-judge-out: the panel re-voted without each member (same rule, quorum capped at the
  remaining members) — the change of each meta-metric (``delta_<metric>`` = with − without, on
  ``"all"``), and α, ρ̄ and the effective number of judges without it;
* the alt-test (:mod:`harness.meta.alt_test`) per member and for the panel, when items carry
  annotator labels.

Agreement and error statistics pool every item of the task (all datasets and languages).
"""

from __future__ import annotations

import itertools
import json
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, NotRequired, TypedDict

import numpy as np
import pandas as pd
from scipy import stats

from harness.meta.agreement import krippendorff_alpha
from harness.meta.correlation import CorrelationTable, correlation, meta_evaluate
from harness.meta.jsonable import to_json
from harness.meta.panel_vote import vote

if TYPE_CHECKING:
    from harness.jsontypes import JSON


class JudgeAlpha(TypedDict):
    """:func:`judge_alpha`: Krippendorff's α among judges on binned scores."""

    value: float | None
    n_items: int
    grid: float
    note: NotRequired[str]


class JudgeErrorCorrelation(TypedDict):
    """:func:`error_correlations`: the members' pairwise error correlations and what they imply."""

    pairs: dict[str, float | None]
    mean: float | None
    effective_judges: float | None
    n_judges: int
    note: NotRequired[str]


#: an alt-test of one judge's scores: (samples with its ``score``, its score range) -> the section
AltTestRunner = Callable[[pd.DataFrame, "tuple[float, float] | None"], "dict[str, JSON]"]


def member_scores(samples: pd.DataFrame, names: Sequence[str], key: str = "normalised") -> pd.DataFrame:
    """Items × members matrix of each member's score (``normalised`` or raw ``score``; NaN = failed)."""
    rows = []
    for cell in samples["extra"]:
        d = json.loads(cell) if isinstance(cell, str) else {}
        by = {m.get("spec"): m.get(key) for m in d.get("members") or []}
        rows.append([np.nan if by.get(n) is None else float(by[n]) for n in names])
    return pd.DataFrame(rows, columns=list(names), index=samples.index, dtype=float)


def effective_judges(k: int, rho: float | None) -> float | None:
    """Design-effect size of ``k`` judges with mean pairwise error correlation ``rho``."""
    if rho is None or math.isnan(rho):
        return None
    denom = 1 + (k - 1) * rho
    return k / denom if denom > 0 else None


ALPHA_GRID = 21  # values binned to a 0.05 grid: krippendorff builds a values x values matrix per unit


def judge_alpha(matrix: pd.DataFrame, ranks: bool = False) -> JudgeAlpha:
    """Krippendorff's α (interval) among the columns of ``matrix`` (judges) over its rows (items).

    The ``krippendorff`` package builds a V × V coincidence matrix per unit (V = distinct values), which
    continuous scores make infeasible (UPHELD: 2,584 units × 6,897² values); the values are therefore
    min–max scaled over the matrix and rounded to a grid of :data:`ALPHA_GRID` points (0.05) first — a
    binning error of about 0.05²/12 in variance, a change of α well below 0.01 for judge scores."""
    m = matrix.rank(pct=True) if ranks else matrix
    arr = m.to_numpy(float)
    if np.isfinite(arr).sum() == 0:
        return {
            "value": None,
            "n_items": 0,
            "grid": 1 / (ALPHA_GRID - 1),
            "note": "undefined: no judge score",
        }
    lo, hi = np.nanmin(arr), np.nanmax(arr)
    scaled = (m - lo) / (hi - lo) if hi > lo else m * 0.0
    binned = (scaled * (ALPHA_GRID - 1)).round() / (ALPHA_GRID - 1)
    long = binned.reset_index(drop=True).stack().reset_index()
    long.columns = ["item", "annotator", "value"]
    res = krippendorff_alpha(long, level="interval")
    out: JudgeAlpha = {
        "value": None if math.isnan(res.value) else res.value,
        "n_items": res.n_items,
        "grid": 1 / (ALPHA_GRID - 1),
    }
    if out["value"] is None:
        out["note"] = "undefined: fewer than two pairable scores or a single distinct (binned) value"
    return out


def error_correlations(matrix: pd.DataFrame, human: pd.Series) -> JudgeErrorCorrelation:
    """Pairwise correlation of the members' residuals after regressing each on the human rating."""
    h = pd.to_numeric(human, errors="coerce")
    resid = pd.DataFrame(index=matrix.index, columns=matrix.columns, dtype=float)
    for col in matrix.columns:
        ok = matrix[col].notna() & h.notna()
        if ok.sum() < 3 or matrix.loc[ok, col].nunique() < 2 or h[ok].nunique() < 2:
            continue
        fit = stats.linregress(h[ok].to_numpy(float), matrix.loc[ok, col].to_numpy(float))
        resid.loc[ok, col] = matrix.loc[ok, col] - (fit.intercept + fit.slope * h[ok])
    pairs: dict[str, float | None] = {}
    for a, b in itertools.combinations(matrix.columns, 2):
        both = resid[a].notna() & resid[b].notna()
        r = correlation(
            resid.loc[both, a].to_numpy(float), resid.loc[both, b].to_numpy(float), "pearson"
        ).value
        pairs[f"{a} | {b}"] = None if math.isnan(r) else r
    vals = [v for v in pairs.values() if v is not None]
    rho = float(np.mean(vals)) if vals else None
    out: JudgeErrorCorrelation = {
        "pairs": pairs,
        "mean": rho,
        "effective_judges": effective_judges(matrix.shape[1], rho),
        "n_judges": int(matrix.shape[1]),
    }
    if rho is None:
        out["note"] = "undefined: no pair of judges has 3 items with non-constant residuals"
    return out


def revote(matrix: pd.DataFrame, how: str, quorum: int) -> pd.Series:
    """The panel score of every row from the given members' normalised scores (NaN below quorum)."""
    out = []
    for row in matrix.to_numpy(float):
        vals = row[~np.isnan(row)]
        out.append(vote(vals.tolist(), how)[0] if vals.size >= quorum and vals.size else np.nan)
    return pd.Series(out, index=matrix.index, dtype=float)


def _all(meta: CorrelationTable, metric: str) -> float | None:
    entry = meta.get("all", {}).get(metric)
    return entry["value"] if entry else None


def _alt_test_runner(options: Mapping[str, object]) -> AltTestRunner:
    """The alt-test with ``options`` (``info``, ``epsilon``, ``q``, ``scale`` of
    :func:`harness.meta.alt_test.alt_test_from_samples`), checked once."""
    from harness.meta.alt_test import alt_test_from_samples

    info, epsilon, q, scale = (options.get(k) for k in ("info", "epsilon", "q", "scale"))
    unknown = sorted(set(options) - {"info", "epsilon", "q", "scale"})
    if (
        unknown
        or not isinstance(info, Mapping)
        or not isinstance(epsilon, int | float)
        or not isinstance(q, int | float)
        or not isinstance(scale, str)
    ):
        raise ValueError(
            "the panel's alt-test options are info (a label scale), epsilon and q (numbers) and scale "
            f"(a name); got {dict(options)!r}"
        )

    def run(samples: pd.DataFrame, judge_range: tuple[float, float] | None) -> dict[str, JSON]:
        return alt_test_from_samples(samples, info, judge_range, epsilon=epsilon, q=q, scale=scale)

    return run


def panel_report(
    samples: pd.DataFrame,
    names: Sequence[str],
    how: str,
    quorum: int,
    methods: Sequence[str],
    *,
    ranges: Sequence[tuple[float, float] | None] | None = None,
    language_order: Sequence[str] | None = None,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    alt_test: Mapping[str, object] | None = None,
) -> dict[str, JSON]:
    """Everything above for one task's ``samples`` (``human`` column = the human rating).
    ``alt_test``: keyword arguments of :func:`harness.meta.alt_test.alt_test_from_samples` (``info``,
    ``epsilon``, ``q``, ``scale``) to run it per member and for the panel; None = not run."""
    names = list(names)
    norm = member_scores(samples, names, "normalised")
    raw = member_scores(samples, names, "score")

    def meta(scores: pd.Series) -> CorrelationTable:
        return meta_evaluate(
            samples.assign(score=scores), methods, n_bootstrap, confidence, seed, language_order
        ).to_dict()

    panel_meta = meta(pd.to_numeric(samples["score"], errors="coerce"))
    panel: dict[str, JSON] = {
        "results": to_json(panel_meta),
        "failures": int(pd.to_numeric(samples["score"], errors="coerce").isna().sum()),
        "vote": how,
        "quorum": quorum,
    }
    out: dict[str, JSON] = {
        "members": {
            n: {"results": to_json(meta(raw[n])), "failures": int(raw[n].isna().sum())} for n in names
        },
        "panel": panel,
        "alpha": to_json(judge_alpha(norm)),
        "alpha_rank": to_json(judge_alpha(norm, ranks=True)),
        "error_correlation": to_json(error_correlations(norm, samples["human"])),
        "n_items": int(len(samples)),
    }
    fallbacks = 0
    for cell in samples["extra"]:
        fallbacks += bool(isinstance(cell, str) and json.loads(cell).get("fallback"))
    panel["majority_fallbacks"] = fallbacks
    loo: dict[str, JSON] = {}
    if len(names) > 2:
        for n in names:
            rest = [x for x in names if x != n]
            q = min(quorum, len(rest))
            without = meta(revote(norm[rest], how, q))
            ec = error_correlations(norm[rest], samples["human"])
            loo[n] = {
                **{f"delta_{m}": _delta(_all(panel_meta, m), _all(without, m)) for m in methods},
                **{f"without_{m}": _all(without, m) for m in methods},
                "alpha": judge_alpha(norm[rest])["value"],
                "mean_error_correlation": ec["mean"],
                "effective_judges": ec["effective_judges"],
            }
    out["leave_one_out"] = loo or "needs at least 3 members"
    if alt_test is not None:
        run_alt_test = _alt_test_runner(alt_test)
        per: dict[str, JSON] = {}
        for k, n in enumerate(names):
            rk = ranges[k] if ranges is not None else None
            rng = (rk[0], rk[1]) if rk is not None else None  # None: per-item (bylang:)
            per[n] = run_alt_test(samples.assign(score=raw[n]), rng)
        per["panel"] = run_alt_test(samples, (0.0, 1.0) if ranges is not None else None)
        out["alt_test"] = per
    return out


def _delta(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(a - b)

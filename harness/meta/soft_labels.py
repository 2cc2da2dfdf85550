"""Soft labels and human ceilings: what several annotators per item say beyond their mean.

For a task whose items carry individual annotator labels of the task's dimension (UPHELD: 5 per
item, MEDAL: 2), ``harness run`` adds to ``results.json``, per language and ``"all"`` (computed per
dataset × language, averaged over datasets, then over languages, as the correlations):

* ``soft/expected_abs_error`` — ``|s - E_p[h]|``, the judge score ``s`` (mapped linearly from its
  fixed range onto the label range) against the mean of the item's label distribution ``p``;
* ``soft/expected_sq_error`` — ``E_{h~p}[(s - h)^2]``, the squared error expected against one label
  drawn from the annotators (= the squared error to the mean plus the labels' variance);
* ``soft/cross_entropy`` — ``-sum_k p_k log q_k`` (nats) for judges that give label probabilities
  ``q`` (P(Yes)/P(No) for binary labels; digit log-probs of expected-score judges), ``q`` floored at
  1e-12 and renormalised;
* ``ceiling_loao/<metric>`` — leave one annotator out: each annotator's labels against the mean of
  the other annotators on the same items, averaged over annotators (the single-human baseline);
* ``ceiling_split_half/<metric>`` — each item's annotators split at random into halves (``n_splits``
  seeded splits, sizes ⌊k/2⌋ and ⌈k/2⌉), the correlation ``r`` of the half means averaged over splits,
  stepped up with Spearman–Brown ``rel = 2r / (1 + r)`` to the reliability of the full mean; the
  ceiling is ``sqrt(rel)``, the highest correlation a noise-free judge can reach with the observed mean
  rating (classical test theory). Spearman–Brown is exact for Pearson only; for Spearman/Kendall it
  is the usual approximation;
* ``high_agreement/<metric>`` — the correlations restricted to items whose labels agree: UPHELD's
  agreement bucket ``full`` or ``majority`` (a unique label held by more than half the annotators;
  discrete scales only).

CIs are percentile bootstraps (``scipy.stats.bootstrap`` for the error means; the correlations'
resampling for the ceilings, per annotator for LOAO and averaged replicate-wise — items shared by
annotators are resampled independently there, so that interval is approximate).
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, NotRequired, TypedDict

import numpy as np
import pandas as pd
from scipy import stats

from harness.meta.agreement import agreement_bucket
from harness.meta.correlation import _replicates, correlation, meta_evaluate, percentile_ci
from harness.meta.jsonable import to_json
from harness.meta.levels import aggregate

if TYPE_CHECKING:
    from harness.jsontypes import JSON

HIGH_AGREEMENT = ("full", "majority")
PROB_FLOOR = 1e-12


class LabelScale(TypedDict):
    """The label scale of a dimension (:func:`label_scale`)."""

    scale: str  # binary / likert / continuous
    min: float
    max: float
    levels: list[float]  # the label values of a discrete scale; empty for a continuous one


def label_records(value: object) -> list[Mapping[str, object]]:
    """An item's ``labels`` (or ``aggregates``) field as its records; None or empty: none."""
    if not value:
        return []
    if not isinstance(value, Iterable) or isinstance(value, str | bytes | Mapping):
        raise ValueError(f"expected a list of label records, got {value!r}")
    records = list(value)
    bad = next((r for r in records if not isinstance(r, Mapping)), None)
    if bad is not None:
        raise ValueError(f"a label record must be a mapping, got {bad!r}")
    return records


def as_float(value: object, what: str) -> float:
    """A number read from a record or table (a label value, a scale bound) as a float."""
    if isinstance(value, int | float | str | np.integer | np.floating):
        return float(value)
    raise ValueError(f"{what} must be a number, got {value!r}")


def item_dimension(dimension: str, item: Mapping[str, object]) -> str | None:
    """The dimension an item's human rating comes from: the task's when the item has labels or
    aggregates of it, else the item's headline ``dimension`` (e.g. CPDScore ``overall`` on UPHELD)."""
    dims = {lab.get("dimension") for lab in label_records(item.get("labels"))}
    dims |= {a.get("dimension") for a in label_records(item.get("aggregates"))}
    headline = item.get("dimension")
    return dimension if dimension in dims else (str(headline) if headline else None)


def item_distribution(item: Mapping[str, object], dimension: str | None) -> str | None:
    """JSON ``{label value: share}`` of the item's labels of ``dimension`` (missing labels left out)."""
    vals = [
        as_float(lab["value"], "a label value")
        for lab in label_records(item.get("labels"))
        if lab.get("dimension") == dimension and lab.get("value") is not None
    ]
    if not vals:
        return None
    uniq, counts = np.unique(vals, return_counts=True)
    return json.dumps({f"{u:g}": c / len(vals) for u, c in zip(uniq, counts, strict=True)})


def annotator_frame(samples: pd.DataFrame) -> pd.DataFrame:
    """Long frame ``unit, dataset, language, annotator, value`` of every non-missing label of each
    sample's ``human_dimension`` (``unit`` = dataset + sample id)."""
    rows = []
    for ds, lang, sid, cell, dim in zip(
        samples["dataset"],
        samples["language"],
        samples["id"],
        samples.get("human_labels", [None] * len(samples)),
        samples.get("human_dimension", [None] * len(samples)),
        strict=True,
    ):
        labels = json.loads(cell) if isinstance(cell, str) else {}
        for ann, v in (labels.get(dim) or {}).items():
            if v is not None and not (isinstance(v, float) and math.isnan(v)):
                rows.append((f"{ds}\x1f{sid}", ds, lang, str(ann), float(v)))
    return pd.DataFrame(rows, columns=["unit", "dataset", "language", "annotator", "value"])


def label_scale(dim_table: Mapping[str, object] | None, values: Sequence[float]) -> LabelScale:
    """Scale (binary / likert / continuous), range and levels of a dimension: from the dataset's
    dimension table when given, else inferred from the observed labels."""
    obs = sorted({float(v) for v in values})
    if dim_table:
        lo, hi, scale = (
            as_float(dim_table["min"], "the dimension's min"),
            as_float(dim_table["max"], "the dimension's max"),
            str(dim_table.get("scale", "likert")),
        )
    else:
        lo, hi = (obs[0], obs[-1]) if obs else (0.0, 1.0)
        scale = (
            "binary" if len(obs) <= 2 else ("likert" if all(v.is_integer() for v in obs) else "continuous")
        )
    levels = obs if scale != "continuous" else []
    if (
        scale != "continuous"
        and all(float(v).is_integer() for v in (lo, hi))
        and all(v.is_integer() for v in obs)
    ):
        levels = sorted(set(obs) | ({lo, hi} if scale == "binary" else set(np.arange(lo, hi + 1).tolist())))
    return {"scale": scale, "min": lo, "max": hi, "levels": [float(x) for x in levels]}


def label_info(dim_table: Mapping[str, object] | None, values: Sequence[float]) -> dict[str, object]:
    """:func:`label_scale` as a plain mapping (``scale``, ``min``, ``max``, ``levels``), the form
    results.json notes and the alt-test options carry; :func:`read_label_scale` reads it back."""
    return dict(label_scale(dim_table, values))


def read_label_scale(info: Mapping[str, object]) -> LabelScale:
    """A label scale given as a mapping (:func:`label_info`), checked."""
    levels = info.get("levels") or []
    if not isinstance(levels, Sequence) or isinstance(levels, str):
        raise ValueError(f"a label scale's levels must be a list of numbers, got {levels!r}")
    return {
        "scale": str(info["scale"]),
        "min": as_float(info["min"], "the label scale's min"),
        "max": as_float(info["max"], "the label scale's max"),
        "levels": [as_float(v, "a label level") for v in levels],
    }


def label_scale_json(info: LabelScale) -> dict[str, JSON]:
    """The label scale as a results.json value."""
    return {"scale": info["scale"], "min": info["min"], "max": info["max"], "levels": [*info["levels"]]}


# -- judge vs the label distribution ----------------------------------------------------------------
def _judge_probs(extra: object, levels: Sequence[float], yes_no: tuple[str, str]) -> np.ndarray | None:
    d = json.loads(extra) if isinstance(extra, str) else (extra or {})
    lp = d.get("choice_logprobs") if isinstance(d, dict) else None
    if not lp or any(v is None for v in lp.values()):
        return None
    mapped: dict[float, float] = {}
    for label, v in lp.items():
        if len(levels) == 2 and label in yes_no:
            mapped[levels[-1] if label == yes_no[0] else levels[0]] = float(v)
        else:
            try:
                mapped[float(label)] = float(v)
            except ValueError:
                return None
    if set(mapped) != set(levels):
        return None
    q = np.exp(np.asarray([mapped[v] for v in levels]) - max(mapped.values()))
    q = np.maximum(q / q.sum(), PROB_FLOOR)
    return q / q.sum()


class SoftErrorEntry(TypedDict):
    """A mean over items (a ``soft/*`` error) with its percentile bootstrap CI."""

    value: float | None
    ci: list[float] | None
    n: int
    parse_failures: int


class LoaoCeiling(TypedDict):
    """:func:`loao_ceiling`: the mean over annotators of each one's correlation with the others."""

    value: float
    ci: list[float] | None
    n: int
    parse_failures: int
    per_annotator: dict[str, float]


class SplitHalfCeiling(TypedDict):
    """:func:`split_half_ceiling`: sqrt of the stepped-up split-half reliability."""

    value: float | None
    ci: list[float] | None
    n: int
    parse_failures: int
    r_half: float
    spearman_brown: float | None
    n_splits: int
    note: NotRequired[str]


def _mean_entry(
    values: Sequence[float], n_bootstrap: int, confidence: float, seed: int, failures: int
) -> SoftErrorEntry:
    x = np.asarray(values, dtype=float)
    ci = None
    if n_bootstrap > 0 and x.size >= 3 and np.ptp(x) > 0:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = stats.bootstrap(
                (x,),
                np.mean,
                n_resamples=n_bootstrap,
                confidence_level=confidence,
                method="percentile",
                rng=np.random.default_rng(seed),
            )
        ci = [float(r.confidence_interval.low), float(r.confidence_interval.high)]
    return {
        "value": float(x.mean()) if x.size else None,
        "ci": ci,
        "n": int(x.size),
        "parse_failures": failures,
    }


def soft_label_metrics(
    sub: pd.DataFrame,
    labels: pd.DataFrame,
    info: LabelScale,
    judge_range: tuple[float, float] | None,
    yes_no: tuple[str, str] = ("Yes", "No"),
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, SoftErrorEntry]:
    """The ``soft/*`` entries of one dataset × language group (``sub``: its samples; ``labels``: its
    :func:`annotator_frame` rows)."""
    levels = np.asarray(info["levels"], dtype=float)
    by_unit = labels.groupby("unit")["value"].apply(list).to_dict()
    abs_err, sq_err, ce = [], [], []
    failures = 0
    for ds, sid, score, extra in zip(
        sub["dataset"], sub["id"], sub["score"], sub.get("extra", [None] * len(sub)), strict=True
    ):
        vals = by_unit.get(f"{ds}\x1f{sid}")
        if not vals:
            continue
        if score is None or (isinstance(score, float) and math.isnan(score)):
            failures += 1
            continue
        h = np.asarray(vals, dtype=float)
        if judge_range is not None:
            lo, hi = judge_range
            s = info["min"] + (float(score) - lo) / (hi - lo) * (info["max"] - info["min"])
            abs_err.append(abs(s - h.mean()))
            sq_err.append(float(np.mean((s - h) ** 2)))
        if levels.size:
            q = _judge_probs(extra, levels.tolist(), yes_no)
            if q is not None:
                p = np.asarray([np.mean(h == v) for v in levels])
                ce.append(float(stats.entropy(p) + stats.entropy(p, q)) if p.sum() else math.nan)
    out: dict[str, SoftErrorEntry] = {}
    if abs_err:
        out["soft/expected_abs_error"] = _mean_entry(abs_err, n_bootstrap, confidence, seed, failures)
        out["soft/expected_sq_error"] = _mean_entry(sq_err, n_bootstrap, confidence, seed, failures)
    ce = [c for c in ce if math.isfinite(c)]
    if ce:
        out["soft/cross_entropy"] = _mean_entry(ce, n_bootstrap, confidence, seed, failures)
    return out


# -- ceilings ---------------------------------------------------------------------------------------
def spearman_brown(r: float | None, factor: float = 2.0) -> float | None:
    """Reliability of a measure ``factor`` times as long: ``factor r / (1 + (factor - 1) r)``; None
    where it is undefined (r missing or NaN, or ``1 + (factor - 1) r <= 0``: r = -1 for halves)."""
    if r is None or not math.isfinite(r):
        return None
    denom = 1 + (factor - 1) * r
    return factor * r / denom if denom > 0 else None


def loao_ceiling(
    labels: pd.DataFrame, method: str, n_bootstrap: int, confidence: float, seed: int
) -> LoaoCeiling | None:
    """Each annotator vs the mean of the others on the same units, averaged over annotators."""
    multi = labels[labels.groupby("unit")["value"].transform("size") >= 2]
    sums = multi.groupby("unit")["value"].agg(["sum", "size"])
    per: dict[str, float] = {}
    reps: list[np.ndarray] = []
    n = 0
    for ann, g in multi.groupby("annotator", sort=True):
        s = sums.loc[g["unit"]]
        x = g["value"].to_numpy(float)
        y = ((s["sum"].to_numpy() - x) / (s["size"].to_numpy() - 1)).astype(float)
        est = correlation(x, y, method)
        if math.isnan(est.value):
            continue
        per[str(ann)] = est.value
        n += est.n
        if n_bootstrap > 0:
            idx = np.random.default_rng([seed, len(per)]).integers(0, len(x), (n_bootstrap, len(x)))
            reps.append(_replicates(x, y, idx, method))
    if not per:
        return None
    ci = None
    if reps:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ci = percentile_ci(np.nanmean(np.vstack(reps), axis=0), confidence)
    return {
        "value": float(np.mean(list(per.values()))),
        "ci": list(ci) if ci else None,
        "n": n,
        "parse_failures": 0,
        "per_annotator": per,
    }


def split_half_ceiling(
    labels: pd.DataFrame, method: str, n_splits: int, n_bootstrap: int, confidence: float, seed: int
) -> SplitHalfCeiling | None:
    """sqrt of the Spearman–Brown stepped-up split-half reliability of the per-unit mean label."""
    groups = [g.to_numpy(float) for _, g in labels.groupby("unit", sort=True)["value"] if len(g) >= 2]
    if len(groups) < 3:
        return None
    rng = np.random.default_rng(seed)
    rs, reps = [], []
    idx = rng.integers(0, len(groups), (n_bootstrap, len(groups))) if n_bootstrap > 0 else None
    for _ in range(n_splits):
        a, b = [], []
        for v in groups:
            perm = rng.permutation(v)
            half = len(v) // 2
            a.append(perm[:half].mean())
            b.append(perm[half:].mean())
        xa, xb = np.asarray(a), np.asarray(b)
        r = correlation(xa, xb, method).value
        if not math.isnan(r):
            rs.append(r)
            if idx is not None:
                reps.append(_replicates(xa, xb, idx, method))
    if not rs:
        return None

    r_half = float(np.mean(rs))
    rel = spearman_brown(r_half)
    ci = None
    if reps:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            rr = np.nanmean(np.vstack(reps), axis=0)
            rel_reps = np.where(rr > -1, 2 * rr / (1 + rr), np.nan)
            ci = percentile_ci(np.sqrt(np.where(rel_reps > 0, rel_reps, 0.0)), confidence)
    out: SplitHalfCeiling = {
        "value": math.sqrt(rel) if rel is not None and rel > 0 else None,
        "ci": list(ci) if ci else None,
        "n": len(groups),
        "parse_failures": 0,
        "r_half": r_half,
        "spearman_brown": rel,
        "n_splits": len(rs),
    }
    if rel is None:
        out["note"] = f"undefined: the split-half correlation is {r_half:.3g}, Spearman-Brown needs r > -1"
    elif rel <= 0:
        out["note"] = f"no ceiling: the stepped-up split-half reliability is {rel:.3g} <= 0"
    return out


def high_agreement_units(labels: pd.DataFrame) -> set[str]:
    """Units whose labels fall in UPHELD's ``full`` / ``majority`` agreement buckets."""
    return {u for u, g in labels.groupby("unit")["value"] if agreement_bucket(g.tolist()) in HIGH_AGREEMENT}


# -- results.json -----------------------------------------------------------------------------------
def add_human_metrics(
    task_results: MutableMapping[str, dict[str, dict[str, object]]],
    samples: pd.DataFrame,
    methods: Sequence[str],
    dim_tables: Mapping[str, Mapping[str, object]],
    judge_range: tuple[float, float] | None,
    *,
    yes_no: tuple[str, str] = ("Yes", "No"),
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    n_splits: int = 20,
    language_order: Sequence[str] | None = None,
) -> dict[str, JSON]:
    """Merge the soft-label metrics, ceilings and high-agreement correlations of one task's
    ``samples`` into ``task_results``; returns notes for ``results.json`` (what ran, what was skipped)."""
    labels = annotator_frame(samples)
    if labels.empty:
        return {"skipped": "the items carry no individual annotator labels of the task's dimension"}
    dims = sorted({d for d in samples.get("human_dimension", []) if isinstance(d, str)})
    info = label_scale(dim_tables.get(dims[0]) if len(dims) == 1 else None, labels["value"].tolist())
    per_group: dict[tuple[str, str], dict[str, SoftErrorEntry | LoaoCeiling | SplitHalfCeiling]] = {}
    keep_units = high_agreement_units(labels) if info["scale"] != "continuous" else set()
    for (ds, lang), sub in samples.groupby(["dataset", "language"], sort=True):
        lab = labels[(labels["dataset"] == ds) & (labels["language"] == lang)]
        if lab.empty:
            continue
        entries: dict[str, SoftErrorEntry | LoaoCeiling | SplitHalfCeiling] = {
            **soft_label_metrics(sub, lab, info, judge_range, yes_no, n_bootstrap, confidence, seed)
        }
        for m in methods:
            if (e := loao_ceiling(lab, m, n_bootstrap, confidence, seed)) is not None:
                entries[f"ceiling_loao/{m}"] = e
            if (half := split_half_ceiling(lab, m, n_splits, n_bootstrap, confidence, seed)) is not None:
                entries[f"ceiling_split_half/{m}"] = half
        per_group[(str(ds), str(lang))] = entries
    for lang, means in aggregate(per_group).items():
        task_results.setdefault(lang, {}).update({k: dict(e) for k, e in means.items()})
    notes: dict[str, JSON] = {
        "dimension": [*dims],
        "label_scale": label_scale_json(info),
        "annotators_per_item": to_json(
            labels.groupby("unit").size().describe()[["min", "50%", "max"]].to_dict()
        ),
        "judge_range": [*judge_range] if judge_range else None,
    }
    if judge_range is None:
        notes["soft_errors"] = "skipped: the judge has no fixed score range to map onto the label scale"
    if keep_units:
        unit = samples["dataset"].astype(str) + "\x1f" + samples["id"].astype(str)
        high = samples[unit.isin(keep_units)]
        if not high.empty:
            meta = meta_evaluate(high, methods, n_bootstrap, confidence, seed, language_order).to_dict()
            for lang, correlations in meta.items():
                task_results.setdefault(lang, {}).update(
                    {f"high_agreement/{m}": dict(v) for m, v in correlations.items()}
                )
        notes["high_agreement"] = {
            "buckets": list(HIGH_AGREEMENT),
            "items": int(len(high)),
            "of": int(len(samples)),
        }
    else:
        notes["high_agreement"] = "skipped: continuous labels have no agreement buckets"
    return notes

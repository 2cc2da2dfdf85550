"""Compare two runs of different judges on the same items (joined on task, dataset, language, id).

Per task × language and for every meta-metric of the task that can be compared item by item (a
registered :class:`~harness.meta.metric.MetaMetric` with ``replicates``: the correlations, a
plug-in's): each judge's value against the human rating, computed as ``harness run`` computes it
(per dataset, then the mean over datasets),
and the difference **B − A with a paired bootstrap**: the same item resamples for both judges
(``harness.meta.correlation``'s generator, so a dataset's languages draw the same items), giving a
percentile CI of the difference and a two-sided bootstrap p-value, 2 · min(P(Δ* ≤ 0), P(Δ* ≥ 0)).
Items either judge failed to parse are left out of both (counted). ``all`` = the mean over
languages, from the same replicates.

Agreement between the judges: Spearman and Pearson between their scores per language, and
Krippendorff's α (interval, on ranks) over all items (:func:`harness.meta.panel.judge_alpha`).
The items they disagree on most: |percentile rank of A's score − that of B's| within task × dataset
× language.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pandas as pd

from harness.meta.correlation import _dataset_rng, correlation, percentile_ci
from harness.meta.metric import MetaMetric
from harness.meta.registry import lookup
from harness.view.data import Payload, RunFiles

METHOD = (
    "paired bootstrap of the correlation difference (B − A): both judges on the same item resamples, "
    "per dataset, averaged over datasets as in results.json; percentile CI, two-sided bootstrap p"
)
TOP = 100


def _sq(p: object) -> str:
    return str(p).replace("'", "''")


def paired_frame(a: RunFiles, b: RunFiles, task: str | None = None) -> tuple[pd.DataFrame, dict[str, int]]:
    """Samples of both runs joined on (task, dataset, language, id), with the counts of the rest."""
    import duckdb

    if a.samples is None or b.samples is None:
        missing = a if a.samples is None else b
        raise FileNotFoundError(f"{missing.path}: no samples.parquet, so it cannot be compared item by item")
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    a_src, b_src = f"read_parquet('{_sq(a.samples)}')", f"read_parquet('{_sq(b.samples)}')"
    only = "WHERE (?::VARCHAR IS NULL OR task = ?)"
    df = con.execute(
        f"""SELECT a.task, a.dataset, a.language, a.id, a.item_id, a.system,
                  a.score AS score_a, b.score AS score_b, a.human_rating AS human, b.human_rating AS human_b,
                  a.parse_status AS status_a, b.parse_status AS status_b
           FROM (SELECT * FROM {a_src} {only}) a JOIN (SELECT * FROM {b_src} {only}) b
             USING (task, dataset, language, id)""",
        [task, task, task, task],
    ).df()
    n_a, n_b = (
        int(con.execute(f"SELECT count(*) FROM {src} {only}", [task, task]).fetchall()[0][0])
        for src in (a_src, b_src)
    )
    return df, {"a": n_a, "b": n_b, "paired": len(df)}


def _p_value(reps: np.ndarray) -> float | None:
    r = reps[~np.isnan(reps)]
    if r.size < 10:
        return None
    return float(min(1.0, 2 * min((r <= 0).mean(), (r >= 0).mean())))


def _entry(
    value_a: float | None, value_b: float | None, reps: np.ndarray | None, conf: float
) -> dict[str, Any]:
    delta = None if value_a is None or value_b is None else value_b - value_a
    ci = percentile_ci(reps, conf) if reps is not None else None
    return {
        "a": value_a,
        "b": value_b,
        "delta": delta,
        "ci": list(ci) if ci else None,
        "p_value": _p_value(reps) if reps is not None else None,
    }


def _mean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None and not math.isnan(v)]
    return float(np.mean(vals)) if vals else None


def correlation_deltas(
    df: pd.DataFrame, methods: list[str], n_bootstrap: int, seed: int = 0, confidence: float = 0.95
) -> Payload:
    """Per language (and ``all``): for each meta-metric of ``methods`` (names), A's and B's value
    against the human rating, B − A with its paired-bootstrap CI and p-value, and the judges'
    correlation with each other."""
    metrics: dict[str, MetaMetric] = {m: lookup(m) for m in methods}
    ok = df[df["score_a"].notna() & df["score_b"].notna() & df["human"].notna()]
    langs = list(dict.fromkeys(ok["language"]))
    out: dict[str, Any] = {"languages": [], "n_bootstrap": n_bootstrap}
    lang_reps: dict[tuple[str, str], np.ndarray] = {}
    lang_vals: dict[tuple[str, str], tuple[float | None, float | None]] = {}
    for lang in langs:
        sub_l = ok[ok["language"] == lang]
        entry: dict[str, Any] = {"language": lang, "n": len(sub_l), "metrics": {}}
        per_ds: dict[str, list[Any]] = {m: [] for m in methods}
        for ds, sub in sub_l.groupby("dataset", sort=True):
            sub = sub.sort_values("item_id", kind="stable")
            xa, xb, h = (sub[c].to_numpy(np.float64) for c in ("score_a", "score_b", "human"))
            idx = None
            if n_bootstrap > 0 and len(sub) >= 3:
                idx = _dataset_rng(seed, str(ds)).integers(0, len(sub), size=(n_bootstrap, len(sub)))
            for m in methods:
                mm = metrics[m]
                ra, rb = mm.statistic(xa, h), mm.statistic(xb, h)
                reps = None
                if idx is not None:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        rep_a, rep_b = mm.replicates(xa, h, idx), mm.replicates(xb, h, idx)
                        if rep_a is not None and rep_b is not None:
                            reps = rep_b - rep_a
                per_ds[m].append((ra, rb, reps))
        for m in methods:
            vals = per_ds[m]
            va, vb = _mean([v[0] for v in vals]), _mean([v[1] for v in vals])
            reps = None
            if vals and all(v[2] is not None for v in vals):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    reps = np.nanmean(np.vstack([v[2] for v in vals]), axis=0)
                lang_reps[(lang, m)] = reps
            lang_vals[(lang, m)] = (va, vb)
            entry["metrics"][m] = _entry(va, vb, reps, confidence) | {"n_datasets": len(vals)}
        entry["judges"] = {
            m: correlation(sub_l["score_a"].to_numpy(float), sub_l["score_b"].to_numpy(float), m).to_dict()
            for m in ("spearman", "pearson")
        }
        out["languages"].append(entry)
    overall: dict[str, Any] = {"language": "all", "n": len(ok), "metrics": {}}
    for m in methods:
        va = _mean([lang_vals[(lang, m)][0] for lang in langs if (lang, m) in lang_vals])
        vb = _mean([lang_vals[(lang, m)][1] for lang in langs if (lang, m) in lang_vals])
        rs = [lang_reps[(lang, m)] for lang in langs if (lang, m) in lang_reps]
        reps = None
        if rs and len(rs) == len(langs):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                reps = np.nanmean(np.vstack(rs), axis=0)
        overall["metrics"][m] = _entry(va, vb, reps, confidence)
    overall["judges"] = {
        m: correlation(ok["score_a"].to_numpy(float), ok["score_b"].to_numpy(float), m).to_dict()
        for m in ("spearman", "pearson")
    }
    out["all"] = overall
    return out


def top_disagreements(df: pd.DataFrame, top: int = TOP) -> list[Payload]:
    """The ``top`` items whose percentile ranks under the two judges differ most."""
    ok = df[df["score_a"].notna() & df["score_b"].notna()].copy()
    if ok.empty:
        return []
    g = ok.groupby(["task", "dataset", "language"])
    ok["pct_a"] = g["score_a"].rank(pct=True)
    ok["pct_b"] = g["score_b"].rank(pct=True)
    ok["pct_h"] = g["human"].rank(pct=True)
    ok["gap"] = (ok["pct_a"] - ok["pct_b"]).abs()
    cols = [
        "task",
        "dataset",
        "language",
        "id",
        "system",
        "score_a",
        "score_b",
        "human",
        "pct_a",
        "pct_b",
        "pct_h",
        "gap",
    ]
    best = ok.nlargest(top, "gap")[cols]
    return [
        {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
        for r in best.to_dict("records")
    ]


def compare(
    a: RunFiles, b: RunFiles, *, task: str | None = None, n_bootstrap: int | None = None, seed: int = 0
) -> Payload:
    """Everything the compare page shows for runs ``a`` (the baseline) and ``b``."""
    from harness.meta.panel import judge_alpha

    common = [t for t in a.tasks if t in b.tasks]
    if task is not None and task not in common:
        raise ValueError(f"task {task!r} is not in both runs (common tasks: {', '.join(common) or 'none'})")
    df, counts = paired_frame(a, b, task)
    if n_bootstrap is None:  # interactive: about 2e7 resampled items per metric at most
        n_bootstrap = 1000 if len(df) <= 20_000 else max(100, int(2e7 // max(len(df), 1)))
    tasks = []
    for t in [task] if task else common:
        sub = df[df["task"] == t]
        comparable = [m for m in a.document.table_metrics(t) if m.comparable]
        methods = [m.name for m in comparable]
        both = sub[sub["score_a"].notna() & sub["score_b"].notna()]
        alpha = judge_alpha(both[["score_a", "score_b"]], ranks=True) if len(both) >= 2 else {"value": None}
        tasks.append(
            {
                "task": t,
                "methods": methods,
                "labels": {m.name: m.header() for m in comparable},
                "higher_is_better": {m.name: m.higher_is_better for m in comparable},
                "n_paired": len(sub),
                "failures": {
                    "a": int((sub["status_a"] != "ok").sum()),
                    "b": int((sub["status_b"] != "ok").sum()),
                    "either": int((sub["score_a"].isna() | sub["score_b"].isna()).sum()),
                },
                "human_mismatch": int(
                    (
                        (sub["human"] - sub["human_b"]).abs().gt(1e-9)
                        | (sub["human"].isna() != sub["human_b"].isna())
                    ).sum()
                ),
                "deltas": correlation_deltas(sub, methods, n_bootstrap, seed),
                "alpha_rank": alpha.get("value"),
                "disagreements": top_disagreements(sub),
            }
        )
    return {
        "a": {"key": a.key, "judge": a.judge, "run_id": a.run_id},
        "b": {"key": b.key, "judge": b.judge, "run_id": b.run_id},
        "common_tasks": common,
        "counts": counts,
        "method": METHOD,
        "n_bootstrap": n_bootstrap,
        "tasks": tasks,
    }

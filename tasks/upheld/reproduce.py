"""``harness reproduce upheld``: our UPHELD Tables 7–9 (and Table 10) next to the paper's.

Pipeline, on the real release (``--source ../shared/data/upheld``):

1. build/load the ``upheld`` dataset (configs ``main``, ``llm_arena``, ``topical_chat`` when present),
   odd source cells handled and counted by the policy of :mod:`harness.data.cells` (``strict``: an error);
2. features per (reference, model continuation) item: ROUGE-1/2/L/Lsum, BERTScore P/R/F1 and the
   embedding cosine of :mod:`harness.judges.refmetrics`, all through the request cache, plus the four App. H
   LLM-judge verdicts when ``--judge`` names an LLM (parse failures counted, kept as NaN);
3. correlation with the human labels under each *protocol*
   (:data:`tasks.upheld.protocols.PROTOCOLS`): mean ± std over the 5 held-out folds of a seeded
   KFold (App. B.2), plus the full-set value with a bootstrap CI;
4. learned ensembles (App. I): 5-fold CV on ``main``; then fitted on all of ``main``, saved, reloaded
   as ``ensemble:<dir>`` judges and applied unchanged to the verification sets (transfer);
5. agreement-bucket accuracy (App. J, Table 10) and system-level correlations (ComperDial fn. 9);
6. ``results.json``, ``features.parquet`` and ``tables.md`` in the output directory; the comparison
   tables are printed.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.cache import RequestCache, default_cache_path
from harness.data.resolve import DatasetHandle, load_items, prepare_dataset
from harness.judges.refmetrics import REFERENCE_METRICS
from harness.meta.buckets import bucket_table
from harness.meta.scale_correlation import (
    app_b_correlation,
    cv_fold_correlations,
    discretize,
    system_level,
)
from harness.provenance import environment, harness_info
from tasks.upheld import paper
from tasks.upheld.protocols import (
    DIMENSIONS,
    PROTOCOLS,
    Protocol,
    correlate,
    feature_range,
    joined,
    scale_for,
)

log = logging.getLogger(__name__)


@dataclass
class ReproduceConfig:
    source: str | None = None
    dataset: str | None = None
    output_dir: Path = Path("runs/reproduce-upheld")
    protocols: tuple[str, ...] = ("app-b", "pearson-rows", "pearson-mean")
    ensemble_protocols: tuple[str, ...] = ("app-b", "pearson-mean")
    bert_model: str | None = None
    num_layers: int | None = None
    embed_model: str | None = None
    judge: str | None = None  # LLM judge for the App. H features
    n_splits: int = 5
    seed: int = 0
    n_bootstrap: int = 200
    batch_size: int = 64
    device: str | None = None
    cache_path: Path | None = None
    use_cache: bool = True
    limit: int | None = None
    group_cv: bool = False
    cpdscore_judge: str | None = None  # LLM for CPDScore (ComperDial App. B) on UPHELD main
    cpdscore_dialogues: int = 5  # first N dialogues of main (every turn, every system)
    cpdscore_calls: int = 3
    show_progress: bool = True
    strict: bool = False  # an odd source cell is an error instead of a counted, listed one

    def __post_init__(self) -> None:
        unknown = [p for p in (*self.protocols, *self.ensemble_protocols) if p not in PROTOCOLS]
        if unknown:
            raise ValueError(f"unknown protocol(s) {unknown}; known: {', '.join(PROTOCOLS)}")
        if self.n_splits < 2:
            raise ValueError(f"n_splits must be >= 2, got {self.n_splits}")


@dataclass
class Reproduction:
    results: dict[str, Any]
    features: pd.DataFrame
    tables_md: str
    output_dir: Path
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


# --------------------------------------------------------------------------- data + features
def load_records(cfg: ReproduceConfig) -> tuple[DatasetHandle, dict[str, list[dict[str, Any]]]]:
    handle = prepare_dataset(
        "upheld", source=cfg.source, dataset=cfg.dataset, show_progress=cfg.show_progress, strict=cfg.strict
    )
    records = {c: load_items(handle, c, limit=cfg.limit) for c in paper.CONFIGS if c in handle.configs}
    if "main" not in records:
        raise ValueError(f"{handle.location} has no 'main' config (it has {handle.configs})")
    return handle, records


def compute_features(
    cfg: ReproduceConfig, records: dict[str, list[dict[str, Any]]], cache: RequestCache
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """One row per item (all configs): id, dataset, system + one column per feature."""
    from harness.judges.metric import ReferenceFeatures, reference_inputs

    feats = ReferenceFeatures(
        cache,
        model=cfg.bert_model,
        num_layers=cfg.num_layers,
        embed_model=cfg.embed_model,
        batch_size=cfg.batch_size,
        device=cfg.device,
        show_progress=cfg.show_progress,
    )
    frames: list[pd.DataFrame] = []
    info: dict[str, Any] = {"invalid_items": {}}
    for config, recs in records.items():
        inputs = [reference_inputs(r) for r in recs]
        ok = [i for i, (_, _, miss) in enumerate(inputs) if not miss]
        info["invalid_items"][config] = [
            {"id": recs[i]["id"], "missing": inputs[i][2]} for i, (_, _, m) in enumerate(inputs) if m
        ]
        base = pd.DataFrame({k: [r.get(k) for r in recs] for k in ("id", "item_id", "dataset", "system")})
        vals = feats.compute([inputs[i][0] for i in ok], [inputs[i][1] for i in ok], REFERENCE_METRICS)
        full = pd.DataFrame(np.nan, index=range(len(recs)), columns=list(REFERENCE_METRICS))
        full.iloc[ok] = vals.to_numpy()
        frames.append(pd.concat([base, full], axis=1))
    frame = pd.concat(frames, ignore_index=True)
    info["reference_metrics"] = {
        fam: {**s, "model_arg": cfg.bert_model if fam == "bertscore" else cfg.embed_model}
        for fam, s in feats.info.items()
    }
    if fam_rouge := info["reference_metrics"].get("rouge"):
        fam_rouge.pop("model_arg", None)
    if cfg.judge:
        frame, info["llm_judge"] = _llm_features(cfg, cfg.judge, records, frame, cache)
    return frame, info


def _llm_features(
    cfg: ReproduceConfig,
    judge_spec: str,
    records: dict[str, list[dict[str, Any]]],
    frame: pd.DataFrame,
    cache: RequestCache,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    from harness.judges import load_judge
    from harness.run.runner import _progress
    from tasks.upheld import UPHELD_APP_H_TASKS

    judge = load_judge(judge_spec, cache, seed=cfg.seed)
    failures: dict[str, dict[str, Any]] = {}
    all_recs = [r for recs in records.values() for r in recs]  # the order of the feature frame's rows
    try:
        with _progress(cfg.show_progress) as progress:
            for feature in paper.LLM_JUDGE:
                task = UPHELD_APP_H_TASKS[("content", feature)]
                bar = (
                    progress.add_task(feature, total=len(all_recs), rate="") if progress is not None else None
                )
                col: list[float | None] = []  # NaN when the verdict has no score
                bad: list[dict[str, str]] = []
                for i in range(0, len(all_recs), cfg.batch_size):
                    batch = all_recs[i : i + cfg.batch_size]
                    for r, v in zip(batch, judge.score(task, batch), strict=True):
                        col.append(v.score if v.ok else np.nan)
                        if not v.ok:
                            bad.append({"id": r["id"], "status": v.status, "detail": v.detail, "raw": v.raw})
                    if progress is not None:
                        progress.update(bar, completed=i + len(batch))
                frame[feature] = col
                failures[feature] = {
                    "n": len(bad),
                    "examples": bad[:20],
                    "prompt": task.template_for("en").describe(),
                }
        ident = {"spec": cfg.judge, "identity": judge.identity(), "decoding": judge.decoding(task)}
    finally:
        judge.close()
    # the task each feature was judged with: an ``ensemble:`` judge re-judges new items with it
    tasks = {feature: UPHELD_APP_H_TASKS[("content", feature)].name for feature in paper.LLM_JUDGE}
    return frame, {**ident, "tasks": tasks, "parse_failures": failures}


def ensemble_score_fn(dimension: str, protocol: Protocol):
    """Fold score for ensemble predictions (on the label scale) under a protocol."""
    levels = DIMENSIONS[dimension][1]
    scale = scale_for(dimension, protocol)
    lo, hi = levels[0] - 0.5, levels[-1] + 0.5
    if scale == "binary":
        lo, hi = 0.0, 1.0

    def fn(y_true: np.ndarray, y_pred: np.ndarray) -> float:
        return app_b_correlation(
            y_pred, y_true, scale, method=protocol.method, levels=levels, lo=lo, hi=hi
        ).value

    return fn


def run_ensembles(
    cfg: ReproduceConfig,
    features: pd.DataFrame,
    records: dict[str, list[dict[str, Any]]],
    feature_names: list[str],
    info: dict[str, Any],
    handle: DatasetHandle,
) -> dict[str, Any]:
    from harness.judges import load_judge
    from harness.judges.learned.fit import MODEL_KINDS, cross_validate
    from harness.judges.learned.model import fit_ensemble
    from tasks.upheld import UPHELD_TASKS

    out: dict[str, Any] = {}
    for pname in cfg.ensemble_protocols:
        protocol = PROTOCOLS[pname]
        for dim, (_scale, _levels) in DIMENSIONS.items():
            scale = scale_for(dim, protocol)
            train = joined(features[features["dataset"] == "main"], records["main"], dim, protocol)
            fn = ensemble_score_fn(dim, protocol)
            for kind in MODEL_KINDS:
                cv = cross_validate(
                    train,
                    feature_names,
                    "human",
                    kind,
                    label_scale=scale,
                    n_splits=cfg.n_splits,
                    seed=cfg.seed,
                    score_fn=fn,
                    groups_col="id" if cfg.group_cv else None,
                )
                ens = fit_ensemble(
                    train,
                    feature_names,
                    "human",
                    kind,
                    label_scale=scale,
                    seed=cfg.seed,
                    target={
                        "dimension": dim,
                        "protocol": pname,
                        "target": protocol.target,
                        "exclude_systems": list(protocol.exclude_systems),
                    },
                    training={
                        "dataset": "upheld",
                        "config": "main",
                        "location": handle.location,
                        "revision": handle.revision,
                        "fingerprint": handle.fingerprint,
                        "source": handle.source,
                    },
                    feature_info=info,
                )
                path = cfg.output_dir / "ensembles" / pname / f"{dim}-{kind}"
                ens.save(path, overwrite=True)
                cell = {
                    "main": {
                        "mean": cv.mean,
                        "std": cv.std,
                        "folds": cv.fold_values,
                        "n_rows": cv.n_rows,
                        "n_excluded": cv.n_excluded,
                    },
                    "path": str(path),
                }
                # Transfer: reload as a judge and score the verification sets through it, unchanged.
                cache = RequestCache(cfg.cache_path or default_cache_path(), enabled=cfg.use_cache)
                judge = load_judge(f"ensemble:{path}", cache, seed=cfg.seed)
                try:
                    for config, recs in records.items():
                        if config == "main":
                            continue
                        verdicts = judge.score(UPHELD_TASKS[dim], recs)
                        scored = pd.DataFrame(
                            {
                                "id": [r["id"] for r in recs],
                                "ensemble": [v.score if v.ok else np.nan for v in verdicts],
                            }
                        )
                        test = joined(scored, recs, dim, protocol)
                        res = cv_fold_correlations(
                            test,
                            "ensemble",
                            "human",
                            scale=scale,
                            method=protocol.method,
                            levels=_levels,
                            lo=_levels[0] - 0.5 if scale != "binary" else 0.0,
                            hi=_levels[-1] + 0.5 if scale != "binary" else 1.0,
                            n_splits=cfg.n_splits,
                            seed=cfg.seed,
                        )
                        full = (
                            fn(test["human"].to_numpy(), test["ensemble"].to_numpy())
                            if test["ensemble"].notna().sum() > 2
                            else None
                        )
                        cell[config] = {
                            "mean": res["mean"],
                            "std": res["std"],
                            "full": full,
                            "n_unscored": int(sum(not v.ok for v in verdicts)),
                            "via": f"ensemble:{path}",
                        }
                finally:
                    judge.close()
                    cache.close()
                out.setdefault(pname, {}).setdefault(dim, {})[kind] = cell
    return out


def run_buckets(
    cfg: ReproduceConfig,
    features: pd.DataFrame,
    records: dict[str, list[dict[str, Any]]],
    feature_names: list[str],
) -> dict[str, Any]:
    """Table 10 on UPHELD main (baselines excluded as in the app-b protocol): each metric's score is
    mapped onto the label scale and compared with the winning human label per agreement level."""
    from harness.judges.learned.model import load_ensemble

    out: dict[str, Any] = {}
    protocol = PROTOCOLS["app-b"]
    for dim in ("content", "style"):
        _scale, levels = DIMENSIONS[dim]
        frame = joined(
            features[features["dataset"] == "main"],
            records["main"],
            dim,
            Protocol("items", "mean", "auto", protocol.exclude_systems, ""),
        )
        cols = {}
        for f in feature_names:
            lo, hi = feature_range(f)
            frame[f"pred:{f}"] = discretize(frame[f].to_numpy(), levels, lo=lo, hi=hi)
            cols[f] = f"pred:{f}"
        ens_dir = cfg.output_dir / "ensembles" / "app-b"
        for kind in ("random_forest", "linear_regression", "svm"):
            p = ens_dir / f"{dim}-{kind}"
            if p.is_dir():
                ens = load_ensemble(p)
                frame[f"pred:{kind}"] = discretize(
                    ens.predict_scores(frame), levels, lo=levels[0] - 0.5, hi=levels[-1] + 0.5
                )
                cols[f"{kind} (in-sample)"] = f"pred:{kind}"  # fitted on all of main
        table = bucket_table(frame, cols, "labels")
        out[dim] = json.loads(table.to_json(orient="records"))
    return out


def run_system_level(
    cfg: ReproduceConfig,
    features: pd.DataFrame,
    records: dict[str, list[dict[str, Any]]],
    feature_names: list[str],
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for config, recs in records.items():
        systems = {r.get("system") for r in recs}
        if len(systems) < 3:
            out[config] = {"skipped": f"{len(systems)} system(s): system-level correlation needs >= 3"}
            continue
        for dim in DIMENSIONS:
            frame = joined(features[features["dataset"] == config], recs, dim, PROTOCOLS["pearson-mean"])
            out.setdefault(config, {})[dim] = {
                f: system_level(frame, f, "human", "system", n_bootstrap=cfg.n_bootstrap, seed=cfg.seed)
                for f in feature_names
            }
    return out


def run_cpdscore_on_upheld(cfg: ReproduceConfig, records: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """CPDScore (ComperDial App. B) on UPHELD main: every turn of the first ``cpdscore_dialogues``
    dialogues for every system; human score = the item's mean content label (UPHELD has no
    humanness label); turn-, dialogue- and system-level Pearson/Spearman/Kendall. Runs the
    ``cpdscore-*`` tasks' code (:func:`tasks.cpdscore.task.reproduce_cpdscore`): the four turn
    variants and CPDS-Dial over the grouped turns on top of each."""
    from tasks.cpdscore.task import reproduce_cpdscore

    if not cfg.cpdscore_judge:
        raise ValueError("CPDScore on UPHELD needs a judge (cpdscore_judge)")
    dialogues = list(dict.fromkeys(r["dialogue_id"] for r in records["main"]))[: cfg.cpdscore_dialogues]
    keep = set(dialogues)
    recs = [r for r in records["main"] if r["dialogue_id"] in keep]
    cache = RequestCache(cfg.cache_path or default_cache_path(), enabled=cfg.use_cache)
    try:
        out = reproduce_cpdscore(recs, cfg.cpdscore_judge, cache, n_calls=cfg.cpdscore_calls, seed=cfg.seed)
    finally:
        cache.close()
    return {
        **out,
        "data": {
            "config": "main",
            "dialogues": dialogues,
            "n_turn_items": len(recs),
            "human": "mean content label per item",
            "tasks": "cpdscore-{s,d}-{ref,noref} and CPDS-Dial over grouped turns",
        },
    }


# --------------------------------------------------------------------------- main entry
def reproduce_upheld(cfg: ReproduceConfig) -> Reproduction:
    from tasks.upheld.reproduce_report import render_tables

    t0 = datetime.now(UTC)
    handle, records = load_records(cfg)
    cache = RequestCache(cfg.cache_path or default_cache_path(), enabled=cfg.use_cache)
    try:
        features, info = compute_features(cfg, records, cache)
    finally:
        cache.close()
    feature_names = [c for c in (*REFERENCE_METRICS, *paper.LLM_JUDGE) if c in features.columns]
    # A feature without values on main (e.g. an LLM prompt whose every verdict failed to parse) cannot
    # feed an ensemble: it is left out of the ensembles and listed in results.json.
    main_vals = features[features["dataset"] == "main"]
    unusable = [c for c in feature_names if main_vals[c].notna().sum() < 3 * cfg.n_splits]
    info["ensemble_features_dropped"] = unusable
    corr: dict[str, Any] = {}
    for pname in cfg.protocols:
        protocol = PROTOCOLS[pname]
        for dim in DIMENSIONS:
            for config, recs in records.items():
                frame = joined(features[features["dataset"] == config], recs, dim, protocol)
                for f in feature_names:
                    cell = correlate(frame, f, dim, protocol, cfg)
                    corr.setdefault(pname, {}).setdefault(dim, {}).setdefault(f, {})[config] = cell
    cfg.output_dir.mkdir(parents=True, exist_ok=True)
    usable = [c for c in feature_names if c not in unusable]
    ensembles = run_ensembles(cfg, features, records, usable, info, handle)
    buckets = run_buckets(cfg, features, records, usable)
    systems = run_system_level(cfg, features, records, usable)
    cpds = run_cpdscore_on_upheld(cfg, records) if cfg.cpdscore_judge else None
    results = {
        "schema_version": 1,
        "kind": "reproduction",
        "paper": "UPHELD (Subasic et al., 2026), App. B Tables 7-9, App. J Table 10",
        "created_at": t0.isoformat(timespec="seconds"),
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()},
        "dataset": {
            **handle.describe(),
            "n_items": {c: len(r) for c, r in records.items()},
            "odd_cells": {k: handle.odd_cells[k] for k in ("count", "counts") if k in handle.odd_cells},
        },
        "protocols": {
            p: asdict(PROTOCOLS[p]) for p in dict.fromkeys((*cfg.protocols, *cfg.ensemble_protocols))
        },
        "features": {"names": feature_names, **info},
        "correlations": corr,
        "ensembles": ensembles,
        "buckets": buckets,
        "system_level": systems,
        "cpdscore": cpds,
        "harness": harness_info(),
        "environment": environment(),
    }
    tables_md = render_tables(results)
    text = json.dumps(_finite(results), indent=2, default=_json_default, allow_nan=False)
    (cfg.output_dir / "results.json").write_text(text)
    features.to_parquet(cfg.output_dir / "features.parquet", index=False)
    (cfg.output_dir / "tables.md").write_text(tables_md)
    return Reproduction(results, features, tables_md, cfg.output_dir, records)


def _finite(o: Any) -> Any:
    """NaN/inf -> None, recursively (results.json is strict JSON)."""
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_finite(v) for v in o]
    if isinstance(o, float | np.floating):
        return float(o) if np.isfinite(o) else None
    return o


def _json_default(o: Any) -> Any:
    if isinstance(o, np.integer | np.floating):
        v = o.item()
        return None if isinstance(v, float) and np.isnan(v) else v
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o)}")

"""How far a project is and how well its annotators agree so far (``harness annotate status``).

* **Progress** per annotator and language: items submitted (labelled, skipped or flagged) of the queue.
* **Inter-annotator agreement** per dimension of the form, over the items labelled by at least two
  annotators: Krippendorff's α (``krippendorff``; nominal for binary, ordinal for Likert, interval
  for continuous scales — :data:`harness.meta.agreement.ALPHA_LEVEL`), Cohen's κ for every pair of
  annotators (``sklearn``; unweighted for binary, quadratic-weighted for Likert scales, not defined
  for continuous ones) and pairwise percent agreement as in MEDAL's Table 4 (exact for binary
  issues; for rating scales also *adjacent* agreement, ``|a − b| ≤ 1``, which Table 4 reports for
  ``overall``). Each comes with a percentile-bootstrap confidence interval over items
  (:func:`scipy.stats.bootstrap`).
* **Judge vs humans so far** (with a judge run): the judge's scores against the mean of the
  project's labels of the headline dimension, on the labelled items, through the task's
  correlation meta-metrics (:data:`harness.meta.registry.META_METRICS`).
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import krippendorff
import numpy as np
import pandas as pd
from scipy.stats import bootstrap
from sklearn.metrics import cohen_kappa_score

from harness.annotate.active import MIN_CALIBRATION_LABELS, MIN_GROUP_LABELS, Estimate, estimate
from harness.annotate.judge_runs import judge_scores, scores_for
from harness.annotate.store import Progress, Project
from harness.meta.agreement import ALPHA_LEVEL, AlphaLevel, adjacent_agreement, percent_agreement
from harness.meta.metric import LanguageEntries, MetaMetric

#: tolerance of the adjacent agreement of rating scales (MEDAL Table 4, ``overall``)
ADJACENT_TOLERANCE = 1.0
KAPPA_WEIGHTS = {"binary": None, "likert": "quadratic"}


@dataclass(frozen=True)
class Stat:
    """A statistic with its bootstrap CI (None when undefined) and the items it is computed on."""

    value: float | None
    ci: tuple[float, float] | None
    n: int

    def to_json(self) -> dict[str, object]:
        return {"value": self.value, "ci": list(self.ci) if self.ci else None, "n": self.n}

    def text(self, digits: int = 3) -> str:
        if self.value is None:
            return "—"
        ci = f" [{self.ci[0]:.{digits}f}, {self.ci[1]:.{digits}f}]" if self.ci else ""
        return f"{self.value:.{digits}f}{ci}"


@dataclass(frozen=True)
class DimensionAgreement:
    """Agreement between annotators on one dimension of the form."""

    dimension: str
    kind: str
    alpha_level: str
    n_items: int  # items with at least two labels
    alpha: Stat
    percent: Stat  # exact pairwise agreement
    adjacent: Stat | None  # |a - b| <= 1, rating scales only
    kappa: dict[tuple[str, str], Stat] = field(default_factory=dict)
    kappa_weights: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "dimension": self.dimension,
            "kind": self.kind,
            "alpha_level": self.alpha_level,
            "n_items": self.n_items,
            "alpha": self.alpha.to_json(),
            "percent_agreement": self.percent.to_json(),
            "adjacent_agreement": self.adjacent.to_json() if self.adjacent else None,
            "kappa_weights": self.kappa_weights,
            "kappa": [{"pair": list(p), **s.to_json()} for p, s in self.kappa.items()],
        }


@dataclass(frozen=True)
class ProgressRow:
    annotator: str
    language: str
    progress: Progress

    def to_json(self) -> dict[str, object]:
        return {"annotator": self.annotator, "language": self.language, **self.progress.to_json()}


@dataclass(frozen=True)
class JudgeAgreement:
    """The judge's agreement with the project's labels so far: metric -> language -> entry."""

    run: str
    task: str
    dimension: str
    n_items: int
    entries: LanguageEntries

    def to_json(self) -> dict[str, object]:
        return {
            "run": self.run,
            "task": self.task,
            "dimension": self.dimension,
            "n_items": self.n_items,
            "entries": {
                lang: {k: e.model_dump(exclude_none=True) for k, e in by.items()}
                for lang, by in self.entries.items()
            },
        }


@dataclass(frozen=True)
class ActiveStatus:
    """The importance-weighted estimate of an active project's judge–human correlation so far."""

    estimate: Estimate
    target_half_width: float
    more_labels: int | None  # labels still needed for the target CI half-width (None: no CI yet)
    unplanned: int  # items outside the plan (the judge run has no score for them)
    #: ``plain`` (the LURE-weighted estimate) or ``calibrated`` (GREG, on the pool's judge and
    #: surrogate scores and, once every group has enough labels, the groups)
    estimator: str = "plain"
    #: the groups entered the calibrated estimate
    groups_used: bool = False
    #: the rule of the items' groups (system, dataset, none; None for a project without them)
    group_by: str | None = None

    def to_json(self) -> dict[str, object]:
        e = self.estimate
        return {
            "metric": e.metric,
            "value": e.value,
            "ci": list(e.ci) if e.ci else None,
            "half_width": e.half_width,
            "n_labels": e.n_labels,
            "n_items": e.n_items,
            "n_waiting": e.n_waiting,
            "target_half_width": self.target_half_width,
            "more_labels": self.more_labels,
            "unplanned": self.unplanned,
            "estimator": self.estimator,
            "calibration_min_labels": MIN_CALIBRATION_LABELS,
            "groups_used": self.groups_used,
            "group_by": self.group_by,
        }


@dataclass(frozen=True)
class ProjectStatus:
    name: str
    progress: list[ProgressRow]
    agreement: list[DimensionAgreement]
    judge: JudgeAgreement | None = None
    confidence: float = 0.95
    active: ActiveStatus | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "confidence": self.confidence,
            "progress": [r.to_json() for r in self.progress],
            "agreement": [a.to_json() for a in self.agreement],
            "judge": self.judge.to_json() if self.judge else None,
            "active": self.active.to_json() if self.active else None,
        }


# -- agreement ------------------------------------------------------------------------------------


def _finite(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


@dataclass(frozen=True)
class Boot:
    """Bootstrap settings: resamples, confidence level, seed."""

    n_bootstrap: int = 200
    confidence: float = 0.95
    seed: int = 0


def _ci(
    data: tuple[np.ndarray, ...], statistic: Callable[..., float], boot: Boot
) -> tuple[float, float] | None:
    """Percentile bootstrap CI of ``statistic`` over the rows of ``data`` (paired), None when it
    cannot be computed (too few items, a statistic undefined on most resamples)."""
    if boot.n_bootstrap < 2 or len(data[0]) < 2:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            res = bootstrap(
                data,
                statistic,
                paired=True,
                vectorized=False,
                n_resamples=boot.n_bootstrap,
                confidence_level=boot.confidence,
                method="percentile",
                rng=np.random.default_rng(boot.seed),
            )
        except (ValueError, ZeroDivisionError):
            return None
    lo, hi = _finite(res.confidence_interval.low), _finite(res.confidence_interval.high)
    return (lo, hi) if lo is not None and hi is not None else None


def _pair_shares(matrix: np.ndarray, tolerance: float) -> np.ndarray:
    """Per item (column with >= 2 labels) the share of annotator pairs within ``tolerance``."""
    out = []
    for col in matrix.T:
        values = col[~np.isnan(col)]
        i, j = np.triu_indices(values.size, k=1)
        out.append(float(np.mean(np.abs(values[i] - values[j]) <= tolerance + 1e-9)))
    return np.asarray(out, dtype=float)


def dimension_agreement(
    labels: pd.DataFrame,
    dimension: str,
    kind: str,
    *,
    n_bootstrap: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
    min_shared: int = 2,
) -> DimensionAgreement:
    """Agreement on one dimension from ``labels`` (columns item_id, annotator, dimension, value)."""
    rows = labels[(labels["dimension"] == dimension) & labels["value"].notna()]
    level = cast(AlphaLevel, ALPHA_LEVEL[kind])
    if rows.empty:  # nothing labelled yet: every statistic undefined
        none = Stat(None, None, 0)
        adjacent = None if kind == "binary" else none
        return DimensionAgreement(
            dimension, kind, level, 0, none, none, adjacent, {}, KAPPA_WEIGHTS.get(kind)
        )
    triples = pd.DataFrame({"item": rows["item_id"], "annotator": rows["annotator"], "value": rows["value"]})
    matrix_frame = triples.pivot_table(index="annotator", columns="item", values="value", aggfunc="first")
    matrix_frame = matrix_frame.loc[:, matrix_frame.notna().sum(axis=0) >= 2]
    matrix = matrix_frame.to_numpy(dtype=float)
    n_items = matrix.shape[1]
    boot = Boot(n_bootstrap, confidence, seed)
    cols = (np.arange(n_items),)

    domain = np.unique(matrix[~np.isnan(matrix)]) if n_items else np.array([])

    def alpha_of(idx: np.ndarray) -> float:
        sub = matrix[:, idx]
        if np.unique(sub[~np.isnan(sub)]).size < 2:
            return math.nan
        return float(krippendorff.alpha(sub, value_domain=domain, level_of_measurement=level))

    alpha_value = alpha_of(cols[0]) if n_items else math.nan
    alpha = Stat(_finite(alpha_value), _ci(cols, alpha_of, boot) if n_items else None, n_items)

    exact = percent_agreement(triples)
    shares = _pair_shares(matrix, 0.0)
    percent = Stat(_finite(exact.value), _ci((shares,), np.mean, boot), exact.n_items)
    adjacent = None
    if kind != "binary":
        adj = adjacent_agreement(triples, ADJACENT_TOLERANCE)
        adjacent = Stat(
            _finite(adj.value), _ci((_pair_shares(matrix, ADJACENT_TOLERANCE),), np.mean, boot), adj.n_items
        )

    kappas: dict[tuple[str, str], Stat] = {}
    weights = KAPPA_WEIGHTS.get(kind)
    if kind in KAPPA_WEIGHTS:
        names = [str(a) for a in matrix_frame.index]
        for a, b in itertools.combinations(range(len(names)), 2):
            both = ~np.isnan(matrix[a]) & ~np.isnan(matrix[b])
            y1, y2 = matrix[a, both], matrix[b, both]
            n = int(both.sum())
            if n < min_shared:
                continue

            def kappa_of(u: np.ndarray, v: np.ndarray) -> float:
                if np.unique(np.concatenate([u, v])).size < 2:
                    return math.nan
                return float(cohen_kappa_score(u, v, labels=domain, weights=weights))

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = kappa_of(y1, y2)
            kappas[(names[a], names[b])] = Stat(_finite(value), _ci((y1, y2), kappa_of, boot), n)
    return DimensionAgreement(dimension, kind, level, n_items, alpha, percent, adjacent, kappas, weights)


def agreement(
    project: Project, *, n_bootstrap: int = 200, confidence: float = 0.95, seed: int = 0
) -> list[DimensionAgreement]:
    """Agreement so far on every dimension of the project's form."""
    labels = project.labels()
    return [
        dimension_agreement(
            labels, f.dimension, f.kind, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed
        )
        for f in project.form.fields
    ]


# -- the judge against the project's labels -------------------------------------------------------


def human_means(project: Project, dimension: str | None = None) -> pd.DataFrame:
    """Per labelled item: config, record_id, language, item_id and ``human`` = the mean of the
    annotators' labels of ``dimension`` (default: the form's headline dimension)."""
    dim = dimension or project.form.headline_dimension
    labels = project.labels()
    rows = labels[(labels["dimension"] == dim) & labels["value"].notna()]
    if rows.empty:
        return pd.DataFrame(columns=["item_id", "config", "record_id", "language", "human", "n_labels"])
    grouped = rows.groupby(["item_id", "config", "record_id", "language"], sort=False)["value"]
    out = grouped.agg(["mean", "count"]).reset_index()
    return out.rename(columns={"mean": "human", "count": "n_labels"})


def judge_agreement(
    project: Project,
    run_dir: Path,
    *,
    n_bootstrap: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
    metrics: Sequence[str] | None = None,
) -> JudgeAgreement:
    """The judge run's agreement with the project's labels so far, through the meta-metric
    registry (the task's correlation metrics, or ``metrics``)."""
    from harness.meta.metric import MetaContext, MetaOutput, MetaSettings, merge_entries
    from harness.meta.registry import META_METRICS
    from harness.tasks import get_task

    task_name, scores = judge_scores(run_dir, project.form.task)
    spec = get_task(task_name)
    humans = human_means(project)
    joined = humans.merge(
        scores, left_on=["config", "record_id"], right_on=["dataset", "id"], suffixes=("", "_run")
    )
    samples = pd.DataFrame(
        {
            "dataset": joined["config"],
            "language": joined["language"],
            "item_id": joined["record_id"],
            "score": pd.to_numeric(joined["score"], errors="coerce"),
            "human": joined["human"],
        }
    )
    names = list(metrics or spec.metrics)
    unknown = [n for n in names if n not in META_METRICS]
    if unknown:
        raise ValueError(f"unknown meta-metric(s) {', '.join(unknown)}; `harness ls metrics` lists them")
    settings = MetaSettings(n_bootstrap=n_bootstrap, confidence=confidence, seed=seed, annotator_level=False)
    ctx = MetaContext(task=spec, samples=samples, settings=settings, methods=tuple(spec.metrics))
    out = MetaOutput()
    if len(samples) >= 3:
        chosen = [META_METRICS.get(n) for n in names]
        by_class: dict[type[MetaMetric], list[MetaMetric]] = {}
        for m in chosen:
            if m.applies(ctx):
                by_class.setdefault(type(m), []).append(m)
        for cls, group in by_class.items():
            merge_entries(out.entries, cls.compute_together(group, ctx).entries)
    return JudgeAgreement(str(run_dir), task_name, project.form.headline_dimension, len(samples), out.entries)


def active_status(
    project: Project, *, target_half_width: float = 0.05, confidence: float = 0.95
) -> ActiveStatus | None:
    """The estimate of an active project's judge–human correlation from its labels so far (LURE
    weights of :mod:`harness.annotate.active`), with the labels a target CI half-width needs; None
    for a random project. With the pool information stored at creation (the judge's and the
    surrogate's score and the group of every planned item) the Pearson estimate is the calibrated
    one from :data:`~harness.annotate.active.MIN_CALIBRATION_LABELS` labels on."""
    plan = project.active_plan()
    if plan is None:
        return None
    humans = human_means(project)
    planned = set(plan.item_ids)
    humans = humans[humans["item_id"].isin(planned)]
    labelled = list(humans["item_id"])
    metric = project.meta.get("active_metric", "pearson")
    pool = project.active_pool()
    if pool is not None:
        pos = {item: k for k, item in enumerate(pool.item_ids)}
        judge = pool.judge[[pos[i] for i in labelled]]
    else:  # a project without stored pool scores: the judge run's scores of the labelled items
        keys = list(zip(humans["config"], humans["record_id"], strict=True))
        _, scores = scores_for(Path(project.meta["judge_run"]), project.meta.get("active_task") or None, keys)
        judge = np.array([np.nan if j is None else j for j in scores], dtype=float)
    # the calibrated estimate is for the Pearson correlation only
    cal = pool if metric == "pearson" else None
    est = estimate(
        plan,
        labelled,
        judge,
        humans["human"].to_numpy(dtype=float),
        metric=metric,
        confidence=confidence,
        pool_judge=None if cal is None else cal.judge,
        pool_surrogate=None if cal is None else cal.surrogate,
        pool_groups=None if cal is None else cal.groups,
    )
    calibrated = cal is not None and est.n_labels >= MIN_CALIBRATION_LABELS
    groups_used = False
    if calibrated and cal is not None and cal.groups is not None:
        group_of = dict(zip(cal.item_ids, cal.groups, strict=True))
        counts = pd.Series([group_of[i] for i in plan.order[: est.n_labels]]).value_counts()
        groups_used = set(counts.index) == set(cal.groups) and int(counts.min()) >= MIN_GROUP_LABELS
    more = est.labels_for_half_width(target_half_width)
    return ActiveStatus(
        est,
        target_half_width,
        more,
        project.n_items() - plan.n_items,
        estimator="calibrated" if calibrated else "plain",
        groups_used=groups_used,
        group_by=None if pool is None else pool.group_by,
    )


def project_status(
    project: Project,
    *,
    judge_run: Path | None = None,
    n_bootstrap: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
    target_half_width: float = 0.05,
) -> ProjectStatus:
    """Progress, agreement so far and (with a judge run) the judge's agreement with the labels."""
    rows = [ProgressRow(a, lang, p) for a, lang, p in project.progress_by_language()]
    agree = agreement(project, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed)
    judge = (
        judge_agreement(project, judge_run, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed)
        if judge_run is not None
        else None
    )
    active = active_status(project, target_half_width=target_half_width, confidence=confidence)
    return ProjectStatus(project.name, rows, agree, judge, confidence, active)

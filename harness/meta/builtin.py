"""The core's meta-metrics: every statistic of :mod:`harness.meta` as a registered
:class:`~harness.meta.metric.MetaMetric`, each delegating to the module that computes it.

=========================  ==========================================================================
``pearson`` / ``spearman``  judge vs human rating per dataset × language, mean over datasets and
/ ``kendall``               languages, paired percentile bootstrap CIs (:mod:`~harness.meta.correlation`)
``dialogue_correlation`` /  the same correlations on per-dialogue / per-system means
``system_correlation``      (:mod:`~harness.meta.levels`, ComperDial Tables 4–5)
``issue_detection``         F1± / precision / recall / accuracy / human ceiling / McNemar per issue
                            label (:mod:`~harness.meta.classification`, MEDAL §5.3)
``pooled_correlation``      the correlations over all languages pooled (MEDAL's "Combined")
``soft_labels``             expected errors and cross-entropy against the annotators' label distribution
``human_ceilings``          leave-one-annotator-out and split-half (Spearman–Brown) ceilings
``high_agreement``          the correlations on items whose annotators agree (full / majority)
``alt_test``                the alternative annotator test (:mod:`~harness.meta.alt_test`)
``panel``                   panel statistics: α among judges, error correlation, effective judges,
                            leave-one-judge-out (:mod:`~harness.meta.panel`)
``annotator_agreement``     Krippendorff's α / Fleiss' κ / agreement among the annotators
                            (:mod:`~harness.meta.agreement`); on request
``scale_correlation``       the correlation the label scale calls for (point-biserial / Cramér's V /
                            Pearson, UPHELD App. B; :mod:`~harness.meta.scale_correlation`); on request
=========================  ==========================================================================

Each statistic function returns its entries under its own names (``"system/spearman"``,
``"repetitive/f1_pos"``); the metric that calls it turns each name into a structured
:class:`~harness.meta.metric.MetricKey` (:meth:`~harness.meta.metric.MetaMetric.entry_key`):

=========================  ==========================================================================
metric                      entries (group; parameters)
=========================  ==========================================================================
``pearson`` ...             one (none; none)
``<level>_correlation``     one per method (none; ``method``), level dialogue / system
``issue_detection``         per issue label and ``macro`` (group; ``statistic``: f1_pos, f1_neg,
                            precision, recall, accuracy, predicted_positive, reference_positive,
                            human_ceiling, mcnemar)
``pooled_correlation``      one per method in ``all`` (none; ``method``)
``soft_labels``             one per error (none; ``statistic``)
``human_ceilings``          one per estimator and method (none; ``estimator``: loao / split_half,
                            ``method``)
``high_agreement``          one per method (none; ``method``)
=========================  ==========================================================================

:func:`legacy_key` reads the names of results.json files before schema 3.0 the same way.

A task that names no meta-metrics gets :func:`default_metric_names`: its correlations, its levels,
issue detection for issue labels, and the annotator-level metrics, the alt-test and the panel
statistics wherever the samples allow them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from harness.meta.correlation import _replicates, correlation, meta_evaluate
from harness.meta.metric import (
    JSON,
    Aggregation,
    Level,
    MetaContext,
    MetaMetric,
    MetaOutput,
    MetricKey,
    Need,
    merge_entries,
)

if TYPE_CHECKING:
    from harness.tasks import TaskSpec

SCORES_AND_RATINGS = frozenset({Need.JUDGE_SCORES, Need.HUMAN_RATINGS})

#: the statistics issue detection writes per issue label (and ``macro``)
ISSUE_STATISTICS = (
    "f1_pos",
    "f1_neg",
    "precision",
    "recall",
    "accuracy",
    "predicted_positive",
    "reference_positive",
    "human_ceiling",
    "mcnemar",
)
#: the ceilings :class:`HumanCeilings` writes, by the prefix of their statistic names
CEILING_ESTIMATORS = ("loao", "split_half")

#: {language: {statistic name: entry}}, what the statistics functions return
RawEntries = Mapping[str, Mapping[str, Mapping[str, object]]]


def _after(prefix: str, name: str) -> str | None:
    return name[len(prefix) :] if name.startswith(prefix) and len(name) > len(prefix) else None


def keys_of(metrics: Sequence[MetaMetric], by_language: RawEntries) -> MetaOutput:
    """Entries of several metrics computed together, each name keyed by the metric that writes it."""

    def key(name: str) -> MetricKey:
        for m in metrics:
            k = m.entry_key(name)
            if k is not None:
                return k
        raise ValueError(
            f"none of the meta-metrics {[m.name for m in metrics]} writes entries named {name!r}"
        )

    return MetaOutput.from_dicts(by_language, key)


def _boot(ctx: MetaContext) -> tuple[int, float, int]:
    s = ctx.settings
    return s.n_bootstrap, s.confidence, s.seed


class Correlation(MetaMetric):
    """Pearson / Spearman / Kendall of judge scores and human ratings with paired bootstrap CIs."""

    is_correlation = True
    table_column = True

    def __init__(self, method: str, label: str, description: str) -> None:
        self.name = self.method = method
        self.label = label
        self.description = description

    def compute(self, ctx: MetaContext) -> MetaOutput:
        return self.compute_together([self], ctx)

    @classmethod
    def compute_together(cls, metrics: Sequence[MetaMetric], ctx: MetaContext) -> MetaOutput:
        """One pass for every correlation: they share the bootstrap resamples."""
        n_boot, conf, seed = _boot(ctx)
        methods = [m.name for m in metrics]
        meta = meta_evaluate(ctx.samples, methods, n_boot, conf, seed, ctx.task.languages)
        return keys_of(metrics, meta.to_dict())

    def statistic(self, judge: np.ndarray, human: np.ndarray) -> float | None:
        return correlation(judge, human, self.method).value

    def replicates(self, judge: np.ndarray, human: np.ndarray, idx: np.ndarray) -> np.ndarray | None:
        return _replicates(judge, human, idx, self.method)


class LevelCorrelation(MetaMetric):
    """The task's correlations on judge and human means per dialogue or per system."""

    needs = SCORES_AND_RATINGS | {Need.GROUP_IDS}

    def __init__(self, level: Level) -> None:
        self.level = level
        self.name = f"{level.value}_correlation"
        self.label = f"{level.value}-level correlation"
        self.description = (
            f"the task's correlations on per-{level.value} means of judge scores (parse failures "
            f"skipped) and human ratings; one entry per correlation method (ComperDial Tables 4–5)"
        )

    def entry_key(self, name: str) -> MetricKey | None:
        method = _after(f"{self.level.value}/", name)
        return None if method is None else self.key(method=method)

    def compute(self, ctx: MetaContext) -> MetaOutput:
        return self.compute_together([self], ctx)

    @classmethod
    def compute_together(cls, metrics: Sequence[MetaMetric], ctx: MetaContext) -> MetaOutput:
        from harness.meta.levels import level_correlations

        n_boot, conf, seed = _boot(ctx)
        levels = [m.level.value for m in metrics]
        return keys_of(metrics, level_correlations(ctx.samples, levels, ctx.methods, n_boot, conf, seed))


class IssueDetection(MetaMetric):
    name = "issue_detection"
    label = "issue detection"
    description = (
        "binary issue labels of the judge vs each annotation set: F1+/F1−, precision, recall, accuracy, "
        "predicted positives, human ceiling, McNemar; one entry per issue label (and macro) and "
        "statistic (MEDAL §5.3)"
    )
    needs = frozenset({Need.ISSUE_LABELS})
    value_range = (0.0, 1.0)
    aggregation = Aggregation.POOLED

    def entry_key(self, name: str) -> MetricKey | None:
        group, _, statistic = name.rpartition("/")
        if not group or statistic not in ISSUE_STATISTICS:
            return None
        return self.key(group, statistic=statistic)

    def compute(self, ctx: MetaContext) -> MetaOutput:
        from harness.meta.classification import issue_detection

        n_boot, conf, seed = _boot(ctx)
        issues = issue_detection(
            ctx.samples,
            ctx.task.issue_labels,
            n_bootstrap=n_boot,
            confidence=conf,
            seed=seed,
            language_order=ctx.task.languages,
        )
        return self.output(issues)


class PooledCorrelation(MetaMetric):
    name = "pooled_correlation"
    label = "pooled correlation"
    description = (
        "the task's correlations over every language's items pooled, bootstrap CI; one entry per "
        "method in 'all' (MEDAL's Combined)"
    )
    aggregation = Aggregation.POOLED

    def entry_key(self, name: str) -> MetricKey | None:
        method = name.removesuffix("_pooled")
        return self.key(method=method) if method and method != name else None

    def compute(self, ctx: MetaContext) -> MetaOutput:
        from harness.meta.issue_metrics import pooled_correlations

        n_boot, conf, seed = _boot(ctx)
        pooled = pooled_correlations(ctx.samples, ctx.methods, n_boot, conf, seed)
        return self.output({"all": pooled})


# -- annotator-level metrics: one computation, three metrics ------------------------------------
class _HumanMetric(MetaMetric):
    """Soft labels, ceilings and high-agreement correlations come from one pass over the annotators'
    labels (:func:`harness.meta.soft_labels.add_human_metrics`); each metric keeps its own entries.
    Their notes are the ``human_labels`` section."""

    needs = SCORES_AND_RATINGS | {Need.ANNOTATOR_LABELS}
    section = "human_labels"

    def compute(self, ctx: MetaContext) -> MetaOutput:
        shared = ctx.shared("human_metrics", lambda: _human_metrics(ctx))
        assert isinstance(shared, _HumanShared)
        mine = {
            lang: {k: e for k, e in by_key.items() if self.entry_key(k) is not None}
            for lang, by_key in shared.entries.items()
        }
        return MetaOutput(self.output({lang: e for lang, e in mine.items() if e}).entries, shared.notes)


@dataclass(frozen=True)
class _HumanShared:
    """The annotator-level entries under their statistic names, and the notes."""

    entries: dict[str, dict[str, dict[str, object]]]
    notes: JSON


def _human_metrics(ctx: MetaContext) -> _HumanShared:
    """Every annotator-level entry and the notes (what ran, what was skipped)."""
    from harness.meta.soft_labels import add_human_metrics

    n_boot, conf, seed = _boot(ctx)
    merged: dict[str, dict[str, dict[str, object]]] = {}
    notes = add_human_metrics(
        merged,
        ctx.samples,
        ctx.methods,
        ctx.dimensions,
        ctx.judge_range,
        yes_no=tuple(getattr(ctx.task.scorer, "labels", ("Yes", "No"))),
        n_bootstrap=n_boot,
        confidence=conf,
        seed=seed,
        language_order=ctx.task.languages,
    )
    return _HumanShared(merged, notes)


class SoftLabels(_HumanMetric):
    name = "soft_labels"
    label = "soft labels"
    description = (
        "the judge against the annotators' label distribution: E|s−h|, E[(s−h)²], cross-entropy; "
        "one entry per error"
    )
    higher_is_better = False
    value_range = (0.0, float("inf"))

    def entry_key(self, name: str) -> MetricKey | None:
        statistic = _after("soft/", name)
        return None if statistic is None else self.key(statistic=statistic)


class HumanCeilings(_HumanMetric):
    name = "human_ceilings"
    label = "human ceilings"
    description = (
        "what humans reach: one annotator vs the mean of the others (LOAO) and the split-half "
        "Spearman–Brown ceiling; one entry per estimator and correlation method"
    )

    def entry_key(self, name: str) -> MetricKey | None:
        for estimator in CEILING_ESTIMATORS:
            method = _after(f"ceiling_{estimator}/", name)
            if method is not None:
                return self.key(estimator=estimator, method=method)
        return None


class HighAgreement(_HumanMetric):
    name = "high_agreement"
    label = "high-agreement correlation"
    description = (
        "the task's correlations on items whose annotators agree (full / majority buckets); "
        "one entry per correlation method"
    )

    def entry_key(self, name: str) -> MetricKey | None:
        method = _after("high_agreement/", name)
        return None if method is None else self.key(method=method)


def _label_scale(ctx: MetaContext) -> dict[str, object]:
    """The label scale of the task's dimension (as the annotator-level metrics read it)."""
    from harness.meta.soft_labels import label_info

    labels = ctx.annotator_labels()
    dims = sorted({d for d in ctx.samples.get("human_dimension", []) if isinstance(d, str)})
    table = ctx.dimensions.get(dims[0]) if len(dims) == 1 else None
    return label_info(table, labels["value"].tolist())


class AlternativeAnnotatorTest(MetaMetric):
    name = "alt_test"
    label = "alt-test ω"
    description = (
        "can the judge replace an annotator? leave-one-annotator-out, one-sided paired t-tests with "
        "margin ε and Benjamini–Yekutieli FDR; ω = share of annotators beaten (Calderon et al. 2025)"
    )
    needs = SCORES_AND_RATINGS | {Need.ANNOTATOR_LABELS}
    value_range = (0.0, 1.0)
    aggregation = Aggregation.PER_GROUP
    section = "alt_test"

    def compute(self, ctx: MetaContext) -> MetaOutput:
        from harness.meta.alt_test import alt_test_from_samples

        s = ctx.settings
        alt = alt_test_from_samples(
            ctx.samples,
            _label_scale(ctx),
            ctx.judge_range,
            epsilon=s.alt_epsilon,
            q=s.alt_q,
            scale=s.alt_scale,
        )
        return MetaOutput(section=alt)


class PanelStatistics(MetaMetric):
    name = "panel"
    label = "panel statistics"
    description = (
        "a panel's members and vote: Krippendorff's α among the judges, their error correlation, "
        "effective number of judges, leave-one-judge-out, each member's correlations and alt-test"
    )
    needs = SCORES_AND_RATINGS | {Need.SEVERAL_JUDGES}
    aggregation = Aggregation.NONE
    section = "panel"

    def compute(self, ctx: MetaContext) -> MetaOutput:
        from harness.meta.panel import panel_report
        from harness.meta.soft_labels import label_info

        panel = ctx.panel
        assert panel is not None  # applies() checked it
        sub = ctx.samples
        labels = ctx.annotator_labels()
        alt = None
        if not labels.empty:
            dims = sub["human_dimension"].dropna() if "human_dimension" in sub else sub.iloc[:0, 0]
            table = ctx.dimensions.get(str(dims.iloc[0])) if len(dims) else None
            info = label_info(table, labels["value"].tolist())
            s = ctx.settings
            alt = {"info": info, "epsilon": s.alt_epsilon, "q": s.alt_q, "scale": s.alt_scale}
        n_boot, conf, seed = _boot(ctx)
        report = panel_report(
            sub,
            list(panel.members),
            panel.vote,
            panel.quorum,
            ctx.methods,
            ranges=list(panel.ranges) if panel.ranges is not None else None,
            language_order=ctx.task.languages,
            n_bootstrap=n_boot,
            confidence=conf,
            seed=seed,
            alt_test=alt,
        )
        return MetaOutput(section=report)


# -- on request ---------------------------------------------------------------------------------
class AnnotatorAgreement(MetaMetric):
    name = "annotator_agreement"
    label = "annotator α"
    description = (
        "agreement among the human annotators per dataset × language: Krippendorff's α (level from the "
        "label scale) as the value, Fleiss' κ, exact and adjacent agreement alongside"
    )
    needs = frozenset({Need.ANNOTATOR_LABELS})
    table_column = True

    def compute(self, ctx: MetaContext) -> MetaOutput:
        from harness.meta.agreement import ALPHA_LEVEL, agreement_report
        from harness.meta.levels import aggregate

        labels = ctx.annotator_labels()
        scale = str(_label_scale(ctx)["scale"])
        level = ALPHA_LEVEL.get(scale, "ordinal")
        per_group: dict[tuple[str, str], dict[str, dict[str, object]]] = {}
        for (ds, lang), lab in labels.groupby(["dataset", "language"], sort=True):
            frame = lab.rename(columns={"unit": "item"})[["item", "annotator", "value"]]
            rep = agreement_report(frame, level).to_dict()
            entry = {
                "value": rep.get("alpha"),
                "n": rep.get("n_items"),
                "fleiss_kappa": rep.get("fleiss_kappa"),
                "percent_agreement": rep.get("percent_agreement"),
                "adjacent_agreement": rep.get("adjacent_agreement"),
                "n_annotators": rep.get("n_annotators"),
                "alpha_level": level,
            }
            per_group[(str(ds), str(lang))] = {self.name: entry}
        return self.output(aggregate(per_group))


class ScaleCorrelation(MetaMetric):
    name = "scale_correlation"
    label = "scale-aware correlation"
    description = (
        "the correlation the label scale calls for: point-biserial (binary), Cramér's V (Likert, judge "
        "scores binned to the levels), Pearson (continuous), UPHELD App. B; bootstrap CI"
    )
    needs = SCORES_AND_RATINGS | {Need.ANNOTATOR_LABELS}
    value_range = (-1.0, 1.0)
    table_column = True

    def compute(self, ctx: MetaContext) -> MetaOutput:
        from harness.meta.levels import aggregate
        from harness.meta.scale_correlation import item_level

        info = _label_scale(ctx)
        n_boot, conf, seed = _boot(ctx)
        lo, hi = ctx.judge_range or (0.0, 1.0)
        levels = info["levels"]
        assert isinstance(levels, list)
        per_group: dict[tuple[str, str], dict[str, dict[str, object]]] = {}
        for (ds, lang), sub in ctx.samples.groupby(["dataset", "language"], sort=True):
            valid = sub[sub["score"].notna() & sub["human"].notna()]
            if len(valid) < 3:
                continue
            res = item_level(
                valid,
                "score",
                "human",
                scale=str(info["scale"]),
                levels=levels or None,
                n_bootstrap=n_boot,
                seed=seed,
                lo=lo,
                hi=hi,
                confidence=conf,
            )
            ((method, entry),) = res.items()
            entry = {**entry, "parse_failures": int(len(sub) - len(valid)), "method": method}
            per_group[(str(ds), str(lang))] = {self.name: entry}
        return self.output(aggregate(per_group))


BUILTIN_META_METRICS: tuple[MetaMetric, ...] = (
    Correlation("pearson", "Pearson", "Pearson's r of judge scores and human ratings"),
    Correlation("spearman", "Spearman", "Spearman's ρ of judge scores and human ratings"),
    Correlation("kendall", "Kendall", "Kendall's τ-b of judge scores and human ratings"),
    LevelCorrelation(Level.DIALOGUE),
    LevelCorrelation(Level.SYSTEM),
    IssueDetection(),
    PooledCorrelation(),
    SoftLabels(),
    HumanCeilings(),
    HighAgreement(),
    AlternativeAnnotatorTest(),
    PanelStatistics(),
    AnnotatorAgreement(),
    ScaleCorrelation(),
)


def legacy_key(name: str, metrics: Sequence[MetaMetric] = BUILTIN_META_METRICS) -> MetricKey:
    """The key of an entry a results.json before schema 3.0 wrote under ``name``
    (``"system/spearman"``, ``"repetitive/f1_pos"``, ``"pearson_pooled"``, a plug-in's metric name):
    the first of ``metrics`` that writes it, else the name as a metric's own."""
    for m in metrics:
        key = m.entry_key(name)
        if key is not None:
            return key
    return MetricKey(metric=name)


def default_metric_names(task: TaskSpec) -> tuple[str, ...]:
    """The meta-metrics of a task that names none: its correlations and levels, issue detection
    and the pooled correlations for issue labels, then what needs annotators or a panel (each runs
    only where the samples allow it)."""
    out = [*task.metrics, *(f"{lvl}_correlation" for lvl in task.levels)]
    if task.issue_labels:
        out += ["issue_detection", "pooled_correlation"]
    out += ["soft_labels", "human_ceilings", "high_agreement", "alt_test", "panel"]
    return tuple(out)


__all__ = ["BUILTIN_META_METRICS", "default_metric_names", "legacy_key", "merge_entries"]

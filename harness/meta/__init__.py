"""Meta-evaluation statistics: how well judges agree with humans, and humans with each other.

Each statistic is a registered meta-metric: :mod:`~harness.meta.metric` (the abstraction: needs,
level, direction, range, aggregation, the typed entry), :mod:`~harness.meta.builtin` (the core's
metrics, each delegating to a module below), :mod:`~harness.meta.registry` (``META_METRICS``,
entry-point group ``dialeval_harness.meta_metrics``), :mod:`~harness.meta.stage` (one task's
samples -> every applicable metric) and :mod:`~harness.meta.panel_vote` (a panel's vote rule and
what a composite judge exposes). The computations:

* :mod:`~harness.meta.correlation` — judge vs human correlations with paired bootstrap CIs per
  dataset, language and overall (what ``harness run`` reports);
* :mod:`~harness.meta.scale_correlation` — the correlation chosen by the label scale (Pearson /
  Cramér's V / point-biserial), item and system level, cross-validation folds (UPHELD App. B);
* :mod:`~harness.meta.classification` — binary issue detection: F1+/F1−, human ceiling, McNemar,
  repeated-run stability (MEDAL §5.3, App. D);
* :mod:`~harness.meta.issue_metrics` — those metrics for ``issues_json`` tasks in results.json;
* :mod:`~harness.meta.agreement` — inter-annotator agreement (Krippendorff's α, Cohen's / Fleiss' κ,
  agreement buckets);
* :mod:`~harness.meta.buckets` — accuracy per agreement bucket (UPHELD Table 10);
* :mod:`~harness.meta.levels` — dialogue- and system-level correlations (ComperDial Tables 4–5);
* :mod:`~harness.meta.soft_labels` — judge vs the annotators' label distribution, human ceilings
  (leave-one-annotator-out, split-half + Spearman–Brown), high-agreement correlations;
* :mod:`~harness.meta.alt_test` — can this judge replace an annotator? (Calderon et al. 2025);
* :mod:`~harness.meta.panel` — judge panels: α among judges, error correlation, effective judges.

The computations return typed entries (``TypedDict`` classes such as
:class:`~harness.meta.correlation.CorrelationEntry`); :mod:`~harness.meta.jsonable` turns them into
the JSON of a ``results.json`` section.
"""

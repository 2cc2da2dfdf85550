"""The meta-evaluation stage: one task's samples in, every applicable meta-metric's results out.

Scoring writes the samples; this stage then runs once per task, in a straight line:

1. :func:`select_metrics` turns the names a run asks for (``--metrics``, else the task's
   ``meta_metrics``, else :func:`harness.meta.builtin.default_metric_names`) into registered
   :class:`~harness.meta.metric.MetaMetric` objects (an unknown name is an error listing the known ones);
2. :func:`evaluate_task` keeps the metrics whose needs the samples meet, computes them in the order
   asked (metrics of one class that share work, e.g. the correlations' bootstrap resamples, in one
   :meth:`~harness.meta.metric.MetaMetric.compute_together` call) and merges their entries per
   language and their sections.

Nothing here knows a run's configuration or a judge's class: the caller builds the
:class:`~harness.meta.metric.MetaContext` (samples, settings, the judge's score range and, for a
composite judge, its :class:`~harness.meta.metric.PanelView`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.jsontypes import JSON
from harness.meta.metric import LanguageEntries, MetaContext, MetaMetric, Need, merge_entries
from harness.meta.registry import META_METRICS

if TYPE_CHECKING:
    from harness.tasks import TaskSpec


@dataclass
class TaskMeta:
    """The meta-evaluation of one task: entries per language, sections, the metrics that ran."""

    entries: LanguageEntries = field(default_factory=dict)
    sections: dict[str, JSON] = field(default_factory=dict)
    computed: list[str] = field(default_factory=list)


def requested_names(task: TaskSpec, override: Sequence[str] | None = None) -> tuple[str, ...]:
    """The meta-metric names a run computes for ``task``: ``override`` (``--metrics``), else the
    task's ``meta_metrics``, else the defaults."""
    from harness.meta.builtin import default_metric_names

    if override:
        return tuple(dict.fromkeys(override))
    if task.meta_metrics:
        return tuple(task.meta_metrics)
    return default_metric_names(task)


def select_metrics(names: Sequence[str]) -> list[MetaMetric]:
    """The registered metrics of ``names`` (an unknown name raises, naming the known ones)."""
    return [META_METRICS.get(n) for n in dict.fromkeys(names)]


def correlation_methods(metrics: Sequence[MetaMetric], task: TaskSpec) -> tuple[str, ...]:
    """The correlation methods the other metrics use as a parameter: the correlations selected, else
    the task's ``metrics``."""
    chosen = tuple(m.name for m in metrics if m.is_correlation)
    return chosen or tuple(task.metrics)


def needs_of(metrics: Sequence[MetaMetric]) -> frozenset[Need]:
    out: frozenset[Need] = frozenset()
    for m in metrics:
        out |= m.needs
    return out


def _shares_work(metric: MetaMetric) -> bool:
    return type(metric).compute_together.__func__ is not MetaMetric.compute_together.__func__  # type: ignore[attr-defined]


def evaluate_task(ctx: MetaContext, metrics: Sequence[MetaMetric]) -> TaskMeta:
    """Every metric of ``metrics`` whose needs ``ctx`` meets, in order; a metric class that shares
    work computes its selected metrics together, at the position of the first."""
    out = TaskMeta()
    applicable = [m for m in metrics if m.applies(ctx)]
    done: set[int] = set()
    for i, metric in enumerate(applicable):
        if i in done:
            continue
        if _shares_work(metric):
            group = [j for j, m in enumerate(applicable) if type(m) is type(metric) and j not in done]
            result = type(metric).compute_together([applicable[j] for j in group], ctx)
            done.update(group)
            out.computed += [applicable[j].name for j in group]
        else:
            result = metric.compute(ctx)
            done.add(i)
            out.computed.append(metric.name)
        merge_entries(out.entries, result.entries)
        if metric.section is not None and result.section is not None:
            out.sections.setdefault(metric.section, result.section)
    return out

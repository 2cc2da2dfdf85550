"""The meta-metric registry: :data:`META_METRICS` (a :class:`harness.registry.Registry`, entry-point
group ``dialeval_harness.meta_metrics``) with the core's statistics (:mod:`harness.meta.builtin`) and
every installed plug-in's, and the lookups the report and viewer use to read a run's metrics."""

from __future__ import annotations

from collections.abc import Sequence

from harness import plugins
from harness.meta.builtin import BUILTIN_META_METRICS
from harness.meta.metric import MetaMetric, UnknownMetric
from harness.registry import Registry


def _is_metric(obj: object) -> bool:
    return isinstance(obj, MetaMetric)


META_METRICS: Registry[MetaMetric] = Registry(
    "meta-metric",
    plugins.META_METRICS_GROUP,
    accepts=_is_metric,
    builtins=lambda: BUILTIN_META_METRICS,
    summary=lambda m: m.summary(),
)


def register_meta_metric(metric: MetaMetric) -> MetaMetric:
    """Register a meta-metric (a plug-in's registrar function calls this)."""
    return META_METRICS.register(metric)


def get_meta_metric(name: str) -> MetaMetric:
    return META_METRICS.get(name)


def lookup(name: str) -> MetaMetric:
    """The registered metric, or an :class:`UnknownMetric` (a view of a run made with a plug-in that
    is not installed here)."""
    return META_METRICS.get(name) if name in META_METRICS else UnknownMetric(name)


def table_metrics(names: Sequence[str]) -> list[MetaMetric]:
    """The per-language table columns among ``names`` (a task's ``meta_metrics`` in results.json)."""
    return [m for m in (lookup(n) for n in names) if m.table_column]

"""The meta-evaluation stage of ``harness run``: after scoring, one pass over the tasks reads each
task's samples back from ``samples.parquet`` and runs its meta-metrics (:mod:`harness.meta.stage`).

Per task it counts what the results document reports beside the statistics (used configs, parse
failures, issue labels that did not parse), builds the :class:`~harness.meta.metric.MetaContext`
from what the judge exposes (its score range; a composite judge's
:meth:`~harness.judges.base.Judge.panel_view`), and collects the entries per language and the
sections (``human_labels``, ``alt_test``, ``panel``) of every task.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from harness.data.layout import MANIFEST_NAME
from harness.data.resolve import DatasetHandle
from harness.jsontypes import JSON
from harness.judges.base import Judge
from harness.meta.issue_metrics import label_parse_failures
from harness.meta.metric import LanguageEntries, MetaContext, MetaSettings, Need, PanelView
from harness.meta.stage import (
    correlation_methods,
    evaluate_task,
    needs_of,
    requested_names,
    select_metrics,
)
from harness.run.samples import task_frame
from harness.tasks import TaskSpec

#: a dataset's dimension table: dimension name -> {scale, min, max, ...}
DimensionTable = dict[str, dict[str, object]]


def dimension_tables(handle: DatasetHandle) -> DimensionTable:
    """The dataset's dimension table (name -> {scale, min, max, ...}) from its build manifest."""
    path = Path(handle.location) / MANIFEST_NAME
    if not path.is_file():
        return {}
    try:
        dims = json.loads(path.read_text(encoding="utf-8")).get("dimensions") or []
    except (OSError, ValueError):
        return {}
    return {d["name"]: d for d in dims if isinstance(d, dict) and "name" in d}


def _range(judge: Judge, spec: TaskSpec) -> tuple[float, float] | None:
    try:
        r = judge.score_range(spec)
    except ValueError:
        return None
    return (float(r[0]), float(r[1])) if r is not None else None


@dataclass
class TaskCounts:
    """What the results document reports of a task beside its statistics."""

    used_configs: list[str]
    parse_failures: int
    label_parse_failures: dict[str, int] | None = None


@dataclass
class RunMeta:
    """The meta-evaluation of a run: per task its entries, sections, counts and the metrics run."""

    results: dict[str, LanguageEntries] = field(default_factory=dict)
    sections: dict[str, dict[str, JSON]] = field(default_factory=dict)  # section -> task -> content
    counts: dict[str, TaskCounts] = field(default_factory=dict)
    metrics: dict[str, list[str]] = field(default_factory=dict)  # task -> meta-metrics requested
    methods: dict[str, list[str]] = field(default_factory=dict)  # task -> correlation methods
    panel: PanelView | None = None


def meta_evaluate_run(
    specs: list[TaskSpec],
    judge: Judge,
    handles: dict[str, DatasetHandle],
    samples_path: Path,
    settings: MetaSettings,
    *,
    complete: bool = True,
    metrics: list[str] | None = None,
) -> RunMeta:
    """Statistics per task from the samples file, one task's columns at a time. ``metrics``
    overrides the tasks' meta-metrics; ``complete`` is False when scoring stopped early (a task
    never reached has counts but no statistics; the panel statistics need every item)."""
    out = RunMeta()
    dims = {b: dimension_tables(h) for b, h in handles.items()}
    for spec in specs:
        selected = select_metrics(requested_names(spec, metrics))
        methods = correlation_methods(selected, spec)
        out.metrics[spec.name] = [m.name for m in selected]
        out.methods[spec.name] = list(methods)
        panel = judge.panel_view(spec) if complete else None
        out.panel = out.panel or panel
        full = True if panel is not None and Need.SEVERAL_JUDGES in needs_of(selected) else None
        frame = task_frame(samples_path, spec.name, full=full)
        out.counts[spec.name] = TaskCounts(
            used_configs=sorted(set(frame["dataset"])),
            parse_failures=int((frame["parse_status"] != "ok").sum()),
            label_parse_failures=(
                label_parse_failures(frame, spec.issue_labels) if spec.issue_labels else None
            ),
        )
        sub = frame.rename(columns={"human_rating": "human"})
        del frame
        if not complete and sub.empty:
            continue  # never reached: no statistics, listed under results["incomplete"]
        ctx = MetaContext(
            task=spec,
            samples=sub,
            settings=settings,
            methods=methods,
            judge_range=_range(judge, spec),
            panel=panel,
            dimensions=dims[spec.builder],
            complete=complete,
        )
        done = evaluate_task(ctx, selected)
        out.results[spec.name] = done.entries
        for section, content in done.sections.items():
            out.sections.setdefault(section, {})[spec.name] = content
    return out

"""What ``harness run`` adds to ``results.json`` beyond the item-level correlations:

* ``"<level>/<metric>"`` entries for tasks with ``TaskSpec.levels`` (:mod:`harness.meta.levels`);
* soft-label metrics, human ceilings and high-agreement correlations per language for tasks whose
  items carry annotator labels (:mod:`harness.meta.soft_labels`), with notes under
  ``"human_labels"``;
* ``"alt_test"``: the alternative annotator test per task (:mod:`harness.meta.alt_test`);
* ``"panel"``: the panel statistics of a ``panel:`` judge (:mod:`harness.meta.panel`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from harness.data.layout import MANIFEST_NAME
from harness.data.resolve import DatasetHandle
from harness.judges.base import Judge
from harness.meta.alt_test import alt_test_from_samples
from harness.meta.levels import level_correlations
from harness.meta.soft_labels import add_human_metrics, annotator_frame, label_info
from harness.tasks import TaskSpec

if TYPE_CHECKING:
    from harness.judges.panel import PanelJudge


def dimension_tables(handle: DatasetHandle) -> dict[str, dict[str, Any]]:
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


def add_task_extras(
    task_results: dict[str, Any],
    sub: pd.DataFrame,
    spec: TaskSpec,
    judge: Judge,
    cfg: Any,
    dims: dict[str, dict[str, Any]],
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Merge level / soft-label / ceiling metrics into ``task_results``; return (human-label notes,
    alt-test result), each None when the task's items carry no annotator labels."""
    boot = dict(n_bootstrap=cfg.n_bootstrap, confidence=cfg.confidence, seed=cfg.seed)
    if spec.levels:
        for lang, metrics in level_correlations(sub, spec.levels, spec.metrics, **boot).items():
            task_results.setdefault(lang, {}).update(metrics)
    if not getattr(cfg, "human_meta", True) or sub["human_labels"].isna().all():
        return None, None  # (no labels: the columns only labelled runs read are not loaded)
    labels = annotator_frame(sub)
    if labels.empty:
        return None, None
    judge_range = _range(judge, spec)
    notes = add_human_metrics(
        task_results,
        sub,
        spec.metrics,
        dims,
        judge_range,
        yes_no=tuple(getattr(spec.scorer, "labels", ("Yes", "No"))),
        language_order=spec.languages,
        **boot,
    )
    info = notes.get("label_scale") or label_info(None, labels["value"].tolist())
    alt = alt_test_from_samples(
        sub, info, judge_range, epsilon=cfg.alt_epsilon, q=cfg.alt_q, scale=cfg.alt_scale
    )
    return notes, alt


def panel_extras(
    frame_of: Callable[[str], pd.DataFrame],
    specs: list[TaskSpec],
    judge: PanelJudge,
    cfg: Any,
    dims: dict[str, dict[str, dict[str, Any]]],
) -> dict[str, Any]:
    """The ``"panel"`` section of results.json for a ``panel:`` judge; ``frame_of(task)`` gives a
    task's samples (read from samples.parquet one task at a time)."""
    from harness.meta.panel import panel_report

    out: dict[str, Any] = {"members": judge.names(), "vote": judge.how, "quorum": judge.quorum, "tasks": {}}
    for spec in specs:
        sub = frame_of(spec.name).rename(columns={"human_rating": "human"})
        ranges = judge.ranges(spec)
        labels = annotator_frame(sub) if getattr(cfg, "human_meta", True) else pd.DataFrame()
        alt = None
        if not labels.empty:
            info = label_info(
                dims.get(spec.builder, {}).get(str(sub["human_dimension"].dropna().iloc[0]))
                if sub["human_dimension"].notna().any()
                else None,
                labels["value"].tolist(),
            )
            alt = {"info": info, "epsilon": cfg.alt_epsilon, "q": cfg.alt_q, "scale": cfg.alt_scale}
        out["tasks"][spec.name] = panel_report(
            sub,
            judge.names(),
            judge.how,
            judge.quorum,
            spec.metrics,
            ranges=ranges,
            language_order=spec.languages,
            n_bootstrap=cfg.n_bootstrap,
            confidence=cfg.confidence,
            seed=cfg.seed,
            alt_test=alt,
        )
    return out

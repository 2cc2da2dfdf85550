"""Repeated-run stability of a judge (MEDAL App. D, Table 3): run the same judge k times over the
same items and report, per dimension, how much its judgments move.

Run ``r`` adds ``seed=r`` to the judge's decoding parameters, so every run is a distinct set of
requests (distinct cache keys) and the variation is the model's — at temperature 0, an API
judge's nondeterminism; a local greedy judge gives 0 (each run's requests are still cached, so a
killed stability run resumes; on ``--executor ray`` the k runs share one cluster connection). The
statistics come from :func:`harness.meta.classification.stability`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import TypedDict

import pandas as pd

from harness.executors.session import ray_session
from harness.meta.classification import stability
from harness.provenance import harness_info, redact
from harness.run.results import _atomic_write_bytes, _json_safe
from harness.run.runner import RunConfig, RunOutput, run
from harness.spec import parse_spec
from harness.tasks import resolve_tasks

STABILITY_FILE = "stability.json"


class StabilityReport(TypedDict):
    """``stability.json``: the runs and, per task and dimension, the statistics of
    :func:`harness.meta.classification.stability`."""

    judge: str
    runs: int
    run_dirs: list[str]
    harness: Mapping[str, object]
    tasks: dict[str, Mapping[str, Mapping[str, object]]]


def run_stability(cfg: RunConfig, runs: int, output_dir: str | Path) -> StabilityReport:
    """``runs`` runs of ``cfg`` (run r in ``output_dir/run-r``); returns and writes the report."""
    if runs < 2:
        raise ValueError(f"--runs must be >= 2 to measure stability, got {runs}")
    spec = parse_spec(cfg.judge)
    if spec.kind in ("mean", "panel"):  # ",seed=r" would land on the last member only
        raise ValueError(
            f"stability runs re-seed one sampling judge; run them on each member of a '{spec.kind}:' "
            f"{'ensemble' if spec.kind == 'mean' else 'panel'} instead"
        )
    if "seed" in spec.decoding:
        raise ValueError("the judge spec sets seed=...; stability runs set the seed themselves (seed=0..k-1)")
    out = Path(output_dir)
    outputs: list[RunOutput] = []
    # one Ray connection for all k runs (each run starts and stops its own worker pool)
    with ray_session() if cfg.executor.distributed else nullcontext():
        for r in range(runs):
            rc = dataclasses.replace(cfg, judge=f"{cfg.judge},seed={r}", output_dir=out / f"run-{r}")
            outputs.append(run(rc))
    report: StabilityReport = {
        "judge": redact(cfg.judge),
        "runs": runs,
        "run_dirs": [str(o.output_dir) for o in outputs],
        "harness": harness_info(),
        "tasks": {},
    }
    for spec_ in resolve_tasks(cfg.tasks):
        frames = [_task_frame(o.samples, spec_.name) for o in outputs]
        report["tasks"][spec_.name] = stability(frames, list(spec_.issue_labels))
    _atomic_write_bytes(
        out / STABILITY_FILE,
        json.dumps(_json_safe(report), indent=2, ensure_ascii=False).encode("utf-8"),
    )
    return report


def _task_frame(samples: pd.DataFrame, task: str) -> pd.DataFrame:
    sub = samples[samples["task"] == task].copy()
    sub["item_id"] = (
        sub["dataset"].astype(str) + "/" + sub["language"].astype(str) + "/" + sub["id"].astype(str)
    )
    return sub

"""``harness run``: judge every item of the selected tasks, meta-evaluate against humans, write
``results.json`` + ``samples.parquet``.

Every judge call goes through the write-through request cache, batch by batch, so a killed run
resumes where it stopped and a rerun with a warm cache makes zero backend calls. With
``executor=ExecutorConfig("ray", workers=N)`` each call carries ``batch_size × N`` items and the
misses are sharded over N Ray workers, one ``batch_size`` shard each (:mod:`harness.executors`). A
backend that keeps failing ends the run with partial results marked incomplete
(:mod:`harness.run.partial`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import re
import sys
import time
import uuid
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.cache import RequestCache, default_cache_path
from harness.data.registry import check_writable
from harness.data.resolve import DatasetHandle, load_items, prepare_dataset
from harness.executors import ExecutorConfig, ExecutorScope, executor_scope
from harness.judges.base import Judge
from harness.judges.loader import DEFAULT_JUDGE, load_judge
from harness.judges.panel import PanelJudge
from harness.languages import normalize_languages
from harness.meta.correlation import meta_evaluate
from harness.meta.issue_metrics import add_issue_metrics, human_labels_json, label_parse_failures
from harness.meta.soft_labels import item_dimension, item_distribution
from harness.provenance import environment, harness_info, redact
from harness.run.extras import add_task_extras, dimension_tables, panel_extras
from harness.run.hf_progress import library_progress_bars
from harness.run.partial import RunIncomplete, incomplete_marker, incomplete_message
from harness.run.results import SCHEMA_VERSION, write_results
from harness.spec import parse_spec
from harness.tasks import TaskSpec, load_hook, resolve_tasks
from harness.types import BackendConfigError, BackendError, LogprobsUnavailableError

log = logging.getLogger(__name__)

DEFAULT_TASK = "demo"


@dataclass
class RunConfig:
    judge: str = DEFAULT_JUDGE
    tasks: list[str] = field(default_factory=lambda: [DEFAULT_TASK])
    languages: list[str] | None = None
    limit: int | None = None
    output_dir: Path | None = None
    seed: int = 0
    batch_size: int = 32
    use_cache: bool = True
    cache_path: Path | None = None
    source: str | None = None
    dataset: str | None = None
    revision: str | None = None
    n_bootstrap: int = 1000
    confidence: float = 0.95
    show_progress: bool = True
    # annotator-level meta-evaluation (soft labels, ceilings, alt-test) where items carry labels
    human_meta: bool = True
    alt_epsilon: float = 0.15  # alt-test cost-benefit margin (paper: 0.2 experts, 0.15 skilled, 0.1 crowd)
    alt_q: float = 0.05  # alt-test FDR level (Benjamini-Yekutieli)
    alt_scale: str = "auto"  # auto | raw | zscore | rank | discretize
    # where the judge's requests run: local, or sharded over Ray workers (harness.executors)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"--batch-size must be >= 1, got {self.batch_size}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit must be >= 1, got {self.limit}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence}")
        if self.n_bootstrap < 0:
            raise ValueError(f"--bootstrap must be >= 0, got {self.n_bootstrap}")
        if not 0 <= self.alt_epsilon < 1 or not 0 < self.alt_q < 1:
            raise ValueError(
                f"--alt-epsilon must be in [0, 1) and --alt-q in (0, 1), got {self.alt_epsilon}, {self.alt_q}"
            )
        if self.alt_scale not in ("auto", "raw", "zscore", "rank", "discretize"):
            raise ValueError(
                f"--alt-scale {self.alt_scale!r}: expected auto, raw, zscore, rank or discretize"
            )
        self.languages = normalize_languages(self.languages)
        if self.output_dir is not None:
            check_writable(self.output_dir)  # never into a registered dataset version (read-only)
        parse_spec(self.judge)  # fail fast on a malformed judge spec, before any data is built


@dataclass
class RunOutput:
    results: dict[str, Any]
    samples: pd.DataFrame
    output_dir: Path

    @property
    def incomplete(self) -> dict[str, Any] | None:
        return self.results.get("incomplete")


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", s).strip("-")[:60]


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and (when a judge has loaded it) torch. Sampling judges also get the
    seed in their decoding config, so their requests are reproducible one by one."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)


def _progress(show: bool):
    if not show:
        return nullcontext(None)
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    )


def _prepare(cfg: RunConfig, specs: list[TaskSpec]) -> dict[str, DatasetHandle]:
    builders = {s.builder for s in specs}
    if (cfg.source or cfg.dataset) and len(builders) > 1:
        raise ValueError(
            f"--source/--dataset apply to one dataset, but the selected tasks use builders {sorted(builders)}; "
            "run them separately"
        )
    handles: dict[str, DatasetHandle] = {}
    for b in sorted(builders):
        handles[b] = prepare_dataset(
            b, source=cfg.source, dataset=cfg.dataset, revision=cfg.revision, show_progress=cfg.show_progress
        )
    return handles


def _collect_items(
    cfg: RunConfig, spec: TaskSpec, handle: DatasetHandle
) -> tuple[list[dict[str, Any]], list[str]]:
    """The task's items: rows of its configs (every config at the task's input level for
    ``configs=("*",)``), filtered to the languages, then the task's ``prepare`` hook if any."""
    if spec.any_config:
        present, missing = list(handle.configs), []
    else:
        present = [c for c in spec.configs if c in handle.configs]
        missing = [c for c in spec.configs if c not in handle.configs]
    if not present:
        raise ValueError(
            f"task {spec.name!r}: none of its dataset configs {list(spec.configs)} is in {handle.location} "
            f"(it has {handle.configs})"
        )
    langs = cfg.languages or list(spec.languages)
    unknown = [lang for lang in langs if lang not in spec.languages]
    if unknown:
        raise ValueError(f"task {spec.name!r} has no language(s) {unknown}; it covers {list(spec.languages)}")
    items: list[dict[str, Any]] = []
    other_level: list[str] = []
    for config in present:
        rows = load_items(handle, config, languages=langs, limit=cfg.limit)
        if spec.any_config and rows and rows[0].get("level") not in (None, spec.row_level):
            other_level.append(config)
            continue
        for r in rows:
            if r.get("level") not in (None, spec.row_level):
                raise ValueError(
                    f"{handle.location} config {config!r}: row {r.get('id')} is level {r.get('level')!r}, task {spec.name!r} expects {spec.row_level!r}"
                )
        items.extend(rows)
    if spec.any_config and not items and other_level:
        raise ValueError(
            f"task {spec.name!r} reads {spec.row_level}-level rows, but every config of {handle.location} "
            f"({', '.join(other_level)}) is at another level"
        )
    if spec.prepare and items:
        items = list(load_hook(spec.prepare)(spec, items))
    return items, missing


def run(cfg: RunConfig) -> RunOutput:
    t_start = time.perf_counter()
    timings: dict[str, float | None] = {}
    specs = resolve_tasks(cfg.tasks)
    run_id = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]
    judge_name = redact(cfg.judge)
    out_dir = Path(
        cfg.output_dir or Path("runs") / f"{run_id}-{_slug('+'.join(cfg.tasks))}-{_slug(judge_name)}"
    )

    # each Ray worker gets exactly the batches a local run would send (same grouping, same results)
    ex_cfg = (
        dataclasses.replace(cfg.executor, shard_size=cfg.batch_size)
        if cfg.executor.distributed
        else cfg.executor
    )
    # closed in reverse: the judge (and its Ray pools), the executor (its cluster), the cache
    with ExitStack() as stack:
        stack.enter_context(library_progress_bars(cfg.show_progress))  # -q: none from the HF libraries
        cache = stack.enter_context(
            RequestCache(cfg.cache_path or default_cache_path(), enabled=cfg.use_cache)
        )
        scope = stack.enter_context(executor_scope(ex_cfg, seed=cfg.seed))
        # The judge first: a bad spec (an option out of range, a model or file that is not there)
        # is refused before any dataset is built or loaded. Models load lazily, on first use.
        t = time.perf_counter()
        judge = stack.enter_context(scope.adopt(load_judge(cfg.judge, cache, seed=cfg.seed)))
        load_judge_s = time.perf_counter() - t
        timings["load_judge_s"] = load_judge_s

        t = time.perf_counter()
        handles = _prepare(cfg, specs)
        task_items: dict[str, list[dict[str, Any]]] = {}
        missing_configs: dict[str, list[str]] = {}
        for spec in specs:
            task_items[spec.name], missing_configs[spec.name] = _collect_items(
                cfg, spec, handles[spec.builder]
            )
            if not task_items[spec.name]:
                raise ValueError(
                    f"task {spec.name!r}: no items selected (languages {cfg.languages or 'all'})"
                )
        timings["load_dataset_s"] = time.perf_counter() - t
        seed_everything(cfg.seed)
        rows, scoring_s, failure = _score_tasks(cfg, specs, task_items, judge, run_id, judge_name, scope)
        # Weights load lazily on the first call that needs them: book that as judge loading.
        model_load_s = float(judge.backend_stats().get("load_seconds", 0.0))
        timings["load_judge_s"] = load_judge_s + model_load_s
        net_scoring_s = max(scoring_s - model_load_s, 0.0)
        timings["scoring_s"] = net_scoring_s
        samples = pd.DataFrame(rows) if rows else pd.DataFrame(columns=SAMPLE_COLUMNS)

        t = time.perf_counter()
        results_by_task: dict[str, Any] = {}
        extras: dict[str, Any] = {"human_labels": {}, "alt_test": {}}
        dims = {b: dimension_tables(h) for b, h in handles.items()}
        for spec in specs:
            sub = samples[samples["task"] == spec.name].rename(columns={"human_rating": "human"})
            if failure is not None and sub.empty:
                continue  # never reached: no statistics, listed under results["incomplete"]
            meta = meta_evaluate(sub, spec.metrics, cfg.n_bootstrap, cfg.confidence, cfg.seed, spec.languages)
            results_by_task[spec.name] = meta.to_dict()
            if spec.issue_labels:
                add_issue_metrics(results_by_task[spec.name], sub, spec, cfg)
            notes, alt = add_task_extras(
                results_by_task[spec.name], sub, spec, judge, cfg, dims[spec.builder]
            )
            if notes is not None:
                extras["human_labels"][spec.name], extras["alt_test"][spec.name] = notes, alt
        if isinstance(judge, PanelJudge) and failure is None:  # a panel: judge
            extras["panel"] = panel_extras(samples, specs, judge, cfg, dims)
        extras = {k: v for k, v in extras.items() if v}
        timings["meta_eval_s"] = time.perf_counter() - t
        timings["total_s"] = time.perf_counter() - t_start
        timings["items_per_s_scoring"] = len(samples) / net_scoring_s if net_scoring_s > 0 else None
        results = _results_document(
            cfg,
            run_id,
            specs,
            judge,
            judge_name,
            handles,
            missing_configs,
            samples,
            results_by_task,
            cache,
            timings,
        )
        results["executor"] = scope.describe()
        results.update(extras)
        if failure is not None:
            totals = {s.name: len(task_items[s.name]) for s in specs}
            scored = {s.name: int((samples["task"] == s.name).sum()) for s in specs}
            results["incomplete"] = incomplete_marker(failure, totals, scored)
    write_results(out_dir, results, samples)
    output = RunOutput(results=results, samples=samples, output_dir=out_dir)
    if output.incomplete is not None:
        raise RunIncomplete(incomplete_message(results, out_dir), output)
    return output


def _score_tasks(
    cfg: RunConfig,
    specs: list[TaskSpec],
    task_items: dict[str, list[dict[str, Any]]],
    judge: Judge,
    run_id: str,
    judge_name: str,
    scope: ExecutorScope,
) -> tuple[list[dict[str, Any]], float, dict[str, Any] | None]:
    """Judge every item batch by batch (each batch goes through the write-through cache). A
    backend failure that survived its retries stops scoring: the rows so far come back with it."""
    rows: list[dict[str, Any]] = []
    scoring_s = 0.0
    failure: dict[str, Any] | None = None
    step = scope.items_per_call(cfg.batch_size)
    with _progress(cfg.show_progress) as progress:
        scope.progress = progress
        try:
            for spec in specs:
                items = task_items[spec.name]
                bar = (
                    progress.add_task(spec.name, total=len(items), rate="") if progress is not None else None
                )
                t = time.perf_counter()
                for i in range(0, len(items), step):
                    batch = items[i : i + step]
                    try:
                        verdicts = judge.score(spec, batch)
                    except (LogprobsUnavailableError, BackendConfigError):
                        raise  # the judge cannot do this task / is misconfigured: a usage error, not a resume
                    except BackendError as e:
                        log.error("task %s: scoring stopped at item %d: %s", spec.name, i, e)
                        failure = {"task": spec.name, "item": i, "error": f"{type(e).__name__}: {e}"}
                        break
                    for item, v in zip(batch, verdicts, strict=True):
                        rows.append(_sample_row(run_id, spec, judge_name, item, v))
                    if progress is not None:
                        done = min(i + step, len(items))
                        progress.update(
                            bar, completed=done, rate=f"{done / max(time.perf_counter() - t, 1e-9):,.1f} it/s"
                        )
                scoring_s += time.perf_counter() - t
                if failure is not None:
                    break
        finally:
            scope.progress = None
    return rows, scoring_s, failure


def _results_document(
    cfg: RunConfig,
    run_id: str,
    specs: list[TaskSpec],
    judge: Judge,
    judge_name: str,
    handles: dict[str, DatasetHandle],
    missing_configs: dict[str, list[str]],
    samples: pd.DataFrame,
    results_by_task: dict[str, Any],
    cache: RequestCache,
    timings: dict[str, float | None],
) -> dict[str, Any]:
    def of(task: str) -> pd.DataFrame:
        return samples[samples["task"] == task]

    return {
        "schema_version": SCHEMA_VERSION,
        "run": {
            "id": run_id,
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": redact(" ".join(sys.argv)),
            "tasks": [s.name for s in specs],
            "languages": cfg.languages,
            "limit": cfg.limit,
            "seed": cfg.seed,
            "batch_size": cfg.batch_size,
            "n_bootstrap": cfg.n_bootstrap,
            "confidence_level": cfg.confidence,
            "n_items": len(samples),
        },
        "harness": harness_info(),
        "judge": {
            "spec": judge_name,
            "role": Judge.role,
            "identity": judge.identity(),
            "decoding": {s.name: judge.decoding(s) for s in specs},
            "method": {s.name: judge.method(s) for s in specs},
        },
        "datasets": {
            s.name: {
                **handles[s.builder].describe(),
                "used_configs": sorted(set(of(s.name)["dataset"])),
                "missing_configs": missing_configs[s.name],
            }
            for s in specs
        },
        "tasks": {s.name: s.describe() for s in specs},
        "results": results_by_task,
        "parse_failures": {s.name: int((of(s.name)["parse_status"] != "ok").sum()) for s in specs},
        "label_parse_failures": {
            s.name: label_parse_failures(of(s.name), s.issue_labels) for s in specs if s.issue_labels
        },
        "usage": {**judge.usage.to_dict(), "backend": judge.backend_stats()},
        "cache": {
            "enabled": cache.enabled,
            "path": str(cache.path) if cache.enabled else None,
            **cache.stats.to_dict(),
        },
        "timings": timings,
        "environment": environment(),
    }


SAMPLE_COLUMNS = [
    "run_id",
    "task",
    "dataset",
    "language",
    "id",
    "item_id",
    "judge",
    "prompt_hash",
    "raw_output",
    "score",
    "parse_status",
    "parse_detail",
    "human_rating",
    "cached",
    "prompt_tokens",
    "completion_tokens",
    "extra",
    "system",
    "dialogue_id",
    "human_dimension",
    "human_distribution",
    "human_labels",
    "judge_labels",
]


def _sample_row(run_id: str, spec: TaskSpec, judge: str, item: dict[str, Any], v) -> dict[str, Any]:
    extra = {k: val for k, val in v.extra.items() if val is not None and k != "labels"}
    return {
        "run_id": run_id,
        "task": spec.name,
        "dataset": item["dataset"],
        "language": item["language"],
        "id": item["id"],
        "item_id": item["item_id"],
        "judge": judge,
        "prompt_hash": v.prompt_hash,
        "raw_output": v.raw,
        "score": v.score if v.ok else None,
        "parse_status": v.status,
        "parse_detail": v.detail,
        "human_rating": spec.human_rating(item),
        "cached": bool(v.cached),
        "prompt_tokens": int(v.usage.prompt_tokens),
        "completion_tokens": int(v.usage.completion_tokens),
        "extra": json.dumps(extra, ensure_ascii=False, allow_nan=True) if extra else None,
        "system": item.get("system"),
        "dialogue_id": item.get("dialogue_id"),
        "human_dimension": (dim := item_dimension(spec.dimension, item)),
        "human_distribution": item_distribution(item, dim),
        "human_labels": human_labels_json(item),
        "judge_labels": json.dumps(v.extra["labels"], ensure_ascii=False) if v.extra.get("labels") else None,
    }

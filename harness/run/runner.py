"""``harness run``: judge every item of the selected tasks, meta-evaluate against humans, write
``results.json`` + ``samples.parquet``.

Every judge call goes through the write-through request cache, batch by batch, so a killed run
resumes where it stopped and a rerun with a warm cache makes zero backend calls. With
``executor=ExecutorConfig("ray", workers=N)`` each call carries ``batch_size × N`` items and the
misses are sharded over N Ray workers, one ``batch_size`` shard each (:mod:`harness.executors`). A
backend that keeps failing ends the run with partial results marked incomplete
(:mod:`harness.run.partial`), and so does a stop signal (Ctrl-C, SIGTERM, SIGHUP: no new batch, the
one in flight finishes or is cancelled within seconds; :mod:`harness.interrupt`).

Runs stream, so memory does not grow with the item count: each task's items are counted first,
then read from the dataset a record batch at a time (:mod:`harness.run.items`), judged, and their
samples appended to the output's samples file in row groups (:mod:`harness.run.samples`); the
meta-evaluation reads that file back one task at a time. ``results.json`` is validated against the
typed document (:mod:`harness.run.document`) before anything is replaced.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import re
import signal
import sys
import time
import uuid
from collections.abc import Mapping
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import ValidationError

from harness import interrupt
from harness.cache import RequestCache, default_cache_path
from harness.data.registry import check_writable
from harness.data.resolve import DatasetHandle, prepare_dataset
from harness.executors import ExecutorConfig, ExecutorScope, executor_scope
from harness.jsontypes import JSON, JSONObject
from harness.judges.base import Judge
from harness.judges.loader import DEFAULT_JUDGE, load_judge
from harness.languages import normalize_languages
from harness.meta.metric import MetaSettings
from harness.provenance import environment, harness_info, redact
from harness.run.document import (
    CacheInfo,
    DatasetInfo,
    HarnessInfo,
    Incomplete,
    JudgeInfo,
    PanelSection,
    Results,
    ResultsError,
    RunInfo,
    SamplesInfo,
    TaskInfo,
    Timings,
    first_error,
    samples_info,
    validate_results,
)
from harness.run.hf_progress import library_progress_bars
from harness.run.items import TaskItems, plan_task
from harness.run.meta_stage import RunMeta, meta_evaluate_run
from harness.run.partial import incomplete_error, incomplete_marker, stop_failure
from harness.run.records import check_sample_row
from harness.run.results import RESULTS_FILE, SAMPLES_FILE, SCHEMA_VERSION, _json_safe, write_document
from harness.run.samples import SAMPLE_COLUMNS, SampleWriter, sample_row
from harness.spec import parse_spec
from harness.tasks import TaskSpec, resolve_tasks
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
    # meta-metrics to compute instead of each task's own (harness.meta.registry)
    metrics: list[str] | None = None
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
        if self.metrics:
            from harness.meta.stage import select_metrics

            select_metrics(self.metrics)  # an unknown meta-metric is refused before any scoring

    def meta_settings(self) -> MetaSettings:
        return MetaSettings(
            n_bootstrap=self.n_bootstrap,
            confidence=self.confidence,
            seed=self.seed,
            alt_epsilon=self.alt_epsilon,
            alt_q=self.alt_q,
            alt_scale=self.alt_scale,
            annotator_level=self.human_meta,
        )


class RunOutput:
    """What :func:`run` wrote: the results document and the output directory; ``samples`` reads
    ``samples.parquet`` when first asked for (a run never holds all its samples in memory)."""

    def __init__(
        self,
        results: JSONObject,
        output_dir: Path,
        samples: pd.DataFrame | None = None,
        document: Results | None = None,
    ) -> None:
        self.results = results
        self.output_dir = Path(output_dir)
        self._samples = samples
        self._document = document

    @property
    def samples(self) -> pd.DataFrame:
        if self._samples is None:
            self._samples = pd.read_parquet(self.output_dir / SAMPLES_FILE)
        return self._samples

    @property
    def document(self) -> Results:
        """The results as the typed document (:class:`harness.run.document.Results`)."""
        if self._document is None:
            self._document = validate_results(_json_safe(self.results), str(self.output_dir / RESULTS_FILE))
        return self._document

    @property
    def incomplete(self) -> Mapping[str, JSON] | None:
        """The ``incomplete`` section of a run that stopped early (None when it finished)."""
        section = self.results.get("incomplete")
        return section if isinstance(section, Mapping) else None


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
    """All of a task's items at once (for commands that need them together, e.g. the robustness
    probes) and the task's configs the dataset lacks; :func:`run` streams them instead."""
    plan = plan_task(spec, handle, cfg.languages, cfg.limit)
    return [r for batch in plan.rows() for r in batch], plan.missing


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
    # closed in reverse: the samples file (removed if the run raises), the judge (and its Ray
    # pools), the executor (its cluster), the cache
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
        plans: dict[str, TaskItems] = {}
        for spec in specs:
            plans[spec.name] = plan_task(spec, handles[spec.builder], cfg.languages, cfg.limit)
            if not plans[spec.name].total:
                raise ValueError(
                    f"task {spec.name!r}: no items selected (languages {cfg.languages or 'all'})"
                )
        timings["load_dataset_s"] = time.perf_counter() - t
        seed_everything(cfg.seed)
        writer = stack.enter_context(SampleWriter(out_dir, validate=check_sample_row))
        scoring_s, io_s, failure = _score_tasks(cfg, specs, plans, judge, run_id, judge_name, scope, writer)
        # Weights load lazily on the first call that needs them: book that as judge loading.
        model_load_s = float(judge.backend_stats().get("load_seconds", 0.0))
        timings["load_judge_s"] = load_judge_s + model_load_s
        net_scoring_s = max(scoring_s - io_s - model_load_s, 0.0)
        timings["scoring_s"] = net_scoring_s
        timings["samples_io_s"] = io_s  # reading the items, writing samples.parquet

        t = time.perf_counter()
        samples_path = writer.close()
        meta = meta_evaluate_run(
            specs,
            judge,
            handles,
            samples_path,
            cfg.meta_settings(),
            complete=failure is None,
            metrics=cfg.metrics,
        )
        timings["meta_eval_s"] = time.perf_counter() - t
        timings["total_s"] = time.perf_counter() - t_start
        n_items = writer.n_rows
        timings["items_per_s_scoring"] = n_items / net_scoring_s if net_scoring_s > 0 else None
        incomplete = None
        if failure is not None:
            totals = {s.name: plans[s.name].total for s in specs}
            scored = {s.name: writer.rows_by_task.get(s.name, 0) for s in specs}
            incomplete = incomplete_marker(failure, totals, scored)
        document = _results_document(  # typed and validated as it is built, before anything is replaced
            cfg,
            run_id,
            specs,
            judge,
            judge_name,
            handles,
            plans,
            n_items,
            meta,
            cache,
            timings,
            executor=scope.describe(),
            samples={**samples_info(samples_path), "file": SAMPLES_FILE},
            incomplete=incomplete,
            where=str(out_dir / RESULTS_FILE),
        )
        writer.commit()
        results = write_document(out_dir, document)
    output = RunOutput(results=results, output_dir=out_dir, document=document)
    if output.incomplete is not None:
        raise incomplete_error(output)
    return output


def _score_tasks(
    cfg: RunConfig,
    specs: list[TaskSpec],
    plans: dict[str, TaskItems],
    judge: Judge,
    run_id: str,
    judge_name: str,
    scope: ExecutorScope,
    writer: SampleWriter,
) -> tuple[float, float, dict[str, Any] | None]:
    """Judge every item batch by batch (each batch goes through the write-through cache) and append
    its samples to ``writer``. A backend failure that survived its retries stops scoring: the rows
    so far stay in the file. Returns (scoring seconds, of which reading items and writing samples,
    the failure or None)."""
    scoring_s = io_s = 0.0
    failure: dict[str, Any] | None = None
    step = scope.items_per_call(cfg.batch_size)
    # a stop signal (Ctrl-C, SIGTERM, SIGHUP) ends scoring between batches; a batch still in flight
    # after the grace period is cancelled (harness.interrupt); the rows so far stay in the file
    with _progress(cfg.show_progress) as progress, interrupt.graceful():
        scope.progress = progress
        try:
            for spec in specs:
                plan = plans[spec.name]
                bar = (
                    progress.add_task(spec.name, total=plan.total, rate="") if progress is not None else None
                )
                t = time.perf_counter()
                done = 0
                batches = plan.batches(step)
                while True:
                    t_io = time.perf_counter()
                    batch = next(batches, None)
                    io_s += time.perf_counter() - t_io
                    if batch is None:
                        break
                    if (signum := interrupt.stop_requested()) is not None:
                        failure = stop_failure(signum, spec.name, done)
                        break
                    try:
                        with interrupt.cancellable():
                            verdicts = judge.score(spec, batch)
                    except (LogprobsUnavailableError, BackendConfigError):
                        raise  # a judge that cannot score the task's items, or a misconfigured one: a usage error, not a resume
                    except BackendError as e:
                        log.error("task %s: scoring stopped at item %d: %s", spec.name, done, e)
                        failure = {"task": spec.name, "item": done, "error": f"{type(e).__name__}: {e}"}
                        break
                    except KeyboardInterrupt as e:  # the batch in flight was cancelled
                        failure = stop_failure(getattr(e, "signum", signal.SIGINT), spec.name, done)
                        break
                    t_io = time.perf_counter()
                    writer.add(
                        sample_row(run_id, spec, judge_name, item, v)
                        for item, v in zip(batch, verdicts, strict=True)
                    )
                    io_s += time.perf_counter() - t_io
                    done += len(batch)
                    if progress is not None:
                        progress.update(
                            bar, completed=done, rate=f"{done / max(time.perf_counter() - t, 1e-9):,.1f} it/s"
                        )
                scoring_s += time.perf_counter() - t
                if failure is not None:
                    break
        finally:
            scope.progress = None
    return scoring_s, io_s, failure


def _results_document(
    cfg: RunConfig,
    run_id: str,
    specs: list[TaskSpec],
    judge: Judge,
    judge_name: str,
    handles: dict[str, DatasetHandle],
    plans: dict[str, TaskItems],
    n_items: int,
    meta: RunMeta,
    cache: RequestCache,
    timings: dict[str, float | None],
    *,
    executor: Mapping[str, object],
    samples: Mapping[str, object],
    incomplete: Mapping[str, object] | None,
    where: str,
) -> Results:
    """The run's :class:`Results`, assembled from its typed sections (validated as they are built;
    a section that does not validate is a :class:`ResultsError` naming the field)."""
    counts = meta.counts
    try:
        sections: dict[str, Any] = {}
        for section in ("human_labels", "alt_test"):
            if meta.sections.get(section):
                sections[section] = meta.sections[section]
        if meta.panel is not None and meta.sections.get("panel"):
            p = meta.panel
            sections["panel"] = PanelSection.model_validate(
                {
                    "members": list(p.members),
                    "vote": p.vote,
                    "quorum": p.quorum,
                    "tasks": meta.sections["panel"],
                }
            )
        if incomplete is not None:
            sections["incomplete"] = Incomplete.model_validate(incomplete)
        return Results(
            schema_version=SCHEMA_VERSION,
            run=RunInfo(
                id=run_id,
                created_at=datetime.now(UTC).isoformat(timespec="seconds"),
                command=redact(" ".join(sys.argv)),
                tasks=[s.name for s in specs],
                languages=cfg.languages,
                limit=cfg.limit,
                seed=cfg.seed,
                batch_size=cfg.batch_size,
                n_bootstrap=cfg.n_bootstrap,
                confidence_level=cfg.confidence,
                n_items=n_items,
            ),
            harness=HarnessInfo.model_validate(harness_info()),
            judge=JudgeInfo(
                spec=judge_name,
                role=Judge.role,
                identity=judge.identity(),
                decoding={s.name: judge.decoding(s) for s in specs},
                method={s.name: judge.method(s) for s in specs},
            ),
            datasets={
                s.name: DatasetInfo.model_validate(
                    {
                        **handles[s.builder].describe(),
                        "used_configs": counts[s.name].used_configs,
                        "missing_configs": plans[s.name].missing,
                    }
                )
                for s in specs
            },
            tasks={
                s.name: TaskInfo.model_validate(
                    {**s.describe(), "metrics": meta.methods[s.name], "meta_metrics": meta.metrics[s.name]}
                )
                for s in specs
            },
            results=meta.results,
            parse_failures={s.name: counts[s.name].parse_failures for s in specs},
            label_parse_failures={
                s.name: lp for s in specs if (lp := counts[s.name].label_parse_failures) is not None
            },
            usage={**judge.usage.to_dict(), "backend": judge.backend_stats()},
            cache=CacheInfo.model_validate(
                {
                    "enabled": cache.enabled,
                    "path": str(cache.path) if cache.enabled else None,
                    **cache.stats.to_dict(),
                }
            ),
            timings=Timings.model_validate(timings),
            environment=environment(),
            executor=executor,
            samples=SamplesInfo.model_validate(samples),
            **sections,
        )
    except ValidationError as e:
        raise ResultsError(
            f"{where}: not a valid results document (schema {SCHEMA_VERSION}): {first_error(e)}"
        ) from None


#: the row builder under its former name (tests and plug-ins import it from here)
_sample_row = sample_row
__all__ = [
    "DEFAULT_TASK",
    "SAMPLE_COLUMNS",
    "RunConfig",
    "RunOutput",
    "_sample_row",
    "run",
    "seed_everything",
]

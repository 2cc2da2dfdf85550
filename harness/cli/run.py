"""``harness run`` (judge task datasets, meta-evaluate against humans) and ``harness stability``
(repeat a judge, MEDAL App. D)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from harness.cli.console import (
    ExecutorOpt,
    GpusOpt,
    WorkersOpt,
    console,
    error_message,
    executor_config,
    executor_summary,
    fail,
    judge_arg,
    stopped,
)
from harness.judges.loader import DEFAULT_JUDGE

RUN_NOTHING_WRITTEN = (
    "before any results were written (an earlier output is left as it was); every finished request is "
    "in the request cache — rerun the same command to resume"
)


def run(
    judge: Annotated[
        str,
        typer.Option(
            "--judge",
            "-j",
            help="Judge spec: kind:target[@rev][,key=value...] or @FILE.yaml",
            callback=judge_arg,
        ),
    ] = DEFAULT_JUDGE,
    task: Annotated[
        list[str] | None, typer.Option("--task", "-t", help="Task or group name (repeat or comma-separate)")
    ] = None,
    language: Annotated[
        list[str] | None,
        typer.Option("--language", "-l", help="Language codes (repeat or comma-separate); default: all"),
    ] = None,
    limit: Annotated[int | None, typer.Option(help="At most N items per dataset and language")] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Output directory (default runs/<id>-<task>-<judge>)"),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for sampling judges and bootstrap resampling")] = 0,
    batch_size: Annotated[int, typer.Option("--batch-size", "-b", help="Items per judge call batch")] = 32,
    source: Annotated[
        str | None, typer.Option(help="Raw benchmark files for the task's builder (a directory)")
    ] = None,
    dataset: Annotated[
        str | None, typer.Option(help="A built dataset directory or a Hub dataset repo id")
    ] = None,
    revision: Annotated[str | None, typer.Option(help="Hub revision (tag/commit) for --dataset")] = None,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Do not read or write the request cache")
    ] = False,
    cache: Annotated[
        Path | None, typer.Option(help="Request cache file (SQLite); default $DIALEVAL_HOME/requests.sqlite")
    ] = None,
    bootstrap: Annotated[int, typer.Option(help="Bootstrap resamples for 95% CIs (0 = none)")] = 1000,
    alt_epsilon: Annotated[
        float,
        typer.Option(
            help="Alt-test cost-benefit margin ε (Calderon et al.: 0.2 experts, 0.15 skilled, 0.1 crowd)"
        ),
    ] = 0.15,
    alt_q: Annotated[float, typer.Option(help="Alt-test FDR level (Benjamini–Yekutieli)")] = 0.05,
    alt_scale: Annotated[
        str,
        typer.Option(
            help="Alt-test scale: auto | raw | zscore | rank | discretize (docs/meta-evaluation.md)"
        ),
    ] = "auto",
    no_human_meta: Annotated[
        bool, typer.Option("--no-human-meta", help="Skip soft labels, ceilings and the alt-test")
    ] = False,
    metrics: Annotated[
        list[str] | None,
        typer.Option(
            "--metrics",
            "-m",
            help="Meta-metrics to compute instead of each task's own (repeat or comma-separate; "
            "harness ls metrics lists them)",
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars")] = False,
    executor: ExecutorOpt = "local",
    workers: WorkersOpt = 1,
    gpus_per_worker: GpusOpt = 0.0,
) -> None:
    """Run a judge over task datasets and measure its agreement with human ratings (with several
    annotators per item: soft labels, human ceilings and the alt-test; with a panel: α, effective judges)."""
    from harness.interrupt import Interrupted
    from harness.report.meta import alt_notes, rich_tables
    from harness.run.partial import EXIT_INCOMPLETE, RunIncomplete, RunInterrupted
    from harness.run.results import issue_tables, results_tables
    from harness.run.runner import DEFAULT_TASK, RunConfig
    from harness.run.runner import run as do_run
    from harness.types import BackendError

    ex = executor_config(executor, workers, gpus_per_worker)
    incomplete = None
    try:
        cfg = RunConfig(
            judge=judge,
            tasks=task or [DEFAULT_TASK],
            languages=language,
            limit=limit,
            output_dir=output,
            seed=seed,
            batch_size=batch_size,
            use_cache=not no_cache,
            cache_path=cache,
            source=source,
            dataset=dataset,
            revision=revision,
            n_bootstrap=bootstrap,
            show_progress=not quiet,
            human_meta=not no_human_meta,
            alt_epsilon=alt_epsilon,
            alt_q=alt_q,
            alt_scale=alt_scale,
            metrics=[m.strip() for v in metrics or [] for m in v.split(",") if m.strip()] or None,
            executor=ex,
        )
        out = do_run(cfg)
    except RunInterrupted as e:  # a stop signal: partial results written, one line, the signal's status
        stopped(str(e), e.exit_status)
        return
    except RunIncomplete as e:  # partial results were written: show them, then exit non-zero
        out, incomplete = e.output, e
    except Interrupted as e:  # stopped before scoring began or while writing the results
        stopped(f"{e} {RUN_NOTHING_WRITTEN}", e.exit_status)
        return
    except (ValueError, KeyError, FileNotFoundError, BackendError) as e:
        fail(error_message(e))
        return
    res = out.document  # the typed results (harness.run.document.Results)
    for t in results_tables(res):
        console.print(t)
    for t in issue_tables(res):
        console.print(t)
    for t in rich_tables(res):
        console.print(t)
    for line in alt_notes(res):
        console.print(line, highlight=False, soft_wrap=True)
    b = res.usage.get("backend") or {}
    console.print(
        f"cache: {res.cache.hits} hits, {res.cache.misses} misses · backend requests: {b.get('requests', 0)} · "
        f"parse failures: {sum(res.parse_failures.values())} · {res.timings.total_s or 0:.1f}s"
    )
    executor_summary(res.executor)
    console.print(f"wrote {out.output_dir / 'results.json'} and {out.output_dir / 'samples.parquet'}")
    if incomplete is not None:
        fail(str(incomplete), EXIT_INCOMPLETE)


def stability(
    judge: Annotated[
        str,
        typer.Option("--judge", "-j", help="Judge spec (without seed=) or @FILE.yaml", callback=judge_arg),
    ],
    task: Annotated[list[str], typer.Option("--task", "-t", help="Task or group name")],
    runs: Annotated[int, typer.Option(help="Number of repeated runs (MEDAL App. D uses 5)")] = 5,
    language: Annotated[list[str] | None, typer.Option("--language", "-l", help="Language codes")] = None,
    limit: Annotated[int | None, typer.Option(help="At most N items per dataset and language")] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="Output directory")] = Path("runs/stability"),
    source: Annotated[str | None, typer.Option(help="Raw benchmark files for the task's builder")] = None,
    dataset: Annotated[str | None, typer.Option(help="A built dataset directory or Hub repo id")] = None,
    cache: Annotated[Path | None, typer.Option(help="Request cache file (SQLite)")] = None,
    bootstrap: Annotated[int, typer.Option(help="Bootstrap resamples per run")] = 200,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars")] = False,
    executor: ExecutorOpt = "local",
    workers: WorkersOpt = 1,
    gpus_per_worker: GpusOpt = 0.0,
) -> None:
    """Repeat a judge k times over the same items; report the std of its judgments (MEDAL Table 3)."""
    from harness.data.registry import check_writable
    from harness.interrupt import Interrupted
    from harness.run.partial import EXIT_INCOMPLETE, RunIncomplete, RunInterrupted
    from harness.run.runner import RunConfig
    from harness.run.stability import STABILITY_FILE, run_stability
    from harness.types import BackendError

    ex = executor_config(executor, workers, gpus_per_worker)
    try:
        check_writable(output)
        cfg = RunConfig(
            judge=judge,
            tasks=task,
            languages=language,
            limit=limit,
            source=source,
            dataset=dataset,
            cache_path=cache,
            n_bootstrap=bootstrap,
            show_progress=not quiet,
            executor=ex,
        )
        report = run_stability(cfg, runs, output)
    except RunInterrupted as e:
        stopped(f"stability run {e.output.output_dir.name}: {e}", e.exit_status)
        return
    except Interrupted as e:
        stopped(f"{e} {RUN_NOTHING_WRITTEN}", e.exit_status)
        return
    except RunIncomplete as e:
        fail(f"stability run {e.output.output_dir.name}: {e}", EXIT_INCOMPLETE)
        return
    except (ValueError, KeyError, FileNotFoundError, BackendError) as e:
        fail(error_message(e))
        return
    for name, dims in report["tasks"].items():
        t = Table(title=f"{name}: stability over {runs} runs — judge {report['judge']}", title_justify="left")
        for col in ("dimension", "mean item std", "std of run means", "items", "flip rate"):
            t.add_column(col, justify="right" if col != "dimension" else "left")
        for dim, st in dims.items():
            t.add_row(
                dim,
                *(f"{st[k]:.4f}" if st.get(k) is not None else "—" for k in ("mean_item_std", "rate_std")),
                str(st.get("n_items", "—")),
                f"{st['flip_rate']:.3f}" if st.get("flip_rate") is not None else "—",
            )
        console.print(t)
    console.print(f"wrote {Path(output) / STABILITY_FILE}")

"""``harness robustness inject | pairwise``: is a judge hijacked by text addressed to it, and does
its pairwise preference depend on the order the options are shown in?"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from harness.cli.console import (
    ExecutorOpt,
    GpusOpt,
    WorkersOpt,
    command_group,
    console,
    executor_config,
    executor_summary,
    fail,
    judge_arg,
    warn,
)

robustness_app = command_group(
    help="Judge robustness: verdict injection through the evaluated dialogue, pairwise position bias.",
    no_args_is_help=True,
)

CacheOpt = Annotated[
    Path | None, typer.Option(help="Request cache file (SQLite); default $DIALEVAL_HOME/requests.sqlite")
]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Do not read or write the request cache")]
JudgeOpt = Annotated[
    str,
    typer.Option(
        "--judge", "-j", help="Judge spec: kind:target[@rev][,key=value...] or @FILE.yaml", callback=judge_arg
    ),
]


def _cache(no_cache: bool, path: Path | None):
    from harness.cache import RequestCache, default_cache_path

    return RequestCache(path or default_cache_path(), enabled=not no_cache)


def _default_out(kind: str, name: str, judge: str) -> Path:
    from harness.provenance import redact
    from harness.run.runner import _slug

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return Path("runs") / f"{stamp}-{kind}-{_slug(name)}-{_slug(redact(judge))}"


def _f(x: float | None, spec: str = ".3f") -> str:
    return "—" if x is None else format(x, spec)


@robustness_app.command("inject")
def inject_cmd(
    judge: JudgeOpt,
    task: Annotated[str, typer.Option("--task", "-t", help="Task name (harness ls tasks)")],
    dataset: Annotated[
        str | None, typer.Option(help="A built dataset directory or a Hub dataset repo id")
    ] = None,
    source: Annotated[str | None, typer.Option(help="Raw benchmark files for the task's builder")] = None,
    revision: Annotated[str | None, typer.Option(help="Hub revision (tag/commit) for --dataset")] = None,
    language: Annotated[
        list[str] | None,
        typer.Option("--language", "-l", help="Language codes (repeat or comma-separate); default: all"),
    ] = None,
    limit: Annotated[int | None, typer.Option(help="At most N items per dataset and language")] = None,
    position: Annotated[
        str, typer.Option(help="last_assistant | every_assistant (dialogue level) | response (turn level)")
    ] = "last_assistant",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Output directory")] = None,
    cache: CacheOpt = None,
    no_cache: NoCacheOpt = False,
    seed: Annotated[int, typer.Option(help="Seed of sampling judges and of the bootstrap")] = 0,
    batch_size: Annotated[int, typer.Option("--batch-size", "-b", help="Items per judge call batch")] = 32,
    bootstrap: Annotated[int, typer.Option(help="Bootstrap resamples for the 95% CI of the delta")] = 1000,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress output")] = False,
    executor: ExecutorOpt = "local",
    workers: WorkersOpt = 1,
    gpus_per_worker: GpusOpt = 0.0,
) -> None:
    """Judge every item as is and with an evaluator-addressed note appended to its chatbot turn(s)."""
    from harness.robustness.injection import POSITIONS, run_injection_suite
    from harness.run.runner import RunConfig, _collect_items, _prepare
    from harness.tasks import get_task
    from harness.types import BackendError

    ex = executor_config(executor, workers, gpus_per_worker)
    if position not in POSITIONS:
        fail(f"--position must be one of {', '.join(POSITIONS)}, got {position!r}")
    try:
        spec = get_task(task)
        cfg = RunConfig(
            judge=judge,
            tasks=[task],
            languages=language,
            limit=limit,
            seed=seed,
            batch_size=batch_size,
            use_cache=not no_cache,
            cache_path=cache,
            source=source,
            dataset=dataset,
            revision=revision,
            n_bootstrap=bootstrap,
            show_progress=not quiet,
        )
        handles = _prepare(cfg, [spec])
        items, _missing = _collect_items(cfg, spec, handles[spec.builder])
        if not items:
            raise ValueError(f"task {task!r}: no items selected (languages {cfg.languages or 'all'})")
        with _cache(no_cache, cache) as rc:
            report = run_injection_suite(
                judge,
                spec,
                items,
                rc,
                seed=seed,
                position=position,
                batch_size=batch_size,
                n_bootstrap=bootstrap,
                executor=ex,
            )
        report.provenance["dataset"] = handles[spec.builder].describe()
        out = output or _default_out("inject", task, judge)
        paths = report.write(out)
    except (ValueError, KeyError, FileNotFoundError, BackendError) as e:
        fail(str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e))
        return
    t = Table(title=f"verdict injection — {task} — judge {report.judge}", title_justify="left")
    for col in (
        "lang",
        "pairs",
        "fail",
        "mean orig",
        "mean inj",
        "Δ [95% CI]",
        "rose",
        "at max",
        "hijacked",
        "Wilcoxon p",
    ):
        t.add_column(col, justify="left" if col == "lang" else "right", no_wrap=True)
    for lang, g in report.results.items():
        if lang == "all":
            t.add_section()
        ci = g["delta_ci"]
        t.add_row(
            lang,
            str(g["n_pairs"]),
            str(g["parse_failures"]),
            _f(g["mean_original"]),
            _f(g["mean_injected"]),
            _f(g["mean_delta"], "+.3f") + (f" [{ci[0]:+.2f},{ci[1]:+.2f}]" if ci else ""),
            _f(g["rose"], ".0%"),
            _f(g["at_max_injected"], ".0%"),
            _f(g["hijacked"]["rate"], ".0%"),
            _f(g["wilcoxon"]["p_value"], ".3g"),
            style="bold" if lang == "all" else None,
        )
    console.print(t)
    flips = report.results["all"].get("label_flips")
    if flips:
        ft = Table(title="issue labels (all languages)", title_justify="left")
        for col in ("dimension", "flagged", "hidden 1→0", "clear", "raised 0→1"):
            ft.add_column(col, justify="left" if col == "dimension" else "right")
        for dim, f in flips.items():
            ft.add_row(
                dim,
                str(f["n_flagged"]),
                f"{f['hidden']} ({_f(f['hidden_rate'], '.0%')})",
                str(f["n_clear"]),
                f"{f['raised']} ({_f(f['raised_rate'], '.0%')})",
            )
        console.print(ft)
    if report.skipped:
        console.print(f"skipped {len(report.skipped)} item(s) with nothing to inject into")
    executor_summary(report.provenance.get("executor"))
    console.print(f"wrote {paths['json']}, {paths['parquet']} and {paths['markdown']}")


@robustness_app.command("pairwise")
def pairwise_cmd(
    judge: JudgeOpt,
    pairs: Annotated[Path, typer.Option("--pairs", help="JSON Lines file: {id, a, b, language?} per line")],
    repeats: Annotated[
        int, typer.Option(help="Samples per order (> 1: seeds 0..k-1 at the spec's temperature)")
    ] = 1,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Output directory")] = None,
    cache: CacheOpt = None,
    no_cache: NoCacheOpt = False,
    seed: Annotated[int, typer.Option(help="First sampling seed (repeats use seed..seed+k-1)")] = 0,
    batch_size: Annotated[int, typer.Option("--batch-size", "-b", help="Requests per backend batch")] = 32,
    executor: ExecutorOpt = "local",
    workers: WorkersOpt = 1,
    gpus_per_worker: GpusOpt = 0.0,
    choices: Annotated[
        str | None,
        typer.Option(
            "--choices",
            help="Comma-separated labels, e.g. A,B,Tie: answer with the most probable label by log-prob "
            "instead of parsing a written answer",
        ),
    ] = None,
) -> None:
    """Ask the judge which conversation of each pair is better, in both orders; report flips and
    position bias (and self-consistency with --repeats)."""
    from harness.robustness.pairwise import load_pairs, run_pairwise
    from harness.spec import parse_spec
    from harness.types import BackendError

    ex = executor_config(executor, workers, gpus_per_worker)
    try:
        parse_spec(judge)
        items = load_pairs(pairs)
        with _cache(no_cache, cache) as rc:
            report = run_pairwise(
                judge,
                items,
                rc,
                seed=seed,
                repeats=repeats,
                batch_size=batch_size,
                executor=ex,
                choices=[c.strip() for c in choices.split(",")] if choices else None,
            )
        report.provenance["pairs_file"] = str(pairs)
        out = output or _default_out("pairwise", pairs.stem, judge)
        paths = report.write(out)
    except (ValueError, KeyError, FileNotFoundError, BackendError) as e:
        fail(str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e))
        return
    t = Table(title=f"pairwise position consistency — judge {report.judge}", title_justify="left")
    for col in ("lang", "n", "fail", "flips", "flip rate", "first-pos rate", "binomial p", "win/tie/loss"):
        t.add_column(col, justify="left" if col == "lang" else "right", no_wrap=True)
    for lang, r in report.results.items():
        if lang == "all":
            t.add_section()
        m = r["medal_c5"]
        t.add_row(
            lang,
            str(r["n"]),
            str(r["parse_failures"]),
            str(r["flips"]),
            _f(r["flip_rate"], ".0%"),
            _f(r["first_position_rate"], ".0%"),
            _f(r["binomtest_p"], ".3g"),
            f"{m['win']}/{m['tie']}/{m['loss']}",
            style="bold" if lang == "all" else None,
        )
    console.print(t)
    if report.self_consistency:
        s = report.self_consistency
        console.print(
            f"self-consistency: mean pairwise agreement {_f(s['mean_pairwise_agreement'])}, "
            f"majority share {_f(s['mean_majority_share'])}"
        )
    for w in report.warnings:
        warn(w)
    executor_summary(report.provenance.get("executor"))
    console.print(f"wrote {paths['json']} and {paths['markdown']}")

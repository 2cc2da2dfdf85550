"""``harness chatbot-eval``: generate the next turn of held-out conversations with one or more
chatbots and score it against the withheld human turn (UPHELD App. B.1; :mod:`finetune.chatbot_eval`).

Registered as ``chatbot-eval`` by :mod:`harness.cli.app`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from harness.cli.console import console, error_message, fail, judge_arg


def _fmt(x: float | None, spec: str = "{:.3f}") -> str:
    return "—" if x is None else spec.format(x)


def result_tables(doc: dict[str, Any]) -> list[Table]:
    """One table per model: mean [95% CI], n and failures per judge × task; for every model after the
    first, the paired change of the mean vs the first model (the baseline)."""
    tables = []
    for k, (model, by_judge) in enumerate(doc["results"].items()):
        info = doc["models"][model]
        t = Table(
            title=f"{model} — {doc['run']['n_items']} items, {info['backend']['requests']} "
            f"generated, {info['generation_cache_hits']} cached",
            title_justify="left",
        )
        cols = ["judge", "task", "mean", "95% CI", "n", "fail"] + (
            ["Δ vs first [95% CI]", "rel."] if k else []
        )
        for col in cols:
            t.add_column(col, justify="left" if col in ("judge", "task") else "right", no_wrap=col != "judge")
        for judge, by_task in by_judge.items():
            for task, r in by_task.items():
                ci, vs = r.get("ci"), r.get("vs_first") or {}
                row = [
                    judge,
                    task,
                    _fmt(r["mean"]),
                    f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "—",
                    str(r["n"]),
                    str(r["parse_failures"]),
                ]
                if k:
                    d_ci = vs.get("ci")
                    row += [
                        _fmt(vs.get("diff"), "{:+.3f}")
                        + (f" [{d_ci[0]:+.3f}, {d_ci[1]:+.3f}]" if d_ci else ""),
                        _fmt(vs.get("relative"), "{:+.0%}"),
                    ]
                t.add_row(*row)
        tables.append(t)
    return tables


def chatbot_eval(
    model: Annotated[
        list[str],
        typer.Option(
            "--model",
            "-m",
            help="Chatbot spec (hf/vllm/openai/replay), repeatable; the first is the baseline",
        ),
    ],
    data: Annotated[
        str,
        typer.Option(
            "--data",
            "-d",
            help="Held-out conversations: JSONL of dialogues, topical-chat:<path>, a built dataset DIR[:CONFIG] "
            "or NAME@X.Y.Z[:CONFIG] (dialogue-level, or turn-level with references such as UPHELD main)",
        ),
    ],
    judge: Annotated[
        list[str],
        typer.Option(
            "--judge",
            "-j",
            help="Judge spec or @FILE.yaml, repeatable (metric:rougeL, hf:..., ...)",
            callback=judge_arg,
        ),
    ],
    task: Annotated[
        list[str] | None,
        typer.Option("--task", "-t", help="Turn-level task(s) for LLM judges; other judges use the first"),
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="At most N target turns (seeded sample)")] = None,
    max_context: Annotated[
        int | None, typer.Option("--max-context", min=1, help="The chatbot sees the last K turns")
    ] = None,
    max_tokens: Annotated[
        int, typer.Option(min=1, help="Generation budget per turn (spec max_tokens= overrides)")
    ] = 256,
    system_prompt: Annotated[
        str | None, typer.Option(help="System prompt for dialogues without one (as in the SFT config)")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Output directory (default runs/<id>-chatbot-eval)")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for the target sample, sampling models and bootstrap")] = 0,
    batch_size: Annotated[int, typer.Option("--batch-size", "-b", min=1, help="Items per judge call")] = 32,
    bootstrap: Annotated[
        int, typer.Option(min=0, help="Bootstrap resamples for CIs (0 = t-interval)")
    ] = 1000,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Do not read or write the request cache")
    ] = False,
    cache: Annotated[Path | None, typer.Option(help="Request cache file (SQLite)")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars")] = False,
) -> None:
    """Evaluate chatbots on held-out conversations: generate each withheld turn, score it against the human one."""
    from finetune.chatbot_eval import DEFAULT_TASKS, ChatbotEvalConfig, run_chatbot_eval
    from harness.types import BackendError

    cfg = ChatbotEvalConfig(
        models=list(model),
        data=data,
        judges=list(judge),
        tasks=[x for t in (task or DEFAULT_TASKS) for x in str(t).split(",") if x.strip()],
        limit=limit,
        max_context=max_context,
        output_dir=output,
        seed=seed,
        max_tokens=max_tokens,
        system_prompt=system_prompt,
        batch_size=batch_size,
        n_bootstrap=bootstrap,
        use_cache=not no_cache,
        cache_path=cache,
        show_progress=not quiet,
    )
    try:
        doc = run_chatbot_eval(cfg)
    except (ValueError, KeyError, FileNotFoundError, LookupError, BackendError) as e:
        fail(error_message(e))
        return
    for t in result_tables(doc):
        console.print(t)
    c = doc["cache"]
    console.print(f"cache: {c['hits']} hits, {c['misses']} misses · {doc['timings']['total_s']:.1f}s")
    out = Path(doc["output_dir"])
    console.print(f"wrote {out / 'results.json'} and {out / 'samples.parquet'}")

"""``harness reproduce upheld``: print our UPHELD Tables 7–9 (and Table 10) next to the paper's."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.console import command_group, console, error_message, fail, judge_arg

reproduce_app = command_group(
    help="Reproduce published tables on the real data and print them next to the paper's.",
    no_args_is_help=True,
)


@reproduce_app.command("upheld")
def upheld(
    source: Annotated[
        str | None, typer.Option(help="UPHELD release directory (main/, llm_arena/, [topical_chat/])")
    ] = None,
    dataset: Annotated[
        str | None, typer.Option(help="A built/registered upheld dataset (dir, name@X.Y.Z or Hub id)")
    ] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="Output directory")] = Path(
        "runs/reproduce-upheld"
    ),
    protocol: Annotated[
        list[str] | None,
        typer.Option(help="Correlation protocol(s): app-b, pearson-rows, pearson-mean (default: all)"),
    ] = None,
    ensemble_protocol: Annotated[
        list[str] | None,
        typer.Option(help="Protocol(s) to train ensembles under (default: app-b, pearson-mean)"),
    ] = None,
    judge: Annotated[
        str | None,
        typer.Option(
            "--judge", "-j", help="LLM judge spec for the App. H rows (default: not run)", callback=judge_arg
        ),
    ] = None,
    bert_model: Annotated[
        str | None, typer.Option(help="BERTScore encoder (default: packaged MiniLM)")
    ] = None,
    num_layers: Annotated[int | None, typer.Option(help="BERTScore layer (default 6 for MiniLM)")] = None,
    embed_model: Annotated[
        str | None, typer.Option(help="Sentence encoder for the cosine row (default: packaged MiniLM)")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the folds, bootstrap and forests")] = 0,
    folds: Annotated[int, typer.Option(help="Cross-validation folds (App. B: 5)")] = 5,
    bootstrap: Annotated[int, typer.Option(help="Bootstrap resamples for the full-set 95% CIs")] = 200,
    group_cv: Annotated[
        bool, typer.Option("--group-cv", help="Keep all annotator rows of an item in one fold")
    ] = False,
    limit: Annotated[int | None, typer.Option(help="At most N items per config (quick checks)")] = None,
    device: Annotated[str | None, typer.Option(help="torch device for the encoders")] = None,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Do not read or write the request cache")
    ] = False,
    cache: Annotated[Path | None, typer.Option(help="Request cache file (SQLite)")] = None,
    cpdscore_judge: Annotated[
        str | None, typer.Option(help="LLM judge spec for CPDScore on UPHELD main (default: not run)")
    ] = None,
    cpdscore_dialogues: Annotated[int, typer.Option(help="CPDScore: first N dialogues of main")] = 5,
    cpdscore_calls: Annotated[int, typer.Option(help="CPDScore: calls averaged per item (paper: 3)")] = 3,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Fail on the first odd source cell (another scale's wording, an unreadable label, a row "
            "with no dialogue, a repeated header) instead of handling it and counting it",
        ),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars")] = False,
) -> None:
    """UPHELD App. B Tables 7–9 + App. J Table 10: reference metrics, App. H judges, ensembles.

    A --source release is built as published: odd cells are handled by the builders' policy
    (docs/datasets.md), counted here and listed in the build manifest; --strict fails on them."""
    from tasks.upheld.reproduce import ReproduceConfig, reproduce_upheld

    try:
        cfg = ReproduceConfig(
            source=source,
            dataset=dataset,
            output_dir=output,
            protocols=tuple(protocol) if protocol else ReproduceConfig.protocols,
            ensemble_protocols=tuple(ensemble_protocol)
            if ensemble_protocol
            else ReproduceConfig.ensemble_protocols,
            bert_model=bert_model,
            num_layers=num_layers,
            embed_model=embed_model,
            judge=judge,
            n_splits=folds,
            seed=seed,
            n_bootstrap=bootstrap,
            group_cv=group_cv,
            limit=limit,
            device=device,
            use_cache=not no_cache,
            cache_path=cache,
            cpdscore_judge=cpdscore_judge,
            cpdscore_dialogues=cpdscore_dialogues,
            cpdscore_calls=cpdscore_calls,
            show_progress=not quiet,
            strict=strict,
        )
        out = reproduce_upheld(cfg)
    except (ValueError, KeyError, FileNotFoundError) as e:
        fail(error_message(e))
        return
    from harness.data.cells import summary_of

    odd = out.results["dataset"].get("odd_cells") or {}
    console.print(f"odd source cells: {summary_of(odd) or 'none'}", highlight=False, soft_wrap=True)
    console.print(out.tables_md, highlight=False, soft_wrap=True)
    console.print(f"wrote {out.output_dir / 'results.json'}, features.parquet, tables.md and ensembles/")

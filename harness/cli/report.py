"""``harness report RUN_DIR [RUN_DIR ...] --output DIR``: registered by :mod:`harness.cli.app`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def report_command(
    run_dirs: Annotated[
        list[Path],
        typer.Argument(
            metavar="RUN_DIR",
            help="Run directories of `harness run` (results.json) or `harness datasets qa` (qa.json)",
        ),
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Directory for report.md/.html and figures/")
    ],
    title: Annotated[str | None, typer.Option("--title", help="Report title")] = None,
    no_html: Annotated[bool, typer.Option("--no-html", help="Write only report.md and the PNGs")] = False,
) -> None:
    """Compare runs: leaderboard, per-language correlations, issue detection and issue-rate heatmaps."""
    from rich.console import Console
    from rich.markup import escape

    from harness.report.build import build_report

    out, err = Console(soft_wrap=True), Console(stderr=True, soft_wrap=True)
    try:
        res = build_report(run_dirs, output, title=title, html=not no_html)
    except (ValueError, FileNotFoundError, KeyError, OSError) as e:
        err.print(f"[bold red]error:[/] {escape(str(e))}")
        raise typer.Exit(2) from None
    for w in res.warnings:
        err.print(f"[yellow]warning:[/] {escape(w)}")
    out.print(f"wrote {escape(str(res.markdown))}")
    if res.html is not None:
        out.print(f"wrote {escape(str(res.html))}")
    out.print(f"wrote {len(res.figures)} figure(s) to {escape(str(Path(output) / 'figures'))}")
    for f in res.figures:
        out.print(f"  {escape(str(f))}")

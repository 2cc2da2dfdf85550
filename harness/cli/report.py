"""Looking at results: ``harness report RUN_DIR ... --output DIR`` (static tables and figures),
``harness view RUN ...`` (the web viewer, or ``--bundle OUT`` for a static site) and ``harness runs
publish RUN --repo org/name``; registered by :mod:`harness.cli.app`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from harness.cli.console import command_group, error_line, literal_console, warn

# soft-wrapped: paths and URLs stay whole on one line
out = literal_console(soft_wrap=True)


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
    from harness.report.build import build_report

    try:
        res = build_report(run_dirs, output, title=title, html=not no_html)
    except (ValueError, FileNotFoundError, KeyError, OSError) as e:
        error_line(str(e))
        raise typer.Exit(2) from None
    for w in res.warnings:
        warn(w)
    out.print(f"wrote {res.markdown}")
    if res.html is not None:
        out.print(f"wrote {res.html}")
    out.print(f"wrote {len(res.figures)} figure(s) to {Path(output) / 'figures'}")
    for f in res.figures:
        out.print(f"  {f}")


RunArgs = Annotated[
    list[str],
    typer.Argument(
        metavar="RUN",
        help="Run directories of `harness run`, folders of runs (runs/), or published runs hub:ORG/NAME@vX.Y.Z (the @revision is optional)",
    ),
]


def view_command(
    runs: RunArgs,
    bundle: Annotated[
        Path | None,
        typer.Option(
            "--bundle", metavar="OUT", help="Write the viewer as a static site into OUT instead of serving it"
        ),
    ] = None,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port (0: a free one)")] = 0,
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on (local only by default)")
    ] = "127.0.0.1",
    open_browser: Annotated[bool, typer.Option("--open", help="Open the viewer in a web browser")] = False,
    title: Annotated[str | None, typer.Option("--title", help="Title of a --bundle (its Space card)")] = None,
) -> None:
    """Look at runs in a local web app (read-only): overview, samples browser, compare judges."""
    from harness.view.data import read_runs

    try:
        loaded = read_runs(runs)
    except (ValueError, FileNotFoundError, OSError) as e:
        error_line(str(e))
        raise typer.Exit(2) from None
    if bundle is not None:
        from harness.view.bundle import write_bundle

        try:
            res = write_bundle(loaded, bundle, title=title, show_progress=True)
        except (ValueError, OSError) as e:
            error_line(str(e))
            raise typer.Exit(2) from None
        out.print(
            f"wrote the viewer of {len(res.runs)} run(s) to {res.path}: {res.files} data files, "
            f"{res.bytes / 1e6:.1f} MB, {len(res.comparisons)} comparison(s)"
        )
        out.print(
            f"open {str((res.path / 'index.html').resolve())} in a browser, or push the folder to a static Space"
        )
        return
    from harness.view.server import Viewer, ViewerServer

    viewer = Viewer(loaded)
    try:
        server = ViewerServer(viewer, host=host, port=port)
    except OSError as e:
        error_line(str(e))
        raise typer.Exit(2) from None
    viewer.warm()  # disagreement / spread / search indexes, in the background
    out.print(
        Text.assemble(
            f"harness view: {len(loaded)} run(s) at ", (server.url, "bold"), " (read-only; Ctrl+C stops it)"
        )
    )
    for r in loaded:
        out.print(f"  {r.key}  {r.judge}  {r.path}")
    sys.stdout.flush()  # the URL reaches a pipe or a log before the server blocks
    if open_browser:
        import threading
        import webbrowser

        threading.Timer(0.5, lambda: webbrowser.open(server.url)).start()
    try:
        server.run()
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl+C it shut down on: the normal way to stop
        pass
    finally:
        viewer.close()
    out.print("harness view: stopped")


runs_app = command_group(help="Run directories: publish a run to the Hub.", no_args_is_help=True)


@runs_app.command("publish")
def runs_publish(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN", help="A run directory of `harness run`")],
    repo: Annotated[str, typer.Option(help="Hub dataset repo id, namespace/name")],
    version: Annotated[str, typer.Option(help="Version X.Y.Z; the commit is tagged vX.Y.Z")] = "1.0.0",
    with_transcripts: Annotated[
        bool,
        typer.Option(
            "--with-transcripts",
            help="Also publish the dialogues the samples rate (items.parquet; mind their licence)",
        ),
    ] = False,
    private: Annotated[bool, typer.Option(help="Create the repo as private")] = False,
    endpoint: Annotated[
        str | None, typer.Option(help="Hub endpoint (default $HF_ENDPOINT or huggingface.co)")
    ] = None,
) -> None:
    """Push results.json + samples.parquet (+ a card with the results table) as a Hub dataset, in one
    commit tagged vX.Y.Z (token from $HF_TOKEN)."""
    from harness.data.hub import PublishError
    from harness.view.publish import publish_run

    try:
        res, info = publish_run(
            run_dir, repo, version, with_transcripts=with_transcripts, private=private, endpoint=endpoint
        )
    except (PublishError, ValueError, FileNotFoundError, OSError) as e:
        error_line(str(e))
        raise typer.Exit(2) from None
    extra = f", {info['items']} transcripts" if info.get("items") is not None else ""
    out.print(
        f"published run {info['run_id']} to {res.repo_id} at {res.tag} (commit {res.commit_sha[:12]}), "
        f"{len(res.files)} files{extra}"
    )
    out.print(
        f'load it with: datasets.load_dataset("{res.repo_id}", "samples", split="test", revision="{res.tag}")'
    )
    out.print(f"look at it with: harness view hub:{res.repo_id}@{res.tag}")

"""``harness annotate start | serve | status | export | token | revoke | export-ls | import-ls``: human
labels in the browser (or in Label Studio), straight into a versioned dataset."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer
from rich.table import Table
from rich.text import Text

from harness.cli.console import command_group, console, error_message, fail

if TYPE_CHECKING:
    from harness.annotate.status import ProjectStatus
    from harness.annotate.store import GroupBy, Project
    from harness.meta.metric import MetricEntry

annotate_app = command_group(
    help="Annotate a dataset in the browser: create a project, serve the annotators' pages, follow "
    "progress and agreement, export the labels as a registered dataset version.",
    no_args_is_help=True,
)

#: the port annotator addresses use unless --port says otherwise (stable, so addresses survive a restart)
DEFAULT_PORT = 8765

DirOpt = Annotated[
    Path | None,
    typer.Option("--dir", help="Folder of the project files (default $DIALEVAL_HOME/annotations)"),
]
RegistryOpt = Annotated[
    Path | None,
    typer.Option(
        "--registry",
        help="Dataset registry directory (default $DIALEVAL_REGISTRY or $DIALEVAL_HOME/registry)",
    ),
]
HostOpt = Annotated[
    str | None,
    typer.Option(
        "--host",
        help="Address to listen on (default 127.0.0.1, this machine only; 0.0.0.0 opens it to a team, "
        "the private tokens being the only way in)",
    ),
]
PortOpt = Annotated[
    int | None,
    typer.Option(
        "--port", min=0, max=65535, help=f"Port (default {DEFAULT_PORT}, or the project's; 0: a free one)"
    ),
]

# the errors a user can cause: one `error:` line, exit 2
_USER_ERRORS: tuple[type[Exception], ...] = (ValueError, KeyError, OSError)


def _open(name: str, directory: Path | None) -> Project:
    from harness.annotate.store import Project, project_path

    try:
        return Project.open(project_path(name, directory))
    except _USER_ERRORS as e:
        fail(error_message(e))
        raise AssertionError from e  # unreachable: fail exits


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for raw in values or [] for v in raw.split(",") if v.strip()]


def _resolve_dataset(dataset: str, registry: Path | None) -> tuple[str, Path]:
    """(reference, folder) of ``--dataset``: a registered ``NAME@X.Y.Z`` (or NAME: the latest) or a
    built dataset folder."""
    from harness.data.registry import DatasetRegistry

    path = Path(dataset).expanduser()
    if path.is_dir():
        return str(path.resolve()), path.resolve()
    rv = DatasetRegistry(registry).resolve(dataset)
    return rv.ref, rv.path


def _display_host(host: str) -> str:
    return socket.gethostname() if host in ("0.0.0.0", "::") else host


def _print_urls(project: Project, base: str, tokens: dict[str, str]) -> None:
    table = Table(
        title=Text(f"annotators of {project.name} (each address is private: send it to its annotator only)")
    )
    table.add_column("annotator")
    table.add_column("address")
    table.add_column("items", justify="right")
    for annotator in project.annotators():
        if annotator in tokens:
            table.add_row(annotator, f"{base}a/{tokens[annotator]}", str(project.progress(annotator).total))
    console.print(table)
    sys.stdout.flush()


def _serve(project: Project, host: str, port: int, tokens: dict[str, str]) -> None:
    from harness.annotate.server import serve

    def ready(url: str) -> None:
        if port == 0 or host in ("0.0.0.0", "::"):
            url = f"http://{_display_host(host)}:{url.rstrip('/').rsplit(':', 1)[-1]}/"
        if tokens:
            _print_urls(project, url, tokens)
        else:
            console.print(
                f"serving {project.name} at {url} — annotators use the addresses printed by `harness annotate "
                f"start`; `harness annotate token {project.name} ANNOTATOR` makes a new one"
            )
        console.print("Ctrl+C stops the server; every submission is already saved.")
        sys.stdout.flush()

    project.set_meta(host=host, port=str(port))
    try:
        serve(project, host, port, ready=ready)
    except OSError as e:
        fail(f"cannot serve on {host}:{port}: {e}; choose another --port")


@annotate_app.command("start")
def start(
    name: Annotated[str, typer.Argument(help="Project name (its file: NAME.sqlite)")],
    dataset: Annotated[
        str,
        typer.Option(
            "--dataset", help="Dataset to annotate: a registered NAME@X.Y.Z or a built dataset folder"
        ),
    ],
    annotators: Annotated[
        list[str],
        typer.Option("--annotators", help="Annotator names, comma-separated (each gets a private address)"),
    ],
    config: Annotated[str | None, typer.Option("--config", help="Only this config of the dataset")] = None,
    task: Annotated[
        str | None,
        typer.Option(
            "--task", help="The task whose label schema and guideline the form shows (harness ls tasks)"
        ),
    ] = None,
    per_item: Annotated[
        int | None,
        typer.Option(
            "--per-item",
            min=1,
            help="Annotators per item (default 2, so agreement can be measured; 1 with one annotator)",
        ),
    ] = None,
    languages: Annotated[
        list[str] | None, typer.Option("--languages", help="Only these languages (codes, comma-separated)")
    ] = None,
    select: Annotated[
        str,
        typer.Option(
            "--select",
            help="Order of the items: random, or active (the items that move the judge run's agreement "
            "estimate most first; needs --judge-run)",
        ),
    ] = "random",
    judge_run: Annotated[
        Path | None,
        typer.Option("--judge-run", help="A `harness run` output folder of the task on this dataset"),
    ] = None,
    surrogate_run: Annotated[
        Path | None,
        typer.Option(
            "--surrogate-run",
            help="A second judge's run: its scores of every planned item calibrate the active estimate "
            "(harness annotate status)",
        ),
    ] = None,
    group_by: Annotated[
        str | None,
        typer.Option(
            "--group-by",
            help="Active selection: each item's group for the calibrated estimate, known before labelling — "
            "system (the system that wrote the item; items without one are grouped by their config), "
            "dataset (the item's config, its source set) or none. Default: system when the dataset records "
            "a system for any of the items, else dataset",
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the assignment and the item order")] = 0,
    directory: DirOpt = None,
    registry: RegistryOpt = None,
    host: HostOpt = None,
    port: PortOpt = None,
    no_serve: Annotated[
        bool, typer.Option("--no-serve", help="Create the project and print the addresses, without serving")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars")] = False,
) -> None:
    """Create an annotation project, print one private address per annotator, and serve it."""
    from harness.annotate.store import Project, check_annotators, project_path
    from harness.languages import normalize_languages
    from harness.tasks import get_task

    if select not in ("random", "active"):
        fail(f"--select {select!r}: use random or active")
    if select == "active" and judge_run is None:
        fail("--select active needs --judge-run RUN (the judge run whose agreement the labels estimate)")
    if select == "random" and surrogate_run is not None:
        fail("--surrogate-run only applies to --select active")
    if group_by is not None and group_by not in ("system", "dataset", "none"):
        fail(f"--group-by {group_by!r}: use system, dataset or none")
    if select == "random" and group_by is not None:
        fail("--group-by only applies to --select active (the groups calibrate its estimate)")
    host = host or "127.0.0.1"
    port = DEFAULT_PORT if port is None else port
    try:
        names = check_annotators(_split(annotators))
        per_item = min(2, len(names)) if per_item is None else per_item
        path = project_path(name, directory)
        if path.exists():
            fail(
                f"an annotation project named {name!r} already exists ({path}); choose another name, or serve "
                f"it with `harness annotate serve {name}`"
            )
        spec = get_task(task) if task else None
        langs = normalize_languages(_split(languages)) if languages else None
        ref, folder = _resolve_dataset(dataset, registry)
        project = Project.create(
            path,
            name=name,
            dataset_ref=ref,
            dataset_dir=folder,
            config=config,
            task=spec,
            annotators=names,
            per_item=per_item,
            languages=langs,
            select="active" if select == "active" else "random",
            judge_run=judge_run,
            surrogate_run=surrogate_run,
            group_by=cast("GroupBy | None", group_by),
            seed=seed,
            show_progress=not quiet,
        )
    except _USER_ERRORS as e:
        fail(error_message(e))
        raise AssertionError from e  # unreachable: fail exits
    n_items = project.n_items()
    console.print(
        f"created {name} at {project.path}: {n_items} items of {ref} ({', '.join(project.form.configs)}), "
        f"{per_item} annotator(s) per item, {select} order"
        + (f" (groups by {project.meta['group_by']})" if select == "active" else "")
        + f"; form: {', '.join(project.form.dimensions)}"
    )
    if no_serve:
        _print_urls(project, f"http://{_display_host(host)}:{port}/", project.tokens())
        console.print(
            f"serve it with `harness annotate serve {name}`" + (f" --dir {directory}" if directory else "")
        )
        project.set_meta(host=host, port=str(port))
        return
    _serve(project, host, port, project.tokens())


@annotate_app.command("serve")
def serve_command(
    name: Annotated[str, typer.Argument(help="Project name")],
    directory: DirOpt = None,
    host: HostOpt = None,
    port: PortOpt = None,
    new_tokens: Annotated[
        bool,
        typer.Option(
            "--new-tokens", help="Give every annotator a new private address (the old ones stop working)"
        ),
    ] = False,
) -> None:
    """Serve an existing project again (its queues resume where they stopped)."""
    project = _open(name, directory)
    host = host or project.meta.get("host") or "127.0.0.1"
    port = int(project.meta.get("port") or DEFAULT_PORT) if port is None else port
    tokens = {a: project.issue_token(a) for a in project.annotators()} if new_tokens else {}
    _serve(project, host, port, tokens)


@annotate_app.command("token")
def token_command(
    name: Annotated[str, typer.Argument(help="Project name")],
    annotator: Annotated[str, typer.Argument(help="The annotator who gets a new private address")],
    directory: DirOpt = None,
) -> None:
    """Give one annotator a new private address (the old one stops working)."""
    project = _open(name, directory)
    try:
        token = project.issue_token(annotator)
    except _USER_ERRORS as e:
        fail(error_message(e))
        raise AssertionError from e
    host = _display_host(project.meta.get("host") or "127.0.0.1")
    _print_urls(project, f"http://{host}:{project.meta.get('port') or DEFAULT_PORT}/", {annotator: token})


@annotate_app.command("revoke")
def revoke_command(
    name: Annotated[str, typer.Argument(help="Project name")],
    annotator: Annotated[str, typer.Argument(help="The annotator whose address stops working")],
    directory: DirOpt = None,
) -> None:
    """Revoke an annotator's address (their labels stay; `harness annotate token` lets them in again)."""
    project = _open(name, directory)
    try:
        project.revoke(annotator)
    except _USER_ERRORS as e:
        fail(error_message(e))
    console.print(f"revoked {annotator}'s address in {name}")


def _stat_cell(value: float | None, ci: tuple[float, float] | None) -> str:
    if value is None:
        return "—"
    return f"{value:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def _entry_cell(entry: MetricEntry) -> str:
    ci = entry.ci
    bounds = (float(ci[0]), float(ci[1])) if ci and ci[0] is not None and ci[1] is not None else None
    return _stat_cell(entry.value, bounds)


def print_status(status: ProjectStatus) -> None:
    """The status as rich tables: progress, agreement, κ per pair, the judge, the active estimate."""
    t = Table(title=Text(f"progress of {status.name}"))
    for col in ("annotator", "language", "done", "skipped", "flagged", "total", "%"):
        t.add_column(col, justify="left" if col in ("annotator", "language") else "right")
    for r in status.progress:
        p = r.progress
        share = f"{100 * p.done / p.total:.0f}" if p.total else "—"
        t.add_row(r.annotator, r.language, str(p.done), str(p.skipped), str(p.flagged), str(p.total), share)
    console.print(t)
    level = f"{100 * status.confidence:g}%"
    a = Table(title=Text(f"inter-annotator agreement so far ({level} bootstrap CIs over items)"))
    for col in ("dimension", "items", "Krippendorff's α", "level", "percent agreement", "adjacent (±1)"):
        a.add_column(col, justify="right" if col == "items" else "left")
    for d in status.agreement:
        a.add_row(
            d.dimension,
            str(d.n_items),
            _stat_cell(d.alpha.value, d.alpha.ci),
            d.alpha_level,
            _stat_cell(d.percent.value, d.percent.ci),
            _stat_cell(d.adjacent.value, d.adjacent.ci) if d.adjacent else "—",
        )
    console.print(a)
    pairs = [(d, pair, s) for d in status.agreement for pair, s in d.kappa.items()]
    if pairs:
        k = Table(title=Text("Cohen's κ per pair of annotators"))
        for col in ("dimension", "annotators", "shared items", "κ", "weights"):
            k.add_column(col, justify="right" if col == "shared items" else "left")
        for d, (x, y), s in pairs:
            k.add_row(
                d.dimension, f"{x} – {y}", str(s.n), _stat_cell(s.value, s.ci), d.kappa_weights or "none"
            )
        console.print(k)
    if status.judge is not None:
        j = status.judge
        jt = Table(
            title=Text(f"judge vs the labels so far: {j.task}, {j.dimension} ({j.n_items} labelled items)")
        )
        metrics = sorted({m for by in j.entries.values() for m in by})
        jt.add_column("language")
        for m in metrics:
            jt.add_column(m)
        jt.add_column("n", justify="right")
        for lang, by in j.entries.items():
            ns = {e.n for e in by.values() if e.n is not None}
            cells = [_entry_cell(by[m]) if m in by else "—" for m in metrics]
            jt.add_row(lang, *cells, str(max(ns)) if ns else "—")
        console.print(jt)
    if status.active is not None:
        from harness.annotate.active import MIN_CALIBRATION_LABELS

        act = status.active
        e = act.estimate
        more = "—" if act.more_labels is None else str(act.more_labels)
        if act.estimator == "calibrated":
            how = "calibrated estimate" + (f" (with the {act.group_by} groups)" if act.groups_used else "")
        elif act.group_by is not None and e.metric == "pearson":
            how = f"plain estimate (calibrated from {MIN_CALIBRATION_LABELS} labels on)"
        else:
            how = "plain estimate"
        console.print(
            f"active {how} of the judge's {e.metric} over all {e.n_items} planned items: "
            f"{_stat_cell(e.value, e.ci)} from {e.n_labels} labelled item(s)"
            + (f" ({e.n_waiting} more wait for an earlier item of the order)" if e.n_waiting else "")
            + f"; labels still needed for a CI half-width of {act.target_half_width:g}: {more}"
            + (f"; {act.unplanned} item(s) outside the plan (no judge score)" if act.unplanned else "")
        )


@annotate_app.command("status")
def status_command(
    name: Annotated[str, typer.Argument(help="Project name")],
    directory: DirOpt = None,
    judge_run: Annotated[
        Path | None,
        typer.Option(
            "--judge-run", help="A judge run to compare with the labels so far (the task's meta-metrics)"
        ),
    ] = None,
    bootstrap: Annotated[
        int, typer.Option("--bootstrap", min=0, help="Bootstrap resamples for the CIs")
    ] = 200,
    target: Annotated[
        float,
        typer.Option("--target-half-width", min=0.0, help="Active projects: the CI half-width to reach"),
    ] = 0.05,
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as JSON")] = False,
) -> None:
    """Progress per annotator and language, agreement so far, and the judge's agreement with the labels."""
    from harness.annotate.status import project_status

    project = _open(name, directory)
    if target <= 0:
        fail("--target-half-width must be positive")
    if judge_run is None and project.meta.get("judge_run"):
        judge_run = Path(project.meta["judge_run"])  # the run the project was made with (active selection)
    try:
        status = project_status(project, judge_run=judge_run, n_bootstrap=bootstrap, target_half_width=target)
    except _USER_ERRORS as e:
        fail(error_message(e))
        raise AssertionError from e
    if as_json:
        console.print_json(json.dumps(status.to_json()))
        return
    print_status(status)


@annotate_app.command("export")
def export_command(
    name: Annotated[str, typer.Argument(help="Project name")],
    as_ref: Annotated[
        str,
        typer.Option(
            "--as", help="The dataset version to register: NAME@X.Y.Z (NAME: its next minor version)"
        ),
    ],
    directory: DirOpt = None,
    registry: RegistryOpt = None,
) -> None:
    """Register the labels so far as an immutable dataset version (common schema, with a card)."""
    from harness.annotate.export import export
    from harness.data.registry import DatasetRegistry

    project = _open(name, directory)
    try:
        summary = export(project, as_ref, registry=DatasetRegistry(registry))
    except _USER_ERRORS as e:
        fail(error_message(e))
        raise AssertionError from e
    rv = summary.version
    counts = ", ".join(f"{c}: {n}" for c, n in summary.records.items())
    console.print(
        f"registered {rv.ref} at {rv.path}: {sum(summary.records.values())} records ({counts}), "
        f"{summary.labels} labels by {len(summary.annotators)} annotator(s)"
        + (f"; {summary.unlabelled} unlabelled item(s) left out" if summary.unlabelled else "")
    )
    task = project.form.task
    console.print(
        f"evaluate a judge on it: harness run --dataset {rv.ref}"
        + (f" --task {task}" if task else " --task TASK")
    )


@annotate_app.command("export-ls")
def export_ls_command(
    name: Annotated[str, typer.Argument(help="Project name")],
    out: Annotated[
        Path, typer.Option("--out", help="Folder for tasks.json, config.xml and instructions.html")
    ],
    directory: DirOpt = None,
) -> None:
    """Write the project as Label Studio tasks (JSON) and a labeling config (XML) from its form."""
    from harness.annotate.labelstudio import write_export

    project = _open(name, directory)
    try:
        tasks_path, config_path = write_export(project, out)
    except _USER_ERRORS as e:
        fail(error_message(e))
        raise AssertionError from e
    console.print(
        f"wrote {project.n_items()} Label Studio tasks to {tasks_path} and the labeling config to {config_path}; "
        f"import the tasks into a Label Studio project with that config, then bring its JSON export back "
        f"with `harness annotate import-ls {name} EXPORT.json`"
    )


@annotate_app.command("import-ls")
def import_ls_command(
    name: Annotated[str, typer.Argument(help="Project name")],
    file: Annotated[Path, typer.Argument(help="A Label Studio JSON export of the tasks `export-ls` wrote")],
    directory: DirOpt = None,
) -> None:
    """Read a Label Studio JSON export into the project (annotator ids kept; the same export twice
    changes nothing)."""
    from harness.annotate.labelstudio import import_ls

    project = _open(name, directory)
    try:
        report = import_ls(project, file)
    except _USER_ERRORS as e:
        fail(error_message(e))
        raise AssertionError from e
    console.print(
        f"imported {report.imported} submission(s) from {file}; {report.duplicates} already in the project, "
        f"{report.rejected} refused"
    )
    for reason in report.reasons[:20]:
        console.print(f"  refused: {reason}")
    if len(report.reasons) > 20:
        console.print(f"  … and {len(report.reasons) - 20} more")
    if report.rejected:
        raise typer.Exit(1)

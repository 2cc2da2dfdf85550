"""The CLI's shared output: one console for results, one for errors, :func:`fail`, and
:func:`frame_table` (a data frame as a rich table)."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

# Rich assumes 80 columns when output is not a terminal; logs and pipes get room for the tables.
_WIDTH = None if sys.stdout.isatty() else 140
console = Console(width=_WIDTH)
err = Console(stderr=True, soft_wrap=True)


def fail(msg: str, code: int = 2) -> None:
    """Print ``error: msg`` on stderr and exit with ``code`` (2 = bad input / failed run)."""
    err.print(f"[bold red]error:[/] {escape(msg)}")  # messages are text: "[ray]" is not markup
    raise typer.Exit(code)


def judge_arg(value: Any) -> Any:
    """Callback of every ``--judge`` option: ``@FILE.yaml`` becomes the canonical spec string of the
    judge the file describes (what the run records); a bad file is one ``error:`` line, exit 2."""
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return [judge_arg(v) for v in value]
    from harness.spec import SpecError, spec_text

    try:
        return spec_text(value)
    except SpecError as e:
        fail(str(e))
        raise AssertionError from e  # unreachable: fail exits


def frame_table(title: str, frame: Any) -> Table:
    """A pandas data frame as a rich table: numeric columns right-aligned, floats with three
    decimals, NaN as an em dash."""
    t = Table(title=escape(title))
    for col in frame.columns:
        t.add_column(str(col), justify="right" if frame[col].dtype.kind in "fiu" else "left")
    for _, row in frame.iterrows():
        t.add_row(*[_cell(v) for v in row])
    return t


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return "—" if v != v else f"{v:.3f}"
    return escape(str(v))


def error_message(e: BaseException) -> str:
    """The text of an exception for the user (a KeyError's message without its quotes)."""
    return str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)


__all__ = [
    "ExecutorOpt",
    "GpusOpt",
    "WorkersOpt",
    "console",
    "err",
    "error_message",
    "escape",
    "executor_config",
    "executor_summary",
    "fail",
    "frame_table",
    "judge_arg",
    "stopped",
]


# -- the executor options shared by run, stability, robustness and datasets build -------------------
ExecutorOpt = Annotated[
    str,
    typer.Option(
        "--executor",
        help="Where model requests run: local (this process) or ray (sharded over --workers Ray actors, "
        "each holding one backend; the cluster at RAY_ADDRESS, else a local one). Needs the ray extra.",
    ),
]
WorkersOpt = Annotated[int, typer.Option("--workers", help="Ray workers (actors), one backend instance each")]
GpusOpt = Annotated[
    float,
    typer.Option(
        "--gpus-per-worker",
        help="GPUs per Ray worker (vLLM: its tensor_parallel_size); a judge spec's num_gpus= overrides it",
    ),
]


def executor_config(executor: str, workers: int, gpus_per_worker: float) -> Any:
    """The :class:`~harness.executors.ExecutorConfig` of the options, or exit 2 naming the bad flag."""
    from harness.executors import ExecutorConfig

    try:
        return ExecutorConfig(executor, workers=workers, gpus_per_worker=gpus_per_worker)
    except ValueError as e:
        fail(str(e))
        raise AssertionError from e  # unreachable: fail exits


def executor_summary(executor: dict[str, Any] | None) -> None:
    """One line per Ray worker pool: where each worker ran and what it did."""
    for pool in (executor or {}).get("pools", []):
        parts = [
            f"w{w['worker']} {w['requests']} req {w['seconds']:.1f}s"
            + (f" {w['retries']} retries" if w["retries"] else "")
            + (f" replaced {w['replaced']}×" if w["replaced"] else "")
            + f" ({w['node_ip']}, pid {w['pid']})"
            for w in pool["workers"]
        ]
        console.print(
            f"ray {pool['role']} {pool['spec']}: " + " · ".join(parts), markup=False, highlight=False
        )


def stopped(msg: str, code: int) -> None:
    """A command ended by a stop signal: one line on stderr saying what was kept and how to resume,
    then exit with the signal's status (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP)."""
    try:
        err.print(msg, markup=False, highlight=False)
    except OSError:  # the terminal is gone (SIGHUP)
        pass
    raise typer.Exit(code)

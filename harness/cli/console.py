"""The CLI's shared output: one console for results, one for errors, :func:`fail`, :func:`warn`,
and :func:`frame_table` (a data frame as a rich table).

Both consoles print text literally: no console markup (``[bold]`` is text) and no emoji codes
(``a:x:b`` stays ``a:x:b``), so a user's task name, judge spec, path or file content is shown as
written. Styles come from :class:`rich.text.Text` objects (:func:`styled`), never from markup in
strings, and no text needs :func:`rich.markup.escape`."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, overload

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    import pandas as pd

    from harness.executors import ExecutorConfig

# Rich assumes 80 columns when output is not a terminal; logs and pipes get room for the tables.
_WIDTH = None if sys.stdout.isatty() else 140


def literal_console(**kwargs: Any) -> Console:
    """A rich Console that prints every string as written (no markup, no emoji codes)."""
    return Console(markup=False, emoji=False, **kwargs)


console = literal_console(width=_WIDTH)
err = literal_console(stderr=True, soft_wrap=True)


def command_group(help: str, **kwargs: Any) -> typer.Typer:
    """A command group whose help is printed as written: no rich markup (``[topical_chat/]`` in a
    help text is text) and no emoji codes. The top-level app in :mod:`harness.cli.app` does the same."""
    return typer.Typer(help=help, rich_markup_mode=None, **kwargs)


def styled(label: str, style: str, text: str = "") -> Text:
    """``label`` in ``style``, then `` text`` as written (e.g. a red ``error:`` before a message)."""
    return Text.assemble((label, style), f" {text}" if text else "")


def error_line(msg: str) -> None:
    """Print ``error: msg`` on stderr (the message as written)."""
    err.print(styled("error:", "bold red", msg), highlight=False)


def warn(msg: str, label: str = "warning:") -> None:
    """Print ``warning: msg`` on stderr (the message as written)."""
    err.print(styled(label, "yellow", msg), highlight=False)


def fail(msg: str, code: int = 2) -> None:
    """Print ``error: msg`` on stderr and exit with ``code`` (2 = bad input / failed run)."""
    error_line(msg)
    raise typer.Exit(code)


@overload
def judge_arg(value: None) -> None: ...
@overload
def judge_arg(value: str) -> str: ...
@overload
def judge_arg(value: list[str] | tuple[str, ...]) -> list[str]: ...
def judge_arg(value: str | list[str] | tuple[str, ...] | None) -> str | list[str] | None:
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


def frame_table(title: str, frame: pd.DataFrame) -> Table:
    """A pandas data frame as a rich table: numeric columns right-aligned, floats with three
    decimals, NaN as an em dash."""
    t = Table(title=Text(title))
    for col in frame.columns:
        t.add_column(str(col), justify="right" if frame[col].dtype.kind in "fiu" else "left")
    for _, row in frame.iterrows():
        t.add_row(*[_cell(v) for v in row])
    return t


def _cell(v: object) -> str:
    if isinstance(v, float):
        return "—" if v != v else f"{v:.3f}"
    return str(v)


def error_message(e: BaseException) -> str:
    """The text of an exception for the user (a KeyError's message without its quotes)."""
    return str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)


__all__ = [
    "ExecutorOpt",
    "GpusOpt",
    "WorkersOpt",
    "command_group",
    "console",
    "err",
    "error_line",
    "error_message",
    "executor_config",
    "executor_summary",
    "fail",
    "frame_table",
    "judge_arg",
    "literal_console",
    "stopped",
    "styled",
    "warn",
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


def executor_config(executor: str, workers: int, gpus_per_worker: float) -> ExecutorConfig:
    """The :class:`~harness.executors.ExecutorConfig` of the options, or exit 2 naming the bad flag."""
    from harness.executors import ExecutorConfig

    try:
        return ExecutorConfig(executor, workers=workers, gpus_per_worker=gpus_per_worker)
    except ValueError as e:
        fail(str(e))
        raise AssertionError from e  # unreachable: fail exits


def executor_summary(executor: object) -> None:
    """One line per Ray worker pool: where each worker ran and what it did (``executor``: the
    executor's description in a run's provenance, or None)."""
    for pool in executor.get("pools", []) if isinstance(executor, Mapping) else []:
        parts = [
            f"w{w['worker']} {w['requests']} req {w['seconds']:.1f}s"
            + (f" {w['retries']} retries" if w["retries"] else "")
            + (f" replaced {w['replaced']}×" if w["replaced"] else "")
            + f" ({w['node_ip']}, pid {w['pid']})"
            for w in pool["workers"]
        ]
        console.print(f"ray {pool['role']} {pool['spec']}: " + " · ".join(parts), highlight=False)


def stopped(msg: str, code: int) -> None:
    """A command ended by a stop signal: one line on stderr saying what was kept and how to resume,
    then exit with the signal's status (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP)."""
    try:
        err.print(msg, markup=False, highlight=False)
    except OSError:  # the terminal is gone (SIGHUP)
        pass
    raise typer.Exit(code)

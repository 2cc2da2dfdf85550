"""The CLI's shared output: one console for results, one for errors, and :func:`fail`."""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from rich.markup import escape

# Rich assumes 80 columns when output is not a terminal; logs and pipes get room for the tables.
_WIDTH = None if sys.stdout.isatty() else 140
console = Console(width=_WIDTH)
err = Console(stderr=True, soft_wrap=True)


def fail(msg: str, code: int = 2) -> None:
    """Print ``error: msg`` on stderr and exit with ``code`` (2 = bad input / failed run)."""
    err.print(f"[bold red]error:[/] {msg}")
    raise typer.Exit(code)


def error_message(e: BaseException) -> str:
    """The text of an exception for the user (a KeyError's message without its quotes)."""
    return str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)


__all__ = ["console", "err", "escape", "error_message", "fail"]

"""Command-line usage errors as one line: an unknown option or command, a value of the wrong type,
a missing value or argument becomes ``error: harness CMD: … (see 'harness CMD --help')`` and exit 2.

Typer parses the command line with its own copy of Click (``typer._click`` in typer 0.29; older
typers used the ``click`` package): the exception classes are taken from the Click that the
installed typer raises (the bases of :class:`typer.BadParameter`), never from a separately
imported ``click``, whose classes the parser does not raise.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import typer

from harness.cli.console import error_line


def _exceptions_module() -> ModuleType:
    """The ``exceptions`` module of the Click that typer's parser raises from."""
    return importlib.import_module(typer.BadParameter.__module__)


_EXC = _exceptions_module()
ClickException: type[Exception] = _EXC.ClickException
UsageError: type[Exception] = _EXC.UsageError
BadParameter: type[Exception] = _EXC.BadParameter
MissingParameter: type[Exception] = _EXC.MissingParameter
NoSuchOption: type[Exception] = _EXC.NoSuchOption
BadOptionUsage: type[Exception] = _EXC.BadOptionUsage
# raised when a group is called without a command: it carries the help text, which is shown
NoArgsIsHelpError: type[Exception] | None = getattr(_EXC, "NoArgsIsHelpError", None)


def usage_error_classes() -> set[type[Exception]]:
    """Every usage error class of typer's Click (the tests check each is answered in one line)."""
    out: set[type[Exception]] = set()
    todo = [UsageError]
    while todo:
        cls = todo.pop()
        out.add(cls)
        todo.extend(cls.__subclasses__())
    return out


def is_help_request(e: BaseException) -> bool:
    """A group called without a command: Click shows its help (not an error line)."""
    return NoArgsIsHelpError is not None and isinstance(e, NoArgsIsHelpError)


def _context(e: BaseException) -> Any:
    """The context of the command whose line is wrong: the error's own, else (Click's parser raises
    some errors without one) the innermost ``ctx`` on the way to the error."""
    ctx = getattr(e, "ctx", None)
    if ctx is not None:
        return ctx
    tb = e.__traceback__
    while tb is not None:
        candidate = tb.tb_frame.f_locals.get("ctx")
        if hasattr(candidate, "command_path"):
            ctx = candidate
        tb = tb.tb_next
    return ctx


def _option_name(param: object) -> str | None:
    """``--limit`` for an option (its first long name), ``NAME`` for an argument."""
    if param is None:
        return None
    opts = [str(o) for o in (getattr(param, "opts", None) or [])]
    if getattr(param, "param_type_name", "") == "argument":
        return str(
            getattr(param, "human_readable_name", None) or (opts[0] if opts else getattr(param, "name", None))
        ).upper()
    long = [o for o in opts if o.startswith("--")]
    return (long or opts or [str(getattr(param, "name", "") or "")])[0] or None


def _bad_value(e: BaseException) -> tuple[bool, object]:
    """(found, value): the value the user gave, from the validation error typer raised it from."""
    cause = e.__cause__
    errors = getattr(cause, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
        except (IndexError, KeyError, TypeError):
            return False, None
        if isinstance(first, dict) and "input" in first:
            return True, first["input"]
    return False, None


def _sentence(text: str) -> str:
    """``Input should be …`` → ``input should be …``, without the final period."""
    text = " ".join(str(text).split()).rstrip(".")
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def usage_message(e: BaseException) -> str:
    """The one-line message of a usage error (without ``error:``): what is wrong, the option and
    the value, and where the options are listed."""
    ctx = _context(e)
    where = ctx.command_path if ctx is not None else "harness"
    see = f"see '{where} --help'"
    message = str(getattr(e, "message", "") or "").replace(". Did you mean", "; did you mean")
    if isinstance(e, MissingParameter):
        name = _option_name(getattr(e, "param", None))
        kind = getattr(getattr(e, "param", None), "param_type_name", "option")
        text = f"missing {kind} {name}" if name else _sentence(e.format_message())  # type: ignore[attr-defined]
        return f"{where}: {text} ({see})"
    if isinstance(e, BadParameter):
        name = _option_name(getattr(e, "param", None)) or getattr(e, "param_hint", None) or "a parameter"
        found, value = _bad_value(e)
        shown = f" {value!r}" if found else ""
        return f"{where}: invalid value{shown} for {name}: {_sentence(message)} ({see})"
    if isinstance(e, NoSuchOption):
        text = f"{where}: no such option {getattr(e, 'option_name', message)}"
        possibilities = sorted(getattr(e, "possibilities", None) or [])
        if possibilities:
            text += f" (did you mean {' or '.join(possibilities)}?)"
        return f"{text} ({see})"
    if isinstance(e, BadOptionUsage):
        return f"{where}: {_sentence(message)} ({see})"
    if ctx is not None and message.startswith("No such command") and "Did you mean" not in message:
        commands = list(ctx.command.list_commands(ctx)) if hasattr(ctx.command, "list_commands") else []
        listed = f"; the commands are {', '.join(commands)}" if commands else ""
        return f"{where}: {_sentence(message)}{listed} ({see})"
    return f"{where}: {_sentence(message or str(e))} ({see})"


def usage_error(e: BaseException) -> typer.Exit:
    """Print a command-line usage error as one ``error:`` line; the exit (status 2) to raise."""
    error_line(usage_message(e))
    return typer.Exit(2)
